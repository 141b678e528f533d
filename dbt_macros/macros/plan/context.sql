{#-
  The names and per-row values every plan step shares: the merge's relations (context), the
  target's row id, the output value of each column with its checks (NOT NULL, CHAR/VARCHAR
  length, nested CHAR fields), and the broadcast threshold.
-#}

{% macro spark_merge__broadcast_rows() -%}1000000{%- endmacro %}

{#- The most source rows a merge broadcasts to the target's rows: the fused write's split (the source at
    full width), the summary's semi-join (its ON columns) and, without an insert clause, the summary's
    inner join (at full width). A larger source is joined by a shuffle. -#}
{% macro spark_merge__source_broadcast_rows() -%}100000{%- endmacro %}

{#- The most partitions a source may be read in for an append into an unpartitioned table to write
    its rows as read, without a shuffle to rebalance them (rewrite.sql: append_sql). -#}
{% macro spark_merge__append_slices() -%}4{%- endmacro %}

{#- The most target rows the summary's join broadcasts: a target that small (counted by the host
    without a Spark job, host.target_rows) is joined without a shuffle of either side, and without
    the semi-join that would otherwise narrow it first. -#}
{% macro spark_merge__target_broadcast_rows() -%}100000{%- endmacro %}

{#- Whether the rewrite broadcasts the row ids of updated and deleted rows to its anti-join
    (out.broadcast), from the plan's counts `m`. -#}
{% macro spark_merge__broadcast_changed(m, out) -%}
{%- do out.update({'broadcast': m.numTargetRowsUpdated + m.numTargetRowsDeleted <= spark_merge.spark_merge__broadcast_rows() | int}) -%}
{%- endmacro %}

{#- Names of the merge's relations. The read-once fallbacks (changes_table, source_table) are managed
    tables of the merge in the target's database (for a database target, Spark's current one). -#}
{% macro spark_merge__context(spec, table, merge_id, out) -%}
{%- set root = table.root.rstrip('/') -%}
{%- do out.update({
  'merge_id': merge_id,
  'changes': '`__sm_changes_' ~ merge_id ~ '`',
  'source': '`__sm_source_' ~ merge_id ~ '`',
  'changes_view': '`__sm_changes_' ~ merge_id ~ '`',
  'source_view': '`__sm_source_' ~ merge_id ~ '`',
  'found_view': '`__sm_found_' ~ merge_id ~ '`',
  'changes_table': ('' if table.provider == 'jdbc' else spark_merge.spark_merge__quote(table.database) ~ '.') ~
      spark_merge.spark_merge__quote('__sm_chg_' ~ merge_id),
  'source_table': ('' if table.provider == 'jdbc' else spark_merge.spark_merge__quote(table.database) ~ '.') ~
      spark_merge.spark_merge__quote('__sm_src_' ~ merge_id),
  'stage': none if table.provider == 'jdbc' else spark_merge.spark_merge__quote(table.database) ~ '.' ~
      spark_merge.spark_merge__quote('__sm_stage_' ~ merge_id),
  'stage_name': '__sm_stage_' ~ merge_id,
  'stage_location': root ~ '/_merge_' ~ merge_id,
  'history_location': root ~ '/_spark_merge/history/' ~ merge_id,
  'history_glob': root ~ '/_spark_merge/history/*',
  'on_keys': [],
  'feed': spark_merge.spark_merge__feed_on(table) == 'True' and table.provider != 'jdbc',
}) -%}
{%- endmacro %}

{#- Row id: file and position for parquet; ORC has no row_index, so file and the
    row's own values (identical rows in one file share every fate, so the
    coarser id never changes a result). -#}
{% macro spark_merge__row_id(table) -%}
{%- if table.provider == 'jdbc' -%}
'jdbc' AS __sm_file, to_json(struct({{ spark_merge.spark_merge__column_list(table.primary_key) }})) AS __sm_row
{%- else -%}
_metadata.file_path AS __sm_file, {% if table.provider == 'parquet' -%}
_metadata.row_index AS __sm_row
{%- else -%}
to_json(struct({{ spark_merge.spark_merge__column_list(table.columns | map(attribute='name') | list) }})) AS __sm_row
{%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- `alias`: the name the filter `where` may qualify columns with (a NOT MATCHED BY SOURCE condition's t.col). -#}
{% macro spark_merge__target_scan(table, where=none, alias=none) -%}
(SELECT *, {{ spark_merge.spark_merge__row_id(table) }} FROM {{ table.relation }}{% if alias %} AS {{ alias }}{% endif %}{% if where
    %} WHERE ({{ where }}){% endif %})
{%- endmacro %}

{#- The value clause `cl` gives column `c` (index i). -#}
{% macro spark_merge__output_value(spec, cl, c) -%}
{%- set lname = c.name | lower -%}
{%- if lname in cl.outputs -%}CAST(({{ cl.outputs[lname] }}) AS {{ c.type }})
{%- elif cl.action == 'update' -%}{{ spark_merge.spark_merge__quote(spec.target_alias) }}.{{ spark_merge.spark_merge__quote(c.name) }}
{%- else -%}CAST(NULL AS {{ c.type }})
{%- endif -%}
{%- endmacro %}

{#- Which checks guard the value column `c` is given (__sm_c<i>): NOT NULL, the struct fields
    listed in spark_merge.not_null, a CHAR/VARCHAR length, CHAR/VARCHAR inside a struct, array or
    map. The one definition: changes_sql builds the checks from it, change_summary_sql counts the
    checked values by it (so every check runs in the plan, before anything is staged). -#}
{% macro spark_merge__value_checks(c, out) -%}
{%- do out.update({'not_null': not c.nullable, 'fields': c.get('not_null_fields') or [],
                   'length': c.get('char_length'), 'nested': c.get('nested_chars')}) -%}
{%- if c.get('computed_by_target') -%}{#- a PostgreSQL target computes and checks its values itself -#}
  {%- do out.update({'not_null': false, 'fields': [], 'length': none, 'nested': none}) -%}
{%- endif -%}
{%- do out.update({'any': true if out.not_null or out.fields or out.length or out.nested else false}) -%}
{%- endmacro %}

{#- The value Spark stores for `v` in a CHAR(n)/VARCHAR(n) column (CharVarcharCodegenUtils): a
    string of at most n characters as it is; a longer one without its trailing spaces beyond n when
    that is enough; else EXCEED_LIMIT_LENGTH, raised here while planning (before any write).
    `v` names a column of the same SELECT (a lateral alias), so a non-deterministic value is
    computed once. CHAR values are padded when read, as Spark reads them. -#}
{% macro spark_merge__char_checked(spec, table, c, v) -%}
{%- set n = c.char_length -%}
CASE WHEN {{ v }} IS NULL OR char_length({{ v }}) <= {{ n }} THEN {{ v }} WHEN char_length(rtrim({{ v }})) <= {{ n }} THEN substr({{ v
    }}, 1, {{ n }}) ELSE raise_error({{ spark_merge.spark_merge__literal(spark_merge.spark_merge__error_code('length') ~ ': a ' ~ spec.kind
        | upper ~ ' would write a string longer than ' ~ n ~ ' characters into column ' ~ c.name ~ ' ' ~ c.char_type | upper ~ ' of ' ~
            table.name ~ ' (Spark: EXCEED_LIMIT_LENGTH)') }}) END
{%- endmacro %}

{#- Split a type's text at `sep` where it is outside <>, () and backticks (struct fields, map types). -#}
{% macro spark_merge__split_type(text, sep, out) -%}
{%- set state = {'depth': 0, 'tick': false, 'start': 0} -%}
{%- for ch in text -%}
  {%- if ch == '`' -%}{%- do state.update({'tick': not state.tick}) -%}
  {%- elif not state.tick and ch in '<(' -%}{%- do state.update({'depth': state.depth + 1}) -%}
  {%- elif not state.tick and ch in '>)' -%}{%- do state.update({'depth': state.depth - 1}) -%}
  {%- elif not state.tick and state.depth == 0 and ch == sep -%}
    {%- do out.append(text[state.start:loop.index0]) -%}{%- do state.update({'start': loop.index}) -%}
  {%- endif -%}
{%- endfor -%}
{%- do out.append(text[state.start:]) -%}
{%- endmacro %}

{#- The value Spark stores for `v` of a type `ty` (as DESCRIBE TABLE spells it) that holds CHAR(n) or
    VARCHAR(n) inside a struct, array or map: each such string checked as char_checked checks a
    column's (EXCEED_LIMIT_LENGTH, raised while planning), a CHAR padded to n as Spark's INSERT
    stores it; the rest as it is. `path` names the field in the error. -#}
{% macro spark_merge__nested_char_checked(spec, table, path, v, ty, depth=0) -%}
{%- set t = ty | trim -%}{%- set lt = t | lower -%}
{%- if 'char(' not in lt -%}{{ v }}
{%- elif lt.startswith('char(') or lt.startswith('varchar(') -%}
  {%- set n = lt.split('(')[1].rstrip(')') | int -%}
  {{- 'rpad(' if lt.startswith('char(') }}CASE WHEN {{ v }} IS NULL OR char_length({{ v }}) <= {{ n }} THEN {{ v
      }} WHEN char_length(rtrim({{ v }})) <= {{ n }} THEN substr({{ v }}, 1, {{ n }}) ELSE raise_error({{
          spark_merge.spark_merge__literal(spark_merge.spark_merge__error_code('length') ~ ': a ' ~ spec.kind | upper ~
              ' would write a string longer than ' ~ n ~ ' characters into ' ~ path ~ ' ' ~ lt | upper ~ ' of ' ~ table.name ~
                  ' (Spark: EXCEED_LIMIT_LENGTH)') }}) END{{ ', ' ~ n ~ ')' if lt.startswith('char(') }}
{%- elif lt.startswith('array<') -%}
  {%- set e = '__sm_e' ~ depth -%}
transform({{ v }}, {{ e }} -> {{ spark_merge.spark_merge__nested_char_checked(spec, table, path ~ '[]', e, t[6:-1], depth + 1) }})
{%- elif lt.startswith('map<') -%}
  {%- set kv = [] -%}{%- do spark_merge.spark_merge__split_type(t[4:-1], ',', kv) -%}
  {%- set k, x = '__sm_k' ~ depth, '__sm_e' ~ depth -%}
  {%- set keys = 'transform_keys(' ~ v ~ ', (' ~ k ~ ', ' ~ x ~ ') -> ' ~ spark_merge.spark_merge__nested_char_checked(spec, table, path ~ ' key', k,
      kv[0], depth + 1) ~ ')' if 'char(' in kv[0] | lower else v -%}
  {%- if 'char(' in kv[1] | lower -%}transform_values({{ keys }}, ({{ k }}, {{ x }}) -> {{
      spark_merge.spark_merge__nested_char_checked(spec, table, path ~ ' value', x, kv[1], depth + 1) }}){%- else -%}{{ keys }}{%- endif -%}
{%- elif lt.startswith('struct<') -%}
  {%- set fields = [] -%}{%- do spark_merge.spark_merge__split_type(t[7:-1], ',', fields) -%}
IF({{ v }} IS NULL, NULL, named_struct(
  {%- for f in fields -%}
    {%- set nt = [] -%}{%- do spark_merge.spark_merge__split_type(f, ':', nt) -%}
    {%- set name = nt[0] | trim -%}
    {%- set name = name[1:-1] | replace('``', '`') if name.startswith('`') else name -%}
    {{- ', ' if not loop.first }}{{ spark_merge.spark_merge__literal(name) }}, {{ spark_merge.spark_merge__nested_char_checked(spec, table,
        path ~ '.' ~ name, v ~ '.' ~ spark_merge.spark_merge__quote(name), nt[1:] | join(':'), depth) }}
  {%- endfor -%}))
{%- else -%}{{ v }}
{%- endif -%}
{%- endmacro %}

{#-
  The write guards the plan: the staged rows (`new`, decoded file stats of the
  staging table) lie only in the planned partitions, and each planned partition
  holds exactly its rows before (`old`) plus the plan's delta (summarize_changes'
  deltas; none: counts unchecked). Appends to `out` one {message, excess} per
  violation (excess: rows beyond the plan in a planned partition; short: rows below
  it; else none); any violation stops the merge before its journal. A merge's rewrite
  copies every row of a partition whose row id the changes do not name, so changes
  read from files the partition no longer holds (a write that bypassed spark-merge
  while the merge planned) show as excess rows, one per changed row of those files;
  files the rewrite did not read (added since the plan listed the partition, by a
  write that bypassed spark-merge) show as short rows, once `old` counts them (the
  Python host lists the files as they are).
-#}
{% macro spark_merge__output_errors(table, partitions, deltas, old, new, out) -%}
{%- set pcols = table.partition_columns -%}
{%- set planned, before, after = [], {}, {} -%}
{%- for p in partitions -%}{%- do planned.append(spark_merge.spark_merge__partition_key(pcols, p)) -%}{%- endfor -%}
{%- for r in old -%}{%- set k = spark_merge.spark_merge__partition_key(pcols, r.partition) -%}{%- do before.update({k: before.get(k, 0) +
    r.rows | int}) -%}{%- endfor -%}
{%- for r in new -%}{%- set k = spark_merge.spark_merge__partition_key(pcols, r.partition) -%}{%- do after.update({k: after.get(k, 0) +
    r.rows | int}) -%}{%- endfor -%}
{%- for k in after.keys() | sort if k not in planned -%}
  {%- do out.append({'excess': none, 'short': none, 'message': 'the rewrite wrote ' ~ after[k] ~ ' row(s) into partition ' ~ (k.rstrip('/') or
      'of the table') ~ ', which the plan did not list'}) -%}
{%- endfor -%}
{%- for k in planned if deltas is not none -%}
  {%- set expected = before.get(k, 0) + deltas.get(k, 0) -%}
  {%- if after.get(k, 0) != expected -%}
    {%- do out.append({'excess': after.get(k, 0) - expected if after.get(k, 0) > expected else none,
                       'short': expected - after.get(k, 0) if after.get(k, 0) < expected else none,
                       'message': 'the rewrite wrote ' ~ after.get(k, 0) ~ ' row(s) into partition ' ~ (k.rstrip('/') or 'of the table') ~
                           ' where the plan gives ' ~ expected ~ ' (' ~ before.get(k, 0) ~ ' before, ' ~ '%+d' | format(deltas.get(k, 0)) ~ ')'}) -%}
  {%- endif -%}
{%- endfor -%}
{%- endmacro %}

{#- A partition column's value as Spark's own INSERT stores it: a string partition value '' or
    '__HIVE_DEFAULT_PARTITION__' goes to the NULL partition and reads back as NULL, as NULL does (the
    three spellings in one write would otherwise name one directory twice). Other columns as they are. -#}
{% macro spark_merge__partition_value(table, c, value) -%}
{%- set string = (c.type | lower) == 'string' or (c.type | lower).startswith('varchar') or (c.type | lower).startswith('char') -%}
{%- if string and (c.name | lower) in table.partition_columns | map('lower') | list -%}
CASE WHEN {{ value }} IN ('', '__HIVE_DEFAULT_PARTITION__') THEN NULL ELSE {{ value }} END
{%- else -%}{{ value }}{%- endif -%}
{%- endmacro %}
