-- A watermark upsert: every batch up to `batch` is offered again each run; only fresher rows
-- (by batch number) change the table, and a 'D' row leaves a tombstone, so re-runs and backfills
-- of any batch give the same table. Live rows: where not deleted.
{{ config(materialized='spark_merge', unique_key='id', watermark_key='version', tombstone_key='deleted') }}
select id, name, amount, batch as version, op = 'D' as deleted
from {{ ref('account_updates') }}
where batch <= {{ var('batch', 1) }}
