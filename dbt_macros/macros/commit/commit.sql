{#-
  The copy-on-write commit: journal, repoint, mark done, refresh.

  `repoints`: [{'partition': {col: string value} or none, 'location': new dir,
                'old_location': previous dir or none, 'exists': bool}]

  The journal (merge id, repoints, and the commit's history entry) goes into
  table properties in one ALTER (atomic in the metastore) before the first
  repoint; the history entry is written after the last repoint and before the
  journal is marked done, so a commit finished by recovery has its entry too. Every repoint statement is idempotent
  (ADD IF NOT EXISTS, SET LOCATION), so a begin that finds a journal simply
  replays it: the commit rolls forward. Old directories stay for readers in
  flight and rollback until vacuum removes them.
-#}

{#- The journal's JSON text in parts of at most `chunk` characters (a metastore keeps a property
    value of limited length): out.parts, stored as spark_merge.journal.0, .1, ... -#}
{% macro spark_merge__journal_parts(table, merge_id, repoints, entry, out, append=none, chunk=3000) -%}
{%- set journal = {'merge_id': merge_id, 'table_id': table.table_id or merge_id, 'repoints': repoints} -%}
{%- if entry -%}{%- do journal.update({'entry': entry}) -%}{%- endif -%}
{%- if append -%}{%- do journal.update({'append': append}) -%}{%- endif -%}
{%- set text = journal | tojson -%}
{%- set parts = [] -%}
{%- for i in range(((text | length) / chunk) | round(0, 'ceil') | int) -%}{%- do parts.append(text[i * chunk:(i + 1) * chunk]) -%}{%- endfor -%}
{%- do out.update({'parts': parts}) -%}
{%- endmacro %}

{#- `properties`: more of the table's properties, set in the same statement (a merge-on-read log's options). -#}
{% macro spark_merge__journal_properties(table, merge_id, repoints, entry=none, append=none, properties={}) -%}
{%- set journal = {} -%}
{%- do spark_merge.spark_merge__journal_parts(table, merge_id, repoints, entry, journal, append) -%}
({{ spark_merge.spark_merge__identity_properties(table, merge_id) }},
{%- for k, v in properties.items() %} {{ spark_merge.spark_merge__literal(k) }} = {{ spark_merge.spark_merge__literal(v) }},{% endfor %}
 'spark_merge.journal.merge_id' = {{ spark_merge.spark_merge__literal(merge_id) }},
 'spark_merge.journal.parts' = '{{ journal.parts | length }}'
{%- for part in journal.parts %},
 'spark_merge.journal.{{ loop.index0 }}' = {{ spark_merge.spark_merge__literal(part) }}
{%- endfor %})
{%- endmacro %}

{#- `entry`: the commit's history entry (without finished_at), written by whoever completes the commit;
    `append`: an append's record (records.sql: append_record), which tells recovery whether its rows landed. -#}
{% macro spark_merge__journal_sql(table, merge_id, repoints, entry=none, append=none, properties={}) -%}
ALTER TABLE {{ table.relation }} SET TBLPROPERTIES {{ spark_merge.spark_merge__journal_properties(table, merge_id, repoints, entry, append,
    properties) }}
{%- endmacro %}

{#- One statement per entry of `out`; idempotent, so recovery replays them. -#}
{% macro spark_merge__repoint_statements(table, repoints, out) -%}
{%- for r in repoints -%}
  {%- if r.partition is none -%}
    {%- do out.append(spark_merge.spark_merge__set_location_sql(table.relation, r.location)) -%}
  {%- else -%}
    {%- if not r.exists -%}
      {%- do out.append('ALTER TABLE ' ~ table.relation ~ ' ADD IF NOT EXISTS ' ~ spark_merge.spark_merge__partition_spec(table, r.partition) ~
          ' LOCATION ' ~ spark_merge.spark_merge__literal(r.location)) -%}
    {%- endif -%}
    {%- do out.append('ALTER TABLE ' ~ table.relation ~ ' ' ~ spark_merge.spark_merge__partition_spec(table, r.partition) ~ ' SET LOCATION ' ~
        spark_merge.spark_merge__literal(r.location)) -%}
  {%- endif -%}
{%- endfor -%}
{%- endmacro %}

{#- Partitions a commit creates, in one statement (one metastore call), after the batch of moves. -#}
{% macro spark_merge__add_partitions_sql(table, repoints) -%}
ALTER TABLE {{ table.relation }} ADD IF NOT EXISTS{% for r in repoints %} {{ spark_merge.spark_merge__partition_spec(table, r.partition)
    }} LOCATION {{ spark_merge.spark_merge__literal(r.location) }}{% endfor %}
{%- endmacro %}

{#- Mark the journal done and drop its text, in one statement (the commit's last ALTER): `parts = 0`
    is what says done; each text part is set empty, those `table` (as described) holds text in and
    the first `written`, those the journal written since holds. The keys stay, empty: a statement
    cannot both set and unset properties, and a second one would cost the commit a metastore call. -#}
{% macro spark_merge__journal_done_sql(table, merge_id, written=0) -%}
{%- set prefix, keys = 'spark_merge.journal.', [] -%}
{%- for k, v in table.properties.items() if k.startswith(prefix) and k[prefix | length:].isdigit() and v -%}{%- do keys.append(k) -%}{%- endfor -%}
{%- for i in range(written) if (prefix ~ i) not in keys -%}{%- do keys.append(prefix ~ i) -%}{%- endfor -%}
ALTER TABLE {{ table.relation }} SET TBLPROPERTIES ('spark_merge.journal.parts' = '0', 'spark_merge.last_merge_id' = {{
    spark_merge.spark_merge__literal(merge_id) }}{% for k in keys %}, {{ spark_merge.spark_merge__literal(k) }} = ''{% endfor %})
{%- endmacro %}

{#- Point the table (not a partition) at `location`. -#}
{% macro spark_merge__set_location_sql(relation, location) -%}
ALTER TABLE {{ relation }} SET LOCATION {{ spark_merge.spark_merge__literal(location) }}
{%- endmacro %}

{#- Set `properties` ({key: value}) on the table, and unset `keys` (adopt). -#}
{% macro spark_merge__set_properties_sql(table, properties) -%}
ALTER TABLE {{ table.relation }} SET TBLPROPERTIES ({% for k, v in properties.items() %}{{ spark_merge.spark_merge__literal(k) }} = {{
    spark_merge.spark_merge__literal(v) }}{{ ", " if not loop.last }}{% endfor %})
{%- endmacro %}

{% macro spark_merge__unset_properties_sql(table, keys) -%}
ALTER TABLE {{ table.relation }} UNSET TBLPROPERTIES IF EXISTS ({% for k in keys %}{{ spark_merge.spark_merge__literal(k) }}{{ ", " if not
    loop.last }}{% endfor %})
{%- endmacro %}

{#- Remove the journal's text keys (repair-journal, after journal_reset_sql): those `table` holds. -#}
{% macro spark_merge__journal_clear_sql(table) -%}
{%- set keys = [] -%}
{%- for k in table.properties if k.startswith('spark_merge.journal.') and k not in ['spark_merge.journal.parts', 'spark_merge.journal.merge_id'] -%}
  {%- do keys.append(k) -%}
{%- endfor -%}
{%- if keys -%}
{{ spark_merge.spark_merge__unset_properties_sql(table, keys) }}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__refresh_sql(table) -%}
REFRESH TABLE {{ table.relation }}
{%- endmacro %}

{#- The history's record of a merge: one JSON line in a file of its own under
    <root>/_spark_merge/history/<merge id>/, {merge_id, finished_at, entry: the entry as JSON text}. -#}
{% macro spark_merge__history_record(entry, out) -%}
{%- do out.update({'merge_id': entry.merge_id, 'finished_at': entry.finished_at, 'entry': entry | tojson}) -%}
{%- endmacro %}

{#- The record, written by a Spark job (what a host without a file system runs). -#}
{% macro spark_merge__history_write_sql(ctx, entry) -%}
{%- set record = {} -%}
{%- do spark_merge.spark_merge__history_record(entry, record) -%}
INSERT OVERWRITE DIRECTORY {{ spark_merge.spark_merge__literal(ctx.history_location) }} USING json
SELECT {% for k, v in record.items() %}{{ spark_merge.spark_merge__literal(v) }} AS {{ k }}{{ ", " if not loop.last }}{% endfor %}
{%- endmacro %}

{#- Write the history record of `entry`: the host writes the file itself where it reaches the table's
    files (a Python host: no Spark job), else runs history_write_sql. -#}
{% macro spark_merge__write_history(host, table, merge_id, entry) -%}
{%- set hctx, record = {}, {} -%}
{%- do spark_merge.spark_merge__context({}, table, merge_id, hctx) -%}
{%- do spark_merge.spark_merge__history_record(entry, record) -%}
{%- do host.history_write(hctx.history_location, record, spark_merge.spark_merge__history_write_sql(hctx, entry)) -%}
{%- endmacro %}

{% macro spark_merge__history_read_sql(ctx) -%}
SELECT merge_id, finished_at, entry FROM json.`{{ ctx.history_glob | replace('`', '``') }}` ORDER BY finished_at DESC
{%- endmacro %}

{#- The journal of a commit that did not finish ({merge_id, repoints, entry}), or nothing; when its
    text cannot be read back (edited or truncated properties), {'corrupt': why, 'text': its text}:
    the hosts refuse to guess and point at `spark-merge repair-journal`. -#}
{#- A journal is this table's when its shape is a journal's (table/metadata.sql), it carries
    the table's identity, and every location it points a partition at lies under the table's root. -#}
{% macro spark_merge__pending_journal(table, out) -%}
{%- set raw = table.properties.get('spark_merge.journal.parts') or '0' -%}
{%- set parts = raw | int(-1) if raw.isdigit() else -1 -%}
{%- if parts != 0 -%}
  {%- set text = [] -%}
  {%- for i in range(parts if parts > 0 else 0) -%}{%- do text.append(table.properties.get('spark_merge.journal.' ~ i) or '') -%}{%- endfor -%}
  {%- set parsed = fromjson(text | join(''), none) if parts > 0 else none -%}
  {%- set errors = [] -%}
  {%- if parts < 0 -%}{%- do errors.append('spark_merge.journal.parts is ' ~ raw | tojson ~ ', not a count') -%}
  {%- elif parsed is none -%}{%- do errors.append('its ' ~ parts ~ ' part(s) are not the JSON a commit wrote') -%}
  {%- else -%}{%- do spark_merge.spark_merge__shape_errors(parsed, 'journal', 'the journal', errors) -%}
  {%- endif -%}
  {%- if not errors and parsed.get('table_id') and parsed.table_id != (table.table_id or parsed.merge_id) -%}
    {%- do errors.append('it belongs to another table (table_id ' ~ parsed.table_id ~ ', not ' ~ (table.table_id or 'none') ~ ')') -%}
  {%- endif -%}
  {%- for r in (parsed.repoints if not errors else []) if spark_merge.spark_merge__is_inside(r.location, table.root) | trim != 'True' -%}
    {%- do errors.append('it points ' ~ ('partition ' ~ r.partition | tojson if r.partition else 'the table') ~ ' at ' ~ r.location | tojson ~
        ', outside the root of the table ' ~ table.root | tojson) -%}
  {%- endfor -%}
  {%- if errors -%}
    {%- do out.update({'corrupt': errors[0], 'text': text | join('')}) -%}
  {%- else -%}
    {%- do out.update(parsed) -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__corrupt_journal_message(table, journal) -%}
the commit journal in the table properties of {{ table.name }} cannot be used: {{ journal.corrupt
    }}; nothing was touched. `spark-merge repair-journal {{ table.name
        }}` shows it and clears it, changing nothing else; then check the partitions with `spark-merge history {{ table.name }}`
{%- endmacro %}

{#- The statement that clears a journal (repair-journal): the parts count and the journal keys. -#}
{% macro spark_merge__journal_reset_sql(table) -%}
ALTER TABLE {{ table.relation }} SET TBLPROPERTIES ('spark_merge.journal.parts' = '0')
{%- endmacro %}
