"""Subprocess side of the stale-cache test (test_corruption.py). Not a test module itself.

    python tests/stale_cache_driver.py sc://127.0.0.1:PORT setup|die|merge STATEMENT

Each call is a Spark Connect client of its own (its own server-side session), as separate
Airflow tasks would be. `die` begins and plans a merge, so its caches exist on the server,
then ends the process without any clean-up (os._exit), as a task killed hard would.
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

from merge_core import MergeRun, merge, to_spec


def main(url: str, mode: str, statement: str = "") -> None:
    spark = SparkSession.builder.remote(url).getOrCreate()
    if mode == "setup":
        spark.sql("CREATE DATABASE IF NOT EXISTS conc")
        spark.sql("DROP TABLE IF EXISTS conc.t")
        spark.sql("CREATE TABLE conc.t (id BIGINT, v BIGINT, p INT) USING parquet PARTITIONED BY (p)")
        spark.sql(
            "INSERT INTO conc.t SELECT id, 0, CAST(id DIV 1000 AS INT) FROM range(0, 1200) WHERE id < 200 OR id >= 1000"
        )
    elif mode == "die":
        run = MergeRun(spark, to_spec(statement))
        run.begin()
        run.plan()
        print("RESULT " + json.dumps({"merge_id": run.merge_id}), flush=True)
        os._exit(0)
    else:
        result = merge(spark, statement)
        rows = [list(r) for r in spark.sql("SELECT id, v, p FROM conc.t ORDER BY id").collect()]
        print("RESULT " + json.dumps({"metrics": result.metrics, "rows": rows}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
