"""Subprocess side of the Spark Connect test (test_airflow.py). Not a test module itself.

    python tests/connect_driver.py sc://127.0.0.1:PORT
Creates a table on the Connect server, runs the `connect_merge` DAG (SparkMergeOperator with a
connection to that server) with dag.test(), and prints the outcome as JSON. A process of its own,
so the Connect client never meets the test run's classic SparkSession.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession


def main(url: str) -> None:
    spark = SparkSession.builder.remote(url).getOrCreate()
    spark.sql("CREATE DATABASE IF NOT EXISTS sc")
    spark.sql("DROP TABLE IF EXISTS sc.accounts")
    spark.sql("CREATE TABLE sc.accounts (id INT, amount INT, region STRING) USING parquet PARTITIONED BY (region)")
    spark.sql("INSERT INTO sc.accounts VALUES (1, 10, 'eu'), (2, 20, 'us'), (3, 30, 'eu')")
    path = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]) / "connect_merge.py"
    spec = importlib.util.spec_from_file_location("connect_merge", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test(logical_date=datetime(2026, 11, 1, tzinfo=UTC))

    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        xcoms = {
            x.key: XComModel.deserialize_value(x)
            for x in session.scalars(
                select(XComModel).where(XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id)
            )
        }
    rows = [list(r) for r in spark.sql("SELECT * FROM sc.accounts ORDER BY id").collect()]
    print(
        "RESULT "
        + json.dumps({"state": getattr(run.state, "value", str(run.state)), "rows": rows, "xcom": xcoms}, default=str)
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
