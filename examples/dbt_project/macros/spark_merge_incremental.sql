{#- microbatch models (incremental_strategy='microbatch') run on spark-merge: each batch one commit
    replacing its window; other incremental models keep dbt-spark's materialization -#}
{% materialization incremental, adapter='spark' %}{{ return(spark_merge.incremental()) }}{% endmaterialization %}
