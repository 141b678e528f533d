"""A table after many merges: 100 CDC merges in a row, and every 10 of them what a reader pays.

    make bench-aging                                        # 1M rows, 100 merges, both layouts
    make bench-aging AGING_ARGS="--rows 200000 --merges 20 --every 5"
    make bench-aging AGING_ARGS="--write-docs"

File-granular copy-on-write carries the files a merge does not change and writes new ones for what it
does: a partition that takes many small merges gathers small files, and a full scan slows with their
number. Side by side, on the same rows and the same merges (bench/merge_cost.py's target, daily or
unpartitioned; each merge's CDC source updates and deletes rows of the newest 5 days and inserts rows
over the newest 30):

- spark-merge with auto compaction (the table property spark_merge.auto_compact.min_files = 8);
- spark-merge without it (every file carried until a merge changes it);
- Delta Lake with auto compaction on (delta.autoOptimize.autoCompact, as its users run it), copy-on-write;
- a fresh copy: the same rows written once by Spark, as the bench's target was (the floor a reader can hope for).

Every ``--every`` merges each table gets: its data files (in all, and in its fullest partition), their
bytes, a full scan's time (every column of every row: count and hash) and a point lookup's time (one id,
not a partition column), medians of 3 warm runs; and the seconds its last ``--every`` merges took. The
rows of all of them are checked to be the same. Runs on Delta's Spark, as bench-delta does.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from merge_cost import COLUMNS, INSERT, SCHEMA, UPDATE_SET, checksum, generate, timed
from peers import peer_conf
from report import Report

from merge_core import merge
from merge_core.spark.session import get_session

POLICY = 8  # spark_merge.auto_compact.min_files of the compacting table
ENGINES = ("sm", "sm_plain", "delta", "fresh")
TITLES = {
    "sm": f"spark-merge, auto compaction ({POLICY})",
    "sm_plain": "spark-merge, no policy",
    "delta": "Delta, auto compaction",
    "fresh": "fresh copy",
}


def source_view(spark, rows: int, changes: int, k: int) -> None:
    """Merge k's CDC source, the view aging_src: distinct existing ids of the newest 5 days (a tenth
    of them deleted), and new ids over the newest 30 days (late data: most of those days take inserts
    only, which is what fills a partition with small files); its values depend on k only, so every
    engine merges the same rows."""
    newest, changed = rows // 20, int(changes * 0.55)
    spark.sql(f"""
        CREATE OR REPLACE TEMP VIEW aging_src AS
        SELECT id, date_add(DATE'2026-01-01', CAST(id * 100 DIV {rows} AS INT)) AS dt, concat('cust', (id + {k}) % 101) AS customer,
               CAST((id * {k + 7}) % 100000 AS DOUBLE) / 100 AS amount, CAST((id + {k}) % 5 AS INT) AS qty, 'changed' AS status,
               TIMESTAMP'2026-04-11 00:00:00' + make_interval(0, 0, 0, {k}, 0, 0, 0) AS updated_at, j % 10 = 9 AS deleted
        FROM (SELECT j, {rows - newest} + ((j + {k} * {changed}) * 7919) % {newest} AS id FROM (SELECT id AS j FROM range({changed})))
        UNION ALL
        SELECT id, date_add(DATE'2026-01-01', 99 - CAST(id % 30 AS INT)), concat('cust', id % 101), CAST(id % 1000 AS DOUBLE), 1, 'new',
               TIMESTAMP'2026-04-11 00:00:00' + make_interval(0, 0, 0, {k}, 0, 0, 0), false
        FROM range({rows + k * (changes - changed)}, {rows + (k + 1) * (changes - changed)})""")


def statement(table: str) -> str:
    return (
        f"MERGE INTO {table} t USING aging_src s ON t.id = s.id WHEN MATCHED AND s.deleted THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {UPDATE_SET} WHEN NOT MATCHED AND NOT s.deleted THEN {INSERT}"
    )


def targets(spark, where: Path, daily: bool) -> dict[str, str]:
    """The three merged tables over copies of the same files (Delta's by CTAS from them)."""
    layout = "daily" if daily else "flat"
    files = where / ("target" if daily else "flat")
    out = {}
    for engine in ("sm", "sm_plain"):
        name, copy = f"bench.{engine}_{layout}", where / f"{engine}_{layout}_{time.monotonic_ns()}"
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        shutil.copytree(files, copy)
        spark.sql(
            f"CREATE TABLE {name} ({SCHEMA}) USING parquet {'PARTITIONED BY (dt)' if daily else ''} LOCATION '{copy}'"
        )
        if daily:
            spark.sql(f"ALTER TABLE {name} RECOVER PARTITIONS")
        out[engine] = name
    spark.sql(f"ALTER TABLE {out['sm']} SET TBLPROPERTIES ('spark_merge.auto_compact.min_files' = '{POLICY}')")
    spark.sql(f"DROP TABLE IF EXISTS bench.delta_{layout}")
    spark.sql(
        f"CREATE TABLE bench.delta_{layout} USING delta {'PARTITIONED BY (dt)' if daily else ''} "
        f"LOCATION '{where / f'delta_{layout}_{time.monotonic_ns()}'}' "
        f"TBLPROPERTIES ('delta.autoOptimize.autoCompact' = 'true') AS SELECT * FROM parquet.`{files}`"
    )
    out["delta"] = f"bench.delta_{layout}"
    return out


def fresh_copy(spark, where: Path, table: str, daily: bool, flat_files: int) -> str:
    """The rows of ``table`` written once, as the bench's target was: by day, or in ``flat_files`` files."""
    copy = where / f"fresh_{time.monotonic_ns()}"
    rows = spark.table(table)
    if daily:
        rows.repartition("dt").write.partitionBy("dt").parquet(str(copy))
    else:
        rows.repartition(flat_files).write.parquet(str(copy))
    return f"parquet.`{copy}`"


def measure(spark, table: str, daily: bool, lookup_id: int) -> dict:
    part = "dt" if daily else "0"
    files = spark.sql(
        f"SELECT count(*), sum(size), max(n) FROM (SELECT size, count(*) OVER (PARTITION BY part) AS n FROM "
        f"(SELECT DISTINCT _metadata.file_path AS file, _metadata.file_size AS size, {part} AS part FROM {table}))"
    ).collect()[0]
    scan = f"SELECT count(*), sum(hash({', '.join(COLUMNS)})) FROM {table}"
    lookup = f"SELECT * FROM {table} WHERE id = {lookup_id}"
    spark.sql(scan).collect()  # warm: the listing, the footers
    return {
        "files": files[0],
        "most": files[2],
        "mb": (files[1] or 0) / 1e6,
        "scan": statistics.median(timed(lambda: spark.sql(scan).collect()) for _ in range(3)),
        "lookup": statistics.median(timed(lambda: spark.sql(lookup).collect()) for _ in range(3)),
    }


def cell(m: dict) -> str:
    merged = f" · merges {m['merges']:.1f} s" if m.get("merges") is not None else ""
    return f"{m['files']} files ({m['most']} in the fullest partition), {m['mb']:.1f} MB · scan {m['scan']:.2f} s · lookup {m['lookup']:.2f} s{merged}"


def age(spark, where: Path, daily: bool, args, out) -> dict:
    tables = targets(spark, where, daily)
    flat_files = len(spark.read.parquet(str(where / "flat")).inputFiles())
    layout = "daily" if daily else "unpartitioned"
    out(f"\n**{layout}**, Spark {spark.version}, {args.rows:,} rows, each merge {args.changes:,} source rows\n")
    out("| merges | " + " | ".join(TITLES[e] for e in ENGINES) + " | same rows |")
    out("|---|" + "---|" * (len(ENGINES) + 1))
    spent = {e: 0.0 for e in ENGINES}
    last = {}
    for k in range(args.merges + 1):
        if k:
            source_view(spark, args.rows, args.changes, k)
            for engine in ("sm", "sm_plain"):
                spent[engine] += timed(lambda engine=engine: merge(spark, statement(tables[engine])))
            spent["delta"] += timed(lambda: spark.sql(statement(tables["delta"])).collect())
        if k % args.every:
            continue
        tables["fresh"] = fresh_copy(spark, where, tables["sm"], daily, flat_files)
        sums = {checksum(spark, tables[e]) for e in ENGINES}
        found = {e: measure(spark, tables[e], daily, args.rows // 3) for e in ENGINES}
        for e in ("sm", "sm_plain", "delta"):
            found[e]["merges"] = spent[e] if k else None
            spent[e] = 0.0
        out(f"| {k} | " + " | ".join(cell(found[e]) for e in ENGINES) + f" | {'yes' if len(sums) == 1 else 'NO'} |")
        last = found
    return last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=10_000, help="source rows of each merge")
    parser.add_argument("--merges", type=int, default=100)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--layouts", default="daily,unpartitioned")
    parser.add_argument("--write-docs", action="store_true", help="write the tables into docs/performance.md")
    args = parser.parse_args()
    where = Path(tempfile.mkdtemp(prefix="sm_aging_"))
    spark = get_session(
        master="local[2]",
        warehouse=str(where / "home"),
        conf={"spark.driver.memory": "6g", **peer_conf(where / "home")},
    )
    spark.sql("CREATE DATABASE IF NOT EXISTS bench")
    generate(spark, args.rows, args.changes, where)
    spark.read.parquet(str(where / "target")).write.parquet(str(where / "flat"))
    for layout in args.layouts.split(","):
        out = Report(f"aging-{layout}")  # a section of docs/performance.md per layout
        last = age(spark, where, layout == "daily", args, out)
        sm, fresh, delta = (last[e]["scan"] for e in ("sm", "fresh", "delta"))
        out()
        out(
            f"- {layout}, after {args.merges} merges: spark-merge's full scan is {sm / fresh:.2f}x the fresh copy's "
            f"(goal: at most 1.2x) and {sm / delta:.2f}x Delta's (goal: at most 1x); without the policy "
            f"{last['sm_plain']['scan'] / fresh:.2f}x the fresh copy's."
        )
        if args.write_docs:
            out.write()
    spark.stop()
    shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
