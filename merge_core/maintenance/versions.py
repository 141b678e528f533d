"""The versions of a table: where its partitions live now, which directories the history says
each commit replaced, and which of them a version inside the retention period still uses.

Every copy-on-write commit leaves the directories it replaced on disk, so readers that started
earlier can finish and a rollback can point back at them. A directory is *in use by a version
inside retention* when the table uses it now, or a commit that finished within the retention
period replaced it. vacuum (vacuum.py), rollback (rollback.py) and the canonical layout
(layout.py) decide from these.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import SpecError
from merge_core.lifecycle.housekeeping import refuse_foreign_format
from merge_core.spark import files, host
from merge_core.spark.catalog import SPARK_ERRORS, describe_table

log = logging.getLogger("spark_merge")


DEFAULT_RETENTION_HOURS = 168.0  # 7 days, as Delta Lake; table property spark_merge.retention_hours overrides


NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # how the catalog spells a NULL partition value


def retention_hours(table: dict) -> float:
    """The table's retention (property spark_merge.retention_hours), default 7 days."""
    text = table["properties"].get("spark_merge.retention_hours")
    if text is None:
        return DEFAULT_RETENTION_HOURS
    try:
        hours = float(text)
    except ValueError:
        hours = -1.0
    if not hours >= 0 or hours == float("inf"):
        raise SpecError(
            f"table property spark_merge.retention_hours of {table['name']} is {text!r}, not a number of "
            f"hours >= 0; fix it with ALTER TABLE {table['name']} SET TBLPROPERTIES "
            f"('spark_merge.retention_hours' = '168')"
        )
    return hours


def settled_table(spark: SparkSession, name: str) -> dict:
    parts = [p.strip("`") for p in name.split(".")]
    table = describe_table(spark, parts)
    refuse_foreign_format(table)
    if host.recover(spark, table):
        table = describe_table(spark, parts)
    return table


def finished_at(entry: dict) -> datetime:
    return datetime.fromisoformat(entry["finished_at"])


def partition_location(spark: SparkSession, table: dict, partition: dict | None) -> str | None:
    """Where the metastore points a partition (the table for an unpartitioned one); None if it does not exist."""
    if not table["partition_columns"]:
        return table["location"]
    assert partition is not None, "a partition of a partitioned table"
    spec = macros.partition_spec(table, {c: partition[c] for c in table["partition_columns"]})
    try:
        desc = spark.sql(macros.describe_json_sql(table["relation"], spec)).collect()[0][0]
    except SPARK_ERRORS as e:
        if "PARTITIONS_NOT_FOUND" in str(e) or "NoSuchPartition" in str(e):
            return None
        raise
    return json.loads(desc)["location"]


def current_locations(spark: SparkSession, table: dict) -> dict[str, tuple[dict | None, str]]:
    """Each partition's directory name under the root, as SHOW PARTITIONS spells it (``dt=2024-01-01``,
    ``a=1/b=x``: Spark names a partition's directory so) -> (its values, the directory the catalog
    points it at now). An unpartitioned table: ``{"": (None, its location)}``.

    One listing of the table's files gives the directory of every partition that has files; only
    partitions whose directory does not end in their own name (empty ones, or ones added with a
    custom LOCATION) are asked for one by one.
    """
    if not table["partition_columns"]:
        return {"": (None, table["location"])}
    rel = table["relation"]
    dirs = {files.location_of_uri(f).rsplit("/", 1)[0] for f in spark.table(rel).inputFiles()}
    depth = len(table["partition_columns"])
    by_name = {"/".join(files.key(d).split("/")[-depth:]): d for d in dirs}
    by_lower = {c.lower(): c for c in table["partition_columns"]}
    found: dict[str, tuple[dict | None, str]] = {}
    for (spec,) in spark.sql(macros.show_partitions_sql(rel)).collect():
        values = {
            by_lower[unquote(k).lower()]: None if v == NULL_PARTITION else unquote(v)
            for k, v in (kv.split("=", 1) for kv in spec.split("/"))
        }
        location = by_name.get(spec) or partition_location(spark, table, values)
        if location:
            found[spec] = (values, location)
    return found


def live_locations(spark: SparkSession, table: dict) -> set[str]:
    """Every directory the table reads now (as files.key())."""
    return {files.key(location) for _, location in current_locations(spark, table).values()}


def replaced_by(entries: list[dict]) -> dict[str, list[tuple[str, datetime]]]:
    """{replaced directory (files.key()): [(the directory that replaced it, when the commit checked
    it under the lock)]}: a data file in the replaced directory that is newer than that moment and
    not in the new one was appended after the check (a late append), so no version reads it."""
    out: dict[str, list[tuple[str, datetime]]] = {}
    for entry in entries:
        moment = datetime.fromisoformat(entry.get("checked_at") or entry["finished_at"])
        for r in entry.get("repoints") or []:
            if r.get("old_location"):
                out.setdefault(files.key(r["old_location"]), []).append((r["location"], moment))
    return out


def late_files(doomed: str, replaced: dict[str, list[tuple[str, datetime]]]) -> list[str]:
    """The late appends (replaced_by) inside ``doomed``, or in it when it is a replaced directory."""
    key = files.key(doomed)
    found = []
    for old, newer in replaced.items():
        if not (files.is_inside(old, key) or key.rsplit("/", 1)[0] == old):
            continue
        for location, moment in newer:
            present = {name for name, _ in files.data_file_times(location)}
            for name, mtime in files.data_file_times(old):
                path = f"{old}/{name}"
                if mtime > moment and name.rsplit("/", 1)[-1] not in present and files.is_inside(files.key(path), key):
                    found.append(path)
    return sorted(set(found))


def in_use(entries: list[dict], live: set[str], cutoff: datetime) -> tuple[set[str], set[str], dict[str, str]]:
    """(every directory a version inside retention uses, those of them a commit inside retention
    replaced, {directory: location as recorded} replaced before the cutoff), all as files.key().

    A directory is in use when the table reads it now, a commit that finished after the cutoff
    wrote it, or such a commit replaced it (it was the current data at some moment of the period).
    """
    keep = set(live)
    replaced_long_ago: dict[str, Any] = {}
    replaced_recently = set()
    for entry in entries:
        recent = finished_at(entry) >= cutoff
        for r in entry.get("repoints") or []:
            if recent:
                keep.add(files.key(r["location"]))
            if not r.get("old_location"):
                continue
            if recent:
                replaced_recently.add(files.key(r["old_location"]))
            else:
                replaced_long_ago.setdefault(files.key(r["old_location"]), r["old_location"])
    return keep | replaced_recently, replaced_recently, replaced_long_ago
