"""What a merge's commit costs against the number of partitions it rewrites and the number the table has.

    make bench-partitions                                  # embedded and service metastores, Delta beside
    make bench-partitions PARTS_ARGS="--metastores embedded --rewrite 10,100"
    make bench-partitions PARTS_ARGS="--tables 1000,10000,100000 --write-docs"
    make bench-partitions PARTS_ARGS="--tables 100000 --rewrite 10,1000 --block partitions-wide --write-docs"

spark-merge commits a rewritten partition by pointing the metastore at its new directory; a backfill
that rewrites 10,000 partitions moves 10,000 partition locations, where Delta Lake appends one entry to
its log. This bench measures that cost, on the two metastores a Spark user runs: the embedded one (Derby
in the Spark application) and a Hive metastore service over Thrift (backed by PostgreSQL, as in
tests/hive_metastore.py), each in an application of its own (a Spark application binds to one
metastore for its life), spark-merge and Delta Lake in the same application on the same rows.

Workload: a table of P partitions (an INT column `p`) of R rows each; a merge whose source has one row
in each of K partitions (``ON t.id = s.id AND t.p = s.p WHEN MATCHED THEN UPDATE``), so it rewrites
exactly K partitions, K = 10, 100, 1,000, 10,000 on the table of 10,000, and K = 10 on tables of the
other sizes (``--tables``). Merges run in order on the same table, after one untimed merge of one
partition on each engine (see warm_up). Per merge:

- spark-merge's time, and of it the commit's (from its `commit:` step, the lock, conflict check,
  journal and repoint, to the end: the time that grows with K);
- Hive client calls: every call Spark's Hive client made to the metastore during the merge
  (HiveCatalogMetrics' hiveClientCalls, counted in the Spark driver), for both engines;
- Delta's time for the same MERGE on a Delta copy of the same rows, and whether the two tables then
  hold the same rows.

Delta runs on Spark 4.1 (bench/peers.py says why): `make bench-partitions` runs the whole bench there.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from peers import JARS, peer_conf  # noqa: E402
from report import Report  # noqa: E402

ROWS_PER_PARTITION = 10


class StepClock(logging.Handler):
    """The time of each progress step the merge logs (the host's `step`), from the handler's start."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.t0, self.steps = time.monotonic(), []

    def emit(self, record: logging.LogRecord) -> None:
        if len(record.args or ()) >= 2:
            self.steps.append((str(record.args[1]), time.monotonic() - self.t0))

    def since(self, prefix: str) -> float | None:
        return next((t for text, t in self.steps if text.startswith(prefix)), None)


def hive_calls(spark) -> int:
    metrics = spark._jvm.org.apache.spark.metrics.source.HiveCatalogMetrics
    return int(metrics.METRIC_HIVE_CLIENT_CALLS().getCount())


def build(spark, home: Path, parts: int, delta: bool) -> tuple[str, str | None, float]:
    """A parquet table bench.sm_<parts> of ``parts`` partitions (and its Delta copy); the seconds the
    metastore took to register the partitions (ALTER TABLE ... RECOVER PARTITIONS)."""
    files = home / f"p{parts}"
    spark.sql(
        f"SELECT id, CAST(0 AS INT) AS v, CAST(id % {parts} AS INT) AS p FROM range({parts * ROWS_PER_PARTITION})"
    ).repartition(8, "p").write.partitionBy("p").parquet(str(files))
    sm, dl = f"bench.sm_{parts}", f"bench.dl_{parts}" if delta else None
    spark.sql(f"CREATE TABLE {sm} (id BIGINT, v INT, p INT) USING parquet PARTITIONED BY (p) LOCATION '{files}'")
    t0 = time.monotonic()
    spark.sql(f"ALTER TABLE {sm} RECOVER PARTITIONS")
    registered = time.monotonic() - t0
    if dl:
        spark.sql(
            f"CREATE TABLE {dl} USING delta PARTITIONED BY (p) LOCATION '{home / f'd{parts}'}' "
            f"AS SELECT * FROM parquet.`{files}`"
        )
    return sm, dl, registered


def statement(table: str, k: int) -> str:
    return (
        f"MERGE INTO {table} t USING (SELECT id, CAST(id AS INT) AS p FROM range({k})) s "
        "ON t.id = s.id AND t.p = s.p WHEN MATCHED THEN UPDATE SET v = t.v + 1"
    )


def checksum(spark, table: str) -> tuple:
    return tuple(spark.sql(f"SELECT count(*), sum(hash(id, v, p)) FROM {table}").collect()[0])


def measure(spark, sm: str, dl: str | None, k: int) -> dict:
    from merge_core import merge
    from merge_core.common import macros

    clock = StepClock()
    logger = logging.getLogger("spark_merge")
    logger.addHandler(clock)
    logger.setLevel(logging.INFO)
    calls = hive_calls(spark)
    try:
        result = merge(spark, statement(sm, k))
    finally:
        logger.removeHandler(clock)
    total = time.monotonic() - clock.t0
    commit = clock.since(macros.render("step_label", "commit"))  # the plan's own label: "step 6/6 (commit)"
    row = {
        "rewritten": len(result.partitions),
        "sm": total,
        "commit": total - commit if commit is not None else None,
        "sm_calls": hive_calls(spark) - calls,
    }
    if dl:
        calls, t0 = hive_calls(spark), time.monotonic()
        spark.sql(statement(dl, k))
        row.update(delta=time.monotonic() - t0, delta_calls=hive_calls(spark) - calls)
        row["same"] = checksum(spark, sm) == checksum(spark, dl)
    return row


def warm_up(spark, sm: str, dl: str | None) -> None:
    """One untimed merge of one partition on each engine: the series measures merges into a table the
    application already knows (classes loaded, code generated, the table's metadata read once), as a
    scheduled merge runs, not the first statement of a cold application."""
    from merge_core import merge

    merge(spark, statement(sm, 1))
    if dl:
        spark.sql(statement(dl, 1))


def child(args) -> None:
    """One metastore's measurements, as JSON lines on stdout (the parent writes the table)."""
    from merge_core.spark.session import get_session

    home = Path(tempfile.mkdtemp(prefix="sm_bench_parts_"))
    home.chmod(0o755)  # PostgreSQL runs as its own user (tests/pg_server.py) and must reach its folder
    conf = {"spark.sql.shuffle.partitions": "8", "spark.driver.memory": "6g", "spark.ui.showConsoleProgress": "false"}
    conf.update(peer_conf(home))
    services = []
    metastore = None
    if args.child == "service":
        from tests.hive_metastore import HiveMetastore
        from tests.pg_server import Server

        pg = Server(home / "pg").start()
        services.append(pg)
        hms = HiveMetastore(home / "hms", pg.url).start()
        services.insert(0, hms)
        metastore = hms.uri
    spark = get_session(master="local[2]", warehouse=str(home), conf=conf, metastore=metastore)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS bench LOCATION '{home / 'bench.db'}'")
    try:
        for parts in [int(x) for x in args.tables.split(",")]:
            sm, dl, registered = build(spark, home, parts, bool(JARS))
            warm_up(spark, sm, dl)
            ks = [int(x) for x in args.rewrite.split(",")] if parts == max_table(args) else [10]
            for k in ks:
                if k > parts:
                    continue
                row = {"metastore": args.child, "parts": parts, "k": k, "registered": registered}
                row.update(measure(spark, sm, dl, k))
                print("ROW " + json.dumps(row), flush=True)
    finally:
        spark.stop()
        for service in services:
            service.stop()
        shutil.rmtree(home, ignore_errors=True)


def max_table(args) -> int:
    """The table the rewrite series runs on: the largest of --tables not over 10,000 (or the largest)."""
    sizes = [int(x) for x in args.tables.split(",")]
    return max([s for s in sizes if s <= 10_000] or sizes)


def fmt(x, digits: int = 2) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metastores", default="embedded,service")
    ap.add_argument("--tables", default="1000,10000", help="table sizes in partitions (the rewrite series: 10,000)")
    ap.add_argument("--rewrite", default="10,100,1000,10000", help="partitions a merge rewrites, on the 10,000 table")
    ap.add_argument("--write-docs", action="store_true", help="put the table into docs/performance.md")
    ap.add_argument(
        "--block",
        default="partitions",
        help="the section of docs/performance.md --write-docs replaces: partitions (the series on 10,000), "
        "partitions-wide (a table of more)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    import pyspark

    out = Report(args.block)
    out(
        f"\nSpark {pyspark.__version__}, local[2]; a table of P partitions of {ROWS_PER_PARTITION} rows, a merge "
        "updating one row in each of K of them; one run each, seconds; Hive calls: the Spark driver's calls to "
        "the metastore during the merge\n"
    )
    peer = "Delta / spark-merge" if JARS else "(no Delta: run with make bench-partitions)"
    out(
        "| metastore | P | K | registering P partitions | spark-merge | of it the commit | commit per 1,000 K "
        f"| Hive calls | Delta | Delta's Hive calls | {peer} | same rows |"
    )
    out("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind in args.metastores.split(","):
        cmd = [sys.executable, __file__, "--child", kind, "--tables", args.tables, "--rewrite", args.rewrite]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        for line in proc.stdout:
            if not line.startswith("ROW "):
                continue
            r = json.loads(line[4:])
            if r["rewritten"] != r["k"]:
                raise SystemExit(f"the merge rewrote {r['rewritten']} partitions, not the workload's {r['k']}: {r}")
            per = r["commit"] / r["k"] * 1000 if r["commit"] is not None else None
            ratio = r["delta"] / r["sm"] if "delta" in r else None
            out(
                f"| {r['metastore']} | {r['parts']:,} | {r['k']:,} | {fmt(r['registered'], 1)} | {fmt(r['sm'])} "
                f"| {fmt(r['commit'])} | {fmt(per)} | {r['sm_calls']:,} | {fmt(r.get('delta'))} "
                f"| {r.get('delta_calls', '')} | {fmt(ratio)} | {r.get('same', '')} |"
            )
        if proc.wait() != 0:
            raise SystemExit(f"the {kind} metastore's run failed ({proc.returncode})")
    if args.write_docs:
        out.write()


if __name__ == "__main__":
    main()
