"""Subprocess side of the PostgreSQL kill test (test_postgres.py). Not a test module itself.

    python tests/pg_crash_driver.py HOME JDBC_URL SCHEMA.TABLE
Runs a MERGE into the PostgreSQL table; a failpoint (SPARK_MERGE_FAULT) stops it for the SIGKILL.
"""

from __future__ import annotations

import sys
from pathlib import Path

from merge_core import merge
from merge_core.spark.session import get_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster import FAST_CONF  # noqa: E402


def main(home: str, url: str, table: str) -> None:
    spark = get_session(master="local[1]", warehouse=home, conf={"spark.sql.shuffle.partitions": "1", **FAST_CONF})
    merge(
        spark,
        f"MERGE INTO {table} t USING (SELECT * FROM VALUES (1, 'x'), (5, 'new') AS s(id, name)) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET note = s.name "
        "WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name)",
        jdbc_url=url,
    )
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
