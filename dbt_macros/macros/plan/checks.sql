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

{#- The failure path only: up to `limit` target rows that break the duplicate rule, with their
    key values (or row ids) and how many source rows matched them. Empty text when nothing can
    break the rule. -#}
{% macro spark_merge__duplicates_sql(spec, table, resolved, ctx, limit=5) -%}
{%- set rule = {} -%}
{%- do spark_merge.spark_merge__duplicate_rule(spec, table, resolved, rule) -%}
{%- set keys = [] -%}
{%- for k in spec.key_columns if (k | lower) in table.columns_by_name -%}{%- do keys.append(k) -%}{%- endfor -%}
{%- if rule.tests -%}
SELECT {% for k in keys %}CAST(first(__sm_key{{ loop.index0 }}) AS STRING) AS {{ spark_merge.spark_merge__quote(k) }}, {% endfor -%}
{% if keys | length == 0 %}first(__sm_file) AS file, first(__sm_row) AS row, {% endif -%}
sum(__sm_n) AS source_rows
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
{%- endif -%}
{%- endmacro %}
