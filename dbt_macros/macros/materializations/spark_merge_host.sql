{#-
  dbt's host primitives for the lifecycle macros (lifecycle/phases.sql): the same
  primitives merge_core/spark/host.py binds to a SparkSession, here made of dbt's own run_query,
  log and exceptions, so they work over every dbt-spark connection (session, thrift, http).
  Each statement and primitive is logged at debug level as `spark_merge.trace [kind, text]`
  (dbt --debug shows them; tests/test_conformance.py compares them with Python's).
-#}

{% macro spark_merge__dbt_host() -%}
{{ return({
  'run': spark_merge.spark_merge__dbt_host_run, 'rows': spark_merge.spark_merge__dbt_host_rows,
  'step': spark_merge.spark_merge__dbt_host_step, 'warn': spark_merge.spark_merge__dbt_host_step,
  'fail': spark_merge.spark_merge__dbt_host_fail, 'failpoint': spark_merge.spark_merge__dbt_host_failpoint,
  'describe': spark_merge.spark_merge__dbt_host_describe,
  'lock': spark_merge.spark_merge__dbt_lock, 'unlock': spark_merge.spark_merge__dbt_unlock,
  'wait_free': spark_merge.spark_merge__dbt_wait_free, 'release_finished': spark_merge.spark_merge__dbt_release_finished,
  'exists': spark_merge.spark_merge__dbt_host_exists, 'file_stats': spark_merge.spark_merge__dbt_host_file_stats, 'repoint':
      spark_merge.spark_merge__dbt_host_repoint,
  'journal': spark_merge.spark_merge__dbt_host_run, 'now': spark_merge.spark_merge__dbt_host_now,
  'carry_late': spark_merge.spark_merge__dbt_host_carry_late, 'can_carry': spark_merge.spark_merge__dbt_host_can_carry,
  'elapsed_ms': spark_merge.spark_merge__dbt_host_elapsed_ms, 'hash': spark_merge.spark_merge__dbt_host_hash,
}) }}
{%- endmacro %}

{% macro spark_merge__dbt_trace(kind, text='') -%}
{%- do log('spark_merge.trace ' ~ tojson([kind, text | trim])) -%}
{%- endmacro %}

{#- dbt cannot catch an error: `tolerate` only documents that the Python host would. -#}
{% macro spark_merge__dbt_host_run(sql, tolerate=false) -%}
{%- do spark_merge.spark_merge__dbt_trace('sql', sql) -%}
{%- do run_query(sql) -%}
{%- endmacro %}

{% macro spark_merge__dbt_host_rows(sql) -%}
{%- do spark_merge.spark_merge__dbt_trace('sql', sql) -%}
{{ return(spark_merge.spark_merge__dbt_rows(sql)) }}
{%- endmacro %}

{% macro spark_merge__dbt_host_step(text) -%}
{%- do log('spark_merge: ' ~ text, info=true) -%}
{%- endmacro %}

{#- MERGE_VERSION_MOVED: Python plans again; a dbt model fails, to be run again. -#}
{% macro spark_merge__dbt_host_fail(code, message, rows=none) -%}
{%- do spark_merge.spark_merge__dbt_trace('fail', code) -%}
{%- if code == spark_merge.spark_merge__error_code('version_moved') -%}
  {{ spark_merge.spark_merge__dbt_runtime_fail(spark_merge.spark_merge__error_code('conflict') ~ ': ' ~ message ~
      '; nothing was written, run the model again') }}
{%- else -%}
  {{ spark_merge.spark_merge__dbt_runtime_fail(code ~ ': ' ~ message) }}
{%- endif -%}
{%- endmacro %}

{#- With env SPARK_MERGE_FAULT=<name> the run stops dead here (merge_core/spark/faults.py): it writes the
    name to the directory $SPARK_MERGE_FAULT_FLAG.d and sleeps in Spark, to be killed by the test. -#}
{% macro spark_merge__dbt_host_failpoint(name) -%}
{%- if env_var('SPARK_MERGE_FAULT', '') == name -%}
  {%- do run_query('INSERT OVERWRITE DIRECTORY ' ~ spark_merge.spark_merge__literal(env_var('SPARK_MERGE_FAULT_FLAG') ~ '.d') ~ ' USING text SELECT '
      ~ spark_merge.spark_merge__literal(name)) -%}
  {%- do run_query("SELECT reflect('java.lang.Thread', 'sleep', CAST(3600000 AS BIGINT))") -%}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__dbt_host_describe(table) -%}
{{ return(spark_merge.spark_merge__dbt_describe(table.table_name)) }}
{%- endmacro %}

{#- dbt has no file system: whether staged data exists cannot be told (Python checks it). -#}
{% macro spark_merge__dbt_host_exists(location) -%}
{{ return(none) }}
{%- endmacro %}

{#- dbt has no file system: the files' statistics come from the query (Python lists the files). -#}
{% macro spark_merge__dbt_host_file_stats(table, name, sql, partitions) -%}
{%- do spark_merge.spark_merge__dbt_trace('file_stats', sql) -%}
{{ return(spark_merge.spark_merge__dbt_rows(sql)) }}
{%- endmacro %}

{#- dbt has no file system: files appended past the lock after the check are left to vacuum, which
    keeps and reports them (MERGE_LATE_APPEND); Python carries them into the new version. -#}
{#- dbt has no file system: a rewrite writes the touched partitions whole (Python carries the
    unchanged files over and rewrites only the changed ones). -#}
{% macro spark_merge__dbt_host_can_carry(table, old) -%}
{%- do spark_merge.spark_merge__dbt_trace('can_carry') -%}
{{ return(false) }}
{%- endmacro %}

{% macro spark_merge__dbt_host_carry_late(table, repoints) -%}
{%- do spark_merge.spark_merge__dbt_trace('carry_late') -%}
{%- endmacro %}

{% macro spark_merge__dbt_host_repoint(table, merge_id, repoints) -%}
{%- do spark_merge.spark_merge__dbt_trace('repoint', repoints | length | string) -%}
{%- set statements = [] -%}
{%- do spark_merge.spark_merge__repoint_statements(table, repoints, statements) -%}
{%- for stmt in statements -%}
  {%- do run_query(stmt) -%}
  {%- if not loop.last -%}{%- do spark_merge.spark_merge__dbt_host_failpoint('between_repoints') -%}{%- endif -%}
{%- endfor -%}
{%- endmacro %}

{% macro spark_merge__dbt_host_now() -%}
{{ return(modules.datetime.datetime.now(modules.pytz.utc).isoformat(timespec='milliseconds')) }}
{%- endmacro %}

{% macro spark_merge__dbt_host_elapsed_ms(s) -%}
{{ return(((modules.datetime.datetime.now(modules.pytz.utc) - modules.datetime.datetime.fromisoformat(s.started)).total_seconds() * 1000) | int) }}
{%- endmacro %}

{% macro spark_merge__dbt_host_hash(text) -%}
{{ return(local_md5(text)) }}
{%- endmacro %}

{#- The commit lock's holder: {merge_id, since, expires, owner, dead}, or none when free. A holder
    whose lease lapsed (by 5 s, for clock skew) is dead, as merge_core/spark/lock.py decides; a lock
    without a lease (older spark-merge) is dead after 900 s. -#}
{% macro spark_merge__dbt_lock_holder(table) -%}
{%- set held = run_query('SHOW TABLES IN ' ~ spark_merge.spark_merge__quote(table.database) ~ ' LIKE ' ~ spark_merge.spark_merge__literal('__sm_lock_'
    ~ table.table_name)).rows -%}
{%- if held | length == 0 -%}{{ return(none) }}{%- endif -%}
{%- set props = {} -%}
{%- for row in run_query('SHOW TBLPROPERTIES ' ~ spark_merge.spark_merge__lock_relation(table)).rows -%}{%- do props.update({row[0]: row[1]}) -%}{%- endfor -%}
{%- set record = {} -%}
{%- do spark_merge.spark_merge__lock_record(table, props, record) -%}
{%- if record.error -%}{{ spark_merge.spark_merge__dbt_runtime_fail(spark_merge.spark_merge__error_code('metadata') ~ ': ' ~ record.error) }}{%- endif -%}
{%- set dt = modules.datetime -%}
{%- set now = dt.datetime.now(modules.pytz.utc) -%}
{%- set since = record.since -%}
{%- set expires = record.expires -%}
{%- if expires -%}
  {%- set dead = (now - dt.datetime.fromisoformat(expires)).total_seconds() > 5 -%}
{%- else -%}
  {%- set dead = not since or (now - dt.datetime.fromisoformat(since)).total_seconds() > 900 -%}
{%- endif -%}
{{ return({'merge_id': record.merge_id, 'since': since, 'expires': expires, 'owner': record.owner or '?', 'dead': dead}) }}
{%- endmacro %}

{#- When a wait for the commit lock that starts now gives up: the var spark_merge_lock_wait_seconds
    (120 s, lock.py's LOCK_WAIT_S) from now, in UTC. -#}
{% macro spark_merge__dbt_lock_deadline() -%}
{{ return(modules.datetime.datetime.now(modules.pytz.utc) + modules.datetime.timedelta(seconds=var('spark_merge_lock_wait_seconds', 120) | float)) }}
{%- endmacro %}

{#- Wait while a live holder commits, polling every 0.5 s (a sleep in Spark: dbt has none of its
    own) until `deadline` (a UTC datetime; default: dbt_lock_deadline()); break a dead holder's
    lock, or the lock of `finished`. Fails MERGE_CONFLICT at the deadline. -#}
{% macro spark_merge__dbt_wait_lock(table, finished=none, deadline=none) -%}
{%- set dt = modules.datetime -%}
{%- set start = dt.datetime.now(modules.pytz.utc) -%}
{%- set deadline = deadline or spark_merge.spark_merge__dbt_lock_deadline() -%}
{%- set state = {'free': false, 'holder': none, 'late': false} -%}
{%- for attempt in range(100000) if not state.free and not state.late -%}
  {%- set holder = spark_merge.spark_merge__dbt_lock_holder(table) -%}
  {%- if holder is none -%}
    {%- do state.update({'free': true}) -%}
  {%- elif holder.dead or holder.merge_id == finished -%}
    {%- do log("spark_merge: breaking the commit lock of merge " ~ holder.merge_id ~ " on " ~ table.name ~ " (" ~ ('its lease lapsed' if holder.dead
        else 'its commit is complete') ~ ")", info=true) -%}
    {%- do run_query(spark_merge.spark_merge__unlock_sql(table)) -%}
    {%- do state.update({'free': true}) -%}
  {%- elif dt.datetime.now(modules.pytz.utc) > deadline -%}
    {%- do state.update({'holder': holder, 'late': true}) -%}
  {%- else -%}
    {%- do run_query("SELECT reflect('java.lang.Thread', 'sleep', CAST(500 AS BIGINT))") -%}
  {%- endif -%}
{%- endfor -%}
{%- if not state.free -%}
  {{ spark_merge.spark_merge__dbt_runtime_fail(spark_merge.spark_merge__error_code('conflict') ~ ": " ~ table.name ~ " is being committed by merge " ~
      state.holder.merge_id ~ " on " ~ state.holder.owner ~ " (since " ~ state.holder.since ~ ", lease until " ~ state.holder.expires ~
      "), which is alive; gave up after " ~ ((dt.datetime.now(modules.pytz.utc) - start).total_seconds() | round | int) ~
      " s; nothing was written, run the model again once it finishes") }}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__dbt_wait_free(table) -%}
{%- do spark_merge.spark_merge__dbt_trace('wait_free') -%}
{%- do spark_merge.spark_merge__dbt_wait_lock(table, table.properties.get('spark_merge.last_merge_id')) -%}
{%- endmacro %}

{% macro spark_merge__dbt_release_finished(table, merge_id) -%}
{%- do spark_merge.spark_merge__dbt_trace('release_finished') -%}
{%- set holder = spark_merge.spark_merge__dbt_lock_holder(table) -%}
{%- if holder is not none and (holder.dead or holder.merge_id == merge_id) -%}
  {%- do run_query(spark_merge.spark_merge__unlock_sql(table)) -%}
{%- endif -%}
{%- endmacro %}

{#- The lock with a lease of 120 s (a dbt run cannot renew it from a thread; its commit takes
    seconds). Wait while another holds it, create it if none does, and read whose it is: a taker
    that lost the race to another (in any application) waits for that one in the next round. All
    rounds share one deadline (spark_merge_lock_wait_seconds, 120 s, from the first), as
    lock.table_lock's. -#}
{% macro spark_merge__dbt_lock(table, merge_id) -%}
{%- do spark_merge.spark_merge__dbt_trace('lock') -%}
{%- set state = {'held': false} -%}
{%- set deadline = spark_merge.spark_merge__dbt_lock_deadline() -%}
{%- for attempt in range(20) if not state.held -%}
  {%- do spark_merge.spark_merge__dbt_wait_lock(table, none, deadline) -%}
  {%- set now = modules.datetime.datetime.now(modules.pytz.utc) -%}
  {%- do run_query(spark_merge.spark_merge__lock_sql(table, merge_id, now.isoformat(), (now + modules.datetime.timedelta(seconds=120)).isoformat(),
      'dbt ' ~ invocation_id)) -%}
  {%- set holder = spark_merge.spark_merge__dbt_lock_holder(table) -%}
  {%- do state.update({'held': holder is not none and holder.merge_id == merge_id}) -%}
{%- endfor -%}
{%- if not state.held -%}
  {{ spark_merge.spark_merge__dbt_runtime_fail(spark_merge.spark_merge__error_code('conflict') ~ ": other merges took the commit lock on " ~
      table.name ~ " first 20 times in a row; nothing was written, run the model again") }}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__dbt_unlock(table, merge_id=none) -%}
{%- do spark_merge.spark_merge__dbt_trace('unlock') -%}
{%- do run_query(spark_merge.spark_merge__unlock_sql(table)) -%}
{%- endmacro %}
