{#-
  dbt's host primitives for the lifecycle macros (declared in merge_core/common/host_contract.py): the
  same primitives merge_core/spark/host.py binds to a SparkSession, here made of dbt's own run_query,
  log and exceptions, so they work over every dbt-spark connection (session, thrift, http).
  Each statement and primitive is logged at debug level as `spark_merge.trace [kind, text]`
  (dbt --debug shows them; tests/test_conformance.py compares them with Python's).
-#}

{% macro spark_merge__dbt_host() -%}
{{ return({
  'run': spark_merge.spark_merge__dbt_host_run, 'rows': spark_merge.spark_merge__dbt_host_rows,
  'step': spark_merge.spark_merge__dbt_host_step, 'warn': spark_merge.spark_merge__dbt_host_warn,
  'fail': spark_merge.spark_merge__dbt_host_fail, 'failpoint': spark_merge.spark_merge__dbt_host_failpoint,
  'catalog': spark_merge.spark_merge__dbt_host_catalog,
  'lock': spark_merge.spark_merge__dbt_lock, 'unlock': spark_merge.spark_merge__dbt_unlock,
  'lock_handle': spark_merge.spark_merge__dbt_lock_handle, 'release_finished': spark_merge.spark_merge__dbt_release_finished,
  'exists': spark_merge.spark_merge__dbt_host_exists, 'file_stats': spark_merge.spark_merge__dbt_host_file_stats,
  'stage': spark_merge.spark_merge__dbt_host_stage, 'repoint':
      spark_merge.spark_merge__dbt_host_repoint,
  'journal': spark_merge.spark_merge__dbt_host_run, 'now': spark_merge.spark_merge__dbt_host_now,
  'history_write': spark_merge.spark_merge__dbt_host_history_write,
  'carry_late': spark_merge.spark_merge__dbt_host_carry_late, 'can_carry': spark_merge.spark_merge__dbt_host_can_carry,
  'carry': spark_merge.spark_merge__dbt_host_carry,
  'target_rows': spark_merge.spark_merge__dbt_host_target_rows, 'key_candidates': spark_merge.spark_merge__dbt_host_key_candidates,
  'can_observe': spark_merge.spark_merge__dbt_host_can_observe, 'stage_observed': spark_merge.spark_merge__dbt_host_stage_observed,
  'elapsed_ms': spark_merge.spark_merge__dbt_host_elapsed_ms, 'hash': spark_merge.spark_merge__dbt_host_hash,
  'evolve_spec': spark_merge.spark_merge__dbt_host_evolve_spec, 'own_target': spark_merge.spark_merge__dbt_host_own_target,
  'check_files': spark_merge.spark_merge__dbt_host_check_files, 'source_types': spark_merge.spark_merge__dbt_host_source_types,
  'prepare': spark_merge.spark_merge__dbt_host_prepare, 'part_types': spark_merge.spark_merge__dbt_host_part_types,
  'on_keys': spark_merge.spark_merge__dbt_host_on_keys, 'target_begin': spark_merge.spark_merge__dbt_host_target_begin,
  'analyze': spark_merge.spark_merge__dbt_host_analyze, 'history': spark_merge.spark_merge__dbt_host_history,
  'partition_location': spark_merge.spark_merge__dbt_host_partition_location, 'require': spark_merge.spark_merge__dbt_host_require,
  'written_after': spark_merge.spark_merge__dbt_host_written_after,
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

{#- dbt has no file system: the history record is written by its Spark job. -#}
{% macro spark_merge__dbt_host_history_write(location, record, sql) -%}
{%- do spark_merge.spark_merge__dbt_trace('history_write', sql) -%}
{%- do run_query(sql) -%}
{%- endmacro %}

{% macro spark_merge__dbt_host_rows(sql, kind='rows') -%}
{%- do spark_merge.spark_merge__dbt_trace('sql', sql) -%}
{{ return(spark_merge.spark_merge__dbt_rows(sql)) }}
{%- endmacro %}

{% macro spark_merge__dbt_host_step(text) -%}
{%- do log('spark_merge: ' ~ text, info=true) -%}
{%- endmacro %}

{#- A warning dbt shows as one (and --warn-error turns into an error). -#}
{% macro spark_merge__dbt_host_warn(text) -%}
{%- do exceptions.warn('spark_merge (' ~ spark_merge.spark_merge__dbt_who() ~ '): ' ~ text) -%}
{%- endmacro %}

{#- MERGE_VERSION_MOVED: Python plans again; a dbt model fails, to be run again. Begin's validation
    (its `fields` carry the errors) finds that the config does not fit the table: a Compilation Error,
    as dbt reports a wrong config; anything found while the model runs is a Database Error. `fields`
    are in the message: dbt's error carries text only. -#}
{% macro spark_merge__dbt_host_fail(code, message, rows=none, fields=none) -%}
{%- do spark_merge.spark_merge__dbt_trace('fail', code) -%}
{%- if code == spark_merge.spark_merge__error_code('validation') and (fields or {}).get('errors') -%}
  {{ spark_merge.spark_merge__dbt_fail(code ~ ': ' ~ message) }}
{%- elif code == spark_merge.spark_merge__error_code('version_moved') -%}
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

{% macro spark_merge__dbt_host_catalog(parts, json_sql, columns_sql) -%}
{%- do spark_merge.spark_merge__dbt_trace('catalog') -%}
{%- set types = [] -%}
{%- for row in run_query(columns_sql).rows -%}{%- do types.append([row[0], row[1]]) -%}{%- endfor -%}
{{ return({'desc': fromjson(run_query(json_sql).rows[0][0]), 'types': types}) }}
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

{#- dbt has no file system: the staged rows are a staging table (sql, its CREATE TABLE ... AS),
    measured by a query and dropped again (its files stay: they are the new version). -#}
{% macro spark_merge__dbt_host_stage(table, ctx, sql, select, partitions) -%}
{%- do spark_merge.spark_merge__dbt_trace('stage', sql) -%}
{%- do run_query(sql) -%}
{%- set rows = spark_merge.spark_merge__dbt_rows(spark_merge.spark_merge__file_stats_sql(table, ctx.stage)) -%}
{%- do run_query(spark_merge.spark_merge__drop_table_sql(ctx.stage)) -%}
{{ return(rows) }}
{%- endmacro %}

{#- dbt has no file system: a rewrite writes the touched partitions whole (Python carries the
    unchanged files over and rewrites only the changed ones). -#}
{% macro spark_merge__dbt_host_can_carry(table, old) -%}
{%- do spark_merge.spark_merge__dbt_trace('can_carry') -%}
{{ return(false) }}
{%- endmacro %}

{#- Never called: the lifecycle carries only where can_carry said it could. -#}
{% macro spark_merge__dbt_host_carry(table, repoints, rewritten, fold=none) -%}
{%- do exceptions.raise_compiler_error('spark_merge: the dbt host cannot carry files (it has no file system)') -%}
{%- endmacro %}

{#- SQL has no observed metrics: a write of dbt's counts nothing itself (the summary counts first), and
    stage_observed is never called. -#}
{% macro spark_merge__dbt_host_can_observe(table, ctx) -%}
{%- do spark_merge.spark_merge__dbt_trace('can_observe') -%}{{ return(false) }}
{%- endmacro %}
{% macro spark_merge__dbt_host_stage_observed(table, ctx, select, rewritten) -%}
{%- do exceptions.raise_compiler_error('spark_merge: the dbt host cannot observe its writes') -%}
{%- endmacro %}

{#- The files' key ranges are in their footers, which dbt does not read: cannot tell. -#}
{% macro spark_merge__dbt_host_key_candidates(table, keys) -%}
{%- do spark_merge.spark_merge__dbt_trace('key_candidates') -%}
{{ return(none) }}
{%- endmacro %}

{#- dbt has no file system: it cannot count a target's rows without a Spark job, so the summary's
    join never broadcasts the target (Python counts a small unpartitioned table's from its footers). -#}
{% macro spark_merge__dbt_host_target_rows(table) -%}
{%- do spark_merge.spark_merge__dbt_trace('target_rows') -%}
{{ return(none) }}
{%- endmacro %}

{#- dbt has no file system: files appended past the lock after the check are left to vacuum, which
    keeps and reports them (MERGE_LATE_APPEND); Python carries them into the new version. -#}
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

{#- The dbt host's handle on lock tables (host_contract.LockHandle) for the shared holder and wait
    (spark_merge__lock_holder, spark_merge__lock_wait): the wait pauses 0.5 s in Spark (dbt has no
    sleep of its own), and gives up after the var spark_merge_lock_wait_seconds (default:
    lock_settings' wait_s, as for Python). A dbt holder takes a lease of lock_settings' dbt_lease_s:
    a dbt run cannot renew it from a thread, and its commit takes seconds. -#}
{% macro spark_merge__dbt_lock_handle() -%}
{%- do spark_merge.spark_merge__dbt_trace('lock_handle') -%}
{{ return(spark_merge.spark_merge__dbt_lock_handle_of()) }}
{%- endmacro %}

{% macro spark_merge__dbt_lock_handle_of() -%}
{%- set k = {} -%}
{%- do spark_merge.spark_merge__lock_settings(k) -%}
{{ return({'lease': spark_merge.spark_merge__dbt_lock_lease, 'take': spark_merge.spark_merge__dbt_lock_run,
           'properties': spark_merge.spark_merge__dbt_lock_properties, 'ages': spark_merge.spark_merge__dbt_lock_ages,
           'release': spark_merge.spark_merge__dbt_lock_run, 'pause': spark_merge.spark_merge__dbt_lock_pause,
           'clock': spark_merge.spark_merge__dbt_lock_clock, 'note': spark_merge.spark_merge__dbt_lock_note,
           'wait_s': var('spark_merge_lock_wait_seconds', k.wait_s) | float}) }}
{%- endmacro %}

{#- The shared wait with this host's handle; a conflict (or a lock that is not spark-merge's) fails the model. -#}
{% macro spark_merge__dbt_lock_wait(table, merge_id, finished) -%}
{%- set lock, out = spark_merge.spark_merge__dbt_lock_handle_of(), {} -%}
{%- do spark_merge.spark_merge__lock_wait(lock, table, merge_id, finished, lock.wait_s, out) -%}
{%- if out.get('error') -%}
  {{ spark_merge.spark_merge__dbt_runtime_fail(spark_merge.spark_merge__error_code(out.get('code') or 'conflict') ~ ': ' ~ out.error) }}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__dbt_lock_lease() -%}
{%- set k = {} -%}
{%- do spark_merge.spark_merge__lock_settings(k) -%}
{%- set now = modules.datetime.datetime.now(modules.pytz.utc) -%}
{{ return({'since': now.isoformat(), 'expires': (now + modules.datetime.timedelta(seconds=k.dbt_lease_s)).isoformat(), 'owner': 'dbt ' ~ invocation_id}) }}
{%- endmacro %}

{% macro spark_merge__dbt_lock_run(table, sql) -%}
{%- do run_query(sql) -%}
{%- endmacro %}

{#- dbt cannot catch an error: the lock table is listed first, always. -#}
{% macro spark_merge__dbt_lock_properties(table, listing_sql, props_sql) -%}
{%- if run_query(listing_sql).rows | length == 0 -%}{{ return(none) }}{%- endif -%}
{%- set props = {} -%}
{%- for row in run_query(props_sql).rows -%}{%- do props.update({row[0]: row[1]}) -%}{%- endfor -%}
{{ return(props) }}
{%- endmacro %}

{% macro spark_merge__dbt_lock_ages(since, expires) -%}
{%- set dt = modules.datetime -%}
{%- set now = dt.datetime.now(modules.pytz.utc) -%}
{{ return({'lapsed': (now - dt.datetime.fromisoformat(expires)).total_seconds() if expires else none,
           'held': (now - dt.datetime.fromisoformat(since)).total_seconds() if since else none}) }}
{%- endmacro %}

{% macro spark_merge__dbt_lock_pause() -%}
{%- do run_query("SELECT reflect('java.lang.Thread', 'sleep', CAST(500 AS BIGINT))") -%}
{%- endmacro %}

{% macro spark_merge__dbt_lock_clock() -%}
{{ return(modules.datetime.datetime.now(modules.pytz.utc).timestamp()) }}
{%- endmacro %}

{% macro spark_merge__dbt_lock_note(text) -%}
{%- do log('spark_merge: ' ~ text, info=true) -%}
{%- endmacro %}

{% macro spark_merge__dbt_release_finished(table, merge_id) -%}
{%- do spark_merge.spark_merge__dbt_trace('release_finished') -%}
{%- set holder = {} -%}
{%- do spark_merge.spark_merge__lock_holder(spark_merge.spark_merge__dbt_lock_handle_of(), table, holder) -%}
{%- if holder.get('error') -%}
  {{ spark_merge.spark_merge__dbt_runtime_fail(spark_merge.spark_merge__error_code('metadata') ~ ': ' ~ holder.error) }}
{%- endif -%}
{%- if holder and (holder.dead or holder.merge_id == merge_id) -%}
  {%- do run_query(spark_merge.spark_merge__unlock_sql(table)) -%}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__dbt_lock(table, merge_id) -%}
{%- do spark_merge.spark_merge__dbt_trace('lock') -%}
{%- do spark_merge.spark_merge__dbt_lock_wait(table, merge_id, none) -%}
{%- endmacro %}

{% macro spark_merge__dbt_unlock(table, merge_id=none) -%}
{%- do spark_merge.spark_merge__dbt_trace('unlock') -%}
{%- do run_query(spark_merge.spark_merge__unlock_sql(table)) -%}
{%- endmacro %}


{#- Begin's primitives (lifecycle/begin.sql). -#}

{#- A model's target is a catalog table, which the lifecycle describes. -#}
{% macro spark_merge__dbt_host_own_target(parts) -%}
{%- do spark_merge.spark_merge__dbt_trace('own_target') -%}
{{ return(none) }}
{%- endmacro %}

{#- dbt has no file system: another format's metadata in the table's directories cannot be seen
    (Python refuses it), and dead merges' staging tables are left to vacuum. -#}
{% macro spark_merge__dbt_host_check_files(table, listing_sql) -%}
{%- do spark_merge.spark_merge__dbt_trace('check_files') -%}
{{ return([]) }}
{%- endmacro %}

{#- An analysis-only statement; dbt reports Spark's refusal itself (it cannot catch it to name `label`). -#}
{% macro spark_merge__dbt_host_analyze(sql, label) -%}
{%- do spark_merge.spark_merge__dbt_trace('sql', sql) -%}
{%- do run_query(sql) -%}
{%- endmacro %}

{#- The table's history entries, read with Spark (dbt has no file system), each checked as Python checks
    it; an entry that cannot be used stops the operation (`spark-merge repair-history` moves it aside).
    A table no commit has finished on (created by a model's first run, say) has none: Spark refuses to
    read a folder that does not exist, so it is not read. -#}
{% macro spark_merge__dbt_host_history(table) -%}
{%- do spark_merge.spark_merge__dbt_trace('history') -%}
{%- if not table.properties.get('spark_merge.last_merge_id') -%}{{ return([]) }}{%- endif -%}
{%- set ctx = {} -%}
{%- do spark_merge.spark_merge__context({}, table, 'history', ctx) -%}
{%- set entries = [] -%}
{%- for row in run_query(spark_merge.spark_merge__history_read_sql(ctx)).rows -%}
  {%- set entry = fromjson(row[2]) -%}
  {%- set problems = [] -%}
  {%- if entry is mapping -%}{%- do spark_merge.spark_merge__entry_errors(table, entry, 'the entry', problems) -%}
  {%- else -%}{%- do problems.append('it is not one JSON entry') -%}{%- endif -%}
  {%- if problems -%}
    {{ spark_merge.spark_merge__dbt_runtime_fail(spark_merge.spark_merge__error_code('metadata') ~ ': a history entry of ' ~ table.name ~
       ' (merge ' ~ row[0] ~ ') cannot be used: ' ~ problems[0] ~ '; nothing was changed. `spark-merge repair-history ' ~ table.name ~
       '` moves it aside') }}
  {%- endif -%}
  {%- do spark_merge.spark_merge__rebase_entry(table, entry) -%}
  {%- do entries.append(entry) -%}
{%- endfor -%}
{{ return(entries) }}
{%- endmacro %}

{#- Where the catalog points a partition now (the table's location when unpartitioned); none when the
    partition does not exist (listed first: dbt cannot catch the error describing it would raise). -#}
{% macro spark_merge__dbt_host_partition_location(table, partition) -%}
{%- do spark_merge.spark_merge__dbt_trace('partition_location') -%}
{%- if not table.partition_columns -%}{{ return(table.location) }}{%- endif -%}
{%- set values = {} -%}
{%- for c in table.partition_columns -%}{%- do values.update({c: partition[c]}) -%}{%- endfor -%}
{%- set spec = spark_merge.spark_merge__partition_spec(table, values) | trim -%}
{%- if run_query(spark_merge.spark_merge__show_partitions_sql(table.relation, spec)).rows | length == 0 -%}{{ return(none) }}{%- endif -%}
{{ return(fromjson(run_query(spark_merge.spark_merge__describe_json_sql(table.relation, spec)).rows[0][0]).location) }}
{%- endmacro %}

{#- dbt cannot list a directory: Spark refuses to read a missing path, which stops the operation
    (before anything is written) with Spark's PATH_NOT_FOUND instead of `message`. -#}
{% macro spark_merge__dbt_host_require(location, message) -%}
{%- do spark_merge.spark_merge__dbt_trace('require') -%}
{%- do run_query(spark_merge.spark_merge__path_probe_sql(location)) -%}
{%- endmacro %}

{#- Spark's _metadata names the files a query of the directory reads, with their modification times. -#}
{% macro spark_merge__dbt_host_written_after(table, location, since, during) -%}
{%- do spark_merge.spark_merge__dbt_trace('written_after') -%}
{%- set out = [] -%}
{%- for row in run_query(spark_merge.spark_merge__written_after_sql(table, location, since, during)).rows -%}{%- do out.append(row[0]) -%}{%- endfor -%}
{{ return(out) }}
{%- endmacro %}

{% macro spark_merge__dbt_host_source_types(spec, sql) -%}
{%- do spark_merge.spark_merge__dbt_trace('sql', sql) -%}
{%- set out = [] -%}
{%- for row in run_query(sql).rows -%}{%- do out.append([row[0], row[1]]) -%}{%- endfor -%}
{{ return(out) }}
{%- endmacro %}

{#- The model's config as the spec for this table (dbt_spec), after on_schema_change and the
    config's column names are checked against the model's and the table's columns; an operation's
    spec (UPDATE, DELETE) as it is. -#}
{% macro spark_merge__dbt_host_prepare(s, table, source_types) -%}
{%- do spark_merge.spark_merge__dbt_trace('prepare') -%}
{%- if s.request.get('spec') -%}{{ return({'spec': s.request.spec, 'table': table}) }}{%- endif -%}
{%- set cfg = s.request.cfg -%}
{%- if spark_merge.spark_merge__dbt_schema_change(cfg, table, source_types) -%}{%- set table = spark_merge.spark_merge__dbt_describe() -%}{%- endif -%}
{%- set source_columns = source_types | map(attribute=0) | list -%}
{%- do spark_merge.spark_merge__dbt_check_columns(cfg, source_columns, 'the model') -%}
{%- if not cfg.merge_on -%}
  {%- do spark_merge.spark_merge__dbt_check_columns({'unique_key': cfg.unique_key, 'partition_by': [], 'update_columns': [], 'exclude_columns': []},
                                                    table.columns | map(attribute='name') | list, table.name) -%}
{%- endif -%}
{{ return({'spec': spark_merge.spark_merge__dbt_spec(cfg, table, s.request.source_view, source_columns), 'table': table}) }}
{%- endmacro %}

{#- dbt cannot catch a refusal: Spark's error on the batch fails the model (Python names the part). -#}
{% macro spark_merge__dbt_host_part_types(sql, singles) -%}
{%- do spark_merge.spark_merge__dbt_trace('sql', sql) -%}
{%- set types = [] -%}
{%- for row in run_query(sql).rows -%}{%- do types.append(row[1]) -%}{%- endfor -%}
{{ return({'types': types, 'errors': []}) }}
{%- endmacro %}

{#- A model's new columns are on_schema_change's (prepare): by the time schema evolution looks, the
    table has them, and its clauses (from the config) assign no struct in part. -#}
{% macro spark_merge__dbt_host_evolve_spec(spec, table, source_types) -%}
{%- do spark_merge.spark_merge__dbt_trace('evolve_spec') -%}
{{ return({'direct': [], 'errors': []}) }}
{%- endmacro %}

{#- ON's equalities: each unique_key column of target and source, when ON is built from unique_key
    (`<=>` in an upsert's generated ON); none for merge_on. -#}
{% macro spark_merge__dbt_host_on_keys(s, spec) -%}
{%- do spark_merge.spark_merge__dbt_trace('on_keys') -%}
{%- set keys = [] -%}
{%- if not s.request.cfg.merge_on -%}
  {%- for k in s.request.cfg.unique_key -%}{%- do keys.append({'target': k, 'source': k, 'null_safe': spec.on.find('<=>') >= 0}) -%}{%- endfor -%}
{%- endif -%}
{{ return(keys) }}
{%- endmacro %}

{% macro spark_merge__dbt_host_target_begin(table) -%}
{%- do spark_merge.spark_merge__dbt_trace('target_begin') -%}
{{ return('DELETE_ROW_AND_INSERT_ROW') }}
{%- endmacro %}
