"""What the catalog says about a table, read with SQL only (works over Spark Connect too)."""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import TargetError, error_for

SPARK_ERRORS = (AnalysisException, ParseException)
_OWN = threading.local()  # how deep this thread is inside a spark-merge operation
P = ParamSpec("P")
R = TypeVar("R")


class _ReportedByUs(logging.Filter):
    """PySpark logs every SQL error it raises (a JSON line with the JVM's stack) to these loggers.
    Inside a spark-merge operation the error is spark-merge's to report, as one MergeError line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_OWN, "depth", 0)


@functools.cache
def _filter_pyspark_error_logs() -> None:
    """Once per process, at the first operation (not at import: importing the package changes no logger)."""
    from pyspark.logger import PySparkLogger  # its own logger class: a plain Logger would not take its fields

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).addFilter(_ReportedByUs())


def reports_spark_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """A public operation: the Spark errors raised inside it reach the user as spark-merge's own
    one-line errors, without PySpark's log line of each (the thread's other Spark calls keep theirs)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        _filter_pyspark_error_logs()
        _OWN.depth = getattr(_OWN, "depth", 0) + 1
        try:
            return fn(*args, **kwargs)
        finally:
            _OWN.depth -= 1

    return wrapper


_POSITION = re.compile(r";?\s*line \d+,? pos \d+\s*;?")


def spark_message(exc: Exception) -> str:
    """The first line of Spark's message, without positions in SQL the user never wrote."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return _POSITION.sub("", text).strip().rstrip(";")


def did_you_mean(spark: SparkSession, parts: list[str]) -> str:
    """ "; did you mean db.t?" for a table the catalog does not have: the closest table of its
    database, or of the closest database; "" when none is close (asked only once a name is missing,
    of Spark's catalog API: no statement to render)."""
    import difflib

    database, table = (parts[-2] if len(parts) > 1 else spark.catalog.currentDatabase()), parts[-1]
    try:
        databases = [d.name for d in spark.catalog.listDatabases()]
        if database.lower() not in (d.lower() for d in databases):
            close = difflib.get_close_matches(database.lower(), databases, n=1, cutoff=0.6)
            database = close[0] if close else ""
        tables = [t.name for t in spark.catalog.listTables(database)] if database else []
    except SPARK_ERRORS:
        return ""
    found = difflib.get_close_matches(table.lower(), tables, n=1, cutoff=0.6)
    if found and f"{database}.{found[0]}".lower() != ".".join(parts[-2:]).lower():
        return f"; did you mean {database}.{found[0]}?"
    return ""


def catalog_rows(spark: SparkSession, parts: list[str], json_sql: str, columns_sql: str) -> dict:
    """What the catalog says of the table ``parts``: ``{'desc'}``, the JSON of ``json_sql``
    (describe_json_sql), and ``{'types'}``, the [name, type] rows of ``columns_sql``
    (describe_columns_sql); a TargetError when the table is missing or unreadable."""
    name = ".".join(parts)
    try:
        desc = json.loads(spark.sql(json_sql).collect()[0][0])
        types = [[r[0], r[1]] for r in spark.sql(columns_sql).collect()]
    except SPARK_ERRORS as e:
        if "TABLE_OR_VIEW_NOT_FOUND" in str(e) or "SCHEMA_NOT_FOUND" in str(e):
            raise TargetError(f"target table {name} not found{did_you_mean(spark, parts)}") from None
        raise TargetError(f"cannot read target table {name}: {spark_message(e)}") from None
    return {"desc": desc, "types": types}


def describe_table(spark: SparkSession, parts: list[str], trusted: bool = True) -> dict:
    """The `table` dict every macro takes; TargetError if it is missing or not rewritable, and
    (``trusted``) MetadataError when its spark-merge properties are not its own (copied from
    another table's DDL, the table moved or renamed, an edited version: table_info's trust_errors).
    The lifecycle's own describe (spark_merge__lifecycle_describe), outside a run."""
    return macros.lifecycle_describe(_Catalog(spark), parts, trusted)


class _Catalog:
    """The two primitives spark_merge__lifecycle_describe calls, for a describe outside a run."""

    def __init__(self, spark: SparkSession):
        self.spark = spark

    def catalog(self, parts: list[str], json_sql: str, columns_sql: str) -> dict:
        return catalog_rows(self.spark, parts, json_sql, columns_sql)

    def fail(self, code: str, message: str, rows: list | None = None, fields: dict | None = None) -> None:
        raise error_for(code, message, rows, fields)
