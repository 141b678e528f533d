-- The row changes of `accounts`, one increment per run: the change rows of the commits since the
-- newest one this table holds, appended (dbt-spark's own incremental append).
{{ config(materialized='incremental', file_format='parquet') }}
select * from {{ spark_merge.changes(ref('accounts'), since=spark_merge.last_merge_id(this)) }}
