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

{% macro spark_merge__show_databases_sql() -%}
SHOW DATABASES
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
{% macro spark_merge__path_probe_sql(location) -%}
DESCRIBE QUERY SELECT * FROM text.{{ spark_merge.spark_merge__quote(location) }}
{%- endmacro %}

{% macro spark_merge__show_properties_sql(relation) -%}
SHOW TBLPROPERTIES {{ relation }}
{%- endmacro %}

{% macro spark_merge__rename_table_sql(relation, new_relation) -%}
ALTER TABLE {{ relation }} RENAME TO {{ new_relation }}
{%- endmacro %}

{% macro spark_merge__drop_view_sql(relation) -%}
DROP VIEW IF EXISTS {{ relation }}
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
