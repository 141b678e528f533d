"""Subprocess side of the dbt crash tests (test_crash.py). Not a test module itself.

    python tests/dbt_crash_driver.py HOME [refresh|append]
Creates the table crash_driver.py creates, then runs the same MERGE as a `spark_merge` dbt
model (dbt-spark, method: session, reusing this process's SparkSession), so a failpoint
(SPARK_MERGE_FAULT) stops dbt's run of the lifecycle where crash_driver.py stops Python's.
With `refresh`, the model runs with --full-refresh instead: its rows replace the table's. With
`append`, the table records its change feed and the model inserts only (crash_driver.py's APPEND).
"""

from __future__ import annotations

import sys
from pathlib import Path

from dbt.cli.main import dbtRunner

from dbt_macros import PACKAGE_DIR
from merge_core.spark.session import get_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster import FAST_CONF  # noqa: E402

MODEL = """{{ config(materialized='spark_merge', unique_key='id', partition_by=['p'], merge_clauses=[
    {'when': 'matched', 'action': 'update', 'set': {'v': 'DBT_INTERNAL_SOURCE.v'}},
    {'when': 'not_matched', 'action': 'insert'}]) }}
select * from values (1, 'u1', 1), (3, 'u3', 2), (5, 'n5', 3) as x(id, v, p)
"""
APPEND_MODEL = """{{ config(materialized='spark_merge', unique_key='id', partition_by=['p'], merge_clauses=[
    {'when': 'not_matched', 'action': 'insert'}]) }}
select * from values (5, 'n5', 3), (6, 'n6', 1), (7, 'n7', CAST(NULL AS INT)) as x(id, v, p)
"""
PROFILE = """crash:
  target: local
  outputs:
    local: {type: spark, method: session, host: NA, schema: crash}
"""


def main(home: str, mode: str = "") -> None:
    refresh = mode == "refresh"
    spark = get_session(master="local[1]", warehouse=home, conf={"spark.sql.shuffle.partitions": "1", **FAST_CONF})
    spark.sql("CREATE DATABASE IF NOT EXISTS crash")
    feed = " TBLPROPERTIES ('spark_merge.change_feed' = 'true')" if mode == "append" else ""
    spark.sql(f"CREATE TABLE crash.t (id INT, v STRING, p INT) USING parquet PARTITIONED BY (p){feed}")
    spark.sql("INSERT INTO crash.t VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 2), (4, 'd', 2)")
    project = Path(home) / "dbt"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: crash\nversion: '1.0.0'\nconfig-version: 2\nprofile: crash\n")
    (project / "profiles.yml").write_text(PROFILE)
    (project / "packages.yml").write_text(f"packages:\n  - local: {PACKAGE_DIR}\n")
    (project / "models" / "t.sql").write_text(APPEND_MODEL if mode == "append" else MODEL)
    for args in (["deps"], ["run", "-s", "t", *(["--full-refresh"] if refresh else [])]):
        result = dbtRunner().invoke([*args, "--project-dir", str(project), "--profiles-dir", str(project)])
        if not result.success:
            sys.exit(f"dbt {args[0]} failed: {result.exception}")


if __name__ == "__main__":
    main(sys.argv[1], (sys.argv[2:] or [""])[0])
