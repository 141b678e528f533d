"""Subprocess side of the dbt-on-a-shared-metastore test (test_shared_metastore.py): the example dbt
project through `method: session` with the profile's server_side_parameters naming the metastore
service, as a user's profile would. Not a test module itself.

    python tests/dbt_metastore_driver.py PROJECT_DIR SCHEMA

dbt-spark's session method builds its SparkSession in this process; after the runs, the rows of the
model and its history (read through that session) are printed as JSON.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from dbt.cli.main import dbtRunner
from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from merge_core import history  # noqa: E402


def dbt(project: str, *args: str, batch: int | None = None) -> None:
    argv = [*args, "--project-dir", project, "--profiles-dir", project]
    if batch is not None:
        argv += ["--vars", json.dumps({"batch": batch})]
    logs: list[str] = []
    result = dbtRunner(callbacks=[lambda e: logs.append(e.info.msg)]).invoke(argv)
    if not result.success:
        raise SystemExit(f"dbt {' '.join(args)} failed:\n" + "\n".join(logs[-30:]))


if __name__ == "__main__":
    project, schema = sys.argv[1], sys.argv[2]
    os.environ["SPARK_MERGE_DBT_SCHEMA"] = schema
    dbt(project, "deps")
    dbt(project, "seed")
    dbt(project, "run", "-s", "accounts", batch=1)
    dbt(project, "run", "-s", "accounts", batch=2)
    spark = SparkSession.builder.getOrCreate()  # the session dbt-spark made (it ran in dbt's thread)
    table = f"{schema}.accounts"
    print(json.dumps({"rows": sorted(list(r) for r in spark.sql(f"SELECT id, name, amount, region FROM {table}").collect()),
                      "history": [h["kind"] for h in history(spark, table)],
                      "metastore": spark.conf.get("spark.hadoop.hive.metastore.uris", "")}))
