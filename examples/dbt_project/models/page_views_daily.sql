{#- a microbatch model: a day per batch, each a spark-merge commit replacing that day of ts (the table
    is partitioned by region, which the days do not align with); enabled with --vars '{microbatch: true}'
    so that a plain `dbt run` does not backfill every day since `begin` -#}
{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='ts', batch_size='day',
          begin='2026-01-01', partition_by='region', enabled=var('microbatch', false)) }}
select id, ts, page, region from {{ ref('page_events') }}
