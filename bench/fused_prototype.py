"""Prototypes of two plans for the CDC MERGE, to measure what a design would cost before building it
into the product (bench/delta_spark.py runs them beside spark-merge and Delta): fused_cdc, the fused
plan (two passes over the target: a match query, then the write), and one_pass_cdc, the one-pass plan
(one join that decides, writes and counts). And small_floor: the least a crash-safe merge of the small
merge's 1,000 updates costs, the floor a small merge's time is read against; small_one_pass: the same
merge with the one-pass plan's verdict (from the source alone) and candidates (from the footers), which
leaves one Spark job over the target.

Not the product and not used by it: the prototypes handle only merge_cost.py's CDC statement (WHEN
MATCHED AND s.deleted THEN DELETE, WHEN MATCHED THEN UPDATE SET ..., WHEN NOT MATCHED AND NOT s.deleted
THEN INSERT), and small_floor only its small one, through the DataFrame API, and only the strict
duplicate rule; they tell a target or source row of the join by its non-NULL id, which holds for this
workload's keys and for no general MERGE.
They keep every step the product's commit has, so the times are comparable. fused_cdc:

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
import operator
import os
import shutil
import time
from functools import reduce
from pathlib import Path

from merge_cost import COLUMNS
from pyspark.sql import Observation, functions as F

UPDATED = ["customer", "amount", "qty", "status", "updated_at"]


def _files(root: str) -> set[str]:
    return {str(p) for p in Path(root.removeprefix("file:")).rglob("*.parquet")}


def _location(spark, table: str) -> str:
    """The table's root directory, as a local path."""
    return json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {table} AS JSON").first()[0])["location"].removeprefix(
        "file:"
    )


def _commit(spark, table: str, location: str, partitions: list[str], stage: Path, read) -> set[str]:
    """The product's commit, as both prototypes run it: lock table, conflict check (the partitions'
    files now, listed, against ``read``, the file URIs the plan read), journal property, one repoint
    per partition, done and version properties, unlock, refresh. Returns the files it replaced."""
    name = table.split(".")[-1]
    spark.sql(f"CREATE TABLE bench.__lock_{name} (merge_id STRING) USING parquet")
    try:
        now = set().union(*(_files(os.path.join(location, f"dt={d}")) for d in partitions))
        seen = {f.removeprefix("file:") for f in read}
        if not now <= seen:
            raise RuntimeError(f"conflict: {len(now - seen)} file(s) appeared in the partitions since they were read")
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('bench.journal' = '{len(partitions)} repoints')")
        for d in partitions:
            spark.sql(f"ALTER TABLE {table} PARTITION (dt = '{d}') SET LOCATION '{stage}/dt={d}'")
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('bench.journal' = '0', 'bench.version' = '1')")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS bench.__lock_{name}")
    spark.sql(f"REFRESH TABLE {table}")
    return now


def _target_keys(spark, table: str, lo, hi):
    """The target's rows with a key in [lo, hi]: key, partition, file and row index (t_id, t_dt,
    t_file, t_row), the columns a match query reads."""
    return (
        spark.table(table)
        .where(F.col("id").between(lo, hi))
        .select(
            F.col("id").alias("t_id"),
            F.col("dt").alias("t_dt"),
            F.col("_metadata.file_path").alias("t_file"),
            F.col("_metadata.row_index").alias("t_row"),
        )
    )


def fused_cdc(spark, table: str, on_dt: bool, stage_root: Path) -> dict:
    """Run the CDC merge into ``table`` with the fused plan; its metrics."""
    src = spark.table("bench.cdc")
    lo, hi, source_rows = src.agg(F.min("id"), F.max("id"), F.count(F.lit(1))).first()  # 1: source statistics

    keys = _target_keys(spark, table, lo, hi)
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

    now = _commit(spark, table, _location(spark, table), partitions, stage, observed["files"])  # 4: the commit
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


def _key_ranges(location: str, days: set[str] | None) -> dict[str, tuple[int, int, int]]:
    """{file URI: (min id, max id, rows)} of the target's data files (of the partitions in ``days``,
    when given), from their footers: the per-file key range a commit could keep."""
    import pyarrow.parquet as pq

    out = {}
    for path in Path(location.removeprefix("file:")).rglob("*.parquet"):
        if days is not None and path.parent.name.removeprefix("dt=") not in days:
            continue
        meta = pq.ParquetFile(path).metadata
        column = meta.schema.names.index("id")
        stats = [meta.row_group(g).column(column).statistics for g in range(meta.num_row_groups)]
        out[f"file:{path}"] = (min(s.min for s in stats), max(s.max for s in stats), meta.num_rows)
    return out


def _carry_untouched(location: str, stage: Path, rewritten: set[str]) -> list[str]:
    """Hard-link into ``stage`` the files of each partition it wrote that are not in ``rewritten``
    (local paths): the untouched files the new partition directory keeps. Returns those partitions."""
    partitions = sorted(p.name.removeprefix("dt=") for p in stage.iterdir() if p.name.startswith("dt="))
    for d in partitions:
        for f in Path(location, f"dt={d}").glob("*.parquet"):
            if str(f) not in rewritten:
                os.link(f, stage / f"dt={d}" / f.name)
    return partitions


def one_pass_cdc(spark, table: str, on_dt: bool, stage_root: Path) -> dict:
    """The CDC merge into ``table`` with one join over the target (the one-pass plan).

    1. The source's statistics, and its duplicate verdict: no target row can match two source rows
       when the source's ON keys are unique (ON is equalities on them), which a distinct count over
       the source checks (a query of its own: inside the statistics' aggregation it costs more); so
       nothing is written before the duplicate check passes, as in the product. A source with a
       repeated key falls back to fused_cdc, which decides by the join.
    2. The candidate files: those whose key range (from their footers; the range a commit could
       keep per file) meets the source's, in the partitions the source names when ON names dt.
    3. One job: the candidate files FULL OUTER JOIN the source, a window over each target file
       marking the files that hold a matched row, those files' rows and the inserts written, the
       counts and the rewritten files observed in the same job (`DataFrame.observe`).
    4. The untouched files of each rewritten partition hard-linked into its new directory; then
       fused_cdc's commit."""
    from pyspark.sql import Window

    src = spark.table("bench.cdc")
    lo, hi, source_rows, days = src.agg(  # 1: source statistics
        F.min("id"), F.max("id"), F.count(F.lit(1)), F.collect_set(F.col("dt").cast("string"))
    ).first()
    keys = ["id", "dt"] if on_dt else ["id"]
    keyed = src.select(*keys).where(reduce(operator.and_, [F.col(k).isNotNull() for k in keys]))
    if keyed.distinct().count() != keyed.count():  # the verdict; a repeated key: the join decides
        return fused_cdc(spark, table, on_dt, stage_root)
    location = _location(spark, table)
    ranges = _key_ranges(location, set(days) if on_dt else None)
    candidates = sorted(f for f, (a, b, _) in ranges.items() if a <= hi and b >= lo)
    held = sum(ranges[f][2] for f in candidates)

    t = (
        spark.table(table)
        .where(F.col("_metadata.file_path").isin(candidates))
        .withColumn("t_file", F.col("_metadata.file_path"))
        .alias("t")
    )
    s = src.alias("s")
    on = (
        (F.col("t.id") == F.col("s.id")) & (F.col("t.dt") == F.col("s.dt")) if on_dt else F.col("t.id") == F.col("s.id")
    )
    in_t, in_s = F.col("t.id").isNotNull(), F.col("s.id").isNotNull()
    matched, deleted = in_t & in_s, F.col("s.deleted")
    group = F.when(in_t, F.col("t.t_file")).otherwise(F.concat(F.lit("new:"), (F.col("s.id") % 64).cast("string")))
    joined = t.join(s, on, "full_outer").withColumn(
        "_touched", F.max(F.when(matched, 1)).over(Window.partitionBy(group))
    )
    seen = Observation("one_pass")
    joined = joined.observe(
        seen,
        F.count(F.when(in_t, 1)).alias("joined"),
        F.count(F.when(matched & deleted, 1)).alias("deleted"),
        F.count(F.when(matched & ~deleted, 1)).alias("updated"),
        F.count(F.when(~in_t & ~deleted, 1)).alias("inserted"),
        F.count(F.when(in_t & ~in_s & (F.col("_touched") == 1), 1)).alias("copied"),
        F.collect_set(F.when(F.col("_touched") == 1, F.col("t.t_file"))).alias("files"),
    )
    rows = joined.where(((F.col("_touched") == 1) & in_t & ~(in_s & deleted)) | (~in_t & ~deleted)).select(
        *[
            (F.when(matched, F.col(f"s.{c}")) if c in UPDATED else F.when(matched, F.col(f"t.{c}")))
            .when(in_t, F.col(f"t.{c}"))
            .otherwise(F.col(f"s.{c}"))
            .alias(c)
            for c in COLUMNS
        ]
    )
    stage = stage_root / f"stage_{time.monotonic_ns()}"
    rows.write.partitionBy("dt").parquet(str(stage))  # 2: the one join, written
    observed = seen.get
    if observed["joined"] > held:  # cannot happen after the verdict of step 1: a broken invariant
        shutil.rmtree(stage)
        raise RuntimeError(f"{observed['joined'] - held} target row(s) joined more than one source row")
    rewritten = {f.removeprefix("file:") for f in observed["files"]}
    added = _files(str(stage))
    partitions = _carry_untouched(location, stage, rewritten)

    _commit(spark, table, location, partitions, stage, ranges)  # 3: the commit, as fused_cdc's
    return {
        "numSourceRows": source_rows,
        "numTargetRowsInserted": observed["inserted"],
        "numTargetRowsUpdated": observed["updated"],
        "numTargetRowsDeleted": observed["deleted"],
        "numTargetRowsCopied": observed["copied"],
        "numTargetFilesAdded": len(added),
        "numTargetFilesRemoved": len(rewritten),
    }


def _updated(target, src):
    """The small statement's output rows of ``target``'s rows: the broadcast source's values where its
    id matches, the target's otherwise."""
    t, s = target.alias("t"), F.broadcast(src).alias("s")
    hit = F.col("s.id").isNotNull()
    return t.join(s, F.col("t.id") == F.col("s.id"), "left").select(
        *[
            F.when(hit, F.col(f"s.{c}")).otherwise(F.col(f"t.{c}")).alias(c) if c in UPDATED else F.col(f"t.{c}")
            for c in COLUMNS
        ]
    )


def small_floor(spark, table: str, stage_root: Path) -> float:
    """The least a crash-safe copy-on-write merge of merge_cost.py's small statement (SMALL_MERGE:
    ON t.id = s.id WHEN MATCHED THEN UPDATE, 1,000 updates) does on Spark; returns its commit's
    seconds. Four steps, none of the product's validation, source cache or checks: the source's key
    range; one verdict query over the target's keys in that range (no target row matched twice) that
    also names the partitions holding a match; one write of those partitions with the broadcast
    source; and the commit both prototypes run (``_commit``)."""
    src = spark.table("bench.small_src")
    lo, hi = src.agg(F.min("id"), F.max("id")).first()  # 1: the source's key range
    keys = _target_keys(spark, table, lo, hi)
    verdict = (
        src.join(keys, src.id == keys.t_id)
        .agg(F.count(F.lit(1)), F.count_distinct(F.struct("t_file", "t_row")), F.collect_set("t_dt"))  # 2: the verdict
        .first()
    )
    if verdict[0] != verdict[1]:
        raise RuntimeError(f"{verdict[0] - verdict[1]} target row(s) matched twice")
    partitions = sorted(str(d) for d in verdict[2])
    location = _location(spark, table)
    read = set().union(*(_files(os.path.join(location, f"dt={d}")) for d in partitions))

    rows = _updated(spark.table(table).where(F.col("dt").isin(partitions)), src)
    stage = stage_root / f"small_{time.monotonic_ns()}"
    rows.write.partitionBy("dt").parquet(str(stage))  # 3: the write
    started = time.monotonic()
    _commit(spark, table, location, partitions, stage, read)  # 4: the commit
    return time.monotonic() - started


def small_one_pass(spark, table: str, stage_root: Path) -> float:
    """small_floor's merge with one_pass_cdc's plan; returns its commit's seconds. Four steps: one
    aggregation over the source (its key range, and the verdict: distinct keys, so no target row can
    match two source rows; a repeated key raises here, where the product would fall back to a plan
    that decides by the join); the candidate files from the target's footers (their key ranges meet
    the source's: no Spark job); one write of the candidate files' rows with the broadcast source,
    the untouched files of their partitions hard-linked beside it; then the commit (``_commit``).
    What it leaves out against small_floor is the verdict query's join over the target's keys."""
    src = spark.table("bench.small_src")
    lo, hi, keyed, distinct = src.agg(  # 1: the key range and the verdict, one job over 1,000 rows
        F.min("id"), F.max("id"), F.count("id"), F.count_distinct("id")
    ).first()
    if keyed != distinct:
        raise RuntimeError(f"{keyed - distinct} repeated source key(s): the plan that decides by the join is needed")
    location = _location(spark, table)
    ranges = _key_ranges(location, None)  # 2: the candidates, from the footers
    candidates = sorted(f for f, (a, b, _) in ranges.items() if a <= hi and b >= lo)

    rows = _updated(spark.table(table).where(F.col("_metadata.file_path").isin(candidates)), src)
    stage = stage_root / f"small1_{time.monotonic_ns()}"
    rows.write.partitionBy("dt").parquet(str(stage))  # 3: the write, the only job over the target
    partitions = _carry_untouched(location, stage, {f.removeprefix("file:") for f in candidates})
    started = time.monotonic()
    _commit(spark, table, location, partitions, stage, ranges)  # 4: the commit
    return time.monotonic() - started
