"""Subprocess side of the dbt-on-a-shared-metastore test (test_shared_metastore.py): the example dbt
project through `method: session` with the profile's server_side_parameters naming the metastore
service, as a user's profile would. Not a test module itself.

    python tests/dbt_metastore_driver.py PROJECT_DIR SCHEMA

dbt-spark's session method builds its SparkSession in this process; after the runs, the rows of the
model and its history (read through that session) are printed as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from merge_core import history  # noqa: E402
from tests.test_dbt import Project  # noqa: E402

if __name__ == "__main__":
    project = Project(Path(sys.argv[1]), sys.argv[2], sql=None)  # dbt in this process, its own session
    project.dbt("deps")
    project.dbt("seed")
    project.dbt("run", "-s", "accounts", vars={"batch": 1})
    project.dbt("run", "-s", "accounts", vars={"batch": 2})
    spark = SparkSession.builder.getOrCreate()  # the session dbt-spark made (it ran in dbt's thread)
    table = project.table("accounts")
    print(
        json.dumps(
            {
                "rows": sorted(list(r) for r in spark.sql(f"SELECT id, name, amount, region FROM {table}").collect()),
                "history": [h["kind"] for h in history(spark, table)],
                "metastore": spark.conf.get("spark.hadoop.hive.metastore.uris", ""),
            }
        )
    )
