"""Run the example dbt project, whose models use materialized='spark_merge', one batch per run.

`dbt deps` then `dbt run`, with the batch to load as a param; the project's profile uses dbt-spark's
`method: session` and $SPARK_MERGE_HOME, so point that (or the profile) at your warehouse. The last
task puts each model's outcome in XCom (`return_value` of `merge_metrics`): status, rows, and for a
merge its merge id and metrics (the names a Python merge returns), read from dbt's run_results.json.
"""

from __future__ import annotations

import os
import shutil
import sys
from datetime import datetime
from pathlib import Path

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, task

PROJECT = os.environ.get(
    "SPARK_MERGE_DBT_PROJECT", str(Path(__file__).resolve().parents[1] / "examples" / "dbt_project")
)
# the dbt of Airflow's own environment (where spark-merge and dbt-spark are installed)
DBT_BIN = shutil.which("dbt") or str(Path(sys.executable).with_name("dbt"))
DBT = f"{DBT_BIN} --no-use-colors {{cmd}} --project-dir {PROJECT} --profiles-dir {PROJECT}"

with DAG(
    dag_id="dbt_spark_merge",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    params={"batch": 1},
    tags=["spark-merge", "dbt"],
) as dag:
    deps = BashOperator(task_id="dbt_deps", bash_command=DBT.format(cmd="deps"))
    seed = BashOperator(task_id="dbt_seed", bash_command=DBT.format(cmd="seed"))
    run = BashOperator(task_id="dbt_run", bash_command=DBT.format(cmd="run") + " --vars '{batch: {{ params.batch }}}'")

    @task
    def merge_metrics() -> dict:
        import json

        from merge_core import parse_message

        results = json.loads((Path(PROJECT) / "target" / "run_results.json").read_text())["results"]
        return {
            r["unique_id"].split(".")[-1]: {
                "status": r["status"],
                "rows": r["adapter_response"].get("rows_affected"),
                **parse_message(r["adapter_response"].get("_message", "")),
            }
            for r in results
        }

    deps >> seed >> run >> merge_metrics()
