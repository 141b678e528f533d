"""The per-merge history entries (spark_merge__history_write_sql): one JSON file per commit.

A journaled commit carries its entry in the journal and writes it before it marks the journal
done, so a commit completed by recovery has its entry too (spark_merge__lifecycle_apply_journal).
"""
from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

from pyspark.sql import SparkSession

from . import macros
from .catalog import SPARK_ERRORS, describe_table, spark_message

log = logging.getLogger("spark_merge")


def write_history(spark: SparkSession, table: dict, entry: dict) -> None:
    """Write one history entry, finished now. The data is committed by then: a missing history
    line must not fail the merge, so a failure is a warning (and rollback refuses to cross it)."""
    entry = dict(entry, finished_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"))
    ctx = macros.fill("context", {}, table, entry["merge_id"])
    try:
        spark.sql(macros.render("history_write_sql", ctx, entry))
    except SPARK_ERRORS as e:
        log.warning("[%s] could not write history entry: %s", entry["merge_id"], spark_message(e))


def read_history(spark: SparkSession, table_name: str, limit: int = 20) -> list[dict]:
    table = describe_table(spark, [p.strip("`") for p in table_name.split(".")])
    ctx = macros.fill("context", {}, table, "*")
    try:
        rows = spark.sql(macros.render("history_read_sql", ctx) + f" LIMIT {int(limit)}").collect()
    except SPARK_ERRORS as e:
        if "PATH_NOT_FOUND" in str(e) or "does not exist" in str(e):
            return []
        raise
    return [json.loads(r["entry"]) for r in rows]
