"""What recording the change feed costs a merge: the CDC merges of merge_cost.py with the table's
property spark_merge.change_feed off and on, side by side in one run.

    .venv/bin/python bench/change_feed.py [--rows 5000000] [--changes 500000] [--repeat 3] [--write-docs]

Each run merges into a fresh copy of the same target (merge_cost.generate's: N rows over 100 days, a
CDC source of M rows: updates, deletes and inserts in the newest days); the two settings alternate, so
both see the machine alike. Reported: the median seconds of each and their ratio, and a check that
the feed holds one row per inserted and deleted row and two per updated one.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from merge_cost import fresh_target, generate, scenarios
from report import Report

from merge_core import merge, table_changes
from merge_core.spark.session import get_session


def run(spark, where: Path, sql_of, feed: bool) -> tuple[float, dict, int]:
    table = fresh_target(spark, where, link=True)
    if feed:
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('spark_merge.change_feed' = 'true')")
    t0 = time.monotonic()
    result = merge(spark, sql_of(table))
    seconds = time.monotonic() - t0
    rows = table_changes(spark, table).count() if feed else 0
    return seconds, result.metrics, rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--changes", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="sm-bench-feed-"))
    spark = get_session(warehouse=str(home / "warehouse"))
    spark.sql("CREATE DATABASE IF NOT EXISTS bench")
    generate(spark, args.rows, args.changes, home)
    out = Report("change-feed")
    out(f"CDC merges of {args.changes:,} source rows into {args.rows:,} rows (merge_cost.py's workload), "
        f"median of {args.repeat} runs each, the two settings alternating:")  # fmt: skip
    out()
    out("| merge | feed off (s) | feed on (s) | on / off | change rows |")
    out("|---|---|---|---|---|")
    for name in ("cdc, ON id", "cdc, ON id AND dt"):
        times: dict[bool, list[float]] = {False: [], True: []}
        rows = 0
        for _ in range(args.repeat):
            for feed in (False, True):
                seconds, metrics, found = run(spark, home, lambda t, n=name: scenarios(t)[n], feed)
                times[feed].append(seconds)
                if feed:
                    expected = (metrics["numTargetRowsInserted"] + metrics["numTargetRowsDeleted"]
                                + 2 * metrics["numTargetRowsUpdated"])  # fmt: skip
                    assert found == expected, f"{name}: {found} change rows, {expected} expected"
                    rows = found
        off, on = statistics.median(times[False]), statistics.median(times[True])
        out(f"| {name} | {off:.2f} | {on:.2f} | {on / off:.2f}x | {rows:,} |")
    if args.write_docs:
        out.write()


if __name__ == "__main__":
    main()
