"""Time travel: a table's rows as they were right after one of its commits, read from the old version's
files without touching the table.

Every commit leaves the directories it replaced on disk (until vacuum), and its history entry says
where each partition it moved went, and from where. So the version right after commit X is, per
partition: where the last commit up to X pointed it; else where the first commit after X moved it
from; else, never moved, where it is now. Files appended in place after X (an insert-only merge, a
plain INSERT) sit in those directories too: they are left out by their modification time, newer
than X's commit. A directory vacuum removed is an error, never an empty or partial result.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, cast

from pyspark.sql import DataFrame, SparkSession

from merge_core.common.errors import SpecError, UnsupportedError
from merge_core.maintenance import history_store
from merge_core.maintenance.versions import current_locations
from merge_core.spark import files
from merge_core.spark.catalog import describe_table


def read_as_of(spark: SparkSession, table_name: str, merge_id: str | None = None, timestamp: Any = None) -> DataFrame:
    """The rows of ``table_name`` right after commit ``merge_id``, or after the latest commit at or
    before ``timestamp`` (a ``datetime``, naive ones read as UTC, or ISO text); exactly the table's
    columns. Exactly one of the two."""
    if (merge_id is None) == (timestamp is None):
        raise SpecError("read_as_of needs exactly one of merge_id and timestamp")
    table = describe_table(spark, [p.strip("`") for p in table_name.split(".")])
    ordered = sorted(
        history_store.load(table).require_readable("time travel").entries,
        key=lambda e: (e.get("version_before") or 0, e["finished_at"]),
    )
    commit = _chosen(table, ordered, merge_id, timestamp)
    moment = datetime.fromisoformat(commit["finished_at"])
    parts = _locations(spark, table, ordered, ordered.index(commit))
    return _read(spark, table, parts, moment, commit)


def _chosen(table: dict, ordered: list[dict], merge_id: str | None, timestamp: Any) -> dict:
    """The commit asked for: by id, or the latest at or before the moment."""
    if merge_id is not None:
        found = [e for e in ordered if e["merge_id"] == merge_id]
        if not found:
            raise SpecError(
                f"{table['name']} has no commit {merge_id} in its history "
                f"(`spark-merge history {table['name']}` lists them)"
            )
        return found[0]
    moment = (
        timestamp if isinstance(timestamp, datetime) else datetime.fromisoformat(str(timestamp).replace("Z", "+00:00"))
    )
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    before = [e for e in ordered if datetime.fromisoformat(e["finished_at"]) <= moment]
    if not before:
        oldest = ordered[0]["finished_at"] if ordered else "none"
        raise SpecError(
            f"{table['name']} has no commit at or before {moment.isoformat()} "
            f"(its oldest recorded commit finished at {oldest})"
        )
    return before[-1]


def _key(partition: dict | None) -> str:
    return json.dumps(sorted((partition or {}).items()), default=str)


def _locations(spark: SparkSession, table: dict, ordered: list[dict], index: int) -> list[tuple[dict | None, str]]:
    """(partition values, directory) of every partition right after commit ``ordered[index]``."""
    at: dict[str, tuple[dict | None, str | None]] = {}
    for entry in ordered[: index + 1]:
        for r in entry.get("repoints") or []:
            at[_key(r.get("partition"))] = (r.get("partition"), r["location"])
    for entry in ordered[index + 1 :]:  # moved later: from where it was then (None: created later)
        for r in entry.get("repoints") or []:
            at.setdefault(_key(r.get("partition")), (r.get("partition"), r.get("old_location")))
    for values, location in current_locations(spark, table).values():  # never moved: where it is now
        at.setdefault(_key(values), (values, location))
    return [(values, location) for values, location in at.values() if location]


def _read(spark: SparkSession, table: dict, parts: list, moment: datetime, commit: dict) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    pcols = {c.lower() for c in table["partition_columns"]}
    columns = ", ".join(f"`{c['name']}` {c['type']}" for c in table["columns"] if c["name"].lower() not in pcols)
    schema = cast(StructType, StructType.fromDDL(columns))
    frames = []
    for values, location in parts:
        if files.exists(location) is False:
            raise UnsupportedError(
                f"the version of {table['name']} after {commit['merge_id']} is gone: {location} was removed by vacuum "
                f"(or by a write outside spark-merge); a later version may still be there"
            )
        frame = spark.read.schema(schema).format(table["provider"]).load(location)
        frame = frame.where(F.col("_metadata.file_modification_time") <= F.lit(moment))
        for column in table["partition_columns"]:
            typed = next(c["type"] for c in table["columns"] if c["name"].lower() == column.lower())
            frame = frame.withColumn(column, F.lit((values or {}).get(column)).cast(typed))
        frames.append(frame)
    names = [c["name"] for c in table["columns"]]
    if not frames:
        return spark.createDataFrame(
            [], cast(StructType, StructType.fromDDL(", ".join(f"`{c['name']}` {c['type']}" for c in table["columns"])))
        )
    out = frames[0].select(*names)
    for frame in frames[1:]:
        out = out.unionByName(frame.select(*names))
    return out
