"""Delete every row of the given customers from a table, across all its partitions.

Trigger with params, e.g. {"table": "demo.orders", "key": "customer_id", "ids": [17, 42]}.
Values reach the statement only through spark-merge's quoting (merge_core.sql_literal and sql_name, as template
filters): each id is a SQL literal (numbers stay numbers; strings are quoted with their quotes and
backslashes escaped, as Spark SQL reads them), the table and key names are checked to be plain
identifiers and quoted. An id such as "O'Brien" deletes exactly that customer, and an id that looks
like SQL is only ever a value. With no ids nothing runs (the delete is skipped: no Spark job, no
history entry).

The delete is a new version of the table: the old files, which still hold the deleted rows, stay
for readers in flight and for `rollback` until the retention period ends (7 days unless the table's
`spark_merge.retention_hours` says otherwise). With `"vacuum": true` the run then vacuums with zero
retention: the deleted rows are gone from disk at once, and no rollback can bring them back.
The first task creates demo.orders with sample rows when that is the table named and it is missing.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, task

from airflow_provider.operators import SparkMergeOperator
from merge_core import sql_literal, sql_name

with DAG(
    dag_id="gdpr_delete",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    params={
        "table": Param("demo.orders", type="string", pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"),
        "key": Param("customer_id", type="string", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"),
        "ids": Param([], type="array"),
        "vacuum": Param(False, type="boolean", description="remove the old files holding the deleted rows now"),
    },
    tags=["spark-merge"],
    user_defined_filters={"sql_literal": sql_literal, "sql_name": sql_name},
) as dag:

    @task
    def example_tables(params=None) -> list[str]:
        from airflow_provider.example_tables import create_missing
        from airflow_provider.hooks import SparkMergeHook

        return create_missing(SparkMergeHook().get_conn(), [params["table"]])

    @task.short_circuit
    def any_ids(params=None) -> bool:
        return bool(params["ids"])

    @task.short_circuit
    def wants_vacuum(params=None) -> bool:
        return bool(params["vacuum"])

    @task
    def vacuum(params=None) -> dict:
        from airflow_provider.hooks import SparkMergeHook
        from merge_core import vacuum as vacuum_table

        result = vacuum_table(SparkMergeHook().get_conn(), params["table"], retain_hours=0)
        return {"removed": result.removed, "files": result.files, "bytes": result.bytes}

    delete = SparkMergeOperator(
        task_id="delete_customers",
        sql="DELETE FROM {{ params.table | sql_name }} WHERE {{ params.key | sql_name }} IN "
        "({{ params.ids | map('sql_literal') | join(', ') or 'NULL' }})",
    )
    example_tables() >> any_ids() >> delete >> wants_vacuum() >> vacuum()
