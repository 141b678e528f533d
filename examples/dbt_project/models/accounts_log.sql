-- The same watermark upsert as accounts_latest, merge-on-read: each run only appends to
-- accounts_log__sm_log; the view accounts_log shows the freshest live row per account.
{{ config(materialized='spark_merge', unique_key='id', watermark_key='version', tombstone_key='deleted',
          upsert_mode='merge-on-read') }}
select id, name, amount, batch as version, op = 'D' as deleted
from {{ ref('account_updates') }}
where batch <= {{ var('batch', 1) }}
