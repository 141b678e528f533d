"""What the catalog says about a table, read with SQL only (works over Spark Connect too)."""
from __future__ import annotations

import json
import re

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import SparkSession

from . import macros
from .errors import TargetError

SPARK_ERRORS = (AnalysisException, ParseException)
_POSITION = re.compile(r";?\s*line \d+,? pos \d+\s*;?")


def spark_message(exc: Exception) -> str:
    """The first line of Spark's message, without positions in SQL the user never wrote."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return _POSITION.sub("", text).strip().rstrip(";")


def relation(parts: list[str]) -> str:
    return ".".join(macros.render("quote", p) for p in parts)


def describe_table(spark: SparkSession, parts: list[str]) -> dict:
    """The `table` dict every macro takes; TargetError if it is missing or not rewritable."""
    name = ".".join(parts)
    rel = relation(parts)
    try:
        desc = json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {rel} AS JSON").collect()[0][0])
        types = [[r[0], r[1]] for r in spark.sql(f"DESCRIBE TABLE {rel}").collect()]
    except SPARK_ERRORS as e:
        if "TABLE_OR_VIEW_NOT_FOUND" in str(e) or "SCHEMA_NOT_FOUND" in str(e):
            raise TargetError(f"target table {name} not found") from None
        raise TargetError(f"cannot read target table {name}: {spark_message(e)}") from None
    table = macros.fill("table_info", desc, types)
    if table["errors"]:
        raise TargetError("; ".join(table["errors"]))
    return table
