"""The command line against a warm `spark-merge server`, end to end: the wall time of a `spark-merge run`
process merging 20 rows into a 1M-row table, through the server's merge service (what `run` does when a
server is up) and over Spark Connect (`run --remote`, what every command did before), side by side on
the same server; with the cost of starting the command line at all (`spark-merge server status`).

    make bench-cli                      # --write-docs puts the table into docs/performance.md
    .venv/bin/python bench/warm_cli.py --rows 200000 --repeat 1

Two targets: partitioned by day (100 days; the 20 rows are in the newest) and unpartitioned (written by
two tasks: two files of half the rows each, one of which the merge rewrites). Each timing is the median
of --repeat runs after the server's own warm-up has ended and --warm untimed runs of each kind (a new
server's JVM compiles the merge's code over its first merges).
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import Report

from merge_core.spark import server
from merge_core.spark.session import get_session


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed_cli(*args: str) -> float:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "merge_core", *args, "-q"], capture_output=True, text=True)
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"spark-merge {' '.join(args)} failed: {done.stderr[-2000:]}")
    return seconds


def make_tables(url: str, rows: int) -> None:
    spark = get_session(remote=url)
    spark.sql("CREATE DATABASE IF NOT EXISTS bench")
    columns = (
        f"id, date_add(DATE'2026-01-01', CAST(id * 100 DIV {rows} AS INT)) AS dt, concat('cust', id % 10007) AS "
        f"customer, CAST(id % 1000 AS DOUBLE) AS amount, 'new' AS status FROM range({rows})"
    )
    spark.sql(f"CREATE TABLE bench.daily USING parquet PARTITIONED BY (dt) AS SELECT {columns}")
    spark.sql(f"CREATE TABLE bench.flat USING parquet AS SELECT /*+ REPARTITION(2) */ {columns}")
    spark.stop()


def wait_for_warm_up(home: Path, timeout: float = 300) -> None:
    """Until the server's own warm-up (merge_service.warm_up) has logged its end: its merges would
    otherwise run beside the timed ones."""
    log, deadline = home / "connect-logs" / "server.log", time.monotonic() + timeout
    while not re.search(r"warm-up: \d+ merges in", text := log.read_text()):
        if time.monotonic() > deadline or "warm-up did not finish" in text:
            raise SystemExit(f"the server's warm-up did not end within {timeout:.0f} s; see {log}")
        time.sleep(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warm", type=int, default=5, help="untimed rounds first")
    ap.add_argument(
        "--server-warm-up", type=int, default=server.WARM_UP_MERGES, help="the server's own warm-up merges (0: none)"
    )
    ap.add_argument("--write-docs", action="store_true", help="put the table into docs/performance.md")
    args = ap.parse_args()
    out = Report("warm-cli")
    home = Path(tempfile.mkdtemp(prefix="sm_bench_cli_"))
    w, port = str(home), free_port()
    url = server.start(w, port, merges_port=free_port(), warm_up=args.server_warm_up)
    try:
        make_tables(url, args.rows)
        if args.server_warm_up:
            wait_for_warm_up(home)
        out(
            f"\n`spark-merge run` of a 20-row MERGE into {args.rows:,} rows against a warm `spark-merge server`, "
            f"end to end (the command's wall time), medians of {args.repeat} after the server's warm-up and "
            f"{args.warm} untimed rounds, seconds, side by side in one run\n"
        )
        out(
            "| target | through the merge service (`run`) | over Spark Connect (`run --remote`) | "
            "Connect / merge service | starting the command line (`server status`) |"
        )
        out("|---|---|---|---|---|")
        for table, label in (
            ("bench.daily", "partitioned by day (100 partitions)"),
            ("bench.flat", "unpartitioned (2 files)"),
        ):
            sql = (
                f"MERGE INTO {table} t USING (SELECT id, 'changed' AS status FROM range({args.rows - 20}, {args.rows})) s "
                "ON t.id = s.id WHEN MATCHED THEN UPDATE SET status = s.status"
            )
            service, connect, start = [], [], []
            for n in range(args.warm + args.repeat):
                a = timed_cli("run", "--warehouse", w, "--sql", sql)
                b = timed_cli("run", "--remote", url, "--sql", sql)
                c = timed_cli("server", "status", "--warehouse", w)
                if n >= args.warm:
                    service.append(a), connect.append(b), start.append(c)
            s, c, o = (statistics.median(x) for x in (service, connect, start))
            out(f"| {label} | {s:.2f} | {c:.2f} | **{c / s:.1f}x** | {o:.2f} |")
    finally:
        server.stop(w)
        shutil.rmtree(home, ignore_errors=True)
    if args.write_docs:
        out.write()


if __name__ == "__main__":
    main()
