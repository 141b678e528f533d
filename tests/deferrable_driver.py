"""Subprocess side of the deferrable-operator tests (test_airflow.py). Not a test module itself.

    python tests/deferrable_driver.py sc://127.0.0.1:PORT http://127.0.0.1:PORT inline|triggerer
Creates a table on the Connect server and runs the `defer_merge` DAG (deferrable SparkMergeOperator
tasks whose merges the merge service runs) with dag.test(). ``inline``: dag.test() runs each trigger
itself, as it does by default. ``triggerer``: dag.test() leaves the deferred task to an `airflow
triggerer` process the test started on the same metadata DB, and resumes the task once that
triggerer has fired its event. Then a slow merge's task is deferred and aborted: through the
trigger's on_kill (inline), or by marking the deferred task failed, as a user would, so that the
triggerer cancels the trigger (triggerer). Prints the outcome as JSON.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

DAY = datetime(2026, 11, 1, tzinfo=UTC)


def load(name: str):
    path = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]) / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def task_instances(dag_id: str, run_id: str) -> dict:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return {
            ti.task_id: {"state": str(getattr(ti.state, "value", ti.state)), "tries": ti.try_number}
            for ti in session.scalars(
                select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)
            )
        }


def xcoms(run) -> dict:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return {
            f"{x.task_id}.{x.key}": XComModel.deserialize_value(x)
            for x in session.scalars(
                select(XComModel).where(XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id)
            )
        }


def kill_slow_merge(service: str, mode: str, table: str) -> dict:
    """Defer the slow merge's task (dag.test() in this thread), and abort it from another thread while
    the merge runs in the service."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    from airflow_provider.triggers import SparkMergeTrigger
    from merge_core.api import service_client

    seen: dict = {}

    def kill() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with create_session() as session:  # this run's task (an earlier test's run has finished)
                ti = session.scalars(
                    select(TaskInstance).where(
                        TaskInstance.dag_id == "defer_slow",
                        TaskInstance.state.not_in([TaskInstanceState.SUCCESS, TaskInstanceState.FAILED]),
                    )
                ).first()
                if ti is not None and ti.run_id:
                    ti_id, seen["run_id"] = ti.id, ti.run_id
                    run_key = f"airflow:defer_slow/{ti.run_id}/slow/-1"
                    seen["before"] = service_client.status(service, run_key)
                    deferred = mode == "inline" or ti.state == TaskInstanceState.DEFERRED
                    if seen["before"]["state"] == "running" and deferred:
                        break
            time.sleep(0.5)
        time.sleep(3)  # the merge is under way in the service
        seen["run_key"] = run_key
        if mode == "triggerer":  # the user marks the deferred task failed: the triggerer calls on_kill
            with create_session() as session:
                ti = session.scalars(select(TaskInstance).where(TaskInstance.id == ti_id)).one()
                ti.set_state(TaskInstanceState.FAILED, session=session)
        else:  # dag.test() runs the trigger itself: call its on_kill as the triggerer would
            asyncio.run(SparkMergeTrigger(service, run_key, "", {}).on_kill())

    killer = threading.Thread(target=kill)
    killer.start()
    load("defer_slow").test(logical_date=DAY, run_conf={"table": table})
    killer.join(300)
    deadline = time.monotonic() + 120
    while (state := service_client.status(service, seen["run_key"]))["state"] == "running":
        assert time.monotonic() < deadline, state
        time.sleep(1)
    return {"before": seen["before"]["state"], "after": state, "tasks": task_instances("defer_slow", seen["run_id"])}


def main(remote: str, service: str, mode: str) -> None:
    from merge_core import history

    if mode == "triggerer":  # dag.test() leaves deferred tasks to the triggerer process
        import airflow.sdk.definitions.dag as dag_module

        inline = dag_module._run_task
        dag_module._run_task = lambda **kwargs: inline(**{**kwargs, "run_triggerer": False})
    spark = SparkSession.builder.remote(remote).getOrCreate()
    spark.sql("CREATE DATABASE IF NOT EXISTS sc")
    table = f"sc.{mode}"  # a table of each mode's own
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id INT, n INT) USING parquet")
    spark.sql(f"INSERT INTO {table} VALUES (1, 0), (2, 0)")
    run = load("defer_merge").test(logical_date=DAY, run_conf={"table": table})
    outcome = {
        "state": str(getattr(run.state, "value", run.state)),
        "tasks": task_instances("defer_merge", run.run_id),
        "xcom": xcoms(run),
        "rows": [list(r) for r in spark.sql(f"SELECT * FROM {table} ORDER BY id").collect()],
        "history": [{k: e.get(k) for k in ("merge_id", "run_key")} for e in history(spark, table)],
        "killed": kill_slow_merge(service, mode, table),
        "rows_after_kill": [list(r) for r in spark.sql(f"SELECT * FROM {table} ORDER BY id").collect()],
    }
    print("RESULT " + json.dumps(outcome, default=str))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
