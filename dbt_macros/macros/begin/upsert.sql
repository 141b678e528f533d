{#-
  Primary-key upserts governed by a watermark key and a tombstone key (the
  TrinityLake definition), copy-on-write: compiled to an ordinary, guarded MERGE.

  - watermark key: one or more columns, compared left to right; larger is
    fresher; NULL is smaller than any value (Spark's struct ordering does both);
  - tombstone key: one column; a row is a tombstone when it is boolean true, a
    string equal to tombstone_string_key_value, or any other type and not NULL.

  The source is reduced to its freshest row per key (ties: a tombstone wins,
  then the largest row as JSON, so the result never depends on input order).
  A target row changes only for a strictly fresher source row, so applying a
  batch again, or an older one, changes nothing: backfills are idempotent.
  Tombstones are stored like any row (a delete replaces the row with its
  tombstone): a key deleted in one batch stays deleted when an older row of it
  arrives in a later batch, whatever order batches come in. Readers filter
  them out (`live_filter` of the compiled spec). Keys compare with <=>, so a NULL
  key is one key like any other.
-#}

{#-
  Checks the upsert options against the table and fills `out` with the pieces
  both modes use: errors, pk (quoted), order(prefix) parts, live_filter.
  `order` is a total order on rows of one key: the watermark, then "is a
  tombstone" (a tie goes to the delete), then the row as JSON (typed as the
  target), so which row wins never depends on input order or on batching.
-#}
{% macro spark_merge__upsert_plan(upsert, table, out, source_columns=none) -%}
{%- set raw = upsert -%}
{%- set u = {'primary_key': raw.get('primary_key') or [], 'watermark_key': raw.get('watermark_key') or [],
             'tombstone_key': raw.get('tombstone_key'), 'upsert_mode': raw.get('upsert_mode') or 'copy-on-write',
             'tombstone_string_key_value': raw.get('tombstone_string_key_value')
               if raw.get('tombstone_string_key_value') is not none
               else table.properties.get('spark_merge.tombstone_string_key_value')} -%}
{%- set errors = [] -%}
{%- set cols_text = table.columns | map(attribute='name') | join(', ') -%}
{%- for name in u.primary_key + u.watermark_key + ([u.tombstone_key] if u.tombstone_key else []) -%}
  {%- if (name | lower) not in table.columns_by_name -%}
    {%- do errors.append('upsert: unknown column ' ~ name ~ spark_merge.spark_merge__did_you_mean(name, table.columns | map(attribute='name')) ~
        ' (target ' ~ table.name ~ ' has: ' ~ cols_text ~ ')') -%}
  {%- endif -%}
{%- endfor -%}
{%- if source_columns is not none -%}
  {%- do spark_merge.spark_merge__upsert_source_errors(u, table, source_columns, errors) -%}
{%- endif -%}
{%- if not u.primary_key -%}{%- do errors.append('upsert: primary_key (one or more columns) is required') -%}{%- endif -%}
{%- if not u.watermark_key and u.upsert_mode == 'merge-on-read' -%}
  {%- do errors.append('upsert: upsert_mode merge-on-read needs watermark_key (the log is reduced to the freshest row of each key by it)') -%}
{%- endif -%}
{%- if u.upsert_mode not in ['copy-on-write', 'merge-on-read'] -%}
  {%- do errors.append("upsert: upsert_mode must be copy-on-write or merge-on-read, got " ~ u.upsert_mode) -%}
{%- endif -%}
{%- for name in u.watermark_key if (name | lower) in table.columns_by_name -%}
  {%- set ty = table.columns_by_name[name | lower].type | lower -%}
  {%- if ty.startswith('array') or ty.startswith('map') or ty.startswith('struct') or ty.startswith('variant') -%}
    {%- do errors.append('upsert: watermark column ' ~ name ~ ' must have a primitive type, not ' ~ ty) -%}
  {%- endif -%}
{%- endfor -%}
{%- set test = spark_merge.spark_merge__tombstone_test(u, table, errors) | trim -%}
{%- set pk, wm, row = [], [], [] -%}
{%- for name in u.primary_key -%}{%- do pk.append(spark_merge.spark_merge__quote(name)) -%}{%- endfor -%}
{#- the watermark compares as the target's type, so a source decimal(13,2) meets a stored decimal(12,2) -#}
{%- for name in u.watermark_key -%}
  {%- set col = table.columns_by_name.get(name | lower) -%}
  {%- do wm.append('CAST({p}' ~ spark_merge.spark_merge__quote(name) ~ ' AS ' ~ col.type ~ ')' if col else '{p}' ~ spark_merge.spark_merge__quote(name)) -%}
{%- endfor -%}
{%- for c in table.columns -%}
  {%- do row.append(spark_merge.spark_merge__literal(c.name) ~ ', CAST({p}' ~ spark_merge.spark_merge__quote(c.name) ~ ' AS ' ~ c.type ~ ')') -%}
{%- endfor -%}
{%- do out.update({'errors': errors, 'mode': u.upsert_mode, 'primary_key': u.primary_key, 'pk': pk, 'order_parts': wm + [test],
                   'order': 'struct(' ~ (wm + [test, 'to_json(named_struct(' ~ row | join(', ') ~ '))']) | join(', ') ~ ')',
                   'row': 'to_json(named_struct(' ~ row | join(', ') ~ '))',
                   'tombstone': test, 'watermark_key': u.watermark_key}) -%}
{%- endmacro %}

{#- The test that a row is a tombstone, with {p} before its column (false without tombstone_key); a
    tombstone column it cannot test appends to `errors`. -#}
{% macro spark_merge__tombstone_test(u, table, errors) -%}
{%- set test = 'false' -%}
{%- if u.tombstone_key and (u.tombstone_key | lower) in table.columns_by_name -%}
  {%- set ty = table.columns_by_name[u.tombstone_key | lower].type | lower -%}
  {%- set q = spark_merge.spark_merge__quote(u.tombstone_key) -%}
  {%- if ty == 'boolean' -%}
    {%- set test = 'coalesce({p}' ~ q ~ ', false)' -%}
  {%- elif ty == 'string' or ty.startswith('varchar') or ty.startswith('char') -%}
    {%- if u.tombstone_string_key_value is none -%}
      {%- do errors.append('upsert: tombstone column ' ~ u.tombstone_key ~
          ' is a string: set tombstone_string_key_value (or the table property spark_merge.tombstone_string_key_value)') -%}
    {%- else -%}
      {%- set test = 'coalesce({p}' ~ q ~ ' = ' ~ spark_merge.spark_merge__literal(u.tombstone_string_key_value) ~ ', false)' -%}
    {%- endif -%}
  {%- elif ty.startswith('array') or ty.startswith('map') or ty.startswith('struct') -%}
    {%- do errors.append('upsert: tombstone column ' ~ u.tombstone_key ~ ' must have a primitive type, not ' ~ ty) -%}
  {%- else -%}
    {%- set test = '{p}' ~ q ~ ' IS NOT NULL' -%}
  {%- endif -%}
{%- endif -%}
{{ test }}
{%- endmacro %}

{#- The upsert's columns against the user's source (`source_columns`), before any SQL is generated around
    it, so the errors appended to `errors` name the option, not that SQL. -#}
{% macro spark_merge__upsert_source_errors(u, table, source_columns, errors) -%}
{%- set have = source_columns | map('lower') | list -%}
{%- for option in ['primary_key', 'watermark_key'] -%}
  {%- for name in u[option] if (name | lower) not in have -%}
    {%- do errors.append('upsert: ' ~ option ~ ' names column ' ~ name ~ ', which the source does not have (its columns: ' ~ source_columns |
        join(', ') ~ ')') -%}
  {%- endfor -%}
{%- endfor -%}
{%- if u.tombstone_key and (u.tombstone_key | lower) not in have -%}
  {%- do errors.append('upsert: tombstone_key names column ' ~ u.tombstone_key ~ ', which the source does not have (its columns: ' ~ source_columns
      | join(', ') ~ ')') -%}
{%- endif -%}
{%- set lacking = [] -%}
{%- set keys = (u.primary_key + u.watermark_key + ([u.tombstone_key] if u.tombstone_key else [])) | map('lower') | list -%}
{%- for c in table.columns if (c.name | lower) not in have and (c.name | lower) not in keys -%}{%- do lacking.append(c.name) -%}{%- endfor -%}
{%- if lacking -%}
  {%- do errors.append('upsert: the source lacks column(s) ' ~ lacking | join(', ') ~ ' of ' ~ table.name ~
      '; an upsert writes whole rows, so add them to the source (e.g. NULL AS ' ~ lacking[0] ~ ')') -%}
{%- endif -%}
{%- endmacro %}

{#- The freshest row of each key of `relation` (all columns of it). -#}
{% macro spark_merge__upsert_reduce_sql(plan, relation) -%}
SELECT __sm_best.* FROM (SELECT max_by(struct(*), {{ plan.order.replace('{p}', '') }}) AS __sm_best FROM {{ relation
    }} AS __sm_u GROUP BY {{ plan.pk | join(', ') }})
{%- endmacro %}

{#- copy-on-write: the guarded MERGE, or a merge engine's MERGE (begin/engines.sql).
    Fills `out` with the spec (errors in out.errors). -#}
{% macro spark_merge__upsert_spec(spec, table, source_columns, out) -%}
{%- if spec.upsert.get('merge_engine') -%}
  {#- an engine folds whole rows too: the source's columns are checked first, as a watermark upsert's -#}
  {%- set errors = [] -%}
  {%- do spark_merge.spark_merge__upsert_source_errors({'primary_key': spec.upsert.get('primary_key') or [], 'watermark_key': [],
      'tombstone_key': none}, table, source_columns, errors) -%}
  {%- if errors -%}{%- do out.update({'errors': errors}) -%}{%- else -%}{%- do spark_merge.spark_merge__engine_spec(spec, table, out) -%}{%- endif -%}
{%- else -%}
{%- set plan = {} -%}
{%- do spark_merge.spark_merge__upsert_plan(spec.upsert, table, plan, source_columns) -%}
{%- if plan.errors -%}
  {%- do out.update({'errors': plan.errors}) -%}
{%- else -%}
  {%- set t = spark_merge.spark_merge__quote(spec.target_alias) ~ '.' -%}
  {%- set s = spark_merge.spark_merge__quote(spec.source_alias) ~ '.' -%}
  {%- set on = [] -%}
  {%- for k in plan.pk -%}{%- do on.append(t ~ k ~ ' <=> ' ~ s ~ k) -%}{%- endfor -%}
  {#- with a watermark a stored row changes only for a fresher one; without, for any row that differs.
      A PostgreSQL target evaluates the condition itself, at its commit: column by column (it has no
      struct order, nor Spark's JSON), the watermark then the tombstone; an equal one keeps the row. -#}
  {%- if table.provider == 'jdbc' -%}
    {%- set keys = plan.order_parts if plan.watermark_key else [] -%}
    {%- set differs = [] -%}
    {%- for c in table.columns -%}{%- do differs.append(s ~ spark_merge.spark_merge__quote(c.name) ~ ' <=> ' ~ t ~
        spark_merge.spark_merge__quote(c.name)) -%}{%- endfor -%}
    {%- set condition = spark_merge.spark_merge__greater_sql(keys, s, t) | trim if plan.watermark_key else 'NOT (' ~ differs | join(' AND ') ~ ')' -%}
  {%- else -%}
    {%- set condition = (plan.order.replace('{p}', s) ~ ' > ' ~ plan.order.replace('{p}', t)) if plan.watermark_key
                        else ('NOT (' ~ plan.row.replace('{p}', s) ~ ' <=> ' ~ plan.row.replace('{p}', t) ~ ')') -%}
  {%- endif -%}
  {%- set clauses = [
    {'matched': true, 'action': 'update',
     'condition': condition,
     'assignments': [], 'insert_columns': [], 'insert_values': [], 'star': true},
    {'matched': false, 'action': 'insert', 'condition': none, 'assignments': [], 'insert_columns': [], 'insert_values': [], 'star': true},
  ] -%}
  {%- do out.update(spec) -%}
  {%- do out.update({'source': spark_merge.spark_merge__upsert_reduce_sql(plan, spark_merge.spark_merge__source_relation(spec)) | trim,
                     'source_kind': 'query', 'on': on | join(' AND '), 'clauses': clauses,
                     'key_columns': plan.primary_key, 'errors': []}) -%}
{%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- Rows a reader sees: not tombstones. -#}
{% macro spark_merge__upsert_live_filter(plan, prefix='') -%}
NOT ({{ plan.tombstone.replace('{p}', prefix) }})
{%- endmacro %}

{#-
  merge-on-read: writers append to the log table <name>__sm_log; the view
  <name> reduces the log per key and hides tombstones, so it reads exactly what
  the copy-on-write table filtered by the live filter holds for the same input.
-#}
{% macro spark_merge__mor_view_sql(view, table, plan) -%}
CREATE OR REPLACE VIEW {{ view }} AS
SELECT {{ spark_merge.spark_merge__column_list(table.columns | map(attribute='name') | list) }}
FROM ({{ spark_merge.spark_merge__upsert_reduce_sql(plan, table.relation) }}) AS __sm_r
WHERE {{ spark_merge.spark_merge__upsert_live_filter(plan) }}
{%- endmacro %}

{% macro spark_merge__mor_append_sql(table, spec) -%}
INSERT INTO {{ table.relation }}
{{ spark_merge.spark_merge__mor_rows_sql(table, spec) }}
{%- endmacro %}

{#- The source's rows per partition of the log, as log rows (n, __sm_part: partition_json). -#}
{% macro spark_merge__mor_counts_sql(table, spec) -%}
SELECT {{ spark_merge.spark_merge__partition_json(table) }} AS __sm_part, count(*) AS n
FROM ({{ spark_merge.spark_merge__mor_rows_sql(table, spec) }}) AS __sm_rows
GROUP BY 1
{%- endmacro %}

{#- The source as log rows: every target column by name, cast to its type. -#}
{% macro spark_merge__mor_rows_sql(table, spec) -%}
SELECT {% for c in table.columns %}CAST({{ spark_merge.spark_merge__quote(spec.source_alias) }}.{{ spark_merge.spark_merge__quote(c.name)
    }} AS {{ c.type }}){{ ", " if not loop.last }}{% endfor %}
FROM {{ spark_merge.spark_merge__source_relation(spec) }} AS {{ spark_merge.spark_merge__quote(spec.source_alias) }}
{%- endmacro %}

{#- Compaction: the log's new content, one row per key; tombstones whose watermark
    (its first column, when a date or timestamp) is before `cutoff` are dropped. -#}
{% macro spark_merge__mor_compact_select(table, plan, cutoff=none) -%}
SELECT * FROM ({{ spark_merge.spark_merge__upsert_reduce_sql(plan, table.relation) }}) AS __sm_r
{%- if cutoff is not none %}
WHERE NOT ({{ plan.tombstone.replace('{p}', '') }} AND {{ spark_merge.spark_merge__quote(plan.watermark_key[0]) }} < {{ cutoff }})
{%- endif %}
{%- endmacro %}

{#- `parts` (expressions with {p} for the side) of the side `a` greater than of side `b`, compared left
    to right with NULL smallest, in SQL that Spark and PostgreSQL read alike (no struct order). -#}
{% macro spark_merge__greater_sql(parts, a, b) -%}
{%- if not parts -%}false
{%- else -%}
  {%- set x, y = parts[0].replace('{p}', a), parts[0].replace('{p}', b) -%}
(({{ x }}) IS NOT NULL AND (({{ y }}) IS NULL OR ({{ x }}) > ({{ y }}))) OR (({{ x }}) <=> ({{ y }}) AND ({{
    spark_merge.spark_merge__greater_sql(parts[1:], a, b) | trim }}))
{%- endif -%}
{%- endmacro %}
