"""Subprocess side of the crash tests (test_crash.py). Not a test module itself.

    python tests/crash_driver.py HOME merge|verify
merge: create the table, then run the merge under test (a failpoint may stop it);
verify: recover, print the rows, run a following merge, print the rows again (JSON).
append: create the table with its change feed on, then run an insert-only merge under a run key;
verify_append: recover, print the rows, the history and the change feed, then run the same merge
under the same run key again and print the rows (JSON).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from merge_core import merge, recover
from merge_core.spark.session import get_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster import app_conf  # noqa: E402

TABLE = "crash.t"
MERGE = (
    f"MERGE INTO {TABLE} t USING (SELECT * FROM VALUES (1, 'u1', 1), (3, 'u3', 2), (5, 'n5', 3) AS x(id, v, p)) s "
    "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
)
FOLLOWING = f"UPDATE {TABLE} SET v = concat(v, '+') WHERE id = 2"
APPEND = (
    f"MERGE INTO {TABLE} t USING (SELECT * FROM VALUES (5, 'n5', 3), (6, 'n6', 1), (7, 'n7', NULL) AS x(id, v, p)) s "
    "ON 1 = 0 WHEN NOT MATCHED THEN INSERT *"
)
RUN_KEY = "job:1"


def create(spark, feed: bool) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS crash")
    props = " TBLPROPERTIES ('spark_merge.change_feed' = 'true')" if feed else ""
    spark.sql(f"CREATE TABLE {TABLE} (id INT, v STRING, p INT) USING parquet PARTITIONED BY (p){props}")
    spark.sql(f"INSERT INTO {TABLE} VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 2), (4, 'd', 2)")


def rows(spark):
    return sorted([list(r) for r in spark.sql(f"SELECT id, v, p FROM {TABLE}").collect()])


def main(home: str, mode: str) -> None:
    master = os.environ.get("SPARK_MASTER", "local[1]")
    spark = get_session(master=master, warehouse=home, conf={"spark.sql.shuffle.partitions": "1", **app_conf(master)})
    if mode == "merge":
        create(spark, bool(os.environ.get("SPARK_MERGE_TEST_FEED")))
        merge(spark, MERGE)
    elif mode == "append":
        create(spark, True)
        merge(spark, APPEND, run_key=RUN_KEY)
    elif mode == "verify_append":
        from merge_core import history, table_changes

        recovered = recover(spark, TABLE)
        first = rows(spark)
        entries = [[e["merge_id"], e.get("run_key"), bool(e.get("recovered"))] for e in history(spark, TABLE)]
        found = table_changes(spark, TABLE).select("id", "v", "p", "_change_type").collect()
        again = merge(spark, APPEND, run_key=RUN_KEY)
        print(
            json.dumps(
                {
                    "recovered": recovered,
                    "rows": first,
                    "history": entries,
                    "changes": sorted([list(r) for r in found], key=str),
                    "replayed": again.replayed,
                    "after_retry": rows(spark),
                }
            )
        )
    elif mode == "verify":
        recovered = recover(spark, TABLE)
        first = rows(spark)
        changes = None
        if os.environ.get("SPARK_MERGE_TEST_FEED"):
            from merge_core import table_changes

            found = table_changes(spark, TABLE).select("id", "v", "p", "_change_type").collect()
            changes = sorted([list(r) for r in found], key=str)
        merge(spark, FOLLOWING)
        print(json.dumps({"recovered": recovered, "rows": first, "after_next_merge": rows(spark), "changes": changes}))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
