"""`spark-merge drop`: drop a table with every version and its history, and nothing that blocks its name.

Spark's DROP TABLE deletes a managed table's current directory. A merged unpartitioned table reads
its current version from ``<root>/_merge_<id>``, so a plain DROP leaves the root (the older versions,
the history) behind, and a new table of that name then fails with LOCATION_ALREADY_EXISTS. `drop`
points such a table back at its root first, so the DROP deletes all of it (as the dbt
materialization's drop does). Named after a plain DROP TABLE already happened, it removes what that
left under the name's directory, once it is sure the directory is a spark-merge root of that table
and nothing else: its history names the table, and no table of the catalog reads a file under it.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import MetadataError
from merge_core.maintenance import history_store
from merge_core.spark import files, metastore
from merge_core.spark.catalog import describe_table

log = logging.getLogger("spark_merge")


def drop(spark: SparkSession, table_name: str, dry_run: bool = False) -> dict:
    """Drop ``table_name`` with its versions and history, or remove what a plain DROP TABLE of it
    left behind; {'table', 'dropped': bool, 'removed': [directories], 'kept': why nothing was removed}."""
    parts = [p.strip("`") for p in table_name.split(".")]
    name = ".".join(parts)
    if spark.catalog.tableExists(name):
        return _drop_table(spark, describe_table(spark, parts, trusted=False), dry_run)
    return _remove_left(spark, parts, dry_run)


def _drop_table(spark: SparkSession, table: dict, dry_run: bool) -> dict:
    out = {"table": table["name"], "dropped": True, "removed": [], "kept": ""}
    own_root = table["root"] and not table["trust_errors"] and not metastore.claims_on(spark, table)
    if table["managed"] and own_root and files.key(table["location"]) != files.key(table["root"]):
        out["removed"].append(table["root"])
        if not dry_run:  # the DROP then deletes the whole root
            spark.sql(macros.repoint_statements(table, [{"partition": None, "location": table["root"]}])[0])
    elif not table["managed"]:
        out["kept"] = f"{table['name']} is an external table: DROP TABLE leaves its files, as Spark's does"
    if not dry_run:
        spark.sql(macros.drop_table_sql(table["relation"]))
        log.warning("dropped %s%s", table["name"], f" with its root {table['root']}" if out["removed"] else "")
    return out


def _remove_left(spark: SparkSession, parts: list[str], dry_run: bool) -> dict:
    """The default directory of a table name no table has: removed when it is a spark-merge root whose
    history is that table's and no table of the catalog reads under it."""
    database, name = (parts[-2] if len(parts) > 1 else spark.catalog.currentDatabase()), parts[-1]
    full = f"{database}.{name}"
    where = f"{spark.catalog.getDatabase(database).locationUri.rstrip('/')}/{name.lower()}"
    out: dict[str, Any] = {"table": full, "dropped": False, "removed": [], "kept": ""}
    probe: dict[str, Any] = {
        "name": full,
        "database": database,
        "table_name": name,
        "root": where,
        "table_id": None,
        "former_roots": [],
    }
    history = history_store.load(probe)
    if files.exists(where) is not True:
        raise MetadataError(f"{full} does not exist, nor does its directory {where}: nothing to drop")
    if not history.entries or any(e["target"].lower() != full.lower() for e in history.entries):
        out["kept"] = f"{where} is not a spark-merge root of {full} (its history does not name it): left as it is"
        return out
    readers = [
        o["name"]
        for o in metastore.other_tables(spark, probe)
        if files.is_inside(files.key(o["location"] or "-"), files.key(where))
    ]
    if readers:
        out["kept"] = f"{where} holds files that {', '.join(readers)} read: left as it is"
        return out
    out["removed"].append(where)
    if not dry_run:
        files.remove(where)
        log.warning("removed %s, the root a plain DROP TABLE of %s left behind", where, full)
    return out
