"""Does a merge cost what it changes, or what the table holds? Measured side by side in one run.

    .venv/bin/python bench/merge_cost.py                       # N=5M, M=500k, medians of 3, + scaling
    .venv/bin/python bench/merge_cost.py --rows 1000000 --scaling none --repeat 1   # a quick look
    .venv/bin/python bench/merge_cost.py --big                 # the scaling table up to N=100M (not in CI)

Workload (as in issue 9): a target of N rows (id BIGINT key, dt DATE partition column over 100 days,
customer, amount, qty, status, updated_at), parquet, one file per day. A CDC source of M rows: updates
(50%) and deletes (5%, a `deleted` flag) of existing ids in the 5 newest days, inserts (45%) into the
newest day. Ids grow with dt, as generated keys do. The 5 newest days hold N/20 rows: when that is
fewer than the updates and deletes asked for, each of those rows is changed once and the rest of the
M rows become inserts (a MERGE must not match a target row twice).

Rows of the table: median seconds of `--repeat` runs, each on a fresh copy of the same target, and
ratios to spark-merge. References, run on the same data in the same process:
- naive: what a user writes by hand: read the whole target, FULL OUTER JOIN the source, write the
  whole table anew;
- floor: Spark reading the touched partitions and writing them back unchanged (any copy-on-write
  merge must at least do this);
- data floor: one Spark job reading the touched partitions and the source and writing their union,
  no join: the least any merge that reads its source can cost;
- jobs, metastore statements: of one spark-merge merge, counted (bench/counts.py's count);
- passes: spark-merge's three data passes alone, with the touched partitions given: read and cache the
  source, join and cache the changes, write the touched partitions (append the rows for insert-only).
  No checks, counts, file stats or commit: the least this plan can cost, and what the rest adds;
- duckdb: DuckDB's MERGE INTO on in-memory tables loaded from the same files (load not timed);
- delta-rs: `deltalake`'s merge on a Delta table of the same rows, partitioned by dt (write not timed).
The scaling section keeps M and grows N: spark-merge should follow the touched partitions, naive N.
The small-merge section: a 1,000-row source (updates in the newest day: one partition) into a 1M-row
table in a warm session, beside Spark's own INSERT INTO of the same 1,000 rows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from report import Report
from tally import count

from merge_core import merge
from merge_core.common import macros
from merge_core.lifecycle.merge_run import MergeRun, broadcasts_changed
from merge_core.request.parse import parse
from merge_core.spark.session import get_session

COLUMNS = ["id", "dt", "customer", "amount", "qty", "status", "updated_at"]
SCHEMA = "id BIGINT, customer STRING, amount DOUBLE, qty INT, status STRING, updated_at TIMESTAMP, dt DATE"
BASE_DAY = "DATE'2026-01-01'"
UPDATE_SET = "customer = s.customer, amount = s.amount, qty = s.qty, status = s.status, updated_at = s.updated_at"
INSERT = f"INSERT ({', '.join(COLUMNS)}) VALUES ({', '.join('s.' + c for c in COLUMNS)})"


def scenarios(table: str) -> dict[str, str]:
    cdc = (
        f"WHEN MATCHED AND s.deleted THEN DELETE WHEN MATCHED THEN UPDATE SET {UPDATE_SET} "
        f"WHEN NOT MATCHED AND NOT s.deleted THEN {INSERT}"
    )
    return {
        "cdc, ON id": f"MERGE INTO {table} t USING bench.cdc s ON t.id = s.id {cdc}",
        "cdc, ON id AND dt": f"MERGE INTO {table} t USING bench.cdc s ON t.id = s.id AND t.dt = s.dt {cdc}",
        "insert-only": f"MERGE INTO {table} t USING bench.inserts s ON t.id = s.id WHEN NOT MATCHED THEN {INSERT}",
        "delete-only": f"MERGE INTO {table} t USING bench.deletes s ON t.id = s.id WHEN MATCHED THEN DELETE",
    }


def generate(spark, rows: int, changes: int, where: Path) -> None:
    """The pristine target files and the three sources (bench.cdc, bench.inserts, bench.deletes)."""
    newest = rows // 20
    changed = min(int(changes * 0.55), newest)
    updates = changed * 10 // 11
    spark.sql(f"""
        SELECT id, date_add({BASE_DAY}, CAST(id * 100 DIV {rows} AS INT)) AS dt, concat('cust', id % 10007) AS customer,
               round(rand(1) * 1000, 2) AS amount, CAST(id % 17 AS INT) AS qty,
               element_at(array('new', 'paid', 'shipped'), CAST(id % 3 AS INT) + 1) AS status,
               TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 86400) AS updated_at
        FROM range({rows})""").repartition("dt").write.partitionBy("dt").parquet(str(where / "target"))
    # distinct existing ids of the newest 5 days (7919 is prime to N/20), then new ids on the newest day
    spark.sql(f"""
        SELECT id, date_add({BASE_DAY}, CAST(id * 100 DIV {rows} AS INT)) AS dt, concat('cust', id % 101) AS customer,
               round(rand(2) * 1000, 2) AS amount, CAST(id % 5 AS INT) AS qty, 'changed' AS status,
               TIMESTAMP'2026-04-11 00:00:00' AS updated_at, k >= {updates} AS deleted
        FROM (SELECT k, {rows - newest} + (k * 7919) % {newest} AS id FROM (SELECT id AS k FROM range({changed})))
        UNION ALL
        SELECT id, date_add({BASE_DAY}, 99), concat('cust', id % 101), round(rand(3) * 1000, 2), 1, 'new',
               TIMESTAMP'2026-04-11 00:00:00', false
        FROM range({rows}, {rows + changes - changed})""").write.saveAsTable(
        "bench.cdc", format="parquet", mode="overwrite"
    )
    spark.table("bench.cdc").where(f"id >= {rows}").write.saveAsTable(
        "bench.inserts", format="parquet", mode="overwrite"
    )
    spark.table("bench.cdc").where(f"id < {rows}").select("id").write.saveAsTable(
        "bench.deletes", format="parquet", mode="overwrite"
    )


def fresh_target(spark, where: Path, name: str = "bench.t", link: bool = False) -> str:
    """A table over a new copy of the pristine files (``link``: hard links to them, for a target too
    large to copy before every run; a merge never changes a file, it writes new ones)."""
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    copy = where / f"copy_{time.monotonic_ns()}"
    shutil.copytree(where / "target", copy, copy_function=os.link if link else shutil.copy2)
    spark.sql(f"CREATE TABLE {name} ({SCHEMA}) USING parquet PARTITIONED BY (dt) LOCATION '{copy}'")
    spark.sql(f"ALTER TABLE {name} RECOVER PARTITIONS")
    return name


def timed(fn) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def naive(spark, table: str, sql_kind: str) -> None:
    """The hand-written full rewrite: whole target FULL OUTER JOIN source, whole table written."""
    source = {"insert-only": "bench.inserts", "delete-only": "(SELECT id, true AS deleted FROM bench.deletes)"}.get(
        sql_kind, "bench.cdc"
    )
    on = "t.id = s.id AND t.dt = s.dt" if sql_kind == "cdc, ON id AND dt" else "t.id = s.id"
    if sql_kind == "insert-only":
        pick = ", ".join(f"coalesce(t.{c}, s.{c}) AS {c}" for c in COLUMNS)
        keep = "true"
    elif sql_kind == "delete-only":
        pick = ", ".join(f"t.{c}" for c in COLUMNS)
        keep = "t.id IS NOT NULL AND s.id IS NULL"
    else:
        pick = ", ".join(f"CASE WHEN s.id IS NOT NULL THEN s.{c} ELSE t.{c} END AS {c}" for c in COLUMNS)
        keep = "s.id IS NULL OR NOT s.deleted"
    spark.sql("DROP TABLE IF EXISTS bench.naive")
    spark.sql(
        f"CREATE TABLE bench.naive USING parquet PARTITIONED BY (dt) AS SELECT {pick} "
        f"FROM {table} t FULL OUTER JOIN {source} s ON {on} WHERE {keep}"
    )


def floor(spark, table: str, days: list[str]) -> None:
    """Read the touched partitions and write them back unchanged."""
    spark.sql("DROP TABLE IF EXISTS bench.floor")
    spark.sql(
        f"CREATE TABLE bench.floor USING parquet PARTITIONED BY (dt) AS SELECT * FROM {table} "
        f"WHERE dt IN ({', '.join(repr(d) for d in days)})"
    )


def data_floor(spark, table: str, days: list[str], kind: str) -> None:
    """One job: read the touched partitions and the source, write their union (no join)."""
    source = {"insert-only": "bench.inserts", "delete-only": "bench.deletes"}.get(kind, "bench.cdc")
    rows = (
        f"SELECT {', '.join(COLUMNS)} FROM {source}"
        if kind != "delete-only"
        else f"SELECT id, date_add({BASE_DAY}, 99) AS dt, {', '.join(f'NULL AS {c}' for c in COLUMNS[2:])} FROM {source}"
    )
    spark.sql("DROP TABLE IF EXISTS bench.dfloor")
    spark.sql(
        f"CREATE TABLE bench.dfloor USING parquet PARTITIONED BY (dt) AS SELECT {', '.join(COLUMNS)} FROM {table} "
        f"WHERE dt IN ({', '.join(repr(d) for d in days)}) UNION ALL {rows}"
    )


def data_passes(spark, table: str, sql: str, done) -> float:
    """The plan's data passes alone, timed (begin, which reads metadata only, is not): the source,
    the join (counted, as the summary reads it) and the write (fused; an append reads the cached
    join), with the touched partitions and the broadcast choice of the finished merge `done`."""
    run = MergeRun(spark, parse(sql))
    run.begin()
    spec, ctx, partitions = run.spec_data, run.ctx, done.partitions
    ctx["scan_filter"] = macros.render("scan_filter", spec, run.table, [{"partition": p} for p in partitions])
    ctx["broadcast_changed"] = broadcasts_changed(done.metrics)
    insert_only = run.resolved["insert_only"]
    last = (
        macros.render("append_sql", run.table, ctx)
        if insert_only
        else macros.render("fused_stage_sql", spec, run.table, run.resolved, ctx, partitions)
    )
    t0 = time.monotonic()
    spark.sql(macros.render("cache_source_sql", spec, ctx))
    spark.sql(f"SELECT count(*) FROM {ctx['source']}").collect()
    if insert_only:  # the append reads the cached changes; a rewrite joins again in its write
        spark.sql(macros.render("cache_changes_sql", spec, run.table, run.resolved, ctx).replace("CACHE LAZY", "CACHE"))
    else:  # the join as the plan's summary reads it
        spark.sql(
            f"CREATE TEMPORARY VIEW {ctx['changes_view']} AS "
            + macros.render("changes_sql", spec, run.table, run.resolved, ctx)
        )
        spark.sql(macros.render("change_summary_sql", spec, run.table, run.resolved, ctx)).collect()
    spark.sql(last)
    seconds = time.monotonic() - t0
    run.close()
    if not run.resolved["insert_only"]:
        shutil.rmtree(ctx["stage_location"].removeprefix("file:"), ignore_errors=True)
    return seconds


def checksum(spark, table: str) -> tuple:
    return tuple(spark.sql(f"SELECT count(*), sum(hash({', '.join(COLUMNS)})) FROM {table}").collect()[0])


def run_duckdb(where: Path, kind: str, sql: str, threads: int) -> float | None:
    try:
        import duckdb
    except ImportError:
        return None
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute(
        f"CREATE TABLE t AS SELECT {', '.join(COLUMNS)} FROM read_parquet('{where}/target/*/*.parquet', "
        "hive_partitioning = true)"
    )
    for name in ("cdc", "inserts", "deletes"):
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet('{where}/{name}/*.parquet')")
    statement = sql.replace("bench.t ", "t ").replace("bench.", "")
    seconds = timed(lambda: con.execute(statement))
    con.close()
    return seconds


def run_delta(spark, where: Path, kind: str) -> float | None:
    try:
        import pyarrow.dataset as ds
        from deltalake import DeltaTable, write_deltalake
    except ImportError:
        return None
    path = where / f"delta_{time.monotonic_ns()}"
    target = ds.dataset(str(where / "target"), format="parquet", partitioning="hive").to_table()
    write_deltalake(str(path), target, partition_by=["dt"])
    name = {"insert-only": "inserts", "delete-only": "deletes"}.get(kind, "cdc")
    source = ds.dataset(str(where / name), format="parquet").to_table()
    table = DeltaTable(str(path))
    on = "t.id = s.id AND t.dt = s.dt" if kind == "cdc, ON id AND dt" else "t.id = s.id"
    m = table.merge(source, predicate=on, source_alias="s", target_alias="t")
    if kind == "insert-only":
        m = m.when_not_matched_insert_all()
    elif kind == "delete-only":
        m = m.when_matched_delete()
    else:
        m = (
            m.when_matched_delete("s.deleted")
            .when_matched_update({c: f"s.{c}" for c in COLUMNS[2:]})
            .when_not_matched_insert({c: f"s.{c}" for c in COLUMNS}, predicate="NOT s.deleted")
        )
    seconds = timed(m.execute)
    shutil.rmtree(path, ignore_errors=True)
    return seconds


def export_sources(spark, where: Path) -> None:
    for name in ("cdc", "inserts", "deletes"):
        spark.table(f"bench.{name}").write.mode("overwrite").parquet(str(where / name))


def compare(spark, where: Path, repeat: int, with_references: bool, out=print) -> list[dict]:
    results = []
    for kind, sql in scenarios("bench.t").items():
        merged, naive_s, floor_s, dfloor_s, passes_s, sums = [], [], [], [], [], set()
        days: list[str] = []
        counted: dict = {}
        for _ in range(repeat):
            table = fresh_target(spark, where)
            result = None

            def run():
                nonlocal result, counted
                counted = count(spark, lambda: merge(spark, sql))
                result = counted["result"]

            merged.append(timed(run))
            days = sorted({p["dt"] for p in result.partitions})
            sums.add(checksum(spark, table))
            table = fresh_target(spark, where)
            naive_s.append(timed(lambda: naive(spark, table, kind)))
            sums.add(checksum(spark, "bench.naive"))
            table = fresh_target(spark, where)
            floor_s.append(timed(lambda: floor(spark, table, days)))
            table = fresh_target(spark, where)
            dfloor_s.append(timed(lambda: data_floor(spark, table, days, kind)))
            table = fresh_target(spark, where)
            passes_s.append(data_passes(spark, table, sql, result))
        row = {
            "scenario": kind,
            "spark-merge": statistics.median(merged),
            "naive": statistics.median(naive_s),
            "floor": statistics.median(floor_s),
            "data floor": statistics.median(dfloor_s),
            "passes": statistics.median(passes_s),
            "partitions": len(days),
            "jobs": counted["jobs"],
            "metastore": counted["metastore statements"],
            "agree": len(sums) == 1,
            "metrics": result.metrics,
        }
        if with_references:
            row["duckdb"] = statistics.median(
                filter(None, [run_duckdb(where, kind, sql, os.cpu_count() or 2) for _ in range(repeat)])
                or [float("nan")]
            )
            row["delta-rs"] = statistics.median(
                filter(None, [run_delta(spark, where, kind) for _ in range(repeat)]) or [float("nan")]
            )
        results.append(row)
        out(format_row(row))
    return results


def format_row(r: dict) -> str:
    sm = r["spark-merge"]
    refs = "".join(f" | {r[k]:.2f} ({r[k] / sm:.2f}x)" for k in ("duckdb", "delta-rs") if k in r)
    return (
        f"| {r['scenario']} | {r['partitions']} | {sm:.2f} | {r['jobs']} | {r['metastore']} | {r['naive']:.2f} | "
        f"**{r['naive'] / sm:.1f}x** | {r['floor']:.2f} | {sm / r['floor']:.2f} | {r['data floor']:.2f} | "
        f"**{sm / r['data floor']:.2f}** | {r['passes']:.2f} | {r['naive'] / r['passes']:.1f}x"
        f"{refs} | {'yes' if r['agree'] else 'NO'} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000, help="N, target rows")
    ap.add_argument("--changes", type=int, default=500_000, help="M, source rows")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scaling", default="1000000,5000000,20000000", help="N values for the scaling table, or none")
    ap.add_argument("--no-references", action="store_true", help="skip DuckDB and delta-rs")
    ap.add_argument("--big", action="store_true", help="add N=100,000,000 to the scaling table (hours; not in CI)")
    ap.add_argument("--no-small", action="store_true", help="skip the small-merge section")
    ap.add_argument("--write-docs", action="store_true", help="put the tables into docs/performance.md")
    args = ap.parse_args()
    out = Report("merge-cost")
    if args.big:
        args.scaling = ",".join([x for x in args.scaling.split(",") if x != "none"] + ["100000000"])
    home = Path(tempfile.mkdtemp(prefix="sm_bench_"))
    spark = get_session(
        warehouse=str(home),
        conf={
            "spark.sql.shuffle.partitions": "8",
            "spark.driver.memory": "6g",
            "spark.ui.showConsoleProgress": "false",
        },
    )
    spark.sql("CREATE DATABASE IF NOT EXISTS bench")
    try:
        data = home / f"n{args.rows}"
        generate(spark, args.rows, args.changes, data)
        export_sources(spark, data)
        fresh_target(spark, data)  # warm up the JVM (the first merge of a session pays for JIT compilation)
        merge(spark, scenarios("bench.t")["cdc, ON id"])
        out(
            f"\nN={args.rows:,} target rows, M={args.changes:,} source rows, medians of {args.repeat} "
            f"(seconds; ratios measured side by side in this run)\n"
        )
        refs = "" if args.no_references else " duckdb | delta-rs |"
        out(
            f"| scenario | partitions rewritten | spark-merge | jobs | metastore statements | naive | naive / spark-merge "
            f"| floor | spark-merge / floor | data floor | spark-merge / data floor | passes | naive / passes |{refs} same rows |"
        )
        out("|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if refs else "") + "---|")
        compare(spark, data, args.repeat, not args.no_references, out)
        if args.scaling != "none":
            out(
                f"\nScaling: M={args.changes:,}, scenario 'cdc, ON id AND dt' and 'cdc, ON id' (medians of {args.repeat})\n"
            )
            out(
                "| N | touched bytes (MB) | spark-merge ON id AND dt | spark-merge ON id | passes ON id | naive | "
                "naive / spark-merge | naive / passes | data floor | spark-merge / data floor |"
            )
            out("|---|---|---|---|---|---|---|---|---|---|")
            for n in [int(x) for x in args.scaling.split(",")]:
                data = home / f"n{n}"
                if not data.exists():
                    generate(spark, n, args.changes, data)
                scaled(spark, data, n, args.repeat, out)
        if not args.no_small:
            small(spark, home, args.repeat, out)
    finally:
        spark.stop()
        shutil.rmtree(home, ignore_errors=True)
    if args.write_docs:
        out.write()


SMALL_MERGE = "MERGE INTO {t} t USING bench.small_src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET " + UPDATE_SET
SMALL_INSERT = f"INSERT INTO {{t}} SELECT {', '.join(c for c in COLUMNS if c != 'dt')}, dt FROM bench.small_src"


def small_workload(spark, home: Path) -> Path:
    """The small merge's data (a 1M-row target: its pristine files, returned) and its source
    bench.small_src (1,000 updates of existing ids in the newest day); SMALL_MERGE and SMALL_INSERT
    (formatted with the target as ``t``) merge and insert those rows."""
    data = home / "n1000000"
    if not data.exists():
        generate(spark, 1_000_000, 500_000, data)
    fresh_target(spark, data)
    spark.sql("DROP TABLE IF EXISTS bench.small_src")
    spark.sql(
        "CREATE TABLE bench.small_src USING parquet AS SELECT id, dt, customer, amount + 1 AS amount, qty, status, "
        f"updated_at FROM bench.t WHERE dt = date_add({BASE_DAY}, 99) ORDER BY id LIMIT 1000"
    )
    return data


def small(spark, home: Path, repeat: int, out=print) -> None:
    """A small merge in a warm session: 1,000 source rows (updates of existing ids in the newest
    day) into a 1M-row table, beside Spark's INSERT INTO of the same rows (into a copy of it)."""
    data = small_workload(spark, home)
    statement, insert = SMALL_MERGE.format(t="bench.t"), SMALL_INSERT.format(t="bench.t")
    merged, inserted = [], []
    for n in range(repeat + 2):  # two warm-up rounds
        fresh_target(spark, data)
        seconds = timed(lambda: merge(spark, statement))
        fresh_target(spark, data)
        appended = timed(lambda: spark.sql(insert))
        if n >= 2:
            merged.append(seconds)
            inserted.append(appended)
    m, i = statistics.median(merged), statistics.median(inserted)
    out(
        f"\nSmall merge: 1,000 source rows (updates, one partition) into 1,000,000 rows, warm session, "
        f"medians of {repeat}\n"
    )
    out("| spark-merge | Spark INSERT INTO (same rows) | spark-merge / INSERT INTO |")
    out("|---|---|---|")
    out(f"| {m:.2f} | {i:.2f} | **{m / i:.1f}x** |")


def scaled(spark, where: Path, n: int, repeat: int, out=print) -> None:
    by_dt, by_id, passes_s, naive_s, dfloor_s, touched = [], [], [], [], [], 0
    sql = scenarios("bench.t")
    for _ in range(repeat):
        fresh_target(spark, where)
        by_dt.append(timed(lambda: merge(spark, sql["cdc, ON id AND dt"])))
        fresh_target(spark, where)
        result = []
        by_id.append(timed(lambda: result.append(merge(spark, sql["cdc, ON id"]))))
        touched = result[0].metrics["numTargetBytesRemoved"]
        table = fresh_target(spark, where)
        passes_s.append(data_passes(spark, table, sql["cdc, ON id"], result[0]))
        table = fresh_target(spark, where)
        naive_s.append(timed(lambda: naive(spark, table, "cdc, ON id")))
        table = fresh_target(spark, where)
        days = sorted({p["dt"] for p in result[0].partitions})
        dfloor_s.append(timed(lambda: data_floor(spark, table, days, "cdc, ON id")))
    a, b, p, c, f = (statistics.median(x) for x in (by_dt, by_id, passes_s, naive_s, dfloor_s))
    out(
        f"| {n:,} | {touched / 1e6:.1f} | {a:.2f} | {b:.2f} | {p:.2f} | {c:.2f} | **{c / b:.1f}x** | {c / p:.1f}x | "
        f"{f:.2f} | **{b / f:.2f}** |"
    )


if __name__ == "__main__":
    main()
