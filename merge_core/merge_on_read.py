"""Watermark upserts in merge-on-read mode: writers append, a view reads, compaction rewrites.

The table's name becomes a view over a log table `<name>__sm_log`: the view
keeps the freshest row of each key by the same total order the copy-on-write
MERGE uses (spark_merge_upsert.sql), and hides tombstones, so both modes read
the same rows for the same input. The first merge-on-read upsert into a plain
table converts it (renames the table to the log and creates the view); the
upsert options are kept in the log's properties for the view and compaction.
"""
from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timedelta, timezone

from pyspark.sql import SparkSession

from . import files, host, lock, macros
from .catalog import SPARK_ERRORS, describe_table, relation, spark_message
from .history_store import write_history
from .result import MergeResult, new_merge_id
from .host import SparkHost
from .errors import TargetError, ValidationError
from .spec import MergeSpec

log = logging.getLogger("spark_merge")
LOG_SUFFIX = "__sm_log"
OPTIONS_PROPERTY = "spark_merge.upsert"


def _is_view(spark: SparkSession, parts: list[str]) -> bool | None:
    """True for a view, False for a table, None when nothing has that name."""
    try:
        desc = json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {relation(parts)} AS JSON").collect()[0][0])
    except SPARK_ERRORS as e:
        if "TABLE_OR_VIEW_NOT_FOUND" in str(e):
            return None
        raise
    return (desc.get("type") or "").upper() == "VIEW"


def log_table(spark: SparkSession, parts: list[str]) -> dict:
    """The log behind the view ``parts``, converting a plain table on first use."""
    db, name = parts[-2], parts[-1]
    log_parts = [db, name + LOG_SUFFIX]
    kind = _is_view(spark, parts)
    if kind is None:
        raise TargetError(f"target table {'.'.join(parts)} not found")
    if kind is False:
        if _is_view(spark, log_parts) is not None:
            raise TargetError(f"{'.'.join(parts)} is a table but {'.'.join(log_parts)} exists too; drop one")
        log.warning("converting %s to merge-on-read: the table becomes %s, read through the view %s",
                    ".".join(parts), ".".join(log_parts), ".".join(parts))
        spark.sql(f"ALTER TABLE {relation(parts)} RENAME TO {relation(log_parts)}")
    return describe_table(spark, log_parts)


def _plan(table: dict, upsert: dict) -> dict:
    plan = macros.fill("upsert_plan", upsert, table)
    if plan["errors"]:
        raise ValidationError(plan["errors"])
    return plan


def _entry(table: dict, merge_id: str, kind: str, statement: str, metrics: dict, repoints: list[dict]) -> dict:
    """The history entry of a merge-on-read upsert or compaction (each moves the version by one)."""
    return {"merge_id": merge_id, "target": table["name"], "kind": kind, "paradigm": "MERGE_ON_READ",
            "status": "committed", "statement": statement, "metrics": metrics,
            "partitions": [r["partition"] or {} for r in repoints], "repoints": repoints,
            "version_before": table["version"], "version_after": table["version"] + 1}


def upsert(spark: SparkSession, spec: MergeSpec) -> MergeResult:
    """Append the source to the log (no join, no rewrite) and keep the view current."""
    t0, merge_id = time.monotonic(), new_merge_id()
    table = log_table(spark, spec.target)
    if host.recover(spark, table):
        table = describe_table(spark, [table["database"], table["table_name"]])
    data = spec.to_dict()
    plan = _plan(table, data["upsert"])
    try:  # the source must give every column, with types the table can store
        spark.sql(f"DESCRIBE QUERY {macros.render('mor_rows_sql', table, data)}").collect()
    except SPARK_ERRORS as e:
        raise ValidationError([f"source for {table['name']}: {spark_message(e)}"]) from None
    view = relation(spec.target)
    source_rows = spark.sql(f"SELECT count(*) FROM {macros.render('source_relation', data)} AS s").collect()[0][0]
    with lock.table_lock(spark, table, merge_id):
        fresh = describe_table(spark, [table["database"], table["table_name"]])
        spark.sql(macros.render("mor_append_sql", fresh, data))
        options = json.dumps(data["upsert"])
        spark.sql(f"ALTER TABLE {fresh['relation']} SET TBLPROPERTIES "
                  f"('{OPTIONS_PROPERTY}' = {macros.render('literal', options)}, "
                  f"'spark_merge.version' = '{fresh['version'] + 1}', "
                  f"'spark_merge.root' = {macros.render('literal', fresh['root'])})")
        spark.sql(macros.render("mor_view_sql", view, fresh, plan))
    metrics = {"numSourceRows": source_rows, "numTargetRowsInserted": source_rows, "numTargetRowsUpdated": 0,
               "numTargetRowsDeleted": 0, "numTargetRowsCopied": 0, "numOutputRows": source_rows,
               "numTargetFilesAdded": 0, "numTargetFilesRemoved": 0, "numTargetBytesAdded": 0,
               "numTargetBytesRemoved": 0, "numTargetPartitionsRewritten": 0,
               "executionTimeMs": int((time.monotonic() - t0) * 1000)}
    write_history(spark, fresh, _entry(fresh, merge_id, "upsert", f"MERGE-ON-READ UPSERT INTO {'.'.join(spec.target)}",
                                       metrics, []))
    result = MergeResult(merge_id, table["name"], "MERGE_ON_READ", "", metrics, [])
    log.info(result.summary())
    return result


def compact(spark: SparkSession, name: str, tombstone_retention_hours: float | None = None) -> dict:
    """Rewrite the log of a merge-on-read table to one row per key (a journaled commit).

    Tombstones are kept, so a late older row of a deleted key stays deleted;
    with ``tombstone_retention_hours`` those whose first watermark column (a
    date or timestamp) is older than that are dropped.
    """
    parts = [p.strip("`") for p in name.split(".")]
    if _is_view(spark, parts) is not True:
        raise TargetError(f"{name} is not a merge-on-read table (no view over {name}{LOG_SUFFIX})")
    table = describe_table(spark, [parts[-2], parts[-1] + LOG_SUFFIX])
    if host.recover(spark, table):
        table = describe_table(spark, [table["database"], table["table_name"]])
    upsert_options = json.loads(table["properties"].get(OPTIONS_PROPERTY) or "{}")
    plan = _plan(table, upsert_options)
    cutoff = None
    if tombstone_retention_hours is not None:
        first = table["columns_by_name"][plan["watermark_key"][0].lower()]
        if first["type"] not in ("date", "timestamp", "timestamp_ntz"):
            raise ValidationError([f"tombstone retention needs a date or timestamp watermark; "
                                   f"{first['name']} is {first['type']}"])
        moment = datetime.now(timezone.utc) - timedelta(hours=tombstone_retention_hours)
        cutoff = f"CAST(TIMESTAMP'{moment:%Y-%m-%d %H:%M:%S}+00:00' AS {first['type']})"
    merge_id = new_merge_id()
    statement = f"COMPACT {name}"
    before = spark.sql(f"SELECT count(*) FROM {table['relation']}").collect()[0][0]
    ctx = macros.fill("context", {}, table, merge_id)
    partitions = ([r["partition"] for r in macros.fill_list("decode_partitions", table, [
        r.asDict() for r in spark.sql(macros.render("file_stats_sql", table, table["relation"], None)).collect()])]
        if table["partition_columns"] else [{}])
    if not partitions:
        return {"merge_id": None, "rows_before": 0, "rows_after": 0}
    # the copy-on-write commit of a merge (spark_merge__lifecycle_write) with the compacting
    # query as its stage statement; its history entry goes with the journal
    s = {"table": table, "ctx": ctx, "merge_id": merge_id, "kind": "compact", "paradigm": "MERGE_ON_READ",
         "plan_hash": "", "statement": statement, "partitions": partitions, "deltas": None, "rows_before": before,
         "metrics": {"numSourceRows": 0, "numTargetRowsInserted": 0, "numTargetRowsUpdated": 0, "numTargetRowsDeleted": 0},
         "stage_statement": macros.render("stage_select_sql", table, ctx, macros.render("mor_compact_select", table, plan, cutoff))}
    job = SparkHost(spark, merge_id)
    try:
        macros.render("lifecycle_write", job, s)
    except BaseException:
        macros.render("lifecycle_cleanup", job, s)
        job.unlock()
        if s.get("staged") and not job.journaled:
            files.remove(ctx["stage_location"])
        raise
    metrics = dict(s["metrics"], executionTimeMs=job.elapsed_ms())
    log.info("compacted %s: %d log rows -> %d", name, before, metrics["numOutputRows"])
    return {"merge_id": merge_id, "rows_before": before, "rows_after": metrics["numOutputRows"], "metrics": metrics}


