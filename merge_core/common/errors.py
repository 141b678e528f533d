"""Errors users see. Each names the problem and, where it has one, the statement part.

The codes are declared once, with the operation codes, in dbt_macros/macros/core/codes.sql:
the lifecycle and the plan's SQL raise them there, these classes carry them here.
"""

from __future__ import annotations

import functools
from typing import Any

from merge_core.common import macros


@functools.cache
def codes() -> dict[str, str]:
    """Every error code, by name (macros/core/codes.sql), read when first asked for."""
    return macros.codes()["error"]


class _Code:
    """An error class's code: its name here, its text in macros/core/codes.sql (read on first use,
    so importing spark-merge renders nothing)."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, instance: object, owner: type) -> str:
        return codes()[self.name]


class MergeError(Exception):
    """Base class: every error spark-merge raises on purpose."""

    code: Any = _Code("error")

    def __init__(self, message: str):
        super().__init__(f"{self.code}: {message}")
        self.detail = message


class SpecError(MergeError):
    """The statement or spec itself is malformed (before looking at any table)."""

    code: Any = _Code("invalid_spec")


class ParseError(SpecError):
    code: Any = _Code("parse")


class UnsupportedError(SpecError):
    code: Any = _Code("unsupported")


class ValidationError(MergeError):
    """The spec does not fit the real target/source schemas. Nothing was touched."""

    code: Any = _Code("validation")

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


class TargetError(MergeError):
    """The target is missing or of a kind spark-merge cannot rewrite."""

    code: Any = _Code("target")


class DuplicateMatchError(MergeError):
    """A target row that the duplicate rule refuses to let several source rows change (found while
    planning, before writes). ``rule``: the duplicate_rule. ``examples``: up to 5 offending target
    rows, each its key values (or file and row), ``source_rows`` and ``matches``, up to 5 of the source
    rows that matched it as ``{"source": {column: value}, "clause": "WHEN MATCHED clause 1 (UPDATE)"}``.
    The plan builds the message (spark_merge__duplicate_examples), so every host shows the same text."""

    code: Any = _Code("duplicate")
    rule: str = ""
    examples: tuple = ()


class NotNullViolation(MergeError):
    """A row would store NULL in a NOT NULL column (found while planning, before writes)."""

    code: Any = _Code("not_null")


class LengthViolation(MergeError):
    """A row would store a string longer than its CHAR(n)/VARCHAR(n) column allows (Spark's
    EXCEED_LIMIT_LENGTH; found while planning, before writes)."""

    code: Any = _Code("length")


class EngineRejected(MergeError):
    """A merge engine refused a record (a DELETE it takes none of, a retraction it cannot apply,
    a bad row kind); found while planning, before writes."""

    code: Any = _Code("engine_rejected")


class PlanViolation(MergeError):
    """The staged rewrite does not match the plan (rows outside the planned partitions, or other
    row counts): found after staging, before the journal, so nothing was committed."""

    code: Any = _Code("plan_violation")


class CorruptJournal(MergeError):
    """The commit journal in the target's table properties cannot be read. Nothing was touched."""

    code: Any = _Code("corrupt_journal")


class MetadataError(MergeError):
    """spark-merge's metadata of a table (its identity, version, lock or history) is not what
    spark-merge wrote for this table: edited, corrupt, or copied from another table. The message
    names the object and the command that repairs it. Nothing was touched."""

    code: Any = _Code("metadata")


class TargetRefused(MergeError):
    """A target database refused the merge's commit (a constraint, a value its column cannot hold);
    its transaction rolled back, nothing was written. ``sqlstate`` is the database's error code."""

    code: Any = _Code("target_refused")
    sqlstate = ""


class ConflictError(MergeError):
    """Another writer changed what this merge read, in the partitions it rewrites. Nothing was written."""

    code: Any = _Code("conflict")


class RetryableConflict(MergeError):
    """Another merge committed elsewhere in the table since this one began: re-plan and try again."""

    code: Any = _Code("retry")


def error_for(code: str, message: str, rows: list[dict] | None = None, fields: dict | None = None) -> MergeError:
    """The error a lifecycle macro's ``host.fail(code, message, rows, fields)`` raises
    (macros/lifecycle/phases.sql), its structured fields set from ``fields`` (a validation's
    ``errors``, a duplicate match's ``rule``) and ``rows`` (a duplicate match's examples).

    MERGE_VERSION_MOVED is the one code no user sees: another merge committed since this one
    began, so the Python host plans again (RetryableConflict); dbt reports it as a conflict.
    """
    fields = fields or {}
    cls: type[MergeError] | None = next((c for c in _all(MergeError) if c.code == code), None)
    if code == codes()["version_moved"]:
        cls = RetryableConflict
    error: Any = Exception.__new__(cls or MergeError)
    MergeError.__init__(error, message if cls else f"{code}: {message}")
    if cls is DuplicateMatchError:
        error.rule, error.examples = fields.get("rule", ""), list(rows or [])
    if cls is ValidationError:
        error.errors = list(fields.get("errors") or [message])
    return error


def _all(cls: type[MergeError]) -> list[type[MergeError]]:
    return [cls] + [d for c in cls.__subclasses__() for d in _all(c)]
