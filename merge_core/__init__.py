"""spark-merge: standard SQL MERGE, UPDATE and DELETE on plain parquet/ORC Spark tables.

    from merge_core import get_session, merge
    result = merge(get_session(), "MERGE INTO sales.accounts t USING updates s ON t.id = s.id "
                                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    print(result.summary())

The package by role: ``api`` (these functions, the CLI, the DataFrame builder), ``request`` (what the
user asked: the spec, its parser, the options), ``lifecycle`` (one run of a commit and its write
modes), ``spark`` (the Spark host: the lifecycle's primitives, the lock, the metastore, the files),
``targets`` (row-change paradigms, PostgreSQL), ``maintenance`` (history, vacuum, rollback, the
canonical layout, adopt), ``common`` (errors, results, the macros' renderer).
"""

from __future__ import annotations

import logging

from merge_core.api.functions import (
    adopt,
    compact,
    explain,
    history,
    jdbc_target,
    merge,
    recover,
    repair_history,
    repair_journal,
    rollback,
    to_spec,
    vacuum,
)
from merge_core.api.writer import MergeIntoWriter, merge_into
from merge_core.common.errors import (
    ConflictError,
    CorruptJournal,
    DuplicateMatchError,
    EngineRejected,
    LengthViolation,
    MergeError,
    MetadataError,
    NotNullViolation,
    ParseError,
    PlanViolation,
    SpecError,
    TargetError,
    TargetRefused,
    UnsupportedError,
    ValidationError,
)
from merge_core.common.result import MergeResult, parse_message
from merge_core.lifecycle.merge_run import MergeRun
from merge_core.request.parse import parse
from merge_core.request.quoting import sql_literal, sql_name
from merge_core.request.spec import MergeSpec, WhenClause
from merge_core.spark.session import get_session

__all__ = [
    "ConflictError",
    "CorruptJournal",
    "DuplicateMatchError",
    "EngineRejected",
    "LengthViolation",
    "MergeError",
    "MergeIntoWriter",
    "MergeResult",
    "MergeRun",
    "MergeSpec",
    "MetadataError",
    "NotNullViolation",
    "ParseError",
    "PlanViolation",
    "SpecError",
    "TargetError",
    "TargetRefused",
    "UnsupportedError",
    "ValidationError",
    "WhenClause",
    "adopt",
    "compact",
    "explain",
    "get_session",
    "history",
    "jdbc_target",
    "merge",
    "merge_into",
    "parse",
    "parse_message",
    "recover",
    "repair_history",
    "repair_journal",
    "rollback",
    "sql_literal",
    "sql_name",
    "to_spec",
    "vacuum",
]

logging.getLogger("spark_merge").addHandler(logging.NullHandler())
