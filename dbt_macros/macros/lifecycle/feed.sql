{#-
  The change feed, for both hosts: the row changes of a commit, one row each (the table's columns and
  _change_type: insert, update_preimage, update_postimage or delete, Delta Lake's names), written into
  the commit's own directory <root>/_merge_<id>/_changes/ before its journal, so they are read
  (merge_core.table_changes, dbt's spark_merge.changes) exactly from the commits the history holds. On
  for a table whose property spark_merge.change_feed is 'true'. The history entry says the commit
  wrote them (change_feed); vacuum removes them with the version's directory.
-#}

{#- Whether the table records its changes ('True' or nothing). -#}
{% macro spark_merge__feed_on(table) -%}
{%- if ((table.get('properties') or {}).get('spark_merge.change_feed') or '') | lower == 'true' -%}True{%- endif -%}
{%- endmacro %}

{% macro spark_merge__changes_location(table, merge_id) -%}
{{ table.root.rstrip('/') }}/_merge_{{ merge_id }}/_changes
{%- endmacro %}

{#- A merge's change rows, from its planned changes (ctx.changes, which carry each changed row's old
    values __sm_t<i> when the feed is on): an insert's new row, a delete's old row, an update's old
    and new rows. -#}
{% macro spark_merge__feed_write_sql(table, ctx, merge_id) -%}
{%- set op = spark_merge.spark_merge__op -%}
INSERT OVERWRITE DIRECTORY {{ spark_merge.spark_merge__literal(spark_merge.spark_merge__changes_location(table, merge_id) | trim) }}
USING {{ table.provider }}
SELECT {% for c in table.columns %}CASE WHEN __sm_ct IN ('insert', 'update_postimage') THEN __sm_c{{ loop.index0 }} ELSE __sm_t{{ loop.index0
    }} END AS {{ spark_merge.spark_merge__quote(c.name) }}, {% endfor %}__sm_ct AS _change_type
FROM {{ ctx.changes }}
LATERAL VIEW explode(CASE __sm_op WHEN {{ op('insert') }} THEN array('insert') WHEN {{ op('delete') }} THEN array('delete')
    ELSE array('update_preimage', 'update_postimage') END) __sm_e AS __sm_ct
WHERE __sm_op IN ({{ op('insert', 'delete', 'update') }})
{%- endmacro %}

{#- A merge-on-read upsert's change rows (Paimon's `lookup` producer): the view's rows of the source's
    keys before the append and after it, each the view's own reduction (upsert_reduce_sql) of the log's
    rows of those keys, without and with the source's; a row only before is a delete, only after an
    insert, a key with both an update. Run under the commit lock, so the rows before are the ones the
    append follows. -#}
{% macro spark_merge__feed_log_sql(table, spec, plan, merge_id) -%}
{%- set cols = spark_merge.spark_merge__column_list(table.columns | map(attribute='name') | list) -%}
{%- set on = [] -%}{%- for k in plan.pk -%}{%- do on.append('__sm_a.' ~ k ~ ' <=> __sm_b.' ~ k) -%}{%- endfor -%}
{%- set live = spark_merge.spark_merge__upsert_live_filter(plan) -%}
{%- set sides = [('update_preimage', '__sm_gone', '__sm_came', 'SEMI'), ('delete', '__sm_gone', '__sm_came', 'ANTI'),
                 ('update_postimage', '__sm_came', '__sm_gone', 'SEMI'), ('insert', '__sm_came', '__sm_gone', 'ANTI')] -%}
INSERT OVERWRITE DIRECTORY {{ spark_merge.spark_merge__literal(spark_merge.spark_merge__changes_location(table, merge_id) | trim) }}
USING {{ table.provider }}
WITH __sm_src AS ({{ spark_merge.spark_merge__mor_rows_sql(table, spec) }}),
__sm_keyed AS (SELECT __sm_a.* FROM {{ table.relation }} AS __sm_a LEFT SEMI JOIN __sm_src AS __sm_b ON {{ on | join(' AND ') }}),
__sm_before AS (SELECT {{ cols }} FROM ({{ spark_merge.spark_merge__upsert_reduce_sql(plan, '__sm_keyed') }}) AS __sm_r WHERE {{ live }}),
__sm_after AS (SELECT {{ cols }} FROM ({{ spark_merge.spark_merge__upsert_reduce_sql(plan,
    '(SELECT * FROM __sm_keyed UNION ALL SELECT * FROM __sm_src)') }}) AS __sm_r WHERE {{ live }}),
__sm_gone AS (SELECT * FROM __sm_before EXCEPT ALL SELECT * FROM __sm_after),
__sm_came AS (SELECT * FROM __sm_after EXCEPT ALL SELECT * FROM __sm_before)
{% for kind, a, b, join in sides -%}
{{ 'UNION ALL ' if not loop.first }}SELECT __sm_a.*, '{{ kind }}' AS _change_type
FROM {{ a }} AS __sm_a LEFT {{ join }} JOIN {{ b }} AS __sm_b ON {{ on | join(' AND ') }}
{% endfor -%}
{%- endmacro %}

{#- A rollback's change rows, as statements into `out`: per partition it points back, the rows of the
    version it leaves that the restored one lacks (delete) and the other way round (insert), each
    directory read through a temporary view of the table's columns (an empty one reads as no rows).
    `restore`: [{partition, location: the directory restored (none: emptied), current: the one left}]. -#}
{% macro spark_merge__feed_rollback_statements(table, restore, merge_id, out) -%}
{%- set pcols = table.partition_columns | map('lower') | list -%}
{%- set data = [] -%}{%- for c in table.columns if (c.name | lower) not in pcols -%}{%- do data.append(c) -%}{%- endfor -%}
{%- set schema = [] -%}{%- for c in data -%}{%- do schema.append(spark_merge.spark_merge__quote(c.name) ~ ' ' ~ c.type) -%}{%- endfor -%}
{%- set selects, views = [], [] -%}
{%- for r in restore -%}
  {%- set part = [] -%}
  {%- for c in table.partition_columns -%}
    {%- set v = (r.partition or {}).get(c) -%}
    {%- do part.append(('CAST(NULL AS ' ~ table.columns_by_name[c | lower].type ~ ')' if v is none
        else spark_merge.spark_merge__typed_literal(v, table.columns_by_name[c | lower].type)) ~ ' AS ' ~ spark_merge.spark_merge__quote(c)) -%}
  {%- endfor -%}
  {%- set names = [] -%}{%- for c in data -%}{%- do names.append(spark_merge.spark_merge__quote(c.name)) -%}{%- endfor -%}
  {%- set cols = (names + part) | join(', ') -%}
  {%- set left, kept = '`__sm_feed_left_' ~ merge_id ~ '_' ~ loop.index0 ~ '`', '`__sm_feed_kept_' ~ merge_id ~ '_' ~ loop.index0 ~ '`' -%}
  {%- for view, location in [(left, r.current), (kept, r.location)] if location -%}
    {%- do views.append(view) -%}
    {%- do out.append('CREATE OR REPLACE TEMPORARY VIEW ' ~ view ~ ' (' ~ schema | join(', ') ~ ') USING ' ~ table.provider ~ ' OPTIONS (path ' ~
        spark_merge.spark_merge__literal(location) ~ ')') -%}
  {%- endfor -%}
  {%- if r.location -%}
    {%- do selects.append("SELECT *, 'delete' AS _change_type FROM (SELECT " ~ cols ~ ' FROM ' ~ left ~ ' EXCEPT ALL SELECT ' ~ cols ~ ' FROM ' ~
        kept ~ ')') -%}
    {%- do selects.append("SELECT *, 'insert' AS _change_type FROM (SELECT " ~ cols ~ ' FROM ' ~ kept ~ ' EXCEPT ALL SELECT ' ~ cols ~ ' FROM ' ~
        left ~ ')') -%}
  {%- else -%}
    {%- do selects.append("SELECT " ~ cols ~ ", 'delete' AS _change_type FROM " ~ left) -%}
  {%- endif -%}
{%- endfor -%}
{%- do out.append('INSERT OVERWRITE DIRECTORY ' ~ spark_merge.spark_merge__literal(spark_merge.spark_merge__changes_location(table, merge_id) | trim)
    ~ ' USING ' ~ table.provider ~ ' SELECT ' ~ spark_merge.spark_merge__column_list(table.columns | map(attribute='name') | list) ~
    ', _change_type FROM (' ~ selects | join(' UNION ALL ') ~ ') AS __sm_feed') -%}
{%- for view in views -%}{%- do out.append(spark_merge.spark_merge__drop_view_sql(view)) -%}{%- endfor -%}
{%- endmacro %}

{#- The commits of `entries` (a table's history) after `since` (a merge id, exclusive; none: from the
    first) up to `until` (inclusive; none: the latest), in commit order, into out.entries (and the whole
    history in commit order into out.ordered); or
    out.error ([code name, message]): an id the history lacks, `since` committed after `until` (an
    inverted range; since = until is an empty one), or a commit in the range that changed rows without
    recording them. -#}
{% macro spark_merge__changes_range(table, entries, since, until, out) -%}
{%- set keyed, ordered = [], [] -%}
{%- for e in entries -%}{%- do keyed.append([e.get('version_before') or 0, e.finished_at, loop.index0]) -%}{%- endfor -%}
{%- for k in keyed | sort -%}{%- do ordered.append(entries[k[2]]) -%}{%- endfor -%}
{%- set ids = ordered | map(attribute='merge_id') | list -%}
{%- for name, id in [('since', since), ('until', until)] if id is not none and id not in ids -%}
  {%- do out.update({'error': ['invalid_spec', table.name ~ ' has no commit ' ~ id ~ ' in its history (' ~ name ~ '; `spark-merge history ' ~
      table.name ~ '` lists them)']}) -%}
{%- endfor -%}
{%- set first = ids.index(since) + 1 if since is not none and since in ids else 0 -%}
{%- set last = ids.index(until) + 1 if until is not none and until in ids else ids | length -%}
{%- if not out.get('error') and first > last -%}
  {%- do out.update({'error': ['invalid_spec', 'the range of changes of ' ~ table.name ~ ' is inverted: since=' ~ since ~ ' was committed after until='
      ~ until ~ ' (since is exclusive, until inclusive, in commit order; swap them)']}) -%}
{%- endif -%}
{%- set chosen = [] -%}
{%- for e in ordered[first:last] if not out.get('error') -%}
  {%- set m = e.get('metrics') or {} -%}
  {#- a compaction and the canonical layout move rows between files, not in the table -#}
  {%- set changed = e.get('kind') == 'rollback' or (e.get('kind') not in ['compact', 'canonicalize'] and (m.get('numTargetRowsInserted') or 0) +
      (m.get('numTargetRowsUpdated') or 0) + (m.get('numTargetRowsDeleted') or 0) > 0) -%}
  {%- if e.get('change_feed') -%}{%- do chosen.append(e) -%}
  {%- elif changed and e.get('status', 'committed') == 'committed' and e.get('kind') == 'rollback'
        and (table.get('properties') or {}).get('spark_merge.upsert') -%}
    {%- do out.update({'error': ['unsupported', 'commit ' ~ e.merge_id ~ ' of ' ~ table.name ~ ' is a rollback of a merge-on-read table, which ' ~
        'records no change rows; read the changes after it (since=' ~ e.merge_id ~ ')']}) -%}
  {%- elif changed and e.get('status', 'committed') == 'committed' -%}
    {%- do out.update({'error': ['unsupported', 'commit ' ~ e.merge_id ~ ' of ' ~ table.name ~ ' changed rows without recording them: its change ' ~
        'feed was off then (ALTER TABLE ' ~ table.name ~ " SET TBLPROPERTIES ('spark_merge.change_feed' = 'true') records the changes of later " ~
        'commits); read the changes after it (since=' ~ e.merge_id ~ ')']}) -%}
  {%- endif -%}
{%- endfor -%}
{%- do out.update({'entries': chosen, 'ordered': ordered}) -%}
{%- endmacro %}

{#- The change rows of `entries` (changes_range's), oldest commit first: the table's columns,
    _change_type, _merge_id and _commit_timestamp. No commit: no rows, the same columns. -#}
{% macro spark_merge__changes_read_sql(table, entries) -%}
{%- set cols = spark_merge.spark_merge__column_list(table.columns | map(attribute='name') | list) -%}
{%- if not entries -%}
SELECT {% for c in table.columns %}CAST(NULL AS {{ c.type }}) AS {{ spark_merge.spark_merge__quote(c.name) }}, {% endfor
    %}CAST(NULL AS STRING) AS _change_type, CAST(NULL AS STRING) AS _merge_id, CAST(NULL AS TIMESTAMP) AS _commit_timestamp WHERE false
{%- else -%}
{%- for e in entries %}
{{ 'UNION ALL ' if not loop.first }}SELECT {{ cols }}, _change_type, {{ spark_merge.spark_merge__literal(e.merge_id) }} AS _merge_id,
  CAST({{ spark_merge.spark_merge__literal(e.finished_at) }} AS TIMESTAMP) AS _commit_timestamp
FROM {{ table.provider }}.{{ spark_merge.spark_merge__quote(spark_merge.spark_merge__changes_location(table, e.merge_id) | trim) }}
{%- endfor -%}
{%- endif -%}
{%- endmacro %}

{#- The rows each partition held after the last commit of `entries` (a table's history in commit order,
    or its beginning) that touched it, where that commit recorded them (partition_rows: merges, appends
    and compactions do; a rollback and entries of older releases do not), into out[partition_key]:
    {partition, rows, at: when they were written (the commit's finished_at, or that of vacuum's
    canonical layout, which copies a partition's rows into its first directory)}. -#}
{% macro spark_merge__recorded_rows(table, entries, out) -%}
{%- for e in entries -%}
  {%- if e.get('kind') == 'canonicalize' -%}
    {%- for r in e.get('repoints') or [] -%}
      {%- set k = spark_merge.spark_merge__partition_key(table.partition_columns, r.partition or {}) -%}
      {%- if out.get(k) -%}{%- do out[k].update({'at': e.finished_at}) -%}{%- endif -%}
    {%- endfor -%}
  {%- else -%}
    {%- set counted = {} -%}
    {%- for r in e.get('partition_rows') or [] -%}
      {%- do counted.update({spark_merge.spark_merge__partition_key(table.partition_columns, r.partition): {'partition': r.partition, 'rows': r.rows,
          'at': e.finished_at}}) -%}
    {%- endfor -%}
    {%- for p in (e.get('partitions') or []) + (e.get('repoints') or []) | map(attribute='partition') | list -%}
      {%- set k = spark_merge.spark_merge__partition_key(table.partition_columns, p or {}) -%}
      {%- do out.update({k: counted.get(k)}) -%}
    {%- endfor -%}
    {%- do out.update(counted) -%}
  {%- endif -%}
{%- endfor -%}
{%- for k in out.keys() | list if out[k] is none -%}{%- do out.pop(k) -%}{%- endfor -%}
{%- endmacro %}

{#- Whether writes that bypassed spark-merge changed the partitions the commits of `chosen` (changes_range's
    entries) touched since the last commit recorded them: `recorded` (recorded_rows of the whole
    history) against `now` (their rows now by partition_key, lifecycle_rows_now's). The first few such
    partitions, said, into out.changed; out.partitions: the partitions to count (now none: only those). -#}
{% macro spark_merge__plain_writes(table, chosen, recorded, now, out) -%}
{%- set keys, partitions = [], [] -%}
{%- for e in chosen -%}
  {%- for p in e.get('partitions') or [] -%}
    {%- set k = spark_merge.spark_merge__partition_key(table.partition_columns, p or {}) -%}
    {%- if k in recorded and k not in keys -%}{%- do keys.append(k) -%}{%- do partitions.append(recorded[k].partition) -%}{%- endif -%}
  {%- endfor -%}
{%- endfor -%}
{%- set changed = [] -%}
{%- for k in keys if now is not none and now.get(k, 0) != recorded[k].rows -%}
  {%- do changed.append(('partition ' ~ recorded[k].partition | tojson if recorded[k].partition else 'the table') ~ ' holds ' ~ now.get(k, 0) ~
      ' row(s), where its last commit left ' ~ recorded[k].rows) -%}
{%- endfor -%}
{%- do out.update({'partitions': partitions, 'changed': changed[:3]}) -%}
{%- endmacro %}

{#- The error of a change feed that plain writes contradict (plain_writes' out.changed), naming how to
    read it anyway (`accept`: the option's name in the host that reads it). -#}
{% macro spark_merge__plain_writes_message(table, changed, accept) -%}
the change feed of {{ table.name }} does not tell the whole story: {{ changed | join('; ') }}, so a write that bypassed spark-merge (INSERT
    OVERWRITE, TRUNCATE TABLE, DROP PARTITION, a plain INSERT) changed it since, and the feed records no change of it. Read the recorded
    changes anyway with {{ accept }}, or rebuild what reads the feed from the table
{%- endmacro %}
