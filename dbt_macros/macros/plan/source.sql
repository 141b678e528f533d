{#-
  Step 0 of the plan (overview in plan/changes.sql): the source read once, with a row number
  (__sm_srow), and the statistics of its ON keys that narrow every target scan.
-#}

{#- The source, read once: every later step reads this cache (LAZY: source_stats_sql fills it).
    The merge id is part of the cached plan: Spark's cache manager matches cached data by plan,
    not by name, so without it a merge could read another (dead) merge's cache of the same query. -#}
{% macro spark_merge__source_select(spec, ctx) -%}
SELECT *, monotonically_increasing_id() AS __sm_srow, {{ spark_merge.spark_merge__literal(ctx.merge_id) }} AS __sm_merge FROM {{
    spark_merge.spark_merge__source_relation(spec) }} AS __sm_src
{%- endmacro %}

{% macro spark_merge__cache_source_sql(spec, ctx) -%}
CACHE LAZY TABLE {{ ctx.source_view }} OPTIONS ('storageLevel' 'MEMORY_AND_DISK') AS
{{ spark_merge.spark_merge__source_select(spec, ctx) }}
{%- endmacro %}

{#-
  Read once, really. Spark serves a cached query only to plans equal to the one
  it cached, and a query with a seedless non-deterministic function (rand(),
  uuid(), shuffle(), ...) gets a new seed each time its view is read: such a
  cache is never used and every step would evaluate the query anew (other rows,
  other values). The host asks Spark how it plans a read of the cache
  (read_once_probe_sql); when the plan does not read the cache, the query is
  written once to a managed table of the merge (materialize_sql) and every step
  reads that instead. `kind`: 'source' or 'changes'.
-#}
{% macro spark_merge__read_once_probe_sql(ctx, kind) -%}
EXPLAIN SELECT * FROM {{ ctx[kind ~ '_view'] }}
{%- endmacro %}

{#- From the probe's plan text: out.served (the cache serves reads). -#}
{% macro spark_merge__read_once_served(plan_text, out) -%}
{%- do out.update({'served': 'InMemoryRelation' in plan_text or 'InMemoryTableScan' in plan_text}) -%}
{%- endmacro %}

{#- The fallback: drop the unusable cache (dropping its view uncaches it), write the query once, read
    the table from now on. -#}
{% macro spark_merge__materialize_statements(ctx, kind, select, out) -%}
{%- do out.append('DROP VIEW IF EXISTS ' ~ ctx[kind ~ '_view']) -%}
{%- do out.append('CREATE TABLE ' ~ ctx[kind ~ '_table'] ~ ' USING parquet AS ' ~ select) -%}
{%- do ctx.update({kind: ctx[kind ~ '_table']}) -%}
{%- endmacro %}

{#- numSourceRows; sourceSlices, how many of the source's read partitions (its row numbers'
    upper bits, monotonically_increasing_id) it reaches at most, which an append writes as it reads
    where that is few (append_sql); and for each ON equality target.col = source.col (ctx.on_keys) a
    JSON object (text survives dbt's agate type guessing): the source column's type, min and max as
    strings, and for a partition column its distinct values. match_filter turns them into a filter. -#}
{% macro spark_merge__source_stats_sql(table, ctx) -%}
SELECT count(*) AS numSourceRows, coalesce(CAST(shiftright(max(__sm_srow), 33) AS INT) + 1, 0) AS sourceSlices
{%- for k in ctx.on_keys %}{% set c = spark_merge.spark_merge__quote(k.source) %},
  to_json(named_struct('type', typeof(min({{ c }})), 'lo', CAST(min({{ c }}) AS STRING), 'hi', CAST(max({{ c }}) AS STRING)
  {%- if (k.target | lower) in table.partition_columns | map('lower') | list %}, 'values', collect_set(CAST({{ c }} AS STRING)){% endif
      %})) AS __sm_key{{ loop.index0 }}
{%- endfor %}
FROM {{ ctx.source }}
{%- endmacro %}
