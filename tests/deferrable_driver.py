"""Subprocess side of the deferrable-operator test (test_airflow.py). Not a test module itself.

    python tests/deferrable_driver.py sc://127.0.0.1:PORT http://127.0.0.1:PORT
Creates a table on the Connect server, runs the `defer_merge` DAG (deferrable SparkMergeOperator
tasks whose merges the merge service runs) with dag.test(), which runs the trigger as a triggerer
would, then aborts a slow merge through the trigger's on_kill; prints the outcome as JSON.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

SLOW = (
    "MERGE INTO sc.counters t USING (SELECT id, 7 AS n FROM VALUES (2) AS x(id) "
    "WHERE java_method('java.lang.Thread', 'sleep', 60000L) IS NULL) s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET n = s.n"
)


def main(remote: str, service: str) -> None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_provider.triggers import SparkMergeTrigger
    from merge_core import history
    from merge_core.api import service_client

    spark = SparkSession.builder.remote(remote).getOrCreate()
    spark.sql("CREATE DATABASE IF NOT EXISTS sc")
    spark.sql("DROP TABLE IF EXISTS sc.counters")
    spark.sql("CREATE TABLE sc.counters (id INT, n INT) USING parquet")
    spark.sql("INSERT INTO sc.counters VALUES (1, 0), (2, 0)")
    path = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]) / "defer_merge.py"
    spec = importlib.util.spec_from_file_location("defer_merge", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test(logical_date=datetime(2026, 11, 1, tzinfo=UTC))
    with create_session() as session:
        xcoms = {
            f"{x.task_id}.{x.key}": XComModel.deserialize_value(x)
            for x in session.scalars(
                select(XComModel).where(XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id)
            )
        }
        tasks = {
            ti.task_id: {"state": str(getattr(ti.state, "value", ti.state)), "tries": ti.try_number}
            for ti in session.scalars(select(TaskInstance).where(TaskInstance.run_id == run.run_id))
        }
    after_dag = [list(r) for r in spark.sql("SELECT * FROM sc.counters ORDER BY id").collect()]
    entries = [{k: e.get(k) for k in ("merge_id", "run_key", "operation")} for e in history(spark, "sc.counters")]

    # a slow merge, aborted the way the triggerer aborts it when a user kills the deferred task
    service_client.submit(service, "slow-run", SLOW, {})
    time.sleep(5)
    asyncio.run(SparkMergeTrigger(service, "slow-run", SLOW, {}).on_kill())
    deadline = time.monotonic() + 120
    while (killed := service_client.status(service, "slow-run"))["state"] == "running" and time.monotonic() < deadline:
        time.sleep(1)
    after_kill = [list(r) for r in spark.sql("SELECT * FROM sc.counters ORDER BY id").collect()]
    outcome = {
        "state": str(getattr(run.state, "value", run.state)),
        "tasks": tasks,
        "xcom": xcoms,
        "rows": after_dag,
        "history": entries,
        "killed": killed,
        "rows_after_kill": after_kill,
    }
    print("RESULT " + json.dumps(outcome, default=str))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
