"""A prototype of issue 20's fused plan for the CDC MERGE, to measure what that design would cost
before building it into the product (bench/delta_spark.py runs it beside spark-merge and Delta).

Not the product and not used by it: it handles only merge_cost.py's CDC statement (WHEN MATCHED AND
s.deleted THEN DELETE, WHEN MATCHED THEN UPDATE SET ..., WHEN NOT MATCHED AND NOT s.deleted THEN
INSERT), through the DataFrame API. It keeps every step the product's commit has, so the time is
comparable:

1. the source's key statistics (one aggregation over the source);
2. one match query over the target's key columns only, narrowed to the source's key range: in one
   aggregation the duplicate verdict (matches against distinct target rows, by file and row index),
   the per-operation counts and the partitions to rewrite; no change set is cached;
3. the staging write of those partitions, whose output and copied counts and the files it read are
   observed in the same job (`DataFrame.observe`); the new files' statistics come from listing the
   staging directory;
4. the commit as the product's: lock table, conflict check (the partitions' files now against the
   files the write read, listed, no Spark job), journal property, one repoint per partition, done and
   version properties, unlock, refresh.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from merge_cost import COLUMNS
from pyspark.sql import Observation, functions as F

UPDATED = ["customer", "amount", "qty", "status", "updated_at"]


def _files(root: str) -> set[str]:
    return {str(p) for p in Path(root.removeprefix("file:")).rglob("*.parquet")}


def fused_cdc(spark, table: str, on_dt: bool, stage_root: Path) -> dict:
    """Run the CDC merge into ``table`` with the fused plan; its metrics."""
    src = spark.table("bench.cdc")
    lo, hi, source_rows = src.agg(F.min("id"), F.max("id"), F.count(F.lit(1))).first()  # 1: source statistics

    keys = (
        spark.table(table)
        .where(F.col("id").between(lo, hi))
        .select(
            F.col("id").alias("t_id"),
            F.col("dt").alias("t_dt"),
            F.col("_metadata.file_path").alias("t_file"),
            F.col("_metadata.row_index").alias("t_row"),
        )
    )
    on = (src.id == keys.t_id) & (src.dt == keys.t_dt) if on_dt else src.id == keys.t_id
    matched, deleted = F.col("t_id").isNotNull(), F.col("deleted")
    summary = (
        src.join(keys, on, "left")
        .agg(  # 2: one match query
            F.count(F.when(matched, 1)).alias("matches"),
            F.count_distinct(F.when(matched, F.struct("t_file", "t_row"))).alias("targets"),
            F.count(F.when(matched & deleted, 1)).alias("deleted"),
            F.count(F.when(matched & ~deleted, 1)).alias("updated"),
            F.count(F.when(~matched & ~deleted, 1)).alias("inserted"),
            F.collect_set(F.when(matched, F.col("t_dt")).when(~deleted, F.col("dt"))).alias("partitions"),
        )
        .first()
    )
    if summary.matches != summary.targets:
        raise RuntimeError(f"{summary.matches - summary.targets} target rows matched more than one source row")
    partitions = sorted(str(d) for d in summary.partitions)

    target = spark.table(table).where(F.col("dt").isin(partitions)).withColumn("t_file", F.col("_metadata.file_path"))
    t, s = target.alias("t"), src.alias("s")
    on = (
        (F.col("t.id") == F.col("s.id")) & (F.col("t.dt") == F.col("s.dt")) if on_dt else F.col("t.id") == F.col("s.id")
    )
    in_t, in_s = F.col("t.id").isNotNull(), F.col("s.id").isNotNull()
    rows = (
        t.join(s, on, "full_outer")
        .where(~(in_s & F.col("s.deleted")) & (in_t | in_s))
        .select(
            *[
                (F.when(in_t & in_s, F.col(f"s.{c}")) if c in UPDATED else F.when(in_t & in_s, F.col(f"t.{c}")))
                .when(in_t, F.col(f"t.{c}"))
                .otherwise(F.col(f"s.{c}"))
                .alias(c)
                for c in COLUMNS
            ],
            F.when(in_t & ~in_s, 1).alias("_copied"),
            F.col("t.t_file").alias("_file"),
        )
    )
    seen = Observation("stage")
    stage = stage_root / f"stage_{time.monotonic_ns()}"
    (
        rows.observe(
            seen,
            F.count(F.lit(1)).alias("output"),
            F.count("_copied").alias("copied"),
            F.collect_set("_file").alias("files"),
        )
        .drop("_copied", "_file")
        .repartition("dt")
        .write.partitionBy("dt")
        .parquet(str(stage))
    )  # 3: staging write
    observed = seen.get
    added = _files(str(stage))

    name = table.split(".")[-1]  # 4: the commit
    spark.sql(f"CREATE TABLE bench.__lock_{name} (merge_id STRING) USING parquet")
    try:
        root = spark.sql(f"DESCRIBE TABLE EXTENDED {table} AS JSON").first()[0]
        location = json.loads(root)["location"].removeprefix("file:")
        now = set().union(*(_files(os.path.join(location, f"dt={d}")) for d in partitions))
        read = {f.removeprefix("file:") for f in observed["files"]}
        if not now <= read:
            raise RuntimeError(f"conflict: {len(now - read)} file(s) appeared in the partitions since they were read")
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('bench.journal' = '{len(partitions)} repoints')")
        for d in partitions:
            spark.sql(f"ALTER TABLE {table} PARTITION (dt = '{d}') SET LOCATION '{stage}/dt={d}'")
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('bench.journal' = '0', 'bench.version' = '1')")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS bench.__lock_{name}")
    spark.sql(f"REFRESH TABLE {table}")
    return {
        "numSourceRows": source_rows,
        "numTargetRowsInserted": summary.inserted,
        "numTargetRowsUpdated": summary.updated,
        "numTargetRowsDeleted": summary.deleted,
        "numTargetRowsCopied": observed["copied"],
        "numOutputRows": observed["output"],
        "numTargetFilesAdded": len(added),
        "numTargetFilesRemoved": len(now),
        "numTargetBytesAdded": sum(os.path.getsize(f) for f in added),
    }
