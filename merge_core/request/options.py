"""Every option, as declared once in dbt_macros/macros/core/options.sql.

The spec's keys, merge()'s keywords, the CLI's flags, the dbt config check and the options table of
the docs (``spark-merge options``) all come from that one table; this module hands it to Python.
"""

from __future__ import annotations

import functools
from typing import Any, Literal, TypedDict

from merge_core.common import macros

DuplicateRule = Literal["trino", "postgres", "strict"]
LossyAssignments = Literal["warn", "refuse", "allow"]


class MergeOptions(TypedDict, total=False):
    """The options merge(), explain(), to_spec() and the builders take, typed: one value from the call
    to the spec the SQL reads (MergeSpec's fields, its ``upsert`` dict). The declarations in
    options.sql are the source; tests/unit/test_options.py holds these names, kinds and choices to
    them."""

    duplicate_rule: DuplicateRule
    lossy_assignments: LossyAssignments
    schema_evolution: bool
    partition_filter: str
    key_columns: list[str]
    primary_key: str | list[str]
    watermark_key: str | list[str]
    tombstone_key: str
    tombstone_string_key_value: str
    upsert_mode: Literal["copy-on-write", "merge-on-read"]
    merge_engine: Literal["deduplicate", "partial-update", "aggregation", "first-row"]
    sequence_field: str | list[str]
    row_kind_field: str
    ignore_delete: bool
    remove_record_on_delete: bool
    default_aggregate_function: str
    aggregate_function: dict[str, Any]
    sequence_group: dict[str, Any]
    ignore_retract: dict[str, Any]
    distinct: dict[str, Any]
    nested_key: dict[str, Any]
    listagg_delimiter: dict[str, Any]


@functools.lru_cache(maxsize=1)
def table() -> tuple[dict, ...]:
    return tuple(macros.option_table())


def option(name: str) -> dict:
    return next(o for o in table() if o["name"] == name)


def names(*groups: str, kind: str | None = None) -> tuple[str, ...]:
    """Names of the options in ``groups`` (of one ``kind`` if given), in declaration order."""
    return tuple(o["name"] for o in table() if o["group"] in groups and (kind is None or o["kind"] == kind))


def choices(name: str) -> tuple[str, ...]:
    return tuple(option(name)["choices"])


def merge_keywords() -> tuple[str, ...]:
    """The options merge() and the Airflow operator take (the rest belong to tables and dbt)."""
    return names("merge", "upsert", "engine")


_GROUPS = {
    "merge": "any statement",
    "upsert": "upserts",
    "engine": "merge engines",
    "table": "the table (a property)",
    "dbt": "dbt models",
}


def _cell(value: object) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | tuple):
        return ", ".join(f"`{v}`" for v in value)
    return f"`{value}`"


def markdown() -> str:
    """The options as a Markdown table (``spark-merge options``; docs/python-and-cli.md holds its output)."""
    rows = [
        "| option | applies to | values | default | CLI | dbt config | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in table():
        cli = o["cli"] and (f"`--field COLUMN.{o['cli']}=VALUE`" if o["kind"] == "fields" else f"`{o['cli']}`")
        values = _cell(o["choices"]) if o["choices"] else o["kind"]
        needs = f" (with {', '.join(o['needs'])})" if o.get("needs") else ""
        applies = _GROUPS[o["group"]] + needs
        cells = [f"`{o['name']}`", applies, values, _cell(o["default"]), cli or "", _cell(o["dbt"]), o["help"]]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


def write_docs(path: str) -> None:
    """Put markdown() between the ``<!-- options:begin -->`` and ``<!-- options:end -->`` markers of ``path``."""
    from pathlib import Path

    doc = Path(path).read_text()
    head, rest = doc.split("<!-- options:begin -->\n", 1)
    tail = rest.split("\n<!-- options:end -->", 1)[1]
    Path(path).write_text(f"{head}<!-- options:begin -->\n{markdown()}\n<!-- options:end -->{tail}")
