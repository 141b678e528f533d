"""`adopt`: give a table spark-merge metadata of its own (spark_merge_metadata.sql explains identity).

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

from . import files, history_store, macros, metastore
from .catalog import describe_table
from .errors import MetadataError
from .result import new_merge_id

log = logging.getLogger("spark_merge")


def adopt(spark: SparkSession, table_name: str, dry_run: bool = False) -> dict:
    """Make ``table_name``'s spark-merge properties its own; returns {'table', 'set': {property:
    value}, 'unset': [property], 'reasons': [text]} (nothing to set: it was its own already)."""
    parts = [p.strip("`") for p in table_name.split(".")]
    table = describe_table(spark, parts, trusted=False)
    name = f"{table['database']}.{table['table_name']}"
    props, location = table["properties"], table["location"]
    identity = macros.fill("identity", {k: v for k, v in props.items() if k != "spark_merge.table"}, name, location)
    own_root = not any("spark_merge.root" in e for e in identity["trust_errors"])
    others = metastore.other_tables(spark, table)
    reasons: list[str] = []
    new: dict[str, str] = {}
    unset: list[str] = []
    for other in others:
        if other["root"] and files.is_inside(files.key(location), files.key(other["root"])):
            raise MetadataError(
                f"{name} reads files under the root of {other['name']} ({other['root']}): no property "
                f"makes two tables that share files safe. Create it with a LOCATION of its own; "
                f"nothing was changed"
            )
    if not own_root:
        reasons.append(
            f"spark_merge.root {table['root']} does not hold its location {location}: a new identity "
            f"rooted at its own location"
        )
        new.update({"spark_merge.root": location, "spark_merge.table_id": f"adopted_{new_merge_id()}"})
        unset += [k for k in props if k.startswith("spark_merge.journal.") or k == "spark_merge.last_merge_id"]
    else:
        table_id = props.get("spark_merge.table_id")
        if table_id is not None and not macros.render("is_id", table_id):
            reasons.append(f"spark_merge.table_id {table_id!r} is not an id: a new one")
            new["spark_merge.table_id"] = f"adopted_{new_merge_id()}"
        elif table_id is not None:
            twins = [o for o in others if o["table_id"] == table_id]
            if twins:
                raise MetadataError(
                    f"{name} shares its root {table['root']} with {twins[0]['name']}, which carries "
                    f"the same identity: one is a copy of the other. Create the copy with a LOCATION "
                    f"of its own; nothing was changed"
                )
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
    if not reasons:
        return {"table": name, "set": {}, "unset": [], "reasons": []}
    if not dry_run:
        sets = ", ".join(f"{macros.render('literal', k)} = {macros.render('literal', v)}" for k, v in new.items())
        spark.sql(f"ALTER TABLE {table['relation']} SET TBLPROPERTIES ({sets})")
        if unset:
            keys = ", ".join(macros.render("literal", k) for k in unset)
            spark.sql(f"ALTER TABLE {table['relation']} UNSET TBLPROPERTIES IF EXISTS ({keys})")
        log.warning("adopted %s: %s", name, "; ".join(reasons))
    return {"table": name, "set": new, "unset": unset, "reasons": reasons}
