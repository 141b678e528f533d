"""Reading the per-commit history entries: one JSON file per commit.

They are written by the lifecycle only (spark_merge__history_entry builds them,
spark_merge__lifecycle_finish or, for a journaled commit, spark_merge__lifecycle_apply_journal
writes them), so a commit completed by recovery has its entry too.
"""
from __future__ import annotations

import json

from pyspark.sql import SparkSession

from . import macros
from .catalog import SPARK_ERRORS, describe_table

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
