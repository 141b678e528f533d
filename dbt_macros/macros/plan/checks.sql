{#-
  Step 3 of the plan (overview in plan/changes.sql): the duplicate rule, checked on the
  changes before anything is written.
-#}

{#-
  The duplicate rule. Every rule refuses a target row that receives more than one
  modifying action (two source rows choosing UPDATE or DELETE for it, through the
  same clause or different ones): the rewrite would emit two versions of the row,
  or update a row it also deletes. The rules differ in what else they refuse:
    trino:    also two source rows choosing the same clause, "no clause" (-1) included
    postgres: nothing else (PostgreSQL's and DuckDB's rule)
    strict:   any target row matched by two source rows (Spark, Delta, Iceberg), except
              when the only MATCHED clause is an unconditional DELETE (deleting a row
              twice deletes it once), or there is no MATCHED clause (no target row changes)
  Fills `out`: tests, the conditions on one row id's groups (__sm_n: source rows of one
  clause, __sm_mods: of them choosing UPDATE or DELETE) that break the rule, none when
  nothing can break it; row_test, the same as one aggregation over a row id's joined
  rows (under strict, a lone unconditional DELETE lets several source rows delete one
  target row); n and mods, the aggregates; targets, how many target rows one row id's
  group holds (its joined rows over its source rows). A parquet row id is unique per target
  row and __sm_srow per source row, so each pair is one joined row; an ORC row id is
  shared by identical rows, so there source rows are counted as distinct __sm_srow.
-#}
{% macro spark_merge__duplicate_rule(spec, table, resolved, out) -%}
{%- set matched = resolved.clauses | selectattr('matched') | list -%}
{%- set lone_delete = spec.duplicate_rule == 'strict' and matched | length == 1 and matched[0].action == 'delete' and not matched[0].condition -%}
{%- set parquet = table.provider in ['parquet', 'jdbc'] -%}
{%- set modifying = spark_merge.spark_merge__op('delete', 'update') -%}
{%- set tests, row_tests = [], [] -%}
{%- set sources = 'count(*)' if parquet else 'size(collect_set(__sm_srow))' -%}
{%- if not lone_delete -%}
  {%- do tests.append('sum(__sm_mods) > 1') -%}
  {%- do row_tests.append(('count_if(__sm_op IN (' ~ modifying ~ '))' if parquet else 'size(collect_set(CASE WHEN __sm_op IN (' ~ modifying ~
      ') THEN __sm_srow END))') ~ ' > 1') -%}
{%- endif -%}
{%- if spec.duplicate_rule == 'trino' -%}
  {%- do tests.append('max(__sm_n) > 1') -%}
  {#- some clause chosen by two source rows: more (clause, source row) pairs than clauses -#}
  {#- the clauses chosen, counted as the bits set in a mask of case numbers (-1 = none: bit 0); a
      fixed-width aggregate, so Spark aggregates by hash rather than by sorting -#}
  {%- set chosen = 'bit_count(bit_or(shiftleft(1L, __sm_case + 1)))' if resolved.clauses | length <= 62 else 'size(collect_set(__sm_case))' -%}
  {%- do row_tests.append(('count(*)' if parquet else "size(collect_set(named_struct('c', __sm_case, 's', __sm_srow)))") ~ ' > ' ~ chosen) -%}
{%- elif spec.duplicate_rule == 'strict' and matched and not lone_delete -%}
  {%- do tests.append('sum(__sm_n) > 1') -%}
  {%- do row_tests.append(sources ~ ' > 1') -%}
{%- endif -%}
{%- set source_kind_none = spec.source_kind == 'none' -%}
{%- do out.update({
  'tests': [] if source_kind_none else tests,
  'row_test': '' if source_kind_none else row_tests | join(' OR '),
  'n': 'count(*)' if parquet else 'count(DISTINCT __sm_srow)',
  'targets': '1' if parquet else 'count(*) div greatest(' ~ sources ~ ', 1)',
  'mods': ('count_if(__sm_op IN (' ~ modifying ~ '))') if parquet else ('count(DISTINCT CASE WHEN __sm_op IN (' ~ modifying ~ ') THEN __sm_srow END)'),
}) -%}
{%- endmacro %}

{#- The failure path only: up to `limit` target rows that break the duplicate rule, each with its
    key values (or row id) and how many source rows matched it, and up to `limit` of those source
    rows: one result row per (target row, source row), the clause that source row chose
    (__sm_clause: a clause's index, -1 none) and the source row itself as JSON (__sm_source), so an
    error can show which source rows to fix. Empty text when nothing can break the rule. -#}
{% macro spark_merge__duplicates_sql(spec, table, resolved, ctx, limit=5) -%}
{%- set rule = {} -%}
{%- do spark_merge.spark_merge__duplicate_rule(spec, table, resolved, rule) -%}
{%- set keys = [] -%}
{%- for k in spec.key_columns if (k | lower) in table.columns_by_name -%}{%- do keys.append(k) -%}{%- endfor -%}
{%- if rule.tests -%}
WITH __sm_bad AS (
  SELECT __sm_file, __sm_row, {% for k in keys %}first(__sm_key{{ loop.index0 }}) AS __sm_key{{ loop.index0 }}, {% endfor %}sum(__sm_n) AS __sm_sources
  FROM (
    SELECT __sm_file, __sm_row, {% for k in keys %}first(__sm_key{{ loop.index0 }}) AS __sm_key{{ loop.index0 }}, {% endfor %}{{ rule.n
        }} AS __sm_n, {{ rule.mods }} AS __sm_mods
    FROM {{ ctx.changes }}
    WHERE __sm_matched
    GROUP BY __sm_file, __sm_row, __sm_case
  )
  GROUP BY __sm_file, __sm_row
  HAVING {{ rule.tests | join(' OR ') }}
  LIMIT {{ limit }}
), __sm_pairs AS (
  SELECT DISTINCT __sm_bad.*, c.__sm_srow, c.__sm_case
  FROM __sm_bad JOIN {{ ctx.changes }} AS c
    ON c.__sm_matched AND c.__sm_file = __sm_bad.__sm_file AND c.__sm_row = __sm_bad.__sm_row
)
SELECT {% for k in keys %}CAST(p.__sm_key{{ loop.index0 }} AS STRING) AS {{ spark_merge.spark_merge__quote(k) }}, {% endfor -%}
{% if keys | length == 0 %}p.__sm_file AS file, p.__sm_row AS row, {% endif -%}
p.__sm_sources AS source_rows, p.__sm_file, p.__sm_row, p.__sm_case AS __sm_clause, to_json(struct(s.*)) AS __sm_source
FROM (SELECT *, row_number() OVER (PARTITION BY __sm_file, __sm_row ORDER BY __sm_srow) AS __sm_i FROM __sm_pairs) AS p
JOIN {{ ctx.source }} AS s ON s.__sm_srow = p.__sm_srow
WHERE p.__sm_i <= {{ limit }}
ORDER BY p.__sm_file, p.__sm_row, p.__sm_i
{%- endif -%}
{%- endmacro %}

{#- The duplicates_sql rows as the error shows them: out.examples, one per offending target row (its
    key values or row id, source_rows, and matches: up to 5 source rows, each its columns, the ON
    equalities' source columns first, and the clause it chose), and out.text, one line per target
    row and one per source row. The plan's own columns (__sm_*) are left out of both. -#}
{% macro spark_merge__duplicate_examples(rows, resolved, ctx, out) -%}
{%- set labels = {'-1': 'no clause'} -%}
{%- for cl in resolved.clauses -%}
  {%- do labels.update({cl.index | string: cl.label ~ (' AND ' ~ cl.condition if cl.condition else '')}) -%}
{%- endfor -%}
{%- set on_sources = ctx.on_keys | map(attribute='source') | map('lower') | list -%}
{%- set examples, by_row = [], {} -%}
{%- for r in rows -%}
  {%- set row_id = r['__sm_file'] ~ '#' ~ r['__sm_row'] -%}
  {%- if row_id not in by_row -%}
    {%- set ex = {} -%}
    {%- for k, v in r.items() if not k.startswith('__sm_') -%}{%- do ex.update({k: v}) -%}{%- endfor -%}
    {%- do ex.update({'matches': []}) -%}
    {%- do by_row.update({row_id: ex}) -%}
    {%- do examples.append(ex) -%}
  {%- endif -%}
  {%- set values = fromjson(r['__sm_source'], {}) -%}
  {%- set source = {} -%}
  {%- for first in [true, false] -%}
    {%- for k, v in values.items() if not k.startswith('__sm_') and ((k | lower) in on_sources) == first -%}{%- do source.update({k: v}) -%}{%- endfor -%}
  {%- endfor -%}
  {%- do by_row[row_id].matches.append({'source': source, 'clause': labels.get(r['__sm_clause'] | int | string, 'clause ' ~ r['__sm_clause'])}) -%}
{%- endfor -%}
{%- set lines = [] -%}
{%- for ex in examples -%}
  {%- set kv, shown = [], [] -%}
  {%- for k, v in ex.items() if k != 'matches' -%}{%- do kv.append(k ~ '=' ~ spark_merge.spark_merge__shown(v)) -%}{%- endfor -%}
  {%- for m in ex.matches -%}
    {%- set cols = [] -%}
    {%- for k, v in m.source.items() -%}{%- do cols.append(k ~ '=' ~ spark_merge.spark_merge__shown(v)) -%}{%- endfor -%}
    {%- set text = cols | join(', ') -%}
    {%- do shown.append('\n    source row (' ~ (text[:197] ~ '...' if text | length > 200 else text) ~ ') chose ' ~ m.clause) -%}
  {%- endfor -%}
  {%- set more = (ex.source_rows | int) - ex.matches | length -%}
  {%- do lines.append('  ' ~ kv | join(', ') ~ ', matched by:' ~ shown | join('') ~ ('\n    and ' ~ more ~ ' more source row(s)' if more > 0 else '')) -%}
{%- endfor -%}
{%- do out.update({'examples': examples, 'text': lines | join('\n')}) -%}
{%- endmacro %}
