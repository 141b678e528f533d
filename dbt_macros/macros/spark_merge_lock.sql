{#-
  The commit lock: a marker table next to the target, created atomically by the
  metastore (of two CREATE TABLE statements for one name, exactly one succeeds).
  Held only for the commit (check, journal, repoint), so seconds; a lock older
  than the timeout belongs to a dead process and may be broken.
-#}

{% macro spark_merge__lock_relation(table) -%}
{{ spark_merge.spark_merge__quote(table.database) }}.{{ spark_merge.spark_merge__quote('__sm_lock_' ~ table.table_name) }}
{%- endmacro %}

{% macro spark_merge__lock_sql(table, merge_id, since) -%}
CREATE TABLE {{ spark_merge.spark_merge__lock_relation(table) }} (merge_id STRING) USING parquet
LOCATION {{ spark_merge.spark_merge__literal(table.root.rstrip('/') ~ '/_spark_merge/locks/' ~ merge_id) }}
TBLPROPERTIES ('spark_merge.lock.merge_id' = {{ spark_merge.spark_merge__literal(merge_id) }}, 'spark_merge.lock.since' = {{ spark_merge.spark_merge__literal(since) }})
{%- endmacro %}

{% macro spark_merge__unlock_sql(table) -%}
DROP TABLE IF EXISTS {{ spark_merge.spark_merge__lock_relation(table) }}
{%- endmacro %}
