{#-
  The catalog statements both hosts issue: describing, listing, renaming and dropping
  relations. Written once here, so the Python host holds no Spark SQL text of its own and
  dbt's materialization reads the same statements. Arguments are already-quoted relations
  (`db`.`t`) or plain names, quoted here.
-#}

{#- The table (or one partition of it) as JSON: location, properties, partition columns. -#}
{% macro spark_merge__describe_json_sql(relation, partition_spec='') -%}
DESCRIBE TABLE EXTENDED {{ relation }}{{ ' ' ~ partition_spec if partition_spec }} AS JSON
{%- endmacro %}

{#- The columns and their types, one row each (then the partition columns again, after a '#' row). -#}
{% macro spark_merge__describe_columns_sql(relation) -%}
DESCRIBE TABLE {{ relation }}
{%- endmacro %}

{#- The names and types a query returns, without running it. -#}
{% macro spark_merge__describe_query_sql(select) -%}
DESCRIBE QUERY {{ select }}
{%- endmacro %}

{#- The names and types of a relation's (a table's or a view's) columns. -#}
{% macro spark_merge__describe_relation_sql(relation) -%}
DESCRIBE QUERY SELECT * FROM {{ relation }}
{%- endmacro %}

{#- The databases, optionally those whose names match a LIKE pattern ('*' any). -#}
{% macro spark_merge__show_databases_sql(like=none) -%}
SHOW DATABASES
{%- if like is not none %} LIKE {{ spark_merge.spark_merge__literal(like) }}{% endif -%}
{%- endmacro %}

{#- The tables of a database, optionally those whose names match a LIKE pattern ('*' any). -#}
{% macro spark_merge__show_tables_sql(database, like=none) -%}
SHOW TABLES IN {{ spark_merge.spark_merge__quote(database) }}
{%- if like is not none %} LIKE {{ spark_merge.spark_merge__literal(like) }}{% endif -%}
{%- endmacro %}

{#- The current session's temporary views whose names match a LIKE pattern. -#}
{% macro spark_merge__show_views_sql(like) -%}
SHOW VIEWS LIKE {{ spark_merge.spark_merge__literal(like) }}
{%- endmacro %}

{#- The partitions, or (with a partition spec) that one partition: no row when it does not exist. -#}
{% macro spark_merge__show_partitions_sql(relation, partition_spec='') -%}
SHOW PARTITIONS {{ relation }}{{ ' ' ~ partition_spec if partition_spec }}
{%- endmacro %}

{#- A read of a directory that Spark refuses when the path does not exist (analysis only: no file is read). -#}
{#- The data files Spark reads in a table's directory that were written after `since` (an ISO instant),
    but not during one of the periods `during` ([start, end]). -#}
{% macro spark_merge__written_after_sql(table, location, since, during=[]) -%}
{%- set t = '_metadata.file_modification_time' -%}
SELECT DISTINCT _metadata.file_path FROM {{ table.provider }}.{{ spark_merge.spark_merge__quote(location) }}
WHERE {{ t }} > CAST({{ spark_merge.spark_merge__literal(since) }} AS TIMESTAMP)
{%- for a, b in during %} AND NOT ({{ t }} BETWEEN CAST({{ spark_merge.spark_merge__literal(a) }} AS TIMESTAMP)
    AND CAST({{ spark_merge.spark_merge__literal(b) }} AS TIMESTAMP)){% endfor %}
{%- endmacro %}

{% macro spark_merge__path_probe_sql(location) -%}
DESCRIBE QUERY SELECT * FROM text.{{ spark_merge.spark_merge__quote(location) }}
{%- endmacro %}

{% macro spark_merge__show_properties_sql(relation) -%}
SHOW TBLPROPERTIES {{ relation }}
{%- endmacro %}

{% macro spark_merge__rename_table_sql(relation, new_relation) -%}
ALTER TABLE {{ relation }} RENAME TO {{ new_relation }}
{%- endmacro %}

{#- A session's view over a query (a model's SELECT, read as a merge's source). -#}
{% macro spark_merge__temp_view_sql(relation, query) -%}
CREATE OR REPLACE TEMPORARY VIEW {{ relation }} AS {{ query }}
{%- endmacro %}

{#- The newest `_merge_id` in a table built from the change feed (its rows carry the feed's columns). -#}
{% macro spark_merge__last_merge_id_sql(relation) -%}
SELECT _merge_id FROM {{ relation }} ORDER BY _commit_timestamp DESC LIMIT 1
{%- endmacro %}

{% macro spark_merge__drop_view_sql(relation) -%}
DROP VIEW IF EXISTS {{ relation }}
{%- endmacro %}

{% macro spark_merge__drop_database_sql(database) -%}
DROP DATABASE IF EXISTS {{ spark_merge.spark_merge__quote(database) }} CASCADE
{%- endmacro %}

{#- The warm server's warm-up (merge_core/api/merge_service.py): out.create, a database at `location`
    and a ten-row table in it; out.merge, a small merge into that table. -#}
{% macro spark_merge__warm_up_statements(database, location, out) -%}
{%- set db = spark_merge.spark_merge__quote(database) -%}
{%- do out.update({
  'create': ['CREATE DATABASE ' ~ db ~ ' LOCATION ' ~ spark_merge.spark_merge__literal(location),
             'CREATE TABLE ' ~ db ~ '.t USING parquet PARTITIONED BY (p) AS SELECT id, \'a\' AS v, CAST(id % 2 AS INT) AS p FROM range(10)'],
  'merge': 'MERGE INTO ' ~ db ~ ".t t USING (SELECT id, 'b' AS v FROM range(3)) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
}) -%}
{%- endmacro %}

{#- SELECT of `columns` (each [expression, name]) from `relation`. -#}
{% macro spark_merge__select_sql(columns, relation) -%}
SELECT {% for expression, name in columns %}{{ expression }} AS {{ spark_merge.spark_merge__quote(name) }}{% if not loop.last %}, {% endif %}
{%- endfor %} FROM {{ relation }}
{%- endmacro %}

{% macro spark_merge__drop_table_sql(relation) -%}
DROP TABLE IF EXISTS {{ relation }}
{%- endmacro %}

{#- `db`.`name` from its two parts. -#}
{% macro spark_merge__relation(database, name) -%}
{{ spark_merge.spark_merge__quote(database) }}.{{ spark_merge.spark_merge__quote(name) }}
{%- endmacro %}

{% macro spark_merge__uncache_sql(relation) -%}
UNCACHE TABLE IF EXISTS {{ relation }}
{%- endmacro %}

{% macro spark_merge__count_rows_sql(relation) -%}
SELECT count(*) AS n FROM {{ relation }}
{%- endmacro %}
