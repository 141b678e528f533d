{#- incremental models with incremental_strategy='merge' (on parquet or ORC) or 'microbatch' run on
    spark-merge; other incremental models keep dbt-spark's materialization -#}
{% materialization incremental, adapter='spark' %}{{ return(spark_merge.incremental()) }}{% endmaterialization %}
