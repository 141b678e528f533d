{#-
  Microbatch models on spark-merge: materialized='incremental', incremental_strategy='microbatch'.

  dbt runs a model in batches only under materialized='incremental' (dbt-core's MicrobatchModelRunner),
  so spark-merge takes that materialization over for microbatch models, with one file in the project's
  macros/ folder (a package may not replace a built-in materialization; a project may):

    {% materialization incremental, adapter='spark' %}{{ return(spark_merge.incremental()) }}{% endmaterialization %}

  The same file runs incremental_strategy='merge' models on parquet and ORC through spark-merge
  (dbt-spark refuses them), with dbt's configs (unique_key, incremental_predicates,
  merge_update_columns, merge_exclude_columns, on_schema_change, partition_by). Other incremental
  models (append, insert_overwrite, any strategy on delta, iceberg or hudi) keep dbt-spark's own
  materialization. Each batch is one spark_merge run:
  the first creates the table (or, with --full-refresh, replaces its rows in one commit), every later
  one is a journaled merge that replaces exactly the batch's window of event_time:

    MERGE INTO t USING (the batch's rows) ON FALSE
    WHEN NOT MATCHED THEN INSERT *
    WHEN NOT MATCHED BY SOURCE AND t.<event_time> >= <start> AND t.<event_time> < <end> THEN DELETE

  so re-running a batch is idempotent, a batch that fails leaves the committed ones, and the window need
  not align with the table's partitions (only the partitions holding rows of the window, or receiving
  the batch's rows, are rewritten). A row of the batch outside its window would break that, so it
  fails the batch before anything is written.
-#}

{#- The same override inside the package: dbt uses it only when the project sets
    flags: {require_explicit_package_overrides_for_builtin_materializations: false} (a project's own
    file, as above, needs no flag and wins over it). -#}
{% materialization incremental, adapter='spark' %}{{ return(spark_merge.incremental()) }}{% endmaterialization %}

{% macro incremental() -%}
{%- set strategy = (config.get('incremental_strategy') or '') | lower -%}
{%- set file_format = (config.get('file_format') or 'parquet') | lower -%}
{%- if strategy == 'microbatch' or (strategy == 'merge' and file_format in ['parquet', 'orc']) -%}
  {{ return(spark_merge.materialization_spark_merge_spark()) }}
{%- endif -%}
{%- if strategy == 'delete+insert' and file_format in ['parquet', 'orc'] -%}
  {{ spark_merge.spark_merge__dbt_fail("incremental_strategy='delete+insert' is not one spark-merge runs (dbt-spark has none either): "
     ~ "use 'merge', which updates the rows whose unique_key the model has and inserts the others in one commit") }}
{%- endif -%}
{{ return(dbt.materialization_incremental_spark()) }}
{%- endmacro %}

{#- The incremental strategy a spark-merge model runs: none, 'merge' (materialized='incremental' with
    incremental_strategy='merge', dbt-spark's spelling, or a spark_merge model, which merges anyway) or
    'microbatch'. Any other on a spark_merge model is refused, never ignored. -#}
{% macro spark_merge__dbt_strategy() -%}
{%- set strategy = (config.get('incremental_strategy') or '') | lower -%}
{%- if config.get('materialized') == 'spark_merge' and strategy not in ['', 'merge', 'microbatch'] -%}
  {{ spark_merge.spark_merge__dbt_fail("incremental_strategy='" ~ strategy ~ "' does not apply to materialized='spark_merge', "
     ~ "which merges: drop it, or use materialized='incremental' for dbt-spark's " ~ strategy) }}
{%- endif -%}
{{ return(strategy or none) }}
{%- endmacro %}

{#- The batch dbt runs (none outside a microbatch model): its id, window and the window as a
    condition over `alias`; a microbatch config without a batch fails. -#}
{% macro spark_merge__dbt_microbatch() -%}
{%- if config.get('incremental_strategy') != 'microbatch' -%}{{ return(none) }}{%- endif -%}
{%- if config.get('materialized') != 'incremental' -%}
  {{ spark_merge.spark_merge__dbt_fail("dbt runs batches only for materialized='incremental': set it, with the project's "
     ~ "materialization file (docs/dbt.md, Microbatch), and keep incremental_strategy='microbatch'") }}
{%- endif -%}
{%- set batch = model.batch -%}
{%- if not batch -%}
  {{ spark_merge.spark_merge__dbt_fail("dbt gave this microbatch run no batch; run it with dbt run or dbt build") }}
{%- endif -%}
{%- set column = config.get('event_time') -%}
{%- set start = spark_merge.spark_merge__typed_literal(batch.event_time_start | string, 'TIMESTAMP') | trim -%}
{%- set end = spark_merge.spark_merge__typed_literal(batch.event_time_end | string, 'TIMESTAMP') | trim -%}
{{ return({'id': batch.id, 'column': column, 'start': batch.event_time_start, 'end': batch.event_time_end,
           'sql_start': start, 'sql_end': end}) }}
{%- endmacro %}

{% macro spark_merge__dbt_microbatch_condition(window, alias) -%}
{%- set c = alias ~ '.' ~ spark_merge.spark_merge__quote(window.column) -%}
({{ c }} >= {{ window.sql_start }} AND {{ c }} < {{ window.sql_end }})
{%- endmacro %}

{#- The config of a batch's merge: ON FALSE, insert every row, delete the window's rows no source row
    matched. Keys that choose another merge are refused rather than ignored. -#}
{% macro spark_merge__dbt_microbatch_config(cfg, window) -%}
{%- for key in ['unique_key', 'merge_on', 'merge_clauses', 'predicates', 'watermark_key', 'merge_engine'] if cfg.get(key) -%}
  {{ spark_merge.spark_merge__dbt_fail("a microbatch model replaces each batch's window of " ~ window.column ~ "; "
     ~ {'predicates': 'incremental_predicates'}.get(key, key) ~ " does not apply to it: drop it") }}
{%- endfor -%}
{%- do cfg.update({'merge_on': 'FALSE', 'merge_clauses': [
    {'when': 'not_matched', 'action': 'insert'},
    {'when': 'not_matched_by_source', 'action': 'delete',
     'condition': spark_merge.spark_merge__dbt_microbatch_condition(window, 'DBT_INTERNAL_DEST') | trim}]}) -%}
{%- endmacro %}

{#- The model's rows for the batch, each checked to lie in the window: a row outside it (or without
    an event time) fails the batch, in Spark, before anything is committed. -#}
{% macro spark_merge__dbt_microbatch_sql(sql, window) -%}
{%- set c = '__sm_batch.' ~ spark_merge.spark_merge__quote(window.column) -%}
{%- set lit = spark_merge.spark_merge__literal -%}
SELECT * FROM ({{ sql }}) AS __sm_batch
WHERE CASE WHEN {{ spark_merge.spark_merge__dbt_microbatch_condition(window, '__sm_batch') }} THEN true
  ELSE raise_error(concat({{ lit('spark_merge (' ~ this ~ '): batch ' ~ window.id ~ ' holds a row with ' ~ window.column ~ ' = ') }},
    coalesce(CAST({{ c }} AS STRING), 'NULL'), {{ lit(', outside its window [' ~ window.start ~ ', ' ~ window.end ~ '): every row a batch '
    ~ 'writes must lie in its window (filter the model on ' ~ window.column ~ ', or give its inputs an event_time config)') }})) END
{%- endmacro %}
