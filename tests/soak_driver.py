"""Subprocess side of the kill soak (test_soak.py). Not a test module itself.

python tests/soak_driver.py HOME run KIND     set the table up, then run the operation KIND
python tests/soak_driver.py HOME verify KIND  recover in a new process and print the rows (JSON)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from merge_core import compact, merge, recover, rollback
from merge_core.spark.session import get_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster import app_conf  # noqa: E402

T, M = "soak.t", "soak.m"
SOURCE = "SELECT * FROM VALUES {} AS s(id, v, w, p)"
OPERATIONS = {  # kind -> what the run does (after the set-up)
    "merge": lambda spark, home: merge(
        spark,
        f"MERGE INTO {T} t USING ({SOURCE.format(MERGE_ROWS)}) s ON t.id = s.id "
        f"WHEN MATCHED THEN UPDATE SET v = s.v, w = s.w WHEN NOT MATCHED THEN INSERT *",
    ),
    "update": lambda spark, home: merge(spark, f"UPDATE {T} SET v = 'u' WHERE p = 1"),
    "move": lambda spark, home: merge(spark, f"UPDATE {T} SET p = 2 WHERE id < 6"),
    "delete": lambda spark, home: merge(spark, f"DELETE FROM {T} WHERE p = 2 AND id > 10"),
    "insert": lambda spark, home: merge(
        spark, f"MERGE INTO {T} t USING ({SOURCE.format(INSERT_ROWS)}) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"
    ),
    "upsert": lambda spark, home: merge(
        spark, {"target": T, "source": SOURCE.format(UPSERT_ROWS)}, primary_key="id", watermark_key="w"
    ),
    "rollback": lambda spark, home: rollback(spark, T, (Path(home) / "a.id").read_text()),
    "compact": lambda spark, home: compact(spark, M),
}
MERGE_ROWS = "(0, 'm', 2, 0), (4, 'm', 2, 1), (40, 'n', 1, 1)"
INSERT_ROWS = ", ".join(f"({i}, 'i', 1, {i % 3})" for i in range(50, 56))
UPSERT_ROWS = "(1, 'x', 5, 1), (60, 'y', 1, 0), (2, 'stale', 0, 2)"


def setup(spark, home: str, kind: str) -> None:
    spark.sql("CREATE DATABASE soak")
    if kind == "compact":
        spark.sql(f"CREATE TABLE {M} (id INT, v STRING, w BIGINT, p INT) USING parquet PARTITIONED BY (p)")
        for v, w, n in (("a", 1, 10), ("b", 2, 5)):
            rows = ", ".join(f"({i}, '{v}', {w}, {i % 3})" for i in range(n))
            merge(
                spark,
                {"target": M, "source": SOURCE.format(rows)},
                primary_key="id",
                watermark_key="w",
                upsert_mode="merge-on-read",
            )
        return
    spark.sql(f"CREATE TABLE {T} (id INT, v STRING, w BIGINT, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {T} SELECT CAST(id AS INT), 'o', CAST(1 AS BIGINT), CAST(id % 3 AS INT) FROM range(0, 30)")
    if kind == "rollback":
        (Path(home) / "a.id").write_text(merge(spark, f"UPDATE {T} SET v = 'a' WHERE p = 0").merge_id)


def main(home: str, mode: str, kind: str) -> None:
    spark = get_session(
        master="local[1]", warehouse=home, conf={"spark.sql.shuffle.partitions": "1", **app_conf("local[1]")}
    )
    if mode == "run":
        setup(spark, home, kind)
        # arm the failpoint's mark only now: the set-up's own merges pass the same boundaries
        os.environ["SPARK_MERGE_FAULT_MARK"] = os.environ.pop("SOAK_PHASE")
        (Path(home) / "ready").write_text("ready")  # the operation starts now
        OPERATIONS[kind](spark, home)
        (Path(home) / "done").write_text("done")
    else:
        table = f"{M}__sm_log" if kind == "compact" else T
        try:
            recover(spark, table)
        except Exception as e:  # noqa: BLE001 - the soak counts it
            print("RESULT " + json.dumps({"recovery_failed": f"{type(e).__name__}: {e}"}))
            return
        rows = sorted(list(r) for r in spark.sql(f"SELECT id, v, w, p FROM {table}").collect())
        print("RESULT " + json.dumps({"rows": rows}))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
