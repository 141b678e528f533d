"""Copy-on-write vs merge-on-read watermark upserts on the same CDC stream: write and read cost.

    .venv/bin/python bench/upsert_modes.py [--keys 1000000] [--batches 4] [--batch-rows 100000]

Both modes get the same initial load and the same batches (updates of existing keys spread over
many partitions, new keys, 5% tombstones, some late rows). Reported: seconds per mode and the
ratios, measured side by side in this one run, plus a check that both read the same rows.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from merge_core import compact, merge
from merge_core.spark.session import get_session

SCHEMA = "id BIGINT, day INT, customer STRING, amount DOUBLE, ts BIGINT, deleted BOOLEAN"


def stream_batch(spark, n, keys, seed):
    """n events: 60% updates of existing keys, 35% new keys, 5% tombstones; ts grows with the batch."""
    return spark.sql(f"""
        SELECT CASE WHEN r < 0.95 THEN CAST(rand({seed} + 1) * {keys} * (CASE WHEN r < 0.6 THEN 1 ELSE 1.3 END) AS BIGINT)
                    ELSE CAST(rand({seed} + 2) * {keys} AS BIGINT) END AS id,
               CAST(rand({seed} + 3) * 100 AS INT) AS day,
               concat('c', CAST(rand({seed} + 4) * 1000 AS INT)) AS customer,
               rand({seed} + 5) * 100 AS amount,
               CAST({seed} * 1000000 + id AS BIGINT) - CAST(rand({seed} + 6) * 10 AS BIGINT) AS ts,
               r >= 0.95 AS deleted
        FROM (SELECT id, rand({seed}) AS r FROM range({n}))""")


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--batch-rows", type=int, default=100_000)
    args = ap.parse_args()
    spark = get_session(warehouse=tempfile.mkdtemp(prefix="sm_bench_"), conf={"spark.sql.shuffle.partitions": "8"})
    spark.sql("CREATE DATABASE IF NOT EXISTS bench")
    for mode in ("cow", "mor"):
        spark.sql(f"DROP VIEW IF EXISTS bench.{mode}")
        spark.sql(f"DROP TABLE IF EXISTS bench.{mode}")
        spark.sql(f"DROP TABLE IF EXISTS bench.{mode}__sm_log")
        spark.sql(f"CREATE TABLE bench.{mode} ({SCHEMA}) USING parquet PARTITIONED BY (day)")
        spark.sql(
            f"INSERT INTO bench.{mode} (id, day, customer, amount, ts, deleted) SELECT id, CAST(id % 100 AS INT), "
            f"concat('c', id % 1000), CAST(id AS DOUBLE), 0, false FROM range({args.keys})"
        )
    options = {"primary_key": "id", "watermark_key": "ts", "tombstone_key": "deleted"}
    writes = {"cow": [], "mor": []}
    for b in range(1, args.batches + 1):
        stream_batch(spark, args.batch_rows, args.keys, b).createOrReplaceTempView(f"batch{b}")
        spark.sql(f"CACHE TABLE batch{b}")
        for mode, extra in (("cow", {}), ("mor", {"upsert_mode": "merge-on-read"})):
            seconds, _ = timed(
                lambda: merge(spark, {"target": f"bench.{mode}", "source": f"batch{b}"}, **options, **extra)
            )
            writes[mode].append(seconds)
    reads = {"cow": [], "mor": []}
    for _ in range(3):
        reads["cow"].append(
            timed(lambda: spark.sql("SELECT count(*), sum(amount) FROM bench.cow WHERE NOT deleted").collect())[0]
        )
        reads["mor"].append(timed(lambda: spark.sql("SELECT count(*), sum(amount) FROM bench.mor").collect())[0])
    compact_s, _ = timed(lambda: compact(spark, "bench.mor"))
    read_after = [
        timed(lambda: spark.sql("SELECT count(*), sum(amount) FROM bench.mor").collect())[0] for _ in range(3)
    ]
    same = (
        spark.sql("SELECT * FROM bench.cow WHERE NOT deleted").exceptAll(spark.table("bench.mor")).count() == 0
        and spark.table("bench.mor").exceptAll(spark.sql("SELECT * FROM bench.cow WHERE NOT deleted")).count() == 0
    )
    med = statistics.median
    print(
        f"\nwatermark upserts, {args.keys:,} keys, {args.batches} batches of {args.batch_rows:,} events "
        f"(100 partitions), same input; both modes read the same rows: {same}\n"
    )
    print("| measure | copy-on-write | merge-on-read | MoR / CoW |")
    print("|---|---|---|---|")
    print(
        f"| write, median per batch (s) | {med(writes['cow']):.2f} | {med(writes['mor']):.2f} | "
        f"{med(writes['mor']) / med(writes['cow']):.2f} |"
    )
    print(
        f"| read, median of 3 (s) | {med(reads['cow']):.2f} | {med(reads['mor']):.2f} | "
        f"{med(reads['mor']) / med(reads['cow']):.2f} |"
    )
    print(
        f"| read after compaction (s) | {med(reads['cow']):.2f} | {med(read_after):.2f} | "
        f"{med(read_after) / med(reads['cow']):.2f} |"
    )
    print(f"| compaction (s) | - | {compact_s:.2f} | |")


if __name__ == "__main__":
    main()
