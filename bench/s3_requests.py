"""What one merge asks of an object store: S3 requests per merge, counted by the server.

    make bench-s3                  # 1M-row CDC merges, the small merge, 100 and 1,000 partitions
    make bench-s3 S3_ARGS="--rows 200000"

The store is moto's S3 server on loopback (tests/s3_server.py: Spark through Hadoop's S3A connector,
spark-merge's own file work through pyarrow), which records every request; a merge's requests are
those between the start and the end of its `merge()` call, sorted by client (Spark's S3A connector,
spark-merge's pyarrow) and operation (LIST, HEAD, GET, PUT, COPY, DELETE, POST: multipart uploads and
bulk deletes). A request count does not depend on the machine, so one run is the measure.

Tables: bench/merge_cost.py's CDC workload (a target partitioned by day, 100 days, and a source
touching the newest 5 days), copied to the bucket for each merge (not counted); its small merge (1,000
updated rows of one day); and a target of 100 or 1,000 partitions (5 files each) into which a merge
updates rows of 5 partitions, ON the key and the partition column.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from merge_cost import BASE_DAY, SCHEMA, UPDATE_SET, generate, scenarios  # noqa: E402
from report import Report  # noqa: E402

from merge_core import merge  # noqa: E402
from merge_core.spark.session import get_session  # noqa: E402
from tests.s3_server import BUCKET, S3Server  # noqa: E402

OPS = ("LIST", "HEAD", "GET", "PUT", "COPY", "DELETE", "POST")


def upload(server: S3Server, local: Path, prefix: str) -> str:
    """A copy of a local directory tree in the bucket (not counted); its s3a:// location."""
    from pyarrow import fs

    fs.copy_files(str(local), f"{BUCKET}/{prefix}", destination_filesystem=server.filesystem())
    return f"s3a://{BUCKET}/{prefix}"


def target_over(spark, name: str, location: str, schema: str, partition: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} ({schema}) USING parquet PARTITIONED BY ({partition}) LOCATION '{location}'")
    spark.sql(f"ALTER TABLE {name} RECOVER PARTITIONS")


def counted(server: S3Server, spark, statement: str) -> tuple[dict, dict]:
    server.start_counting()
    result = merge(spark, statement)
    counts = server.stop_counting()
    return counts, result.metrics


def row(label: str, counts, metrics: dict) -> str:
    by_op = {op: sum(n for (_, o), n in counts.items() if o == op) for op in OPS}
    spark_n = sum(n for (c, _), n in counts.items() if c == "spark")
    mine = sum(n for (c, _), n in counts.items() if c == "spark-merge")
    cells = " | ".join(str(by_op[op]) for op in OPS)
    parts = metrics.get("numTargetPartitionsRewritten", 0)
    return f"| {label} | {parts} | {cells} | {spark_n} | {mine} | **{spark_n + mine}** |"


def cdc_and_small(server: S3Server, spark, data: Path, rows: int, out) -> None:
    """merge_cost.py's CDC merges and its small merge, each into a fresh copy of the target in the bucket."""
    generate(spark, rows, rows // 10, data)  # the target's files locally; the sources in the warehouse, on S3
    for kind, statement in scenarios("bench.t").items():
        if not kind.startswith("cdc"):
            continue
        target_over(spark, "bench.t", upload(server, data / "target", f"cdc_{time.monotonic_ns()}"), SCHEMA, "dt")
        counts, metrics = counted(server, spark, statement)
        out(row(f"CDC {kind[5:]}, {rows:,} rows, 100 days", counts, metrics))
    target_over(spark, "bench.t", upload(server, data / "target", f"small_{time.monotonic_ns()}"), SCHEMA, "dt")
    spark.sql("DROP TABLE IF EXISTS bench.small_src")
    spark.sql(
        "CREATE TABLE bench.small_src USING parquet AS SELECT id, dt, customer, amount + 1 AS amount, qty, "
        f"status, updated_at FROM bench.t WHERE dt = date_add({BASE_DAY}, 99) ORDER BY id LIMIT 1000"
    )
    small = f"MERGE INTO bench.t t USING bench.small_src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET {UPDATE_SET}"
    counts, metrics = counted(server, spark, small)
    out(row("small: 1,000 updated rows of one day, ON id", counts, metrics))
    counts, metrics = counted(server, spark, small.replace("ON t.id = s.id", "ON t.id = s.id AND t.dt = s.dt"))
    out(row("small: the same, ON id AND dt", counts, metrics))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the CDC target (default 1M)")
    parser.add_argument("--only-partitions", action="store_true", help="only the 100 and 1,000 partitions rows")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/performance.md")
    args = parser.parse_args()
    out = Report("s3-requests")
    with tempfile.TemporaryDirectory(prefix="sm_s3_") as tmp:
        home = Path(tmp)
        server = S3Server(home / "s3").start()
        try:
            spark = get_session(
                master="local[2]",
                warehouse=str(home / "spark"),
                conf={"spark.sql.shuffle.partitions": "4", **server.spark_conf(f"s3a://{BUCKET}/warehouse")},
            )
            spark.sql("CREATE DATABASE IF NOT EXISTS bench")
            out(
                "S3 requests of one merge (moto's server counts them; Spark through S3A, spark-merge's own file "
                "work through pyarrow). Partitions: those the merge rewrote.\n"
            )
            out(
                "| merge | partitions | LIST | HEAD | GET | PUT | COPY | DELETE | POST | by Spark | by spark-merge | total |"
            )
            out("|---|---|---|---|---|---|---|---|---|---|---|---|")

            data = home / "cdc"
            if not args.only_partitions:
                cdc_and_small(server, spark, data, args.rows, out)
            for n in (100, 1000):
                local = home / f"p{n}"
                spark.sql(
                    f"SELECT CAST(id AS INT) AS id, 0 AS v, CAST(id % {n} AS INT) AS p, CAST(id DIV {n} % 5 AS INT) AS f "
                    f"FROM range({n * 200})"
                ).repartition(n * 5, "p", "f").drop("f").write.partitionBy("p").parquet(str(local))
                target_over(spark, "bench.w", upload(server, local, f"wide_{n}"), "id INT, v INT, p INT", "p")
                statement = (
                    f"MERGE INTO bench.w t USING (SELECT CAST(id AS INT) AS id, 1 AS v, CAST(id % {n} AS INT) AS p "
                    f"FROM range({n * 200}) WHERE id % {n} < 5 AND id < {n * 20}) s ON t.id = s.id AND t.p = s.p "
                    "WHEN MATCHED THEN UPDATE SET v = s.v"
                )
                counts, metrics = counted(server, spark, statement)
                files = len(spark.sql("SELECT DISTINCT _metadata.file_path FROM bench.w").collect())
                out(row(f"5 of {n:,} partitions ({files:,} files), ON id AND p", counts, metrics))
            spark.stop()
        finally:
            server.stop()
    if args.write_docs:
        out.write()


if __name__ == "__main__":
    main()
