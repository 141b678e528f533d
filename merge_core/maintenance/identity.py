"""`adopt`: give a table spark-merge metadata of its own (macros/table/metadata.sql explains identity).

Every command refuses a table whose spark-merge properties are not its own: created from another
table's `SHOW CREATE TABLE` (it carries that table's root, identity and journal keys), moved to
another location, renamed, or with a version someone edited. `adopt` repairs exactly that, and
says what it changed:

- properties that point at another table's root (the location lies outside it): the table gets a
  new identity whose root is its own location; the other table's journal keys and last merge id
  are dropped. Its history starts empty (the other table's stays the other table's).
- a table renamed (same root, no other table with its identity): the new name is recorded; its
  history stays.
- an edited version: set from the newest readable history entry.

It refuses a table that reads files under another table's root (created with a LOCATION inside it),
or that shares its root with the table whose identity it carries: no property makes two tables that
share files safe; such a table must be created with a LOCATION of its own.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import MetadataError
from merge_core.common.result import new_merge_id
from merge_core.maintenance import history_store
from merge_core.spark import files, metastore
from merge_core.spark.catalog import describe_table

log = logging.getLogger("spark_merge")


def adopt(spark: SparkSession, table_name: str, dry_run: bool = False) -> dict:
    """Make ``table_name``'s spark-merge properties its own; returns {'table', 'set': {property:
    value}, 'unset': [property], 'reasons': [text]} (nothing to set: it was its own already)."""
    parts = [p.strip("`") for p in table_name.split(".")]
    table = describe_table(spark, parts, trusted=False)
    name = f"{table['database']}.{table['table_name']}"
    others = metastore.other_tables(spark, table)
    _refuse_shared_files(name, table["location"], others)
    new, unset, reasons = _identity_changes(table, name, others)
    new, reasons = _name_and_version(table, name, new, reasons)
    if not reasons:
        return {"table": name, "set": {}, "unset": [], "reasons": []}
    if not dry_run:
        spark.sql(macros.set_properties_sql(table, new))
        if unset:
            spark.sql(macros.unset_properties_sql(table, unset))
        log.warning("adopted %s: %s", name, "; ".join(reasons))
    return {"table": name, "set": new, "unset": unset, "reasons": reasons}


def _refuse_shared_files(name: str, location: str, others: list[dict]) -> None:
    for other in others:
        if other["root"] and files.is_inside(files.key(location), files.key(other["root"])):
            raise MetadataError(
                f"{name} reads files under the root of {other['name']} ({other['root']}): no property "
                f"makes two tables that share files safe. Create it with a LOCATION of its own; "
                f"nothing was changed"
            )


def _identity_changes(table: dict, name: str, others: list[dict]) -> tuple[dict, list[str], list[str]]:
    """A root that does not hold the table's location: a new identity rooted at its location (the
    journal and last merge id, another table's, go). A table id that is no id: a new one. Another
    table under the same root with the same id: a copy, refused."""
    props, location = table["properties"], table["location"]
    identity = macros.identity({k: v for k, v in props.items() if k != "spark_merge.table"}, name, location)
    if any("spark_merge.root" in e for e in identity["trust_errors"]):
        reason = (
            f"spark_merge.root {table['root']} does not hold its location {location}: a new identity "
            f"rooted at its own location"
        )
        new = {"spark_merge.root": location, "spark_merge.table_id": f"adopted_{new_merge_id()}"}
        unset = [k for k in props if k.startswith("spark_merge.journal.") or k == "spark_merge.last_merge_id"]
        return new, unset, [reason]
    table_id = props.get("spark_merge.table_id")
    if table_id is not None and not macros.is_id(table_id):
        return (
            {"spark_merge.table_id": f"adopted_{new_merge_id()}"},
            [],
            [f"spark_merge.table_id {table_id!r} is not an id: a new one"],
        )
    twins = [o for o in others if table_id is not None and o["table_id"] == table_id]
    if twins:
        raise MetadataError(
            f"{name} shares its root {table['root']} with {twins[0]['name']}, which carries "
            f"the same identity: one is a copy of the other. Create the copy with a LOCATION "
            f"of its own; nothing was changed"
        )
    return {}, [], []


def _name_and_version(table: dict, name: str, new: dict, reasons: list[str]) -> tuple[dict, list[str]]:
    """The table's own name (always written with a new identity), and a version read back from the
    history when the property is no number."""
    props = table["properties"]
    new, reasons = dict(new), list(reasons)
    if (props.get("spark_merge.table") or name).lower() != name.lower():
        reasons.append(f"spark_merge.table names {props['spark_merge.table']}: now {name}")
        new["spark_merge.table"] = name
    elif new:
        new["spark_merge.table"] = name
    version = props.get("spark_merge.version")
    if version is not None and not version.isdigit():
        entries = [] if "spark_merge.root" in new else history_store.load(table).entries
        after = max((e.get("version_after") or e["version_before"] for e in entries), default=0)
        reasons.append(f"spark_merge.version {version!r} is not a version: {after}, from the history")
        new["spark_merge.version"] = str(after)
    return new, reasons
