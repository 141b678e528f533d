{#-
  The commit lock: a marker table next to the target, created atomically by the
  metastore (of two CREATE TABLE statements for one name, exactly one succeeds).
  A taker creates it IF NOT EXISTS and then reads whose merge id it holds: so losing
  the race to another taker (another application: the metastore refuses the create
  after Spark's own look found no table) is no error to catch, which dbt could not.
  Held only for the commit (check, journal, repoint), so seconds. The holder
  writes when its lease expires and renews it while it lives (renew_lock_sql);
  a lock whose lease lapsed belongs to a dead process and is broken by the next
  one that needs it (merge_core/lock.py).
-#}

{% macro spark_merge__lock_relation(table) -%}
{{ spark_merge.spark_merge__quote(table.database) }}.{{ spark_merge.spark_merge__quote('__sm_lock_' ~ table.table_name) }}
{%- endmacro %}

{% macro spark_merge__lock_sql(table, merge_id, since, expires, owner='') -%}
CREATE TABLE IF NOT EXISTS {{ spark_merge.spark_merge__lock_relation(table) }} (merge_id STRING) USING parquet
LOCATION {{ spark_merge.spark_merge__literal(table.root.rstrip('/') ~ '/_spark_merge/locks/' ~ merge_id) }}
TBLPROPERTIES ('spark_merge.lock.merge_id' = {{ spark_merge.spark_merge__literal(merge_id) }}, 'spark_merge.lock.since' = {{ spark_merge.spark_merge__literal(since) }}, 'spark_merge.lock.expires' = {{ spark_merge.spark_merge__literal(expires) }}, 'spark_merge.lock.owner' = {{ spark_merge.spark_merge__literal(owner) }})
{%- endmacro %}

{% macro spark_merge__renew_lock_sql(table, expires) -%}
ALTER TABLE {{ spark_merge.spark_merge__lock_relation(table) }} SET TBLPROPERTIES ('spark_merge.lock.expires' = {{ spark_merge.spark_merge__literal(expires) }})
{%- endmacro %}

{% macro spark_merge__unlock_sql(table) -%}
DROP TABLE IF EXISTS {{ spark_merge.spark_merge__lock_relation(table) }}
{%- endmacro %}
