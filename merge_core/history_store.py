"""Reading the per-merge history entries written by spark_merge__history_write_sql."""
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
