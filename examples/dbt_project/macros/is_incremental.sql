{#- is_incremental() is true on the runs a spark_merge model merges (see spark_merge's macro). -#}
{% macro is_incremental() %}{{ return(spark_merge.is_incremental()) }}{% endmacro %}
