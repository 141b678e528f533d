{#-
  UPDATE and DELETE on a table from dbt, as operations:

    dbt run-operation spark_merge.update --args '{relation: analytics.accounts, set: {amount: "amount * 2"}, where: "region = ''eu''"}'
    dbt run-operation spark_merge.delete --args '{relation: analytics.accounts, where: "closed"}'

  The same lifecycle as a model's merge and as merge_core's UPDATE and DELETE (lifecycle/*.sql, over
  dbt's host): validated before anything is read, one journaled commit, its history entry. `set`
  maps a column to a Spark SQL expression over the table's columns; `where` is a condition over
  them (default: every row). Logs the merge's summary and returns its metrics.
-#}
{% macro update(relation, set, where='true') -%}
{%- if set is not mapping or not set -%}
  {{ spark_merge.spark_merge__dbt_fail("update needs set: a mapping of column to expression, got " ~ set) }}
{%- endif -%}
{{ return(spark_merge.spark_merge__dbt_statement('update', relation, set, where)) }}
{%- endmacro %}

{#- Point a table back at the version it had before merge `to` (and undo the later ones), as
    `spark-merge rollback` does: the same lifecycle (lifecycle/rollback.sql), one journaled commit. -#}
{% macro rollback(relation, to, discard_later_writes=false) -%}
{%- set parts = (relation | string).replace('`', '').split('.') -%}
{%- if parts | length != 2 -%}
  {{ spark_merge.spark_merge__dbt_fail("rollback needs relation as schema.table, got " ~ relation) }}
{%- endif -%}
{%- set host = spark_merge.spark_merge__dbt_host() -%}
{%- set started = host.now() -%}
{%- set merge_id = spark_merge.spark_merge__new_merge_id(started, local_md5(invocation_id ~ relation ~ started)) | trim -%}
{%- set s = {} -%}
{%- do spark_merge.spark_merge__run_state(merge_id, {'target': parts, 'to_merge_id': to | string, 'kind': 'rollback', 'started': started,
    'discard_later_writes': discard_later_writes}, s) -%}
{%- do spark_merge.spark_merge__lifecycle_begin_rollback(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_execute_rollback(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_finish(host, s) -%}
{%- do log('rolled ' ~ s.table.name ~ ' back to before ' ~ to ~ ': ' ~ s.repoints | length ~ ' partition(s) repointed (rollback ' ~ merge_id ~ ')',
    info=true) -%}
{{ return(s.entry) }}
{%- endmacro %}

{% macro delete(relation, where='true') -%}
{{ return(spark_merge.spark_merge__dbt_statement('delete', relation, {}, where)) }}
{%- endmacro %}

{#- The statement's spec, as merge_core's parser gives it for UPDATE t SET ... WHERE ... (or DELETE),
    its options at their declared defaults; run through the lifecycle. -#}
{% macro spark_merge__dbt_statement(kind, relation, set, where) -%}
{%- set parts = (relation | string).replace('`', '').split('.') -%}
{%- if parts | length != 2 -%}
  {{ spark_merge.spark_merge__dbt_fail(kind ~ " needs relation as schema.table, got " ~ relation) }}
{%- endif -%}
{%- set assignments = [] -%}
{%- for column, expression in set.items() -%}{%- do assignments.append([column, expression | string]) -%}{%- endfor -%}
{%- set spec = {'target': parts, 'on': where | string, 'source': none, 'source_kind': 'none', 'target_alias': parts[1], 'source_alias': 's',
                'kind': kind, 'key_columns': [], 'sql': none, 'upsert': none,
                'clauses': [{'matched': true, 'action': kind, 'condition': none, 'assignments': assignments, 'insert_columns': [],
                             'insert_values': [], 'star': false, 'by_source': false}]} -%}
{%- set declared = [] -%}
{%- do spark_merge.spark_merge__option_table(declared) -%}
{%- for o in declared if o.group == 'merge' and o.name not in spec -%}{%- do spec.update({o.name: o.default}) -%}{%- endfor -%}
{%- set host = spark_merge.spark_merge__dbt_host() -%}
{%- set started = host.now() -%}
{%- set merge_id = spark_merge.spark_merge__new_merge_id(started, local_md5(invocation_id ~ relation ~ started)) | trim -%}
{%- set s = {} -%}
{%- do spark_merge.spark_merge__run_state(merge_id, {'kind': kind,
             'statement': kind | upper ~ ' ' ~ parts | join('.') ~ ' (dbt run-operation)', 'started': started,
             'spec': spec, 'request': {'spec': spec}}, s) -%}
{%- set m = s.metrics -%}
{%- do spark_merge.spark_merge__lifecycle_begin(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_plan(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_write(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_finish(host, s) -%}
{%- do log(spark_merge.spark_merge__message(merge_id, m) | trim, info=true) -%}
{{ return(m) }}
{%- endmacro %}

{#- The change feed of a spark-merge table, for a model that reads only what changed:
      select * from {{ spark_merge.changes(ref('accounts'), since=last_merge_id) }}
    a subquery of the table's columns, _change_type (insert, update_preimage, update_postimage,
    delete), _merge_id and _commit_timestamp, of the commits after `since` (a merge id; none: from
    the first) up to `until` (none: the latest); the same query as merge_core.table_changes. -#}
{% macro changes(relation, since=none, until=none, accept_plain_writes=false) -%}
{%- if not execute -%}{{ return('(SELECT 1 AS __sm_not_run)') }}{%- endif -%}
{#- a merge-on-read model is a view over its log, which takes the commits -#}
{%- set log = adapter.get_relation(database=relation.database, schema=relation.schema, identifier=relation.identifier ~ '__sm_log') -%}
{%- set table = spark_merge.spark_merge__dbt_describe(log.identifier if log else relation.identifier, relation.schema) -%}
{%- set chosen = {} -%}
{%- do spark_merge.spark_merge__changes_range(table, spark_merge.spark_merge__dbt_host().history(table), since, until, chosen) -%}
{%- if chosen.get('error') -%}
  {{ spark_merge.spark_merge__dbt_fail(spark_merge.spark_merge__error_code(chosen.error[0]) ~ ': ' ~ chosen.error[1]) }}
{%- endif -%}
{%- if not accept_plain_writes -%}
  {#- the partitions those commits touched, against the rows their last commits left (feed.sql: plain_writes) -#}
  {%- set recorded, wanted = {}, {} -%}
  {%- do spark_merge.spark_merge__recorded_rows(table, chosen.ordered, recorded) -%}
  {%- do spark_merge.spark_merge__plain_writes(table, chosen.entries, recorded, none, wanted) -%}
  {%- if wanted.partitions -%}
    {%- set now, found = {}, {} -%}
    {%- do spark_merge.spark_merge__lifecycle_rows_now(spark_merge.spark_merge__dbt_host(), table, wanted.partitions, now) -%}
    {%- do spark_merge.spark_merge__plain_writes(table, chosen.entries, recorded, now, found) -%}
    {%- if found.changed -%}
      {{ spark_merge.spark_merge__dbt_fail(spark_merge.spark_merge__error_code('unsupported') ~ ': ' ~
          spark_merge.spark_merge__plain_writes_message(table, found.changed, 'accept_plain_writes=true')) }}
    {%- endif -%}
  {%- endif -%}
{%- endif -%}
{{ return('(' ~ spark_merge.spark_merge__changes_read_sql(table, chosen.entries) ~ ')') }}
{%- endmacro %}

{#- The newest _merge_id a model built from the change feed holds (none on its first run or a full
    refresh): the `since` of spark_merge.changes for its next increment. -#}
{% macro last_merge_id(relation) -%}
{%- if not execute or not is_incremental() -%}{{ return(none) }}{%- endif -%}
{%- set found = run_query(spark_merge.spark_merge__last_merge_id_sql(relation)) -%}
{{ return(found.rows[0][0] if found.rows else none) }}
{%- endmacro %}
