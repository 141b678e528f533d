"""spark-merge against Delta Lake's own MERGE, in one Spark session, on the same rows.

    make bench-delta                       # N=5M and 20M, M=500k, medians of 3
    make bench-delta DELTA_ARGS="--rows 1000000 --repeat 1"
    make bench-delta DELTA_ARGS="--big --write-docs"   # N=5M and 100M: spark-merge and Delta only
    make bench-delta DELTA_ARGS="--rows none --write-docs"   # the small merge only (its own table)

The peer a Spark user would pick instead of spark-merge is Delta Lake's (or Iceberg's) MERGE on the
same Spark. Both run on the Spark they are built for, 4.1 (bench/peers.py says why); spark-merge runs
unchanged there.

Workload and data: bench/merge_cost.py's (a target of N rows partitioned by day, a CDC source of M
rows). Each run gets a fresh copy: a parquet table for spark-merge; for Delta a Delta table made by
CTAS from the same files (not timed), partitioned by dt, copy-on-write (no deletion vectors: Delta's
default for a new table); for Iceberg one table per write mode (copy-on-write, and merge-on-read in
format 3) made by CTAS from the same files, partitioned by dt, set back to the snapshot its CTAS made
before each run. The same MERGE statement runs on all of them. Jobs: the Spark jobs each MERGE ran
(job group + statusTracker), counted in the first run. The data floor (merge_cost.py's: the touched
partitions and the source read, their union written, no join) is measured in the same session, so
both engines' distance from it is side by side too.

Then the small merge of merge_cost.py (1,000 updates into 1M rows, warm) beside Delta's MERGE of the
same statement, the least a crash-safe merge of those rows costs on Spark (fused_prototype.py's
small_floor: the source's key range, a verdict query, one write, the prototypes' commit), the same
with the one-pass plan's verdict from the source and candidates from the footers (small_one_pass: no
verdict query over the target) and Spark's INSERT INTO of the same rows (`--no-small` skips it; its
table has a section of its own in the docs, so `--rows none --write-docs` writes it alone).

`--big` shows that cost follows the change, not the table: the same CDC merge at N=5M and N=100M
(the same M-row source; the 5 days it touches hold N/20 rows), spark-merge and Delta only, the
naive full rewrite estimated from the data floor (the data floor reads and writes the touched
partitions; the naive rewrite reads and writes them all: the data floor's time scaled by the table's
bytes over the touched bytes). At that size each run's target is hard links to the pristine files,
and Delta's is restored to its first version (RESTORE TABLE) instead of created again.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from fused_prototype import fused_cdc, one_pass_cdc, small_floor, small_one_pass
from merge_cost import (
    SMALL_INSERT,
    SMALL_MERGE,
    checksum,
    data_floor,
    fresh_target,
    generate,
    scenarios,
    small_workload,
    timed,
)
from peers import ICEBERG_MODES, JARS, iceberg_restored, iceberg_table, peer_conf
from report import Report

from merge_core import merge
from merge_core.spark.session import get_session


def delta_target(spark, where: Path) -> str:
    spark.sql("DROP TABLE IF EXISTS bench.d")
    spark.sql(
        f"CREATE TABLE bench.d USING delta PARTITIONED BY (dt) LOCATION '{where / f'delta_{time.monotonic_ns()}'}' "
        f"AS SELECT * FROM parquet.`{where / 'target'}`"
    )
    return "bench.d"


def restored_delta(spark) -> str:
    """bench.d back at the version its CTAS made (a metadata commit: no file is written)."""
    spark.sql("RESTORE TABLE bench.d TO VERSION AS OF 0").collect()
    return "bench.d"


def jobs_of(spark, fn) -> tuple[float, int]:
    sc = spark.sparkContext
    group = f"bench_{time.monotonic_ns()}"
    sc.setJobGroup(group, "bench")
    try:
        seconds = timed(fn)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return seconds, len(sc.statusTracker().getJobIdsForGroup(group))


def one_round(spark, where: Path, kind: str, r: dict, big: bool = False, iceberg: dict | None = None) -> list[str]:
    """One side-by-side round of ``kind``: spark-merge, the data floor and Delta copy-on-write, each on
    a fresh target, their seconds appended to ``r['sm']``, ``r['floor']``, ``r['delta']`` and the
    first run's jobs kept in ``r['jobs']``, each table's checksum added to ``r['sums']``; the days the
    merge touched. ``big``: the targets are hard links, Delta's is restored rather than created.
    ``iceberg``: each Iceberg mode's table and first snapshot, merged into too (``r[mode]``)."""
    table = fresh_target(spark, where, link=big)
    done = []
    s, j = jobs_of(spark, lambda: done.append(merge(spark, scenarios(table)[kind])))
    r["sm"].append(s)
    r["jobs"].setdefault("sm", j)
    r["sums"].add(checksum(spark, table))
    days = sorted({p["dt"] for p in done[0].partitions})
    table = fresh_target(spark, where, link=big)
    r["floor"].append(timed(lambda: data_floor(spark, table, days, kind)))
    table = restored_delta(spark) if big else delta_target(spark, where)
    s, j = jobs_of(spark, lambda: spark.sql(scenarios(table)[kind]).collect())
    r["delta"].append(s)
    r["jobs"].setdefault("delta", j)
    r["sums"].add(checksum(spark, table))
    for engine, (name, snapshot) in (iceberg or {}).items():
        table = iceberg_restored(spark, name, snapshot)
        s, j = jobs_of(spark, lambda: spark.sql(scenarios(table)[kind]).collect())
        r[engine].append(s)
        r["jobs"].setdefault(engine, j)
        r["sums"].add(checksum(spark, table))
    return days


def rounds() -> dict:
    return {"sm": [], "delta": [], "floor": [], "fused": [], "one": [], "sums": set(), "jobs": {}} | {
        engine: [] for engine in ICEBERG_MODES
    }


def compare(spark, where: Path, repeat: int, kinds: list[str], iceberg: dict, out=print) -> None:
    for kind in kinds:
        r = rounds()
        for _ in range(repeat):
            one_round(spark, where, kind, r, iceberg=iceberg)
            if kind.startswith("cdc"):  # the fused plan (two passes) and the one-pass plan, prototyped
                for key, plan in (("fused", fused_cdc), ("one", one_pass_cdc)):
                    table = fresh_target(spark, where)
                    s, j = jobs_of(spark, lambda plan=plan, table=table: plan(spark, table, kind.endswith("dt"), where))
                    r[key].append(s)
                    r["jobs"].setdefault(key, j)
                    r["sums"].add(checksum(spark, table))
        a, b, f = (statistics.median(r[k]) for k in ("sm", "delta", "floor"))
        c = "".join(
            f"{statistics.median(r[k]):.2f} ({r['jobs'][k]} jobs) | **{b / statistics.median(r[k]):.2f}x** | "
            if r[k]
            else "- | - | "
            for k in ("fused", "one")
        )
        ice = "".join(
            f"{statistics.median(r[e]):.2f} ({r['jobs'][e]} jobs) | **{statistics.median(r[e]) / a:.2f}x** | "
            for e in ICEBERG_MODES
        )
        out(
            f"| {kind} | {a:.2f} ({r['jobs']['sm']} jobs) | {b:.2f} ({r['jobs']['delta']} jobs) | **{b / a:.2f}x** | "
            f"{ice}{c}{f:.2f} | {a / f:.2f} | {b / f:.2f} | {'yes' if len(r['sums']) == 1 else 'NO'} |"
        )


def megabytes(directory: Path, days: list[str] | None = None) -> float:
    """The data files' bytes under ``directory`` (only the partitions of ``days``, when given)."""
    dirs = [directory / f"dt={d}" for d in days] if days is not None else [directory]
    return sum(f.stat().st_size for d in dirs for f in d.rglob("*.parquet")) / 1e6


def big(spark, where: Path, n: int, repeat: int, kinds: list[str], out=print) -> None:
    """One row per scenario at N=n: spark-merge and Delta copy-on-write, the data floor, the naive
    rewrite estimated from it. Both engines merge once first, untimed (JIT compilation)."""
    merge(spark, scenarios(fresh_target(spark, where, link=True))["cdc, ON id"])
    spark.sql(scenarios(delta_target(spark, where))["cdc, ON id"]).collect()
    for kind in kinds:
        r = rounds()
        for _ in range(repeat):
            days = one_round(spark, where, kind, r, big=True)
        a, b, f = (statistics.median(r[k]) for k in ("sm", "delta", "floor"))
        total, touched = megabytes(where / "target"), megabytes(where / "target", days)
        naive = f * total / touched
        out(
            f"| {n:,} | {kind} | {total:,.0f} | {touched:,.1f} | {a:.2f} ({r['jobs']['sm']} jobs) | "
            f"{b:.2f} ({r['jobs']['delta']} jobs) | **{b / a:.2f}x** | {f:.2f} | {naive:,.0f} | "
            f"**{naive / a:,.0f}x** | {'yes' if len(r['sums']) == 1 else 'NO'} |"
        )


def small(spark, home: Path, repeat: int, out=print) -> None:
    """merge_cost.py's small merge (1,000 updates into 1M rows, warm) beside Delta copy-on-write's
    MERGE of the same statement (its table restored to its first version before each run), the least
    a crash-safe merge of those rows costs (fused_prototype.small_floor, and its commit alone), the
    same with the one-pass plan (fused_prototype.small_one_pass) and Spark's INSERT INTO of the same
    rows; five untimed rounds first (JIT compilation)."""
    data = small_workload(spark, home)
    delta_target(spark, data)
    sums: set = set()
    runs: dict[str, list[float]] = {
        k: [] for k in ("sm", "delta", "least", "least_commit", "one", "one_commit", "insert")
    }

    def prototype(plan) -> tuple[float, float]:
        """One run of a fused_prototype plan on a fresh target: its seconds, and its commit's."""
        table = fresh_target(spark, data)
        started = time.monotonic()
        commit_s = plan(spark, table, home)
        seconds = time.monotonic() - started
        sums.add(checksum(spark, table))
        return seconds, commit_s

    for n in range(repeat + 5):
        table = fresh_target(spark, data)
        seconds = timed(lambda: merge(spark, SMALL_MERGE.format(t=table)))
        sums.add(checksum(spark, table))
        restored_delta(spark)
        delta_s = timed(lambda: spark.sql(SMALL_MERGE.format(t="bench.d")).collect())
        sums.add(checksum(spark, "bench.d"))
        least = prototype(small_floor)
        one = prototype(small_one_pass)
        table = fresh_target(spark, data)
        appended = timed(lambda: spark.sql(SMALL_INSERT.format(t=table)))
        if n >= 5:
            for k, v in zip(runs, (seconds, delta_s, *least, *one, appended), strict=True):
                runs[k].append(v)
    a, b, f, c, o, oc, i = (statistics.median(v) for v in runs.values())
    out(
        f"\nSmall merge: 1,000 source rows (updates, one partition) into 1,000,000 rows, warm session, medians of "
        f"{repeat} (seconds)\n"
    )
    out(
        "| spark-merge | Delta copy-on-write | Delta / spark-merge | least crash-safe merge (its commit) | "
        "spark-merge / least | one-pass plan (its commit) | spark-merge / one-pass | Spark INSERT INTO (same rows) | "
        "same rows |"
    )
    out("|---|---|---|---|---|---|---|---|---|")
    out(
        f"| {a:.2f} | {b:.2f} | **{b / a:.2f}x** | {f:.2f} ({c:.2f}) | {a / f:.1f}x | {o:.2f} ({oc:.2f}) | "
        f"{a / o:.1f}x | {i:.2f} | "
        f"{'yes' if len(sums) == 1 else 'NO'} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--rows", help="N values, target rows (default 5M and 20M; with --big, 5M and 100M); none: the small merge only"
    )
    ap.add_argument("--changes", type=int, default=500_000, help="M, source rows")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scenarios", default="cdc, ON id;cdc, ON id AND dt", help="';'-separated, of merge_cost.py's")
    ap.add_argument("--big", action="store_true", help="N=5M and 100M, spark-merge and Delta only (20 minutes here)")
    ap.add_argument("--no-small", action="store_true", help="skip the small merge beside Delta's")
    ap.add_argument("--write-docs", action="store_true", help="put the table into docs/performance.md")
    args = ap.parse_args()
    out, small_out = Report("delta-big" if args.big else "delta-cdc"), Report("delta-small")
    if not JARS:
        raise SystemExit("set PEER_JARS to the delta-spark, delta-storage and Iceberg jars (make bench-delta does)")
    import pyspark

    home = Path(tempfile.mkdtemp(prefix="sm_bench_delta_"))
    spark = get_session(
        warehouse=str(home),
        conf={
            "spark.sql.shuffle.partitions": "8",
            "spark.driver.memory": "6g",
            "spark.ui.showConsoleProgress": "false",
            **peer_conf(home),
        },
    )
    spark.sql("CREATE DATABASE IF NOT EXISTS bench")
    try:
        if args.big:
            out(
                f"\nSpark {pyspark.__version__}, the CDC merge (M={args.changes:,} source rows) at two target sizes, "
                f"medians of {args.repeat}, seconds, side by side in one run; the naive full rewrite estimated from "
                "the data floor\n"
            )
            out(
                "| N | scenario | table MB | touched MB | spark-merge | Delta copy-on-write | Delta / spark-merge | "
                "data floor | naive rewrite (estimated) | naive / spark-merge | same rows |"
            )
            out("|---|---|---|---|---|---|---|---|---|---|---|")
            for n in [int(x) for x in (args.rows or "5000000,100000000").split(",")]:
                data = home / f"n{n}"
                generate(spark, n, args.changes, data)
                big(spark, data, n, args.repeat, args.scenarios.split(";"), out)
                shutil.rmtree(data, ignore_errors=True)
        for n in (
            [] if args.big or args.rows == "none" else [int(x) for x in (args.rows or "5000000,20000000").split(",")]
        ):
            data = home / f"n{n}"
            generate(spark, n, args.changes, data)
            fresh_target(spark, data)  # warm up both (JIT compilation) before anything is timed
            merge(spark, scenarios("bench.t")["cdc, ON id"])
            spark.sql(scenarios(delta_target(spark, data))["cdc, ON id"]).collect()
            iceberg = {}
            for engine in ICEBERG_MODES:
                name = f"ice.bench.cdc_{engine.split('-')[1]}_{n}"
                iceberg[engine] = (name, iceberg_table(spark, name, str(data / "target"), engine, "dt"))
                spark.sql(scenarios(name)["cdc, ON id"]).collect()
            fused_cdc(spark, fresh_target(spark, data), False, data)
            one_pass_cdc(spark, fresh_target(spark, data), False, data)
            out(
                f"\nSpark {pyspark.__version__}, N={n:,} target rows, M={args.changes:,} source rows, medians of "
                f"{args.repeat} (seconds; side by side in this run)\n"
            )
            out(
                "| scenario | spark-merge | Delta Lake MERGE | Delta / spark-merge | Iceberg copy-on-write | "
                "Iceberg CoW / spark-merge | Iceberg merge-on-read | Iceberg MoR / spark-merge | two-pass prototype | "
                "Delta / two-pass | one-pass prototype | Delta / one-pass | data floor | spark-merge / data floor | "
                "Delta / data floor | same rows |"
            )
            out("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            compare(spark, data, args.repeat, args.scenarios.split(";"), iceberg, out)
        if not args.big and not args.no_small:
            small(spark, home, args.repeat, small_out)
    finally:
        spark.stop()
        shutil.rmtree(home, ignore_errors=True)
    if args.write_docs:
        for report in (out, small_out):
            if report.lines:  # --rows none writes the small merge's table only; --no-small, the others only
                report.write()


if __name__ == "__main__":
    main()
