"""Delete every row of the given customers from a table, across all its partitions.

Trigger with params, e.g. {"table": "demo.orders", "key": "customer_id", "ids": [17, 42]}.
Ids are rendered as SQL literals (numbers stay numbers, strings are quoted and escaped).
"""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param

from airflow_provider.operators import SparkMergeOperator

with DAG(
    dag_id="gdpr_delete",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    params={
        "table": Param("demo.orders", type="string"),
        "key": Param("customer_id", type="string", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"),
        "ids": Param([], type="array"),
    },
    tags=["spark-merge"],
) as dag:
    SparkMergeOperator(
        task_id="delete_customers",
        sql="DELETE FROM {{ params.table }} WHERE `{{ params.key }}` IN "
            "({% for i in params.ids %}{{ i | tojson if i is number else \"'\" ~ (i | replace(\"'\", \"''\")) ~ \"'\" }}"
            "{{ ', ' if not loop.last }}{% else %}NULL{% endfor %})",
    )
