{#-
  is_incremental() for materialized='spark_merge' (and dbt's rule for every other model).

  dbt's own is_incremental() is true only for materialized='incremental', so under spark_merge
  the standard filter `{% if is_incremental() %} where ... > (select max(...) from {{ this }})
  {% endif %}` would never apply. A package cannot replace a dbt macro; a project can, with one
  line in its macros/ folder (the example project has it, macros/is_incremental.sql):

    {% macro is_incremental() %}{{ return(spark_merge.is_incremental()) }}{% endmacro %}

  True when the model's relation exists (a table; the view of a merge-on-read upsert) and the
  run is not --full-refresh: exactly the runs that merge rather than create.
-#}
{% macro is_incremental() -%}
{%- if model.config.materialized != 'spark_merge' -%}{{ return(dbt.is_incremental()) }}{%- endif -%}
{%- if not execute -%}{{ return(false) }}{%- endif -%}
{%- set relation = adapter.get_relation(this.database, this.schema, this.table) -%}
{{ return(relation is not none and not should_full_refresh()) }}
{%- endmacro %}
