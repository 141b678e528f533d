{#-
  materialized='spark_merge': MERGE for plain parquet/ORC tables under dbt-spark.

  The first run creates the table (CTAS); --full-refresh replaces its rows in one journaled
  commit (lifecycle/refresh.sql), or re-creates it when the model changed its columns,
  partitioning or format. Later runs merge the
  model's rows into it through the same lifecycle as merge_core's Python engine
  (begin: describe, recover, validate; plan: changes, duplicate check, counts,
  partitions; execute: stage + journaled commit, or append; finish: history),
  using the same pure macros, so the SQL is identical. Every check fetches its
  result with run_query, so a failed check stops the model before any write.
-#}

{% materialization spark_merge, adapter='spark' %}
  {%- set cfg = spark_merge.spark_merge__dbt_config() -%}
  {%- if cfg.microbatch -%}
    {#- a batch of a microbatch model (microbatch.sql): its rows, checked to lie in its window -#}
    {%- do log("spark_merge: batch " ~ cfg.microbatch.id ~ " of " ~ this ~ ": " ~ cfg.microbatch.column ~ " in ["
        ~ cfg.microbatch.start ~ ", " ~ cfg.microbatch.end ~ ")", info=true) -%}
    {%- set sql = spark_merge.spark_merge__dbt_microbatch_sql(sql, cfg.microbatch) -%}
  {%- endif -%}
  {%- set mor = cfg.upsert_mode == 'merge-on-read' and not cfg.merge_engine -%}
  {%- set upsert = cfg.watermark_key | length > 0 or cfg.merge_engine -%}
  {%- set target_relation = this.incorporate(type='view' if mor else 'table') -%}
  {%- set existing = load_relation(this) -%}
  {{ run_hooks(pre_hooks) }}
  {#- an enforced contract: dbt's own check of the columns' names and types, before anything is written;
      its not_null constraints become the table's NOT NULL columns (spark_merge.not_null) -#}
  {%- set not_null = spark_merge.spark_merge__dbt_contract(existing if not should_full_refresh() else none) -%}
  {%- if existing is not none and not should_full_refresh() and 'is_incremental(' in model.raw_code and not is_incremental() -%}
    {{ spark_merge.spark_merge__dbt_fail("the model calls is_incremental(), which dbt makes true only for materialized='incremental', "
       ~ "so its incremental filter did not apply. Add to the project's macros/ a file is_incremental.sql with the line "
       ~ "{% macro is_incremental() %}{{ return(spark_merge.is_incremental()) }}{% endmacro %} and run again") }}
  {%- endif -%}
  {%- set creating = existing is none or should_full_refresh() -%}
  {%- if not creating and cfg.change_feed and not existing.is_view -%}{%- do spark_merge.spark_merge__dbt_change_feed_on() -%}{%- endif -%}
  {%- set swap = false -%}
  {%- if creating -%}
    {%- set model_types = [] -%}
    {%- for row in run_query(spark_merge.spark_merge__describe_query_sql(sql)).rows -%}{%- do model_types.append([row[0], row[1]]) -%}{%- endfor -%}
    {#- with NOT NULL columns the first load is a merge into the empty table too, which checks them -#}
    {%- set load_by_merge = upsert or not_null -%}
    {#- a plain first load (CTAS) reads partition_by only: the keys the merges read are checked by the
        runs that merge, as dbt's own incremental models check unique_key (test__bad_unique_key) -#}
    {%- do spark_merge.spark_merge__dbt_check_columns(cfg if load_by_merge else {'partition_by': cfg.partition_by},
        model_types | map(attribute=0) | list, 'the model') -%}
    {%- set swap = existing is not none and spark_merge.spark_merge__dbt_refresh_in_place(cfg, existing, mor, model_types) -%}
  {%- endif -%}
  {%- if not creating and mor -%}
    {%- set result = spark_merge.spark_merge__dbt_mor_upsert(cfg, sql) -%}
    {%- do store_raw_result(name='main', message=result.message, code='MERGE', rows_affected=result.rows_affected) -%}
  {%- elif not creating -%}
    {%- set result = spark_merge.spark_merge__dbt_merge(cfg, sql) -%}
    {%- do store_raw_result(name='main', message=result.message, code='MERGE', rows_affected=result.rows_affected) -%}
  {%- elif swap -%}
    {#- --full-refresh of a table whose definition the model keeps: the new version written beside the
        old, then one journaled commit repoints the table at it (rollback returns to the old one) -#}
    {%- set result = spark_merge.spark_merge__dbt_full_refresh(cfg, sql, not_null, load_by_merge) -%}
    {%- do store_raw_result(name='main', message=result.message, code='FULL_REFRESH', rows_affected=result.rows_affected) -%}
  {%- else -%}
    {%- if existing is not none and existing.is_view -%}
      {%- do adapter.drop_relation(existing) -%}
    {%- elif existing is not none -%}
      {%- do spark_merge.spark_merge__dbt_drop_table(this.identifier) -%}
    {%- endif -%}
    {%- if mor and load_relation(this.incorporate(path={'identifier': this.identifier ~ '__sm_log'})) is not none -%}
      {%- do spark_merge.spark_merge__dbt_drop_table(this.identifier ~ '__sm_log') -%}
    {%- endif -%}
    {%- call statement('main') -%}
      {{ spark_merge.spark_merge__dbt_create_sql(cfg, sql, empty=load_by_merge, not_null=not_null) }}
    {%- endcall -%}
    {%- if not load_by_merge -%}
      {#- the rows created, as later runs report the rows they change -#}
      {%- set created = run_query(spark_merge.spark_merge__count_rows_sql(spark_merge.spark_merge__dbt_relation())).rows[0][0] | int -%}
      {%- do store_raw_result(name='main', message='CREATE ' ~ created ~ ' row(s)', code='CREATE', rows_affected=created) -%}
    {%- endif -%}
    {%- if mor -%}
      {%- set result = spark_merge.spark_merge__dbt_mor_upsert(cfg, sql) -%}
      {%- do store_raw_result(name='main', message=result.message, code='MERGE', rows_affected=result.rows_affected) -%}
    {%- elif load_by_merge -%}
      {#- an upsert's first load is an upsert too: many rows per key reduce to one (the freshest, or the engine's) -#}
      {%- set result = spark_merge.spark_merge__dbt_merge(cfg, sql) -%}
      {%- do store_raw_result(name='main', message=result.message, code='MERGE', rows_affected=result.rows_affected) -%}
    {%- endif -%}
  {%- endif -%}
  {#- grants: dbt's apply_grants after the create or the merge, as dbt-spark's materializations do (a
      re-created table gets the config's grants anew; a kept one, merged or refreshed, has them revised) -#}
  {%- do apply_grants(target_relation, config.get('grants'), should_revoke(existing, full_refresh_mode=creating and not swap)) -%}
  {%- do persist_docs(target_relation, model) -%}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}

{#- change_feed=true on a model whose table exists: its property, set before the merge records anything. -#}
{% macro spark_merge__dbt_change_feed_on() -%}
{%- set rel = spark_merge.spark_merge__dbt_relation() -%}
{%- set props = fromjson(run_query(spark_merge.spark_merge__describe_json_sql(rel)).rows[0][0]).get('table_properties') or {} -%}
{%- if (props.get('spark_merge.change_feed') or '') | lower != 'true' -%}
  {%- do run_query(spark_merge.spark_merge__set_properties_sql({'relation': rel}, {'spark_merge.change_feed': 'true'})) -%}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__dbt_relation(identifier=none, schema=none) -%}
{{ spark_merge.spark_merge__quote(schema or this.schema) }}.{{ spark_merge.spark_merge__quote(identifier or this.identifier) }}
{%- endmacro %}

{% macro spark_merge__dbt_create_sql(cfg, sql, empty=false, not_null=[], identifier=none, location=none) -%}
{%- set props = [] -%}
{%- if cfg.retention_hours is not none -%}{%- do props.append("'spark_merge.retention_hours' = '" ~ cfg.retention_hours ~ "'") -%}{%- endif -%}
{%- if cfg.change_feed -%}{%- do props.append("'spark_merge.change_feed' = 'true'") -%}{%- endif -%}
{%- if not_null -%}{%- do props.append("'spark_merge.not_null' = " ~ spark_merge.spark_merge__literal(not_null | join(','))) -%}{%- endif -%}
CREATE TABLE {{ spark_merge.spark_merge__dbt_relation(identifier) }}
USING {{ cfg.file_format }}
{%- if cfg.partition_by %}
PARTITIONED BY ({{ spark_merge.spark_merge__column_list(cfg.partition_by) }})
{%- endif %}
{%- if location %}
LOCATION {{ spark_merge.spark_merge__literal(location) }}
{%- endif %}
{%- if props %}
TBLPROPERTIES ({{ props | join(', ') }})
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

{#- The table, described; `strict`: fail on what table_info finds wrong (else left in table.errors and
    table.trust_errors for the caller). -#}
{% macro spark_merge__dbt_describe(identifier=none, schema=none, strict=true) -%}
{%- set rel = spark_merge.spark_merge__dbt_relation(identifier, schema) -%}
{%- set desc = fromjson(run_query(spark_merge.spark_merge__describe_json_sql(rel)).rows[0][0]) -%}
{%- set types = [] -%}
{%- for row in run_query(spark_merge.spark_merge__describe_columns_sql(rel)).rows -%}{%- do types.append([row[0], row[1]]) -%}{%- endfor -%}
{%- set table = {} -%}
{%- do spark_merge.spark_merge__table_info(desc, types, table) -%}
{%- if not strict -%}{{ return(table) }}{%- endif -%}
{%- if table.errors -%}{{ spark_merge.spark_merge__dbt_runtime_fail(table.errors | join('; ')) }}{%- endif -%}
{%- if table.trust_errors -%}{{ spark_merge.spark_merge__dbt_runtime_fail(spark_merge.spark_merge__error_code('metadata') ~ ': ' ~
    table.trust_errors[0]) }}{%- endif -%}
{{ return(table) }}
{%- endmacro %}

{#- on_schema_change: compare the model's columns (`source_types`: [name, type]) with the table's. -#}
{% macro spark_merge__dbt_schema_change(cfg, table, source_types) -%}
{%- set source_types_by_name = {} -%}
{%- set source_names = [] -%}
{%- for name, type in source_types -%}
  {%- do source_types_by_name.update({name | lower: type}) -%}{%- do source_names.append(name) -%}
{%- endfor -%}
{%- set source_types = source_types_by_name -%}
{%- set added, removed, retyped = [], [], [] -%}
{%- for n in source_names if (n | lower) not in table.columns_by_name -%}{%- do added.append(n) -%}{%- endfor -%}
{%- for c in table.columns -%}
  {%- if (c.name | lower) not in source_types -%}{%- do removed.append(c.name) -%}
  {%- elif source_types[c.name | lower] | lower != c.type | lower -%}{%- do retyped.append(c.name ~ ' ' ~ c.type ~ ' -> ' ~ source_types[c.name | lower]) -%}
  {%- endif -%}
{%- endfor -%}
{%- set mode = 'append_new_columns' if cfg.schema_evolution and cfg.on_schema_change == 'ignore' else cfg.on_schema_change -%}
{%- set described = 'added: ' ~ (added | join(', ') or '-') ~ '; removed: ' ~ (removed | join(', ') or '-') ~ '; type changed: ' ~ (retyped |
    join(', ') or '-') -%}
{%- if mode == 'fail' and (added or removed or retyped) -%}
  {{ spark_merge.spark_merge__dbt_fail("the model's columns differ from " ~ table.name ~ " (" ~ described ~ ") and on_schema_change is fail") }}
{%- elif mode == 'sync_all_columns' and (removed or retyped) -%}
  {{ spark_merge.spark_merge__dbt_fail("on_schema_change sync_all_columns cannot drop or retype columns of a " ~ table.provider ~ " table (" ~
      described ~ "); run with --full-refresh to rebuild it") }}
{%- elif mode in ['append_new_columns', 'sync_all_columns'] and added -%}
  {%- do log("spark_merge: adding column(s) " ~ added | join(', ') ~ " to " ~ table.name, info=true) -%}
  {%- set defs = [] -%}
  {%- for n in added -%}{%- do defs.append([n, source_types[n | lower]]) -%}{%- endfor -%}
  {%- do run_query(spark_merge.spark_merge__add_columns_sql(table, defs)) -%}
  {{ return(true) }}
{%- endif -%}
{{ return(false) }}
{%- endmacro %}

{#- A model's merge: begin, plan, execute, finish, the lifecycle merge_core runs too (lifecycle/*.sql),
    over dbt's host (spark_merge_host.sql); the model's SQL is the source, as a temporary view. -#}
{% macro spark_merge__dbt_merge(cfg, sql, identifier=none) -%}
{%- set identifier = identifier or this.identifier -%}
{%- set host = spark_merge.spark_merge__dbt_host() -%}
{%- set started = host.now() -%}
{%- set merge_id = spark_merge.spark_merge__new_merge_id(started, local_md5(invocation_id ~ this ~ identifier ~ started)) | trim -%}
{%- set source_view = spark_merge.spark_merge__quote(identifier ~ '__sm_source_' ~ merge_id) -%}
{%- do run_query(spark_merge.spark_merge__temp_view_sql(source_view, sql)) -%}
{%- set s = {} -%}
{%- do spark_merge.spark_merge__run_state(merge_id, {'kind': 'merge',
             'statement': 'dbt model ' ~ this, 'started': started,
             'spec': {'target': [this.schema, identifier], 'source': source_view, 'source_kind': 'table',
                      'target_alias': 'DBT_INTERNAL_DEST', 'source_alias': 'DBT_INTERNAL_SOURCE'},
             'request': {'cfg': cfg, 'source_view': source_view}}, s) -%}
{%- set m = s.metrics -%}
{%- do spark_merge.spark_merge__lifecycle_begin(host, s) -%}
{%- do log("spark_merge: BEGIN " ~ merge_id ~ " into " ~ s.table.name, info=true) -%}
{%- do spark_merge.spark_merge__lifecycle_plan(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_write(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_finish(host, s) -%}
{%- do run_query(spark_merge.spark_merge__drop_view_sql(source_view)) -%}
{%- set changed = m.numTargetRowsInserted + m.numTargetRowsUpdated + m.numTargetRowsDeleted -%}
{%- set message = spark_merge.spark_merge__message(merge_id, m) | trim -%}
{%- do log("spark_merge: FINISH " ~ tojson(m), info=true) -%}
{{ return({'message': message, 'rows_affected': changed, 'metrics': m, 'merge_id': merge_id}) }}
{%- endmacro %}


{#- Whether --full-refresh can replace the rows of `existing` in one journaled commit: a table (not a
    merge-on-read view) whose columns, types, partitioning and format the model keeps. Otherwise the
    table is re-created, and the log says why. -#}
{% macro spark_merge__dbt_refresh_in_place(cfg, existing, mor, model_types) -%}
{%- if mor or existing.is_view -%}{{ return(false) }}{%- endif -%}
{%- set table = spark_merge.spark_merge__dbt_describe(strict=false) -%}
{%- set reasons = table.errors + table.trust_errors -%}
{%- if not reasons -%}
  {%- set by_name = {} -%}
  {%- for name, type in model_types -%}{%- do by_name.update({name | lower: [name, type]}) -%}{%- endfor -%}
  {%- set columns = [] -%}
  {%- for name, type in model_types if (name | lower) not in cfg.partition_by | map('lower') | list -%}{%- do columns.append([name, type]) -%}{%- endfor -%}
  {%- for p in cfg.partition_by -%}{%- do columns.append(by_name.get(p | lower, [p, '?'])) -%}{%- endfor -%}
  {%- set shape = {} -%}
  {%- do spark_merge.spark_merge__refresh_shape(table, columns, cfg.partition_by, cfg.file_format, shape) -%}
  {%- set reasons = shape.errors -%}
{%- endif -%}
{%- if reasons -%}
  {%- do log("spark_merge: --full-refresh re-creates " ~ this ~ " (no rollback to its old version): " ~ reasons | join('; '), info=true) -%}
{%- endif -%}
{{ return(not reasons) }}
{%- endmacro %}

{#- --full-refresh as a commit (lifecycle/refresh.sql): the model's rows are written to the commit's
    staging table under the table's root (created as the first run creates the table: by CTAS, or by
    a merge into it when an upsert or NOT NULL columns need one), then one journaled commit points
    every partition at them. A failure before the commit leaves the table as it was. -#}
{% macro spark_merge__dbt_full_refresh(cfg, sql, not_null, load_by_merge) -%}
{%- set host = spark_merge.spark_merge__dbt_host() -%}
{%- set started = host.now() -%}
{%- set merge_id = spark_merge.spark_merge__new_merge_id(started, local_md5(invocation_id ~ this ~ started)) | trim -%}
{%- set s = {} -%}
{%- do spark_merge.spark_merge__run_state(merge_id, {'target': [this.schema, this.identifier], 'kind': 'full_refresh',
             'statement': 'dbt model ' ~ this ~ ' --full-refresh', 'started': started}, s) -%}
{%- do spark_merge.spark_merge__lifecycle_begin_refresh(host, s) -%}
{%- do log("spark_merge: BEGIN " ~ merge_id ~ " full refresh of " ~ s.table.name, info=true) -%}
{%- do host.step('execute: write the model to ' ~ s.ctx.stage_location) -%}
{%- do s.update({'staged': true}) -%}
{%- do run_query(spark_merge.spark_merge__dbt_create_sql(cfg, sql, empty=load_by_merge, not_null=not_null, identifier=s.ctx.stage_name,
    location=s.ctx.stage_location)) -%}
{%- if load_by_merge -%}{%- do spark_merge.spark_merge__dbt_merge(cfg, sql, identifier=s.ctx.stage_name) -%}{%- endif -%}
{%- do spark_merge.spark_merge__lifecycle_execute_refresh(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_finish(host, s) -%}
{#- the commit changed only spark-merge's version and journal properties: begin's are current for these -#}
{%- do spark_merge.spark_merge__dbt_refresh_properties(cfg, not_null, s.table) -%}
{%- set m = s.metrics -%}
{%- do log("spark_merge: FINISH " ~ tojson(m), info=true) -%}
{{ return({'message': 'FULL REFRESH ' ~ merge_id ~ ': ' ~ m.numTargetRowsInserted ~ ' row(s) replaced ' ~ m.numTargetRowsDeleted ~ ' in '
           ~ m.numTargetPartitionsRewritten ~ ' partition(s)', 'rows_affected': m.numTargetRowsInserted, 'merge_id': merge_id}) }}
{%- endmacro %}

{#- After a refresh in place, the table properties the config sets (retention_hours; not_null from an
    enforced contract) as a re-created table would have them. -#}
{% macro spark_merge__dbt_refresh_properties(cfg, not_null, table) -%}
{%- set want = {'spark_merge.retention_hours': cfg.retention_hours | string if cfg.retention_hours is not none else none,
                'spark_merge.change_feed': 'true' if cfg.change_feed else none,
                'spark_merge.not_null': not_null | join(',') if not_null else none} -%}
{%- set sets, unsets = {}, [] -%}
{%- for k, v in want.items() if table.properties.get(k) != v -%}
  {%- if v is none -%}{%- do unsets.append(k) -%}{%- else -%}{%- do sets.update({k: v}) -%}{%- endif -%}
{%- endfor -%}
{%- if sets -%}{%- do run_query(spark_merge.spark_merge__set_properties_sql(table, sets)) -%}{%- endif -%}
{%- if unsets -%}{%- do run_query(spark_merge.spark_merge__unset_properties_sql(table, unsets)) -%}{%- endif -%}
{%- endmacro %}


{#-
  upsert_mode='merge-on-read': the model's name is a view over the log table
  <name>__sm_log (the first run creates the table, the first upsert converts
  it, as merge_core/lifecycle/merge_on_read.py does); each run appends the model's rows.
-#}
{% macro spark_merge__dbt_mor_upsert(cfg, sql) -%}
{%- set host = spark_merge.spark_merge__dbt_host() -%}
{%- set started = host.now() -%}
{%- set merge_id = spark_merge.spark_merge__new_merge_id(started, local_md5(invocation_id ~ this ~ started)) | trim -%}
{%- set source_view = spark_merge.spark_merge__quote(this.identifier ~ '__sm_source_' ~ merge_id) -%}
{%- do run_query(spark_merge.spark_merge__temp_view_sql(source_view, sql)) -%}
{%- set source_columns = [] -%}
{%- for row in run_query(spark_merge.spark_merge__describe_relation_sql(source_view)).rows -%}{%- do source_columns.append(row[0]) -%}{%- endfor -%}
{%- do spark_merge.spark_merge__dbt_check_columns(cfg, source_columns, 'the model') -%}
{%- set upsert = spark_merge.spark_merge__dbt_upsert_options(cfg) -%}
{%- set spec = {'source': source_view, 'source_kind': 'table', 'source_alias': 'DBT_INTERNAL_SOURCE'} -%}
{#- begin, plan, execute, finish: the lifecycle merge_core runs too (merge_on_read.UpsertRun) -#}
{%- set s = {} -%}
{%- do spark_merge.spark_merge__run_state(merge_id, {'spec': spec, 'target': [this.schema, this.identifier], 'kind': 'upsert',
             'statement': 'dbt model ' ~ this, 'started': started, 'upsert': upsert}, s) -%}
{%- set m = s.metrics -%}
{%- do spark_merge.spark_merge__lifecycle_begin_log(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_plan_log(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_write(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_finish(host, s) -%}
{%- do run_query(spark_merge.spark_merge__drop_view_sql(source_view)) -%}
{%- set rows = m.numTargetRowsInserted -%}
{{ return({'message': 'MERGE ' ~ merge_id ~ ': appended ' ~ rows ~ ' row(s) to the log (merge-on-read)', 'rows_affected': rows}) }}
{%- endmacro %}


{#- DROP TABLE deletes only a managed table's current location; after merges an
    unpartitioned table lives in <root>/_merge_<id>, so point it back at its root
    first, or the root (older versions, history) would block re-creating it. -#}
{% macro spark_merge__dbt_drop_table(identifier) -%}
{%- set rel = spark_merge.spark_merge__dbt_relation(identifier) -%}
{%- set desc = fromjson(run_query(spark_merge.spark_merge__describe_json_sql(rel)).rows[0][0]) -%}
{%- set identity = {} -%}
{%- do spark_merge.spark_merge__identity(desc.get('table_properties') or {}, this.schema ~ '.' ~ (identifier or this.identifier),
    desc.get('location'), identity, desc.get('created_time')) -%}
{#- a root copied from another table's DDL is that table's: dropping it would delete the other table's files -#}
{%- set root = (desc.get('table_properties') or {}).get('spark_merge.root') if not identity.trust_errors else none -%}
{%- if root and root != desc.get('location') and (desc.get('type') or '') | upper == 'MANAGED' -%}
  {%- do run_query(spark_merge.spark_merge__set_location_sql(rel, root)) -%}
{%- endif -%}
{%- do run_query(spark_merge.spark_merge__drop_table_sql(rel)) -%}
{%- endmacro %}


{#-
  contract: {enforced: true}. dbt's own assert_columns_equivalent compares the model's columns (names,
  types, number) with the YAML's and fails with dbt's contract error, before anything is written.
  Constraints: not_null, on a column or the model, is enforced by spark-merge's NOT NULL checks
  (the table property spark_merge.not_null, set on the existing table when it differs); the others
  are warned about as not enforced, as dbt-spark does, unless warn_unenforced is false. Returns the
  NOT NULL columns (none without an enforced contract).
-#}
{% macro spark_merge__dbt_contract(existing) -%}
{%- set contract = config.get('contract') -%}
{%- if not (contract and contract.enforced) -%}{{ return([]) }}{%- endif -%}
{{ get_assert_columns_equivalent(sql) }}
{%- set not_null, unenforced = [], [] -%}
{%- for name, column in model.columns.items() -%}
  {%- for c in column.constraints or [] -%}
    {%- if c.type == 'not_null' -%}{%- do not_null.append(column.name) -%}
    {%- elif c.get('warn_unenforced', true) -%}{%- do unenforced.append(c.type) -%}{%- endif -%}
  {%- endfor -%}
{%- endfor -%}
{%- for c in model.constraints or [] -%}
  {%- if c.type == 'not_null' -%}{%- do not_null.extend(c.columns or []) -%}
  {%- elif c.get('warn_unenforced', true) -%}{%- do unenforced.append(c.type) -%}{%- endif -%}
{%- endfor -%}
{%- for type in unenforced | unique -%}
  {%- do exceptions.warn("The constraint type " ~ type ~ " is not enforced by spark_merge. The constraint will be recorded in "
      ~ "the model's contract, but it will not guarantee anything about the underlying data. Set 'warn_unenforced: false' on "
      ~ "this constraint to ignore this warning.") -%}
{%- endfor -%}
{%- if existing is not none and not existing.is_view -%}
  {%- set rel = spark_merge.spark_merge__dbt_relation() -%}
  {%- set props = fromjson(run_query(spark_merge.spark_merge__describe_json_sql(rel)).rows[0][0]).get('table_properties') or {} -%}
  {%- if (props.get('spark_merge.not_null') or '') != not_null | join(',') -%}
    {%- do run_query(spark_merge.spark_merge__set_properties_sql({'relation': rel}, {'spark_merge.not_null': not_null | join(',')})) -%}
  {%- endif -%}
{%- endif -%}
{{ return(not_null) }}
{%- endmacro %}
