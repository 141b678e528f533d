"""Spark jobs, SQL statements, metastore statements and files read per merge: counted, not timed.

    .venv/bin/python bench/counts.py                 # N=200k rows over 100 days, M=20k
    .venv/bin/python bench/counts.py --rows 1000000 --changes 100000
    .venv/bin/python bench/counts.py --by-statement   # and which statement ran how many jobs

How they are counted: tally.py.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from merge_cost import fresh_target, generate, scenarios  # noqa: E402
from tally import count  # noqa: E402

from merge_core import merge  # noqa: E402
from merge_core.spark.session import get_session  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--changes", type=int, default=20_000)
    ap.add_argument("--by-statement", action="store_true", help="under the table, the Spark jobs of each statement")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="sm_counts_"))
    spark = get_session(
        warehouse=str(home), conf={"spark.sql.shuffle.partitions": "8", "spark.ui.showConsoleProgress": "false"}
    )
    spark.sql("CREATE DATABASE IF NOT EXISTS bench")
    try:
        data = home / "data"
        generate(spark, args.rows, args.changes, data)
        print(f"\nN={args.rows:,} target rows, M={args.changes:,} source rows\n")
        print(
            "| scenario | partitions rewritten | Spark jobs | SQL statements | data statements | metastore statements "
            "| file statistics (catalog reads) | target files read (MB) | files written (MB) |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        breakdown = []
        for kind, sql in scenarios("bench.t").items():
            fresh_target(spark, data)
            c = count(spark, lambda: merge(spark, sql))
            target = c["scanned"]["read"].get("spark_catalog.bench.t", {"files": 0, "bytes": 0})
            written = c["scanned"]["written"]
            print(
                f"| {kind} | {len(c['result'].partitions)} | {c['jobs']} | {c['statements']} | "
                f"{c['data statements']} | {c['metastore statements']} | {c['file statistics']} ({c['catalog reads']}) | "
                f"{target['files']} ({target['bytes'] / 1e6:.1f}) | {written['files']} ({written['bytes'] / 1e6:.1f}) |",
                flush=True,
            )
            breakdown += [f"\n{kind}:"] + [
                f"  {jobs:3d} job(s)  {what}: {text[:100]}" for what, text, jobs in c["jobs by statement"]
            ]
        if args.by_statement:
            print("\n".join(breakdown))
    finally:
        spark.stop()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
