"""The merge spec: what the user asked for, independent of where it came from.

SQL text (``parse.py``), a Python dict (Airflow) and a dbt config all become a
``MergeSpec``. UPDATE and DELETE are specs too: they have no source, and their
WHERE becomes the ON condition, so one engine serves all three statements.

``to_dict()`` gives the plain data the Jinja macros in ``dbt_macros/`` consume;
those macros are the single SQL compiler for both hosts (Python and dbt).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Unpack

from merge_core.common import macros
from merge_core.common.errors import SpecError
from merge_core.request.options import DuplicateRule, LossyAssignments, MergeOptions, choices, merge_keywords, names

Action = Literal["update", "delete", "insert"]
SOURCE_KINDS = ("table", "query", "none")


def whens() -> tuple[str, ...]:
    """matched, not_matched, not_matched_by_source: the words naming a WHEN clause's kind."""
    return tuple(macros.codes()["when"])


def upsert_options() -> tuple[str, ...]:
    """Primary-key upserts' options: watermark/tombstone, or Paimon-style merge engines
    (macros/begin/engines.sql, whose per-field options are {field: value} dicts)."""
    return names("upsert", "engine")


def list_options() -> tuple[str, ...]:
    return names("upsert", "engine", kind="list")


@dataclass
class WhenClause:
    """One WHEN clause. Expressions are Spark SQL text."""

    matched: bool
    action: Action
    condition: str | None = None
    # UPDATE: ordered (column, expression) pairs
    assignments: list[tuple[str, str]] = field(default_factory=list)
    # INSERT: column list (empty means all target columns in order) and values
    insert_columns: list[str] = field(default_factory=list)
    insert_values: list[str] = field(default_factory=list)
    # UPDATE SET * / INSERT *: every target column from the same-named source column
    star: bool = False
    # WHEN NOT MATCHED BY SOURCE (matched is False): a target row no source row matches;
    # UPDATE or DELETE, its condition and values read only the target's columns
    by_source: bool = False

    @property
    def when(self) -> str:
        """matched, not_matched or not_matched_by_source (the dbt config's and from_dict's word)."""
        return "matched" if self.matched else ("not_matched_by_source" if self.by_source else "not_matched")

    def describe(self) -> str:
        when = {
            "matched": "WHEN MATCHED",
            "not_matched": "WHEN NOT MATCHED",
            "not_matched_by_source": "WHEN NOT MATCHED BY SOURCE",
        }[self.when]
        return f"{when}{' AND ' + self.condition if self.condition else ''} THEN {self.action.upper()}"


@dataclass
class MergeSpec:
    target: list[str]  # identifier parts, e.g. ["sales", "accounts"]
    on: str  # join condition (UPDATE/DELETE: the WHERE, or "true")
    clauses: list[WhenClause]
    source: str | None = None  # table name or query text; None for UPDATE/DELETE
    source_kind: str = "none"  # table | query | none
    target_alias: str = "t"
    source_alias: str = "s"
    kind: Literal["merge", "update", "delete"] = "merge"
    duplicate_rule: DuplicateRule = "trino"
    # a value whose type says storing it loses information: warn (log), refuse, or allow
    lossy_assignments: LossyAssignments = "warn"
    # MERGE WITH SCHEMA EVOLUTION: directly assigned source columns the target lacks are added
    # (UPDATE SET *, INSERT *, SET c = s.c; MergeRun.evolve_schema, request/evolution.py)
    schema_evolution: bool = False
    # Optional user promise: matching target rows live only where this predicate on the
    # target's columns holds (usually partition columns). Prunes the target scan.
    partition_filter: str | None = None
    # Target columns shown when a duplicate match is reported (default: those in ON).
    key_columns: list[str] = field(default_factory=list)
    sql: str | None = None  # the original statement, for history
    # Primary-key upsert: watermark/tombstone or a merge engine (upsert_options()).
    # ON and clauses are generated at begin (macros/begin/upsert.sql,
    # macros/begin/engines.sql), since they depend on the target's column types.
    upsert: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for name in names("merge", kind="choice"):  # the statement's own options with a list of values
            value = getattr(self, name)
            if value not in choices(name):
                raise SpecError(f"option {name}: unknown value {value!r}; expected one of {', '.join(choices(name))}")
        if self.source_kind not in SOURCE_KINDS:
            raise SpecError(f"source kind {self.source_kind!r} is not one of {SOURCE_KINDS}")
        if not self.clauses and not self.upsert:
            raise SpecError("a MERGE needs at least one WHEN clause")
        if not self.target or not all(self.target):
            raise SpecError("target table name is empty")
        if self.upsert:  # an option given where nothing reads it is refused, as dbt refuses it
            unread = macros.option_errors(self.upsert)
            if unread:
                raise SpecError("; ".join(unread))

    @property
    def target_name(self) -> str:
        return ".".join(self.target)

    def with_options(self, **typed: Unpack[MergeOptions]) -> MergeSpec:
        """This spec with the options given (request/options.py: MergeOptions, as options.sql declares
        them): the statement's own as fields, an upsert's into ``upsert``."""
        options: dict[str, Any] = dict(typed)
        known = set(merge_keywords())
        unknown = set(options) - known
        if unknown:
            raise SpecError(f"unknown option(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
        data = asdict(self)
        upsert = lift_upsert_options(options, data.get("upsert"))
        if upsert:
            if self.kind != "merge" or self.source is None:
                raise SpecError("upsert options (primary_key, watermark_key, ...) need a merge with a source")
            data.update({"upsert": upsert, "clauses": [], "on": "true"})
        data.update({k: v for k, v in options.items() if v is not None})
        return MergeSpec.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the macros (lists, not tuples, so Jinja and JSON agree)."""
        data = asdict(self)
        for clause in data["clauses"]:
            clause["assignments"] = [list(pair) for pair in clause["assignments"]]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MergeSpec:
        """Build a spec from plain data, e.g. an Airflow operator argument.

        Accepts ``target`` as "db.table" or a list of parts, and clauses with
        ``when`` (matched, not_matched, not_matched_by_source) or ``matched``, ``action``, ``condition``,
        ``set`` (dict or pairs), ``columns``, ``values``, ``star``.
        """
        data = dict(data)
        target = data.get("target")
        if isinstance(target, str):
            data["target"] = [p.strip("`") for p in target.split(".")]
        clauses = []
        for i, raw in enumerate(data.get("clauses") or [], start=1):
            if isinstance(raw, WhenClause):
                clauses.append(raw)
                continue
            raw = dict(raw)
            if "when" in raw:
                when = raw.pop("when")
                if when not in whens():
                    raise SpecError(f"clause {i}: when must be one of {', '.join(whens())}, got {when!r}")
                raw["matched"] = when == "matched"
                raw["by_source"] = when == "not_matched_by_source"
            if "set" in raw:
                s = raw.pop("set")
                raw["assignments"] = list(s.items()) if isinstance(s, dict) else [tuple(p) for p in s]
            if "columns" in raw:
                raw["insert_columns"] = raw.pop("columns")
            if "values" in raw:
                raw["insert_values"] = raw.pop("values")
            raw["assignments"] = [tuple(p) for p in raw.get("assignments", [])]
            action = raw.get("action")
            if action not in ("update", "delete", "insert"):
                raise SpecError(f"clause {i}: action must be update, delete or insert, got {action!r}")
            if "matched" not in raw:
                raise SpecError(f"clause {i}: say when: {', '.join(whens())}")
            unknown = set(raw) - {f for f in WhenClause.__dataclass_fields__}
            if unknown:
                raise SpecError(f"clause {i}: unknown field(s) {', '.join(sorted(unknown))}")
            clauses.append(WhenClause(**raw))
        data["clauses"] = clauses
        if data.get("source") is not None and data.get("source_kind", "none") == "none":
            src = data["source"].strip()
            data["source_kind"] = "query" if src.lower().startswith(("select", "with", "(", "values")) else "table"
        if "on" not in data and data.get("upsert"):
            data["on"] = "true"  # generated at begin
        if "on" not in data:
            raise SpecError("spec needs an 'on' condition")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise SpecError(f"unknown spec field(s): {', '.join(sorted(unknown))}")
        return cls(**data)


def lift_upsert_options(options: dict[str, Any], upsert: dict[str, Any] | None) -> dict[str, Any]:
    """``upsert`` with the upsert options given in ``options`` (taken out of it): a list option given
    as one name becomes a list of it. Empty when neither has any."""
    lifted = dict(upsert or {})
    for k in upsert_options():
        value = options.pop(k, None)
        if value is not None:
            lifted[k] = [value] if k in list_options() and isinstance(value, str) else value
    return lifted
