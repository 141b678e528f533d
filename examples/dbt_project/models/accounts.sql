-- A plain upsert by key: rows of each batch update the account or add it (dbt's merge default). Its
-- commits record their row changes (change_feed), which account_changes reads.
{{ config(materialized='spark_merge', unique_key='id', partition_by=['region'], file_format='parquet',
          on_schema_change='append_new_columns', retention_hours=72, change_feed=true) }}
select id, name, amount, region
from {{ ref('account_updates') }}
where batch = {{ var('batch', 1) }}
