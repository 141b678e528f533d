"""`adopt`: give a table spark-merge metadata of its own (macros/table/metadata.sql explains identity).

Every command refuses a table whose spark-merge properties are not its own: created from another
table's `SHOW CREATE TABLE` (it carries that table's root, identity and journal keys), moved to
another location, renamed, or with a version someone edited. `adopt` repairs exactly that, and
says what it changed:

- a table renamed (ALTER TABLE ... RENAME TO; no table of the old name is left): it keeps its
  identity and history. A managed table's root moves with the rename (the catalog moves its
  directory); the new root is recorded, and the old one in `spark_merge.former_roots`, through which
  history entries written before are read. Spark points a renamed managed table at its new default
  directory; an unpartitioned one whose current version lived in `<root>/_merge_<id>` then reads an
  empty directory until adopt moves its root there and points it back at that version.
- properties that point at another table's root (the location lies outside it): the table gets a
  new identity whose root is its own location; the other table's journal keys and last merge id
  are dropped. Its history starts empty (the other table's stays the other table's).
- an edited `spark_merge.table_id` (it no longer matches `spark_merge.identity`): set back to the id
  of the table's first commit, from its history.
- an edited version: set from the newest readable history entry.

It refuses a table that reads files under another table's root (created with a LOCATION inside it),
or that shares its root with the table whose identity it carries: no property makes two tables that
share files safe; such a table must be created with a LOCATION of its own.
"""

from __future__ import annotations

import json
import logging

from pyarrow import fs
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
    if _finish_move(spark, table):  # an adopt of a renamed table that was interrupted: finished now
        return adopt(spark, table_name, dry_run)
    renamed = _renamed(spark, table, name, others)
    if renamed is None:
        _refuse_shared_files(name, table["location"], others)
        new, unset, reasons = _identity_changes(table, name, others)
    else:
        new, unset, reasons = renamed["set"], [], [renamed["reason"]]
    new, reasons = _name_and_version(table, name, new, reasons)
    new, reasons = _signed(table, new, reasons)
    if not reasons:
        return {"table": name, "set": {}, "unset": [], "reasons": []}
    if not dry_run:
        if renamed is not None and renamed.get("move"):  # its current version back first: readers see it again
            spark.sql(macros.repoint_statements(table, [{"partition": None, "location": renamed["current"]}])[0])
        spark.sql(macros.set_properties_sql(table, new))
        if unset:
            spark.sql(macros.unset_properties_sql(table, unset))
        if renamed is not None and renamed.get("move"):
            _finish_move(spark, describe_table(spark, parts, trusted=False))
        log.warning("adopted %s: %s", name, "; ".join(reasons))
    return {"table": name, "set": new, "unset": unset, "reasons": reasons}


def _renamed(spark: SparkSession, table: dict, name: str, others: list[dict]) -> dict | None:
    """A table renamed by ALTER TABLE ... RENAME TO: its properties name another table that no longer
    exists, its identity is no other table's, and its history (under its recorded root, or under
    its location where the catalog moved the root) is this identity's. Then {'set': properties,
    'reason', 'move': (old root, new root) when the root must follow, 'location': where the table
    reads its current version afterwards}; None when it was not renamed."""
    props = table["properties"]
    old_name, table_id, old_root = props.get("spark_merge.table"), props.get("spark_merge.table_id"), table["root"]
    if not old_name or old_name.lower() == name.lower() or not table_id:
        return None
    if any(o["name"].lower() == old_name.lower() or o["table_id"] == table_id for o in others):
        return None  # the other table is there: a copy of its DDL, not a rename
    location, root_key = table["location"], files.key(old_root)
    former = json.loads(props.get("spark_merge.former_roots") or "[]")
    if files.key(location) != root_key and _has_history(table, location, table_id):
        # the catalog moved the root with the table (a partitioned table, or one read from its root)
        new = {"spark_merge.root": location, "spark_merge.former_roots": json.dumps([*former, old_root])}
        return {"set": new, "reason": f"renamed from {old_name}: its root moved to {location}", "location": None}
    if not files.is_inside(files.key(location), root_key) and _has_history(table, old_root, table_id):
        # Spark pointed it at its new default directory, and the root (with the version it read) stayed
        current = _current_location(table)
        if current is None or files.exists(location) and files.listing(location):
            return None
        moved = location + current[len(old_root.rstrip("/")) :]
        new = {"spark_merge.root": location, "spark_merge.former_roots": json.dumps([*former, old_root])}
        reason = (
            f"renamed from {old_name}: its root {old_root} moves to {location}, and the table reads its current "
            f"version there ({moved}) again"
        )
        return {"set": new, "reason": reason, "move": True, "current": current}
    return None


def _has_history(table: dict, root: str, table_id: str) -> bool:
    """Whether ``root`` holds history entries of the table ``table_id``."""
    entries = history_store.load({**table, "root": root, "former_roots": []}).entries
    return any(e.get("table_id") == table_id for e in entries)


def _current_location(table: dict) -> str | None:
    """Where an unpartitioned table's last commit pointed it (the newest history entry that moved it)."""
    for entry in history_store.load({**table, "former_roots": []}).entries:
        for r in entry.get("repoints") or []:
            if r.get("partition") is None:
                return r["location"]
    return None


def _finish_move(spark: SparkSession, table: dict) -> bool:
    """The last steps of adopting a renamed unpartitioned table, whose properties already name its new
    root while it reads a version under its former root: move that root's directory to the new root
    (one rename of a directory), then point the table at its version there. True if there was one.
    Interrupted, adopt runs them again; in between the table reads its version, or fails on a
    missing directory, never another version."""
    location, root = files.key(table["location"]), files.key(table["root"])
    former = [f for f in table.get("former_roots") or [] if files.is_inside(location, files.key(f))]
    if table["partition_columns"] or files.is_inside(location, root) or not former:
        return False
    old = former[-1].rstrip("/")
    filesystem, src = files.resolve(old)
    _, dst = files.resolve(table["root"])
    if filesystem.get_file_info(src).type != fs.FileType.NotFound:
        if filesystem.get_file_info(dst).type != fs.FileType.NotFound:
            filesystem.delete_dir(dst)  # empty (checked by _renamed): the directory Spark's rename named
        filesystem.move(src, dst)
    moved = table["root"].rstrip("/") + table["location"].rstrip("/")[len(old) :]
    spark.sql(macros.repoint_statements(table, [{"partition": None, "location": moved}])[0])
    log.warning("adopted %s: moved its root %s to %s; it reads %s", table["name"], old, table["root"], moved)
    return True


def _signed(table: dict, new: dict, reasons: list[str]) -> tuple[dict, list[str]]:
    """The identity's signature for the table id adopt leaves (spark_merge.identity); an edited id is
    set back to the id of the table's first commit, from its history."""
    props, new, reasons = table["properties"], dict(new), list(reasons)
    table_id = new.get("spark_merge.table_id", props.get("spark_merge.table_id"))
    signed = props.get("spark_merge.identity")
    if table_id is None:
        return new, reasons
    if "spark_merge.table_id" not in new and signed not in (None, macros.identity_sign(table_id, table["created"])):
        first = _first_commit(table)
        edited = f"spark_merge.table_id {props['spark_merge.table_id']!r} was edited"
        if first is None:
            table_id = f"adopted_{new_merge_id()}"
            reasons.append(f"{edited}, and no history names the table's first commit: a new id")
        else:
            table_id = first
            reasons.append(f"{edited}: the id of its first commit, {first}, from its history")
        new["spark_merge.table_id"] = table_id
    if new or reasons or signed is None:
        sign = macros.identity_sign(table_id, table["created"])
        if sign != signed:
            new["spark_merge.identity"] = sign
    return new, reasons


def _first_commit(table: dict) -> str | None:
    """The id the table's history gives its first commit (an entry whose table id is its own merge id)."""
    entries = history_store.load({**table, "table_id": None}).entries
    firsts = [
        e["merge_id"]
        for e in entries
        if e.get("table_id") == e["merge_id"] and e.get("target", "").lower() == table["name"].lower()
    ]
    return firsts[-1] if firsts else None


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
    identity = macros.identity(
        {k: v for k, v in props.items() if k != "spark_merge.table"}, name, location, table["created"]
    )
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
    signed = props.get("spark_merge.identity")
    edited = signed is not None and table_id is not None and signed != macros.identity_sign(table_id, table["created"])
    twins = [o for o in others if table_id is not None and o["table_id"] == table_id]
    if twins and not edited:  # an edited id that names another table's is set back by _signed
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
