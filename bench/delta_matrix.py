"""Delta Lake's own MERGE benchmark (delta-io/delta benchmarks: MergeTestCases, MergeDataLoad) with
spark-merge beside Delta copy-on-write, Delta with deletion vectors, Iceberg copy-on-write and Iceberg
merge-on-read, in one Spark session.

    make bench-matrix                                   # 2M rows in 40 files, medians of 3 (the docs' tables)
    make bench-matrix MATRIX_ARGS="--rows 500000 --repeat 1 --cases upsert"   # a quick look
    make bench-matrix MATRIX_ARGS="--peers delta,iceberg-mor"                 # some peers only
    make bench-matrix MATRIX_ARGS="--big --write-docs"   # three upsert cells at 100M rows (hours on 2 cores)
    make bench-matrix MATRIX_ARGS="--big --shapes flat --repeat 1 --write-docs"   # the unpartitioned target only

The target is a generated table shaped like TPC-DS `web_returns` (keyed by order number and item),
twice: unpartitioned, and partitioned by month (24 partitions). Each source is made as Delta's
MergeDataLoad makes it: the target's files sampled by a hash of their path (fileMatchedFraction),
from their rows a sample that matches (rowMatchedFraction) and a sample given keys that match
nothing (rowNotMatchedFraction). The 16 cases are Delta's (6 insert-only, 1 delete-only, 9 upsert),
with their statements. Every engine gets a fresh copy of the same target for every run (spark-merge:
the parquet files hard-linked into a new table; Delta: a shallow clone of one Delta table made from
the same files; Iceberg: one Iceberg table made from the same files, set back to its first snapshot),
runs the same statement, and the tables must hold the same rows afterwards. Per
engine and case: the median seconds, the Spark jobs, the target files its scans opened (their own
metrics, bench/tally.py: a scan that is not in the final plan, as a side adaptive execution dropped
or, it seems, Iceberg's runtime filter, is not counted, so compare an engine's counts with its own)
and the bytes its stages read and wrote (the first run's). `--write-docs` puts each target's table
into docs/performance.md between its markers (`--shapes monthly --write-docs` replaces the monthly
table only; with `--big`, the 100M tables').
Each spark-merge copy is removed after its run (at 100M rows a rewrite writes gigabytes); `--big` runs
no warm-up run (a merge there takes minutes, the warm-up seconds).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from peers import ICEBERG_MODES, JARS, iceberg_restored, iceberg_table, peer_conf
from pyspark.sql import functions as F
from report import Report
from tally import last_execution, scanned

from merge_core import merge
from merge_core.spark.session import get_session

PEERS = ("delta", "delta-dv", "iceberg-cow", "iceberg-mor")
NAMES = {
    "delta": "Delta copy-on-write",
    "delta-dv": "Delta deletion vectors",
    "iceberg-cow": "Iceberg copy-on-write",
    "iceberg-mor": "Iceberg merge-on-read",
}
SHORT = {"delta": "Delta CoW", "delta-dv": "Delta DV", "iceberg-cow": "Iceberg CoW", "iceberg-mor": "Iceberg MoR"}
KEYS = "t.wr_order_number = s.wr_order_number AND t.wr_item_sk = s.wr_item_sk"
# (kind, fileMatchedFraction, rowMatchedFraction, rowNotMatchedFraction): MergeTestCases.testCases
CASES = [
    ("single_insert_only", 0.05, 0, 0.05),
    ("single_insert_only", 0.05, 0, 0.5),
    ("single_insert_only", 0.05, 0, 1.0),
    ("multiple_insert_only", 0.05, 0, 0.05),
    ("multiple_insert_only", 0.05, 0, 0.5),
    ("multiple_insert_only", 0.05, 0, 1.0),
    ("delete_only", 0.05, 0.05, 0),
    ("upsert", 0.05, 0.1, 0.01),
    ("upsert", 0.05, 0.0, 0.1),
    ("upsert", 0.05, 0.01, 0.1),
    ("upsert", 0.05, 0.1, 0.0),
    ("upsert", 0.5, 0.01, 0.001),
    ("upsert", 1.0, 0.01, 0.001),
    ("upsert", 0.05, 0.5, 0.001),
    ("upsert", 0.05, 0.99, 0.001),
    ("upsert", 0.05, 1.0, 0.001),
]
# --big: the upsert cells touching 5%, half and all of the files, at 100M rows
BIG_CASES = [("upsert", 0.05, 0.01, 0.1), ("upsert", 0.5, 0.01, 0.001), ("upsert", 1.0, 0.01, 0.001)]
STATEMENTS = {
    "single_insert_only": f"MERGE INTO {{t}} t USING {{s}} s ON {KEYS} WHEN NOT MATCHED THEN INSERT *",
    "multiple_insert_only": f"MERGE INTO {{t}} t USING {{s}} s ON {KEYS} WHEN NOT MATCHED AND s.wr_item_sk % 2 = 0 "
    f"THEN INSERT * WHEN NOT MATCHED THEN INSERT *",
    "delete_only": f"MERGE INTO {{t}} t USING {{s}} s ON {KEYS} WHEN MATCHED THEN DELETE",
    "upsert": f"MERGE INTO {{t}} t USING {{s}} s ON {KEYS} WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
}
COLUMNS = """CAST(id % 2500 + 2450815 AS INT) AS wr_returned_date_sk, CAST(id % 86400 AS INT) AS wr_returned_time_sk,
  CAST(id % 18000 + 1 AS INT) AS wr_item_sk, CAST(id * 7 % 100000 AS INT) AS wr_refunded_customer_sk,
  CAST(id * 11 % 1920800 AS INT) AS wr_refunded_cdemo_sk, CAST(id % 7200 AS INT) AS wr_refunded_hdemo_sk,
  CAST(id % 50000 AS INT) AS wr_refunded_addr_sk, CAST(id * 13 % 100000 AS INT) AS wr_returning_customer_sk,
  CAST(id % 60 AS INT) AS wr_web_page_sk, CAST(id % 35 AS INT) AS wr_reason_sk,
  CAST(id DIV 3 AS BIGINT) AS wr_order_number, CAST(id % 100 AS INT) AS wr_return_quantity,
  CAST(id % 10000 / 7.0 AS DECIMAL(7,2)) AS wr_return_amt, CAST(id % 777 / 9.0 AS DECIMAL(7,2)) AS wr_return_tax,
  CAST(id % 12345 / 11.0 AS DECIMAL(7,2)) AS wr_fee, CAST(id % 3333 / 3.0 AS DECIMAL(7,2)) AS wr_net_loss,
  CAST(id % 24 AS INT) AS wr_month"""


def generate(spark, rows: int, files: int, where: Path, shapes: list[str], cases: list) -> dict[str, str]:
    """The target's files (unpartitioned, `files` of them; by month, about two files a month), and the
    source of each of `cases`; what the sources hold, by shape."""
    spark.sql(f"SELECT {COLUMNS} FROM range({rows})").repartition(files).write.parquet(str(where / "flat"))
    if "monthly" in shapes:
        by_month = spark.read.parquet(str(where / "flat")).repartition(
            48, "wr_month", (F.floor(F.col("wr_order_number") / 1000) % 2)
        )
        by_month.write.partitionBy("wr_month").parquet(str(where / "monthly"))
    sizes: dict[str, list[int]] = {shape: [] for shape in shapes}
    for _, files_f, matched_f, not_matched_f in {c[1:]: c for c in cases}.values():
        name = source_name(files_f, matched_f, not_matched_f)
        for shape in shapes:
            target = spark.read.parquet(str(where / shape))
            sampled = _sampled_files(target, files_f)
            matched = sampled.sample(fraction=matched_f, seed=1) if matched_f else sampled.limit(0)
            fresh = (
                sampled.sample(fraction=not_matched_f, seed=2).withColumn(
                    "wr_order_number", -1 - sampled.wr_order_number
                )
                if not_matched_f
                else sampled.limit(0)
            )
            matched.unionByName(fresh).write.parquet(str(where / f"{name}_{shape}"))
            spark.sql(f"CREATE TABLE bench.{name}_{shape} USING parquet LOCATION '{where / f'{name}_{shape}'}'")
            sizes[shape].append(spark.table(f"bench.{name}_{shape}").count())
    return {shape: f"{min(n):,} to {max(n):,} source rows" for shape, n in sizes.items()}


def _sampled_files(target, fraction: float):
    """The rows of a `fraction` of the target's files, chosen by a hash of their path as MergeDataLoad
    chooses them; with few files the hash may choose none, so the next seed is tried until it does."""
    for seed in range(100):
        h = "hash(_metadata.file_path)" if seed == 0 else f"hash(_metadata.file_path, {seed})"
        sampled = target.where(f"{h} * 0.5 / 2147483647 + 0.5 < {fraction}")
        if not sampled.isEmpty():
            return sampled
    raise SystemExit(f"no file of the target falls in a sample of {fraction}")


def source_name(files_f: float, matched_f: float, not_matched_f: float) -> str:
    return re.sub(r"[.]", "_", f"src_{files_f}_{matched_f}_{not_matched_f}")


def spark_merge_target(spark, where: Path, shape: str) -> tuple[str, Path]:
    """A parquet table over hard links of the target's files: a fresh copy in milliseconds; its name and
    directory."""
    copy = where / f"sm_{time.monotonic_ns()}"
    for f in (where / shape).rglob("*.parquet"):
        dest = copy / f.relative_to(where / shape)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.link(f, dest)
    spark.sql("DROP TABLE IF EXISTS bench.sm")
    part = "PARTITIONED BY (wr_month)" if shape == "monthly" else ""
    schema = spark.read.parquet(str(where / shape)).schema.simpleString()[7:-1].replace(":", " ")
    spark.sql(f"CREATE TABLE bench.sm ({schema}) USING parquet {part} LOCATION '{copy}'")
    if part:
        spark.sql("MSCK REPAIR TABLE bench.sm")
    return "bench.sm", copy


def delta_base(spark, where: Path, shape: str) -> None:
    for dv in (False, True):
        name = f"bench.base_{shape}_{'dv' if dv else 'cow'}"
        part = "PARTITIONED BY (wr_month)" if shape == "monthly" else ""
        props = f"TBLPROPERTIES ('delta.enableDeletionVectors' = '{str(dv).lower()}')"
        spark.sql(
            f"CREATE TABLE {name} USING delta {part} {props} LOCATION '{where / ('d_' + shape + str(dv))}' "
            f"AS SELECT * FROM parquet.`{where / shape}`"
        )


def iceberg_base(spark, where: Path, shape: str, peers: list[str]) -> dict[str, int]:
    """An Iceberg table per write mode among `peers`, made from the target's files; the snapshot each run
    starts from."""
    part = "wr_month" if shape == "monthly" else ""
    made = [e for e in ICEBERG_MODES if e in peers]
    return {e: iceberg_table(spark, iceberg_name(shape, e), str(where / shape), e, part) for e in made}


def iceberg_name(shape: str, engine: str) -> str:
    return f"ice.bench.base_{shape}_{engine.split('-')[1]}"


def delta_target(spark, shape: str, dv: bool) -> str:
    spark.sql("DROP TABLE IF EXISTS bench.d")
    spark.sql(f"CREATE TABLE bench.d SHALLOW CLONE bench.base_{shape}_{'dv' if dv else 'cow'}")
    return "bench.d"


def measured(spark, fn, source: str) -> tuple[float, int, int, int, int]:
    """fn()'s seconds, Spark jobs, the bytes its stages read and wrote (from Spark's REST API), and the
    target files its scans opened (the scans' own metrics, tally.scanned: every scan but the source's)."""
    import json
    import urllib.request

    since = last_execution(spark)
    sc = spark.sparkContext
    group = f"matrix_{time.monotonic_ns()}"
    sc.setJobGroup(group, "matrix")
    t0 = time.perf_counter()
    try:
        fn()
    finally:
        seconds = time.perf_counter() - t0
        sc.setLocalProperty("spark.jobGroup.id", None)
    jobs = sc.statusTracker().getJobIdsForGroup(group)
    api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"

    def get(path):
        with urllib.request.urlopen(f"{api}/{path}") as r:
            return json.loads(r.read())

    read = written = 0
    stages = {s for j in jobs for s in get(f"jobs/{j}")["stageIds"]}
    for stage in stages:
        for attempt in get(f"stages/{stage}"):
            read += attempt.get("inputBytes", 0)
            written += attempt.get("outputBytes", 0)
    opened = sum(r["files"] for table, r in scanned(spark, since)["read"].items() if table != f"spark_catalog.{source}")
    return seconds, len(jobs), read, written, opened


def checksum(spark, table: str) -> tuple:
    return tuple(spark.sql(f"SELECT count(*), sum(hash(*)) FROM {table}").first())


def run_case(spark, where: Path, shape: str, case: tuple, repeat: int, peers: list[str], snapshots: dict) -> dict:
    kind, files_f, matched_f, not_matched_f = case
    source = f"bench.{source_name(files_f, matched_f, not_matched_f)}_{shape}"
    out, sums = {}, set()
    for engine in ["spark-merge", *peers]:
        times, first = [], None
        for _ in range(repeat):
            if engine == "spark-merge":
                table, copy = spark_merge_target(spark, where, shape)
                run = lambda: merge(spark, STATEMENTS[kind].format(t=table, s=source))  # noqa: E731
            else:
                if engine.startswith("iceberg"):
                    table = iceberg_restored(spark, iceberg_name(shape, engine), snapshots[shape][engine])
                else:
                    table = delta_target(spark, shape, engine == "delta-dv")
                run = lambda: spark.sql(STATEMENTS[kind].format(t=table, s=source)).collect()  # noqa: E731
            result = measured(spark, run, source)
            times.append(result[0])
            first = first or result
            sums.add(checksum(spark, table))
            if engine == "spark-merge":  # its copy, old files and new: at 100M rows a rewrite is gigabytes
                shutil.rmtree(copy)
        out[engine] = (statistics.median(times), *first[1:])
    out["same"] = len(sums) == 1
    return out


def row(shape: str, case: tuple, r: dict, peers: list[str]) -> str:
    kind, f, m, n = case
    sm = r["spark-merge"][0]

    def cell(engine):
        s, jobs, read, written, opened = r[engine]
        return f"{s:.2f} ({jobs} jobs, {opened} files, {read / 1e6:.0f}/{written / 1e6:.0f} MB)"

    cells = [cell(e) for e in ["spark-merge", *peers]] + [f"**{r[e][0] / sm:.2f}x**" for e in peers]
    return f"| {kind} | {f} / {m} / {n} | {shape} | {' | '.join(cells)} | {'yes' if r['same'] else 'NO'} |"


def header(peers: list[str]) -> str:
    """The table's head: spark-merge and each peer's seconds, then each peer's time over spark-merge's."""
    names = [NAMES[p] for p in peers] + [f"{SHORT[p]} / spark-merge" for p in peers]
    columns = [
        "case",
        "files / matched / not matched",
        "target",
        "spark-merge s (jobs, target files opened, MB read/written)",
        *names,
        "same rows",
    ]
    return f"| {' | '.join(columns)} |\n|{'---|' * len(columns)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, help="target rows (default 2M; with --big, 100M)")
    ap.add_argument("--files", type=int, help="the unpartitioned target's files (default 40; with --big, 400)")
    ap.add_argument(
        "--big", action="store_true", help="three upsert cells (BIG_CASES) at 100M rows, into their own docs section"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="", help="only the cases whose kind contains this text")
    ap.add_argument("--shapes", default="flat,monthly")
    ap.add_argument("--peers", default=",".join(PEERS), help=f"the peers beside spark-merge, of {', '.join(PEERS)}")
    ap.add_argument("--write-docs", action="store_true", help="put the table into docs/performance.md")
    args = ap.parse_args()
    if not JARS:
        raise SystemExit("set PEER_JARS to the delta-spark, delta-storage and Iceberg jars (make bench-matrix does)")
    args.rows = args.rows or (100_000_000 if args.big else 2_000_000)
    args.files = args.files or (400 if args.big else 40)
    peers = [p for p in args.peers.split(",") if p]
    if set(peers) - set(PEERS):
        raise SystemExit(f"--peers: unknown {sorted(set(peers) - set(PEERS))}; the peers are {', '.join(PEERS)}")
    import pyspark

    home = Path(tempfile.mkdtemp(prefix="sm_matrix_"))
    spark = get_session(
        warehouse=str(home),
        conf={
            "spark.sql.shuffle.partitions": "8",
            "spark.driver.memory": "8g",
            "spark.ui.showConsoleProgress": "false",
            "spark.ui.enabled": "true",
            "spark.ui.retainedJobs": "100000",
            "spark.ui.retainedStages": "100000",
            "spark.jars": JARS,
            **peer_conf(home),
        },
    )
    spark.sql("CREATE DATABASE IF NOT EXISTS bench")
    shapes = args.shapes.split(",")
    tables: dict[str, list[str]] = {}
    try:
        data = home / "data"
        cases = [c for c in (BIG_CASES if args.big else CASES) if args.cases in c[0]]
        sources = generate(spark, args.rows, args.files, data, shapes, cases)
        snapshots = {}
        for shape in shapes:
            delta_base(spark, data, shape)
            snapshots[shape] = iceberg_base(spark, data, shape, peers)
        if not args.big:  # warm up every engine (JIT) first; at 100M rows a merge takes minutes, a warm-up seconds
            run_case(spark, data, shapes[0], cases[0], 1, peers, snapshots)
        for shape in shapes:
            n_files = len(list((data / shape).rglob("*.parquet")))
            target = "unpartitioned" if shape == "flat" else "partitioned by month (24 partitions)"
            tables[shape] = [
                f"Spark {pyspark.__version__}; the target {target}, {args.rows:,} rows in {n_files} files; "
                f"{sources[shape]}; Delta Lake's MergeTestCases; medians of {args.repeat}, seconds, side by side "
                f"in one run{'' if not args.big else ', no warm-up run'}; jobs, target files opened (a file once per scan that "
                "opens it) and MB read/written from the first run.",
                "",
                header(peers),
            ]
            print("\n".join(tables[shape]), flush=True)
            for case in cases:
                result = run_case(spark, data, shape, case, args.repeat, peers, snapshots)
                tables[shape].append(row(shape, case, result, peers))
                print(tables[shape][-1], flush=True)
    finally:
        spark.stop()
        shutil.rmtree(home, ignore_errors=True)
    if args.write_docs:
        for shape, lines in tables.items():
            report = Report(f"delta-matrix-{'big-' if args.big else ''}{shape}")
            report.lines = lines
            report.write()


if __name__ == "__main__":
    main()
