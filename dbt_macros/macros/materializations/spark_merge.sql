{#-
  materialized='spark_merge': MERGE for plain parquet/ORC tables under dbt-spark.

  The first run and --full-refresh create the table (CTAS). Later runs merge the
  model's rows into it through the same lifecycle as merge_core's Python engine
  (begin: describe, recover, validate; plan: changes, duplicate check, counts,
  partitions; execute: stage + journaled commit, or append; finish: history),
  using the same pure macros, so the SQL is identical. Every check fetches its
  result with run_query, so a failed check stops the model before any write.
-#}

{% materialization spark_merge, adapter='spark' %}
  {%- set cfg = spark_merge.spark_merge__dbt_config() -%}
  {%- set mor = cfg.upsert_mode == 'merge-on-read' and not cfg.merge_engine -%}
  {%- set upsert = cfg.watermark_key | length > 0 or cfg.merge_engine -%}
  {%- set target_relation = this.incorporate(type='view' if mor else 'table') -%}
  {%- set existing = load_relation(this) -%}
  {{ run_hooks(pre_hooks) }}
  {%- if mor and existing is not none and not should_full_refresh() -%}
    {%- set result = spark_merge.spark_merge__dbt_mor_upsert(cfg, sql) -%}
    {%- do store_raw_result(name='main', message=result.message, code='MERGE', rows_affected=result.rows_affected) -%}
  {%- elif existing is none or should_full_refresh() -%}
    {%- if existing is not none and existing.is_view -%}
      {%- do adapter.drop_relation(existing) -%}
    {%- elif existing is not none -%}
      {%- do spark_merge.spark_merge__dbt_drop_table(this.identifier) -%}
    {%- endif -%}
    {%- if mor and load_relation(this.incorporate(path={'identifier': this.identifier ~ '__sm_log'})) is not none -%}
      {%- do spark_merge.spark_merge__dbt_drop_table(this.identifier ~ '__sm_log') -%}
    {%- endif -%}
    {%- call statement('main') -%}
      {{ spark_merge.spark_merge__dbt_create_sql(cfg, sql, empty=upsert) }}
    {%- endcall -%}
    {%- if mor -%}
      {%- set result = spark_merge.spark_merge__dbt_mor_upsert(cfg, sql) -%}
      {%- do store_raw_result(name='main', message=result.message, code='MERGE', rows_affected=result.rows_affected) -%}
    {%- elif upsert -%}
      {#- an upsert's first load is an upsert too: many rows per key reduce to one (the freshest, or the engine's) -#}
      {%- set result = spark_merge.spark_merge__dbt_merge(cfg, sql) -%}
      {%- do store_raw_result(name='main', message=result.message, code='MERGE', rows_affected=result.rows_affected) -%}
    {%- endif -%}
  {%- else -%}
    {%- set result = spark_merge.spark_merge__dbt_merge(cfg, sql) -%}
    {%- do store_raw_result(name='main', message=result.message, code='MERGE', rows_affected=result.rows_affected) -%}
  {%- endif -%}
  {%- do persist_docs(target_relation, model) -%}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}

{% macro spark_merge__dbt_relation(identifier=none) -%}
{{ spark_merge.spark_merge__quote(this.schema) }}.{{ spark_merge.spark_merge__quote(identifier or this.identifier) }}
{%- endmacro %}

{% macro spark_merge__dbt_create_sql(cfg, sql, empty=false) -%}
CREATE TABLE {{ spark_merge.spark_merge__dbt_relation() }}
USING {{ cfg.file_format }}
{%- if cfg.partition_by %}
PARTITIONED BY ({{ spark_merge.spark_merge__column_list(cfg.partition_by) }})
{%- endif %}
{%- if cfg.retention_hours is not none %}
TBLPROPERTIES ('spark_merge.retention_hours' = '{{ cfg.retention_hours }}')
{%- endif %}
AS {% if empty %}SELECT * FROM ({{ sql }}) AS __sm_model WHERE false{% else %}{{ sql }}{% endif %}
{%- endmacro %}

{#- Rows of a query as dicts (agate rows as plain data for the pure macros). -#}
{% macro spark_merge__dbt_rows(query) -%}
{%- set table = run_query(query) -%}
{%- set out = [] -%}
{%- for row in table.rows -%}
  {%- set d = {} -%}
  {%- for name in table.column_names -%}{%- do d.update({name: row[loop.index0]}) -%}{%- endfor -%}
  {%- do out.append(d) -%}
{%- endfor -%}
{{ return(out) }}
{%- endmacro %}

{% macro spark_merge__dbt_describe(identifier=none) -%}
{%- set rel = spark_merge.spark_merge__dbt_relation(identifier) -%}
{%- set desc = fromjson(run_query('DESCRIBE TABLE EXTENDED ' ~ rel ~ ' AS JSON').rows[0][0]) -%}
{%- set types = [] -%}
{%- for row in run_query('DESCRIBE QUERY SELECT * FROM ' ~ rel).rows -%}{%- do types.append([row[0], row[1]]) -%}{%- endfor -%}
{%- set table = {} -%}
{%- do spark_merge.spark_merge__table_info(desc, types, table) -%}
{%- if table.errors -%}{{ spark_merge.spark_merge__dbt_fail(table.errors | join('; ')) }}{%- endif -%}
{{ return(table) }}
{%- endmacro %}

{#- File stats of a relation with decoded partitions (see file_stats_sql). -#}
{% macro spark_merge__dbt_file_stats(table, relation, where=none) -%}
{%- set out = [] -%}
{%- do spark_merge.spark_merge__decode_partitions(table, spark_merge.spark_merge__dbt_rows(spark_merge.spark_merge__file_stats_sql(table, relation, where)), out) -%}
{{ return(out) }}
{%- endmacro %}

{#- Every later step reads the same rows (see read_once_probe_sql in spark_merge_plan.sql). -#}
{% macro spark_merge__dbt_read_once(ctx, kind, select) -%}
{%- set served = {} -%}
{%- do spark_merge.spark_merge__read_once_served(run_query(spark_merge.spark_merge__read_once_probe_sql(ctx, kind)).rows[0][0], served) -%}
{%- if not served.served -%}
  {%- do log("spark_merge: the " ~ kind ~ " is non-deterministic; writing it once to " ~ ctx[kind ~ '_table'], info=true) -%}
  {%- set statements = [] -%}
  {%- do spark_merge.spark_merge__materialize_statements(ctx, kind, select, statements) -%}
  {%- for stmt in statements -%}{%- do run_query(stmt) -%}{%- endfor -%}
{%- endif -%}
{%- endmacro %}

{#- Spark's own rule: a non-deterministic join condition fails analysis (see determinism_probe_sql). -#}
{% macro spark_merge__dbt_deterministic(spec, table, conditions) -%}
{%- set out = {} -%}
{%- do spark_merge.spark_merge__probe_deterministic(run_query(spark_merge.spark_merge__determinism_probe_sql(spec, table, conditions)).rows[0][0], out) -%}
{{ return(out.deterministic) }}
{%- endmacro %}

{#- Roll an interrupted commit forward, as merge_core's recover() does. -#}
{% macro spark_merge__dbt_recover(table) -%}
{%- set journal = {} -%}
{%- do spark_merge.spark_merge__pending_journal(table, journal) -%}
{%- if journal.get('corrupt') -%}
  {{ spark_merge.spark_merge__dbt_fail('MERGE_CORRUPT_JOURNAL: ' ~ spark_merge.spark_merge__corrupt_journal_message(table, journal)) }}
{%- endif -%}
{%- if journal -%}
  {%- do log("spark_merge: finishing interrupted merge " ~ journal.merge_id ~ " on " ~ table.name, info=true) -%}
  {%- set repoints = [] -%}
  {%- for r in journal.repoints -%}{%- set c = r.copy() -%}{%- do c.update({'exists': false}) -%}{%- do repoints.append(c) -%}{%- endfor -%}
  {%- set statements = [] -%}
  {%- do spark_merge.spark_merge__repoint_statements(table, repoints, statements) -%}
  {%- for stmt in statements -%}{%- do run_query(stmt) -%}{%- endfor -%}
  {%- if journal.get('entry') and repoints -%}
    {%- set entry = journal.entry.copy() -%}
    {%- do entry.update({'finished_at': modules.datetime.datetime.now(modules.pytz.utc).isoformat(timespec='milliseconds'), 'recovered': true}) -%}
    {%- set hctx = {} -%}
    {%- do spark_merge.spark_merge__context({}, table, journal.merge_id, hctx) -%}
    {%- do run_query(spark_merge.spark_merge__history_write_sql(hctx, entry)) -%}
  {%- endif -%}
  {%- do run_query(spark_merge.spark_merge__journal_done_sql(table, journal.merge_id)) -%}
  {%- set clear = spark_merge.spark_merge__journal_clear_sql(spark_merge.spark_merge__dbt_describe(table.table_name)) | trim -%}
  {%- if clear -%}{%- do run_query(clear) -%}{%- endif -%}
  {%- do run_query(spark_merge.spark_merge__refresh_sql(table)) -%}
{%- endif -%}
{{ return(journal | length > 0) }}
{%- endmacro %}

{#- on_schema_change: compare the model's columns with the table's. -#}
{% macro spark_merge__dbt_schema_change(cfg, table, source_view) -%}
{%- set source_types = {} -%}
{%- set source_names = [] -%}
{%- for row in run_query('DESCRIBE QUERY SELECT * FROM ' ~ source_view).rows -%}
  {%- do source_types.update({row[0] | lower: row[1]}) -%}{%- do source_names.append(row[0]) -%}
{%- endfor -%}
{%- set added, removed, retyped = [], [], [] -%}
{%- for n in source_names if (n | lower) not in table.columns_by_name -%}{%- do added.append(n) -%}{%- endfor -%}
{%- for c in table.columns -%}
  {%- if (c.name | lower) not in source_types -%}{%- do removed.append(c.name) -%}
  {%- elif source_types[c.name | lower] | lower != c.type | lower -%}{%- do retyped.append(c.name ~ ' ' ~ c.type ~ ' -> ' ~ source_types[c.name | lower]) -%}
  {%- endif -%}
{%- endfor -%}
{%- set mode = cfg.on_schema_change -%}
{%- set described = 'added: ' ~ (added | join(', ') or '-') ~ '; removed: ' ~ (removed | join(', ') or '-') ~ '; type changed: ' ~ (retyped | join(', ') or '-') -%}
{%- if mode == 'fail' and (added or removed or retyped) -%}
  {{ spark_merge.spark_merge__dbt_fail("the model's columns differ from " ~ table.name ~ " (" ~ described ~ ") and on_schema_change is fail") }}
{%- elif mode == 'sync_all_columns' and (removed or retyped) -%}
  {{ spark_merge.spark_merge__dbt_fail("on_schema_change sync_all_columns cannot drop or retype columns of a " ~ table.provider ~ " table (" ~ described ~ "); run with --full-refresh to rebuild it") }}
{%- elif mode in ['append_new_columns', 'sync_all_columns'] and added -%}
  {%- do log("spark_merge: adding column(s) " ~ added | join(', ') ~ " to " ~ table.name, info=true) -%}
  {%- set defs = [] -%}
  {%- for n in added -%}{%- do defs.append(spark_merge.spark_merge__quote(n) ~ ' ' ~ source_types[n | lower]) -%}{%- endfor -%}
  {%- do run_query('ALTER TABLE ' ~ table.relation ~ ' ADD COLUMNS (' ~ defs | join(', ') ~ ')') -%}
  {{ return(true) }}
{%- endif -%}
{{ return(false) }}
{%- endmacro %}

{#- The commit lock with a lease of 120 s (a dbt run cannot renew it from a thread: its commit takes
    seconds); a holder whose lease lapsed (by 5 s, for clock skew) is dead and its lock broken, as
    merge_core/lock.py decides; a lock without a lease (older spark-merge) is dead after 900 s. -#}
{% macro spark_merge__dbt_lock(table, merge_id) -%}
{%- set dt = modules.datetime -%}
{%- set now = dt.datetime.now(modules.pytz.utc) -%}
{%- set held = run_query('SHOW TABLES IN ' ~ spark_merge.spark_merge__quote(table.database) ~ ' LIKE ' ~ spark_merge.spark_merge__literal('__sm_lock_' ~ table.table_name)).rows -%}
{%- if held | length > 0 -%}
  {%- set props = {} -%}
  {%- for row in run_query('SHOW TBLPROPERTIES ' ~ spark_merge.spark_merge__lock_relation(table)).rows -%}{%- do props.update({row[0]: row[1]}) -%}{%- endfor -%}
  {%- set since = props.get('spark_merge.lock.since', '') -%}
  {%- set expires = props.get('spark_merge.lock.expires', '') -%}
  {%- if expires -%}
    {%- set dead = (now - dt.datetime.fromisoformat(expires)).total_seconds() > 5 -%}
  {%- else -%}
    {%- set dead = not since or (now - dt.datetime.fromisoformat(since)).total_seconds() > 900 -%}
  {%- endif -%}
  {%- if not dead -%}
    {{ spark_merge.spark_merge__dbt_fail("MERGE_CONFLICT: " ~ table.name ~ " is being committed by merge " ~ props.get('spark_merge.lock.merge_id', '?') ~ " on " ~ props.get('spark_merge.lock.owner', '?') ~ " (since " ~ since ~ ", lease until " ~ expires ~ "), which is alive; nothing was written, run the model again once it finishes") }}
  {%- endif -%}
  {%- do log("spark_merge: breaking the commit lock of dead merge " ~ props.get('spark_merge.lock.merge_id', '?') ~ " on " ~ table.name, info=true) -%}
  {%- do run_query(spark_merge.spark_merge__unlock_sql(table)) -%}
{%- endif -%}
{%- do run_query(spark_merge.spark_merge__lock_sql(table, merge_id, now.isoformat(), (now + dt.timedelta(seconds=120)).isoformat(), 'dbt ' ~ invocation_id)) -%}
{%- endmacro %}

{% macro spark_merge__dbt_abort(ctx, message, table=none) -%}
{%- if table is not none -%}{%- do run_query(spark_merge.spark_merge__unlock_sql(table)) -%}{%- endif -%}
{%- set statements = [] -%}
{%- do spark_merge.spark_merge__cleanup_statements(ctx, statements) -%}
{%- for stmt in statements -%}{%- do run_query(stmt) -%}{%- endfor -%}
{{ spark_merge.spark_merge__dbt_fail(message) }}
{%- endmacro %}

{% macro spark_merge__dbt_history_entry(merge_id, table, spec, resolved, ctx, m, partitions, repoints, version_after) -%}
{{ return({
  'merge_id': merge_id, 'target': table.name, 'kind': 'merge', 'paradigm': 'DELETE_ROW_AND_INSERT_ROW',
  'plan_hash': local_md5(spark_merge.spark_merge__cache_changes_sql(spec, table, resolved, ctx) | replace(merge_id, '<id>'))[:16],
  'status': 'committed', 'statement': 'dbt model ' ~ this, 'metrics': m.copy(), 'partitions': partitions,
  'repoints': repoints, 'version_before': table.version, 'version_after': version_after,
}) }}
{%- endmacro %}

{% macro spark_merge__dbt_merge(cfg, sql) -%}
{%- set started = modules.datetime.datetime.now(modules.pytz.utc) -%}
{%- set merge_id = started.strftime('%Y%m%d%H%M%S') ~ '_' ~ local_md5(invocation_id ~ this ~ started.isoformat())[:8] -%}
{#- begin: describe, recover, source, schema change, validate -#}
{%- set table = spark_merge.spark_merge__dbt_describe() -%}
{%- if spark_merge.spark_merge__dbt_recover(table) -%}{%- set table = spark_merge.spark_merge__dbt_describe() -%}{%- endif -%}
{%- set source_view = spark_merge.spark_merge__quote(this.identifier ~ '__sm_source_' ~ merge_id) -%}
{%- do run_query('CREATE OR REPLACE TEMPORARY VIEW ' ~ source_view ~ ' AS ' ~ sql) -%}
{%- if spark_merge.spark_merge__dbt_schema_change(cfg, table, source_view) -%}{%- set table = spark_merge.spark_merge__dbt_describe() -%}{%- endif -%}
{%- set source_columns = [] -%}
{%- for row in run_query('DESCRIBE QUERY SELECT * FROM ' ~ source_view).rows -%}{%- do source_columns.append(row[0]) -%}{%- endfor -%}
{%- set spec = spark_merge.spark_merge__dbt_spec(cfg, table, source_view, source_columns) -%}
{%- if spec.upsert -%}
  {%- set compiled = {} -%}
  {%- do spark_merge.spark_merge__upsert_spec(spec, table, compiled) -%}
  {%- if compiled.errors -%}{{ spark_merge.spark_merge__dbt_fail('MERGE_VALIDATION_ERROR: ' ~ compiled.errors | join('; ')) }}{%- endif -%}
  {%- set spec = compiled -%}
{%- endif -%}
{%- set resolved = {} -%}
{%- do spark_merge.spark_merge__resolve(spec, table, resolved) -%}
{%- set errors = resolved.errors -%}
{%- set parts, types = [], [] -%}
{%- for scope in ['both', 'source', 'target'] -%}
  {%- set batch = resolved.parts | selectattr('scope', 'equalto', scope) | list -%}
  {%- if batch -%}
    {%- for row in run_query(spark_merge.spark_merge__describe_parts_sql(spec, table, batch)).rows -%}{%- do types.append(row[1]) -%}{%- endfor -%}
    {%- do parts.extend(batch) -%}
  {%- endif -%}
{%- endfor -%}
{%- do spark_merge.spark_merge__check_types(parts, types, errors) -%}
{%- if errors -%}{{ spark_merge.spark_merge__dbt_fail('MERGE_VALIDATION_ERROR: ' ~ errors | join('; ')) }}{%- endif -%}
{%- for scope in ['both', 'source', 'target'] -%}
  {%- set conditions = [] -%}
  {%- do spark_merge.spark_merge__conditions(resolved.parts, scope, conditions) -%}
  {%- if conditions and not spark_merge.spark_merge__dbt_deterministic(spec, table, conditions) -%}
    {%- for part in conditions if not spark_merge.spark_merge__dbt_deterministic(spec, table, [part]) -%}
      {%- do errors.append(spark_merge.spark_merge__nondeterministic_error(part)) -%}
    {%- endfor -%}
  {%- endif -%}
{%- endfor -%}
{%- if errors -%}{{ spark_merge.spark_merge__dbt_fail('MERGE_VALIDATION_ERROR: ' ~ errors | join('; ')) }}{%- endif -%}
{%- set ctx = {} -%}
{%- do spark_merge.spark_merge__context(spec, table, merge_id, ctx) -%}
{#- ON equates each unique_key column of target and source (`<=>` in an upsert): plan step 0 narrows by them -#}
{%- if not cfg.merge_on -%}
  {%- for k in cfg.unique_key -%}{%- do ctx.on_keys.append({'target': k, 'source': k, 'null_safe': spec.on.find('<=>') >= 0}) -%}{%- endfor -%}
{%- endif -%}
{%- do log("spark_merge: BEGIN " ~ merge_id ~ " into " ~ table.name, info=true) -%}
{#- plan: source (cached once, with its ON-key values), matched partitions (step 1, as match_filter says), changes (cached), duplicate check, summary -#}
{%- do run_query(spark_merge.spark_merge__cache_source_sql(spec, ctx)) -%}
{%- do spark_merge.spark_merge__dbt_read_once(ctx, 'source', spark_merge.spark_merge__source_select(spec, ctx)) -%}
{%- set stats = spark_merge.spark_merge__dbt_rows(spark_merge.spark_merge__source_stats_sql(table, ctx))[0] -%}
{%- set source_rows = stats.numSourceRows | int -%}
{%- set narrowed = {} -%}
{%- do spark_merge.spark_merge__match_filter(table, ctx, stats, narrowed) -%}
{%- do ctx.update({'match_filter': narrowed.filter}) -%}
{%- if table.partition_columns and narrowed.matched_by != 'filter' -%}
  {%- set matched = [] -%}
  {%- do spark_merge.spark_merge__decode_partitions(table, spark_merge.spark_merge__dbt_rows(spark_merge.spark_merge__matched_partitions_sql(spec, table, ctx, source_rows, narrowed.matched_by == 'range')), matched) -%}
  {%- do ctx.update({'scan_filter': spark_merge.spark_merge__scan_filter(spec, table, matched) | trim}) -%}
{%- endif -%}
{%- do run_query(spark_merge.spark_merge__cache_changes_sql(spec, table, resolved, ctx)) -%}
{%- do spark_merge.spark_merge__dbt_read_once(ctx, 'changes', spark_merge.spark_merge__changes_sql(spec, table, resolved, ctx)) -%}
{%- set dup_sql = spark_merge.spark_merge__duplicates_sql(spec, table, resolved, ctx) | trim -%}
{%- if dup_sql -%}
  {%- set dups = spark_merge.spark_merge__dbt_rows(dup_sql) -%}
  {%- if dups -%}
    {%- set shown = [] -%}
    {%- for d in dups -%}{%- set kv = [] -%}{%- for k, v in d.items() -%}{%- do kv.append(k ~ '=' ~ v) -%}{%- endfor -%}{%- do shown.append(kv | join(', ')) -%}{%- endfor -%}
    {{ spark_merge.spark_merge__dbt_abort(ctx, "MERGE_TARGET_ROW_MULTIPLE_MATCHES: One MERGE target table row matched more than one source row (duplicate_rule=" ~ spec.duplicate_rule ~ "). Offending target rows: " ~ shown | join('; ')) }}
  {%- endif -%}
{%- endif -%}
{%- set summary = {} -%}
{%- do spark_merge.spark_merge__summarize_changes(table, spark_merge.spark_merge__dbt_rows(spark_merge.spark_merge__change_summary_sql(spec, table, resolved, ctx)), summary) -%}
{%- set m = {'numSourceRows': source_rows} -%}
{%- do m.update(summary.metrics) -%}
{%- for k in ['numTargetRowsCopied', 'numOutputRows', 'numTargetFilesAdded', 'numTargetFilesRemoved', 'numTargetBytesAdded', 'numTargetBytesRemoved', 'numTargetPartitionsRewritten'] -%}{%- do m.update({k: 0}) -%}{%- endfor -%}
{%- set changed = m.numTargetRowsInserted + m.numTargetRowsUpdated + m.numTargetRowsDeleted -%}
{%- set insert_only = spec.clauses | selectattr('matched') | list | length == 0 -%}
{%- set partitions = summary.partitions -%}
{%- do ctx.update({'broadcast_changed': m.numTargetRowsUpdated + m.numTargetRowsDeleted <= spark_merge.spark_merge__broadcast_rows() | int}) -%}
{#- execute + commit -#}
{%- set repoints = [] -%}
{%- if changed and insert_only -%}
  {%- do spark_merge.spark_merge__dbt_lock(table, merge_id) -%}
  {%- set fresh = spark_merge.spark_merge__dbt_describe() -%}
  {%- if fresh.version != table.version -%}
    {{ spark_merge.spark_merge__dbt_abort(ctx, "MERGE_CONFLICT: " ~ table.name ~ " moved from version " ~ table.version ~ " to " ~ fresh.version ~ " since this merge began; nothing was written, run the model again", table) }}
  {%- endif -%}
  {%- do run_query(spark_merge.spark_merge__append_sql(table, ctx)) -%}
  {%- do run_query(spark_merge.spark_merge__version_sql(fresh)) -%}
  {%- do run_query(spark_merge.spark_merge__unlock_sql(table)) -%}
  {%- do m.update({'numOutputRows': m.numTargetRowsInserted}) -%}
{%- elif changed -%}
  {%- set where = spark_merge.spark_merge__partition_filter(table, partitions) if table.partition_columns else none -%}
  {%- set old = spark_merge.spark_merge__dbt_file_stats(table, table.relation, where) -%}
  {%- set stale = spark_merge.spark_merge__dbt_rows(spark_merge.spark_merge__stale_files_sql(table, ctx, where)) -%}
  {%- if stale -%}
    {{ spark_merge.spark_merge__dbt_abort(ctx, "MERGE_CONFLICT: this merge read rows of " ~ table.name ~ " from file(s) the table no longer holds (" ~ stale[0].file ~ "): the data changed while it planned; nothing was written, run the model again") }}
  {%- endif -%}
  {%- do run_query(spark_merge.spark_merge__stage_sql(table, ctx, partitions)) -%}
  {%- set new = spark_merge.spark_merge__dbt_file_stats(table, ctx.stage) -%}
  {%- do run_query('DROP TABLE IF EXISTS ' ~ ctx.stage) -%}
  {%- set violations = [] -%}
  {%- do spark_merge.spark_merge__output_errors(table, partitions, summary.deltas, old, new, violations) -%}
  {%- if violations -%}
    {{ spark_merge.spark_merge__dbt_abort(ctx, "MERGE_PLAN_VIOLATION: " ~ violations[:5] | join('; ') ~ "; nothing was committed") }}
  {%- endif -%}
  {%- set planned = {} -%}
  {%- do spark_merge.spark_merge__repoints(table, ctx, partitions, old, new, planned) -%}
  {%- for location in planned.empty -%}{%- do run_query(spark_merge.spark_merge__empty_partition_sql(table, location)) -%}{%- endfor -%}
  {%- do m.update(planned.metrics) -%}
  {%- do m.update({'numTargetRowsCopied': m.numOutputRows - m.numTargetRowsInserted - m.numTargetRowsUpdated}) -%}
  {%- do repoints.extend(planned.repoints) -%}
  {%- do spark_merge.spark_merge__dbt_lock(table, merge_id) -%}
  {%- set conflicts = [] -%}
  {%- do spark_merge.spark_merge__changed_partitions(table, old, spark_merge.spark_merge__dbt_file_stats(table, table.relation, where), conflicts) -%}
  {%- if conflicts -%}
    {{ spark_merge.spark_merge__dbt_abort(ctx, "MERGE_CONFLICT: partition(s) " ~ conflicts | join(', ') ~ " of " ~ table.name ~ " changed since this merge read them; nothing was written, run the model again", table) }}
  {%- endif -%}
  {%- set fresh = spark_merge.spark_merge__dbt_describe() -%}
  {%- if fresh.version != table.version -%}
    {{ spark_merge.spark_merge__dbt_abort(ctx, "MERGE_CONFLICT: " ~ table.name ~ " moved from version " ~ table.version ~ " to " ~ fresh.version ~ " since this merge began; nothing was written, run the model again", table) }}
  {%- endif -%}
  {%- do m.update({'executionTimeMs': ((modules.datetime.datetime.now(modules.pytz.utc) - started).total_seconds() * 1000) | int}) -%}
  {%- set entry = spark_merge.spark_merge__dbt_history_entry(merge_id, table, spec, resolved, ctx, m, partitions, repoints, table.version + 1) -%}
  {%- do run_query(spark_merge.spark_merge__journal_sql(fresh, merge_id, repoints, entry)) -%}
  {%- set statements = [] -%}
  {%- do spark_merge.spark_merge__repoint_statements(fresh, repoints, statements) -%}
  {%- for stmt in statements -%}{%- do run_query(stmt) -%}{%- endfor -%}
  {%- do entry.update({'finished_at': modules.datetime.datetime.now(modules.pytz.utc).isoformat(timespec='milliseconds')}) -%}
  {%- do run_query(spark_merge.spark_merge__history_write_sql(ctx, entry)) -%}
  {%- do run_query(spark_merge.spark_merge__journal_done_sql(fresh, merge_id)) -%}
  {%- set clear = spark_merge.spark_merge__journal_clear_sql(spark_merge.spark_merge__dbt_describe()) | trim -%}
  {%- if clear -%}{%- do run_query(clear) -%}{%- endif -%}
  {%- do run_query(spark_merge.spark_merge__refresh_sql(table)) -%}
  {%- do run_query(spark_merge.spark_merge__unlock_sql(table)) -%}
{%- endif -%}
{#- finish: history entry (same shape as merge_core's; a rewrite's commit wrote it), clean-up, result -#}
{%- set finished = modules.datetime.datetime.now(modules.pytz.utc) -%}
{%- do m.update({'executionTimeMs': ((finished - started).total_seconds() * 1000) | int}) -%}
{%- if not repoints -%}
  {%- set entry = spark_merge.spark_merge__dbt_history_entry(merge_id, table, spec, resolved, ctx, m, partitions, repoints, table.version + (1 if changed else 0)) -%}
  {%- do entry.update({'finished_at': finished.isoformat(timespec='milliseconds')}) -%}
  {%- do run_query(spark_merge.spark_merge__history_write_sql(ctx, entry)) -%}
{%- endif -%}
{%- set statements = [] -%}
{%- do spark_merge.spark_merge__cleanup_statements(ctx, statements) -%}
{%- for stmt in statements -%}{%- do run_query(stmt) -%}{%- endfor -%}
{%- do run_query('DROP VIEW IF EXISTS ' ~ source_view) -%}
{%- set message = 'MERGE ' ~ merge_id ~ ': inserted ' ~ m.numTargetRowsInserted ~ ', updated ' ~ m.numTargetRowsUpdated
    ~ ', deleted ' ~ m.numTargetRowsDeleted ~ ', copied ' ~ m.numTargetRowsCopied ~ ', partitions rewritten '
    ~ m.numTargetPartitionsRewritten ~ ', files +' ~ m.numTargetFilesAdded ~ '/-' ~ m.numTargetFilesRemoved -%}
{%- do log("spark_merge: FINISH " ~ tojson(m), info=true) -%}
{{ return({'message': message, 'rows_affected': changed, 'metrics': m, 'merge_id': merge_id}) }}
{%- endmacro %}


{#-
  upsert_mode='merge-on-read': the model's name is a view over the log table
  <name>__sm_log (the first run creates the table, the first upsert converts
  it, as merge_core/merge_on_read.py does); each run appends the model's rows.
-#}
{% macro spark_merge__dbt_mor_upsert(cfg, sql) -%}
{%- set started = modules.datetime.datetime.now(modules.pytz.utc) -%}
{%- set merge_id = started.strftime('%Y%m%d%H%M%S') ~ '_' ~ local_md5(invocation_id ~ this ~ started.isoformat())[:8] -%}
{%- set log_name = this.identifier ~ '__sm_log' -%}
{%- set kind = fromjson(run_query('DESCRIBE TABLE EXTENDED ' ~ spark_merge.spark_merge__dbt_relation() ~ ' AS JSON').rows[0][0]).get('type', '') | upper -%}
{%- if kind != 'VIEW' -%}
  {%- do run_query('ALTER TABLE ' ~ spark_merge.spark_merge__dbt_relation() ~ ' RENAME TO ' ~ spark_merge.spark_merge__dbt_relation(log_name)) -%}
{%- endif -%}
{%- set table = spark_merge.spark_merge__dbt_describe(log_name) -%}
{%- if spark_merge.spark_merge__dbt_recover(table) -%}{%- set table = spark_merge.spark_merge__dbt_describe(log_name) -%}{%- endif -%}
{%- set upsert = {'primary_key': cfg.unique_key, 'watermark_key': cfg.watermark_key, 'tombstone_key': cfg.tombstone_key,
                  'tombstone_string_key_value': cfg.tombstone_string_key_value, 'upsert_mode': 'merge-on-read'} -%}
{%- set plan = {} -%}
{%- do spark_merge.spark_merge__upsert_plan(upsert, table, plan) -%}
{%- if plan.errors -%}{{ spark_merge.spark_merge__dbt_fail('MERGE_VALIDATION_ERROR: ' ~ plan.errors | join('; ')) }}{%- endif -%}
{%- set source_view = spark_merge.spark_merge__quote(this.identifier ~ '__sm_source_' ~ merge_id) -%}
{%- do run_query('CREATE OR REPLACE TEMPORARY VIEW ' ~ source_view ~ ' AS ' ~ sql) -%}
{%- set spec = {'source': source_view, 'source_kind': 'table', 'source_alias': 'DBT_INTERNAL_SOURCE'} -%}
{%- do run_query('DESCRIBE QUERY ' ~ spark_merge.spark_merge__mor_rows_sql(table, spec)) -%}
{%- set rows = run_query('SELECT count(*) FROM ' ~ source_view).rows[0][0] | int -%}
{%- do spark_merge.spark_merge__dbt_lock(table, merge_id) -%}
{%- do run_query(spark_merge.spark_merge__mor_append_sql(table, spec)) -%}
{%- do run_query('ALTER TABLE ' ~ table.relation ~ " SET TBLPROPERTIES ('spark_merge.upsert' = "
                 ~ spark_merge.spark_merge__literal(tojson(upsert)) ~ ", 'spark_merge.version' = '" ~ (table.version + 1)
                 ~ "', 'spark_merge.root' = " ~ spark_merge.spark_merge__literal(table.root) ~ ")") -%}
{%- do run_query(spark_merge.spark_merge__mor_view_sql(spark_merge.spark_merge__dbt_relation(), table, plan)) -%}
{%- do run_query(spark_merge.spark_merge__unlock_sql(table)) -%}
{%- do run_query('DROP VIEW IF EXISTS ' ~ source_view) -%}
{%- set ctx = {} -%}
{%- do spark_merge.spark_merge__context({}, table, merge_id, ctx) -%}
{%- set finished = modules.datetime.datetime.now(modules.pytz.utc) -%}
{%- set m = {'numSourceRows': rows, 'numTargetRowsInserted': rows, 'numTargetRowsUpdated': 0, 'numTargetRowsDeleted': 0,
             'numTargetRowsCopied': 0, 'numOutputRows': rows, 'numTargetPartitionsRewritten': 0,
             'executionTimeMs': ((finished - started).total_seconds() * 1000) | int} -%}
{%- do run_query(spark_merge.spark_merge__history_write_sql(ctx, {
  'merge_id': merge_id, 'target': table.name, 'kind': 'upsert', 'paradigm': 'MERGE_ON_READ', 'status': 'committed',
  'finished_at': finished.isoformat(timespec='milliseconds'), 'statement': 'dbt model ' ~ this, 'metrics': m,
  'partitions': [], 'repoints': [], 'version_before': table.version, 'version_after': table.version + 1})) -%}
{{ return({'message': 'MERGE ' ~ merge_id ~ ': appended ' ~ rows ~ ' row(s) to the log (merge-on-read)', 'rows_affected': rows}) }}
{%- endmacro %}


{#- DROP TABLE deletes only a managed table's current location; after merges an
    unpartitioned table lives in <root>/_merge_<id>, so point it back at its root
    first, or the root (older versions, history) would block re-creating it. -#}
{% macro spark_merge__dbt_drop_table(identifier) -%}
{%- set rel = spark_merge.spark_merge__dbt_relation(identifier) -%}
{%- set desc = fromjson(run_query('DESCRIBE TABLE EXTENDED ' ~ rel ~ ' AS JSON').rows[0][0]) -%}
{%- set root = (desc.get('table_properties') or {}).get('spark_merge.root') -%}
{%- if root and root != desc.get('location') and (desc.get('type') or '') | upper == 'MANAGED' -%}
  {%- do run_query('ALTER TABLE ' ~ rel ~ ' SET LOCATION ' ~ spark_merge.spark_merge__literal(root)) -%}
{%- endif -%}
{%- do run_query('DROP TABLE ' ~ rel) -%}
{%- endmacro %}
