"""Subprocess side of the rollback-after-recovery test (test_crash.py). Not a test module itself.

    python tests/rollback_driver.py HOME prep|x|verify|verify_gap
prep: create rb.t and run merge A; x: run merge X (a failpoint may stop it); verify: recover,
then print the history and roll back to A; verify_gap: the same after removing X's history entry.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from merge_core import MergeError, history, merge, recover, rollback
from merge_core.spark.catalog import describe_table
from merge_core.spark.session import get_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster import FAST_CONF  # noqa: E402

TABLE = "rb.t"


def rows(spark):
    return sorted([list(r) for r in spark.sql(f"SELECT id, v, p FROM {TABLE}").collect()])


def main(home: str, mode: str) -> None:
    spark = get_session(master="local[1]", warehouse=home, conf={"spark.sql.shuffle.partitions": "1", **FAST_CONF})
    if mode == "prep":
        spark.sql("CREATE DATABASE IF NOT EXISTS rb")
        spark.sql(f"CREATE TABLE {TABLE} (id INT, v STRING, p INT) USING parquet PARTITIONED BY (p)")
        spark.sql(f"INSERT INTO {TABLE} VALUES (1, 'orig', 1), (2, 'orig', 2), (3, 'orig', 3)")
        print(json.dumps({"a": merge(spark, f"UPDATE {TABLE} SET v = 'A' WHERE p = 1").merge_id}))
    elif mode == "x":
        merge(spark, f"UPDATE {TABLE} SET v = 'X' WHERE p = 2")
    else:
        recovered = recover(spark, TABLE)
        entries = history(spark, TABLE)
        at_x = rows(spark)
        a = [e["merge_id"] for e in entries if e["statement"].endswith("p = 1")][0]
        if mode == "verify_gap":
            x = [e for e in entries if e["statement"].endswith("p = 2")][0]
            root = describe_table(spark, TABLE.split("."))["root"].removeprefix("file:")
            shutil.rmtree(f"{root}/_spark_merge/history/{x['merge_id']}")
        try:
            rollback(spark, TABLE, a)
            outcome = "rolled back"
        except MergeError as e:
            outcome = str(e)
        print(
            json.dumps(
                {
                    "recovered": recovered,
                    "statements": [e["statement"] for e in entries],
                    "recovered_entries": [e["merge_id"] for e in entries if e.get("recovered")],
                    "at_x": at_x,
                    "outcome": outcome,
                    "rows": rows(spark),
                }
            )
        )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
