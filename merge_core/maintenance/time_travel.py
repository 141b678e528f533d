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
from datetime import UTC, date, datetime
from typing import Any, cast

from pyspark.sql import DataFrame, SparkSession

from merge_core.common import macros
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
    index = ordered.index(commit)
    # vacuum's canonical layout moves a version into other directories without changing a row: the
    # version after a commit so moved is read where the layout put it
    while index + 1 < len(ordered) and ordered[index + 1].get("kind") == "canonicalize":
        index += 1
    moment = datetime.fromisoformat(ordered[index]["finished_at"])
    parts = _locations(spark, table, ordered, index)
    return _read(spark, table, parts, moment, commit, _recorded_rows(table, ordered, index))


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
    moment = _moment(timestamp)
    before = [e for e in ordered if datetime.fromisoformat(e["finished_at"]) <= moment]
    if not before:
        oldest = ordered[0]["finished_at"] if ordered else "none"
        raise SpecError(
            f"{table['name']} has no commit at or before {moment.isoformat()} "
            f"(its oldest recorded commit finished at {oldest})"
        )
    return before[-1]


def _moment(timestamp: Any) -> datetime:
    """``timestamp`` as an aware datetime: a datetime (naive ones read as UTC), a date (its midnight, UTC)
    or ISO-8601 text; anything else (a number, 'yesterday') is a SpecError saying what to pass."""
    if isinstance(timestamp, datetime):
        moment = timestamp
    elif isinstance(timestamp, date):
        moment = datetime(timestamp.year, timestamp.month, timestamp.day)
    else:
        try:
            if not isinstance(timestamp, str):
                raise ValueError
            moment = datetime.fromisoformat(timestamp.strip().replace("Z", "+00:00"))
        except ValueError:
            raise SpecError(
                f"timestamp {timestamp!r} is not a moment: pass a datetime, a date, or ISO-8601 text such as "
                f"'2026-12-01T10:00:00Z' (naive ones are UTC; for seconds since the epoch, "
                f"datetime.fromtimestamp(seconds, UTC))"
            ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


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


def _recorded_rows(table: dict, ordered: list[dict], index: int) -> dict[str, tuple[dict | None, int, datetime]]:
    """By partition_key, the rows each partition held right after ``ordered[index]``, where a commit
    recorded them, and when they were written (feed.sql: recorded_rows)."""
    recorded = macros.recorded_rows(table, ordered[: index + 1])
    return {k: (r["partition"], r["rows"], datetime.fromisoformat(r["at"])) for k, r in recorded.items()}


def _read(
    spark: SparkSession,
    table: dict,
    parts: list,
    moment: datetime,
    commit: dict,
    recorded: dict[str, tuple[dict | None, int, datetime]],
) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    pcols = {c.lower() for c in table["partition_columns"]}
    columns = ", ".join(f"`{c['name']}` {c['type']}" for c in table["columns"] if c["name"].lower() not in pcols)
    schema = cast(StructType, StructType.fromDDL(columns))
    frames, read = [], []
    for values, location in parts:
        if files.exists(location) is False:
            raise UnsupportedError(
                f"the version of {table['name']} after {commit['merge_id']} is gone: {location} was removed by vacuum "
                f"(or by a write outside spark-merge); a later version may still be there"
            )
        frame = spark.read.schema(schema).format(table["provider"]).load(location)
        frame = frame.where(F.col("_metadata.file_modification_time") <= F.lit(moment))
        read.append(frame)
        for column in table["partition_columns"]:
            typed = next(c["type"] for c in table["columns"] if c["name"].lower() == column.lower())
            frame = frame.withColumn(column, F.lit((values or {}).get(column)).cast(typed))
        frames.append(frame)
    names = [c["name"] for c in table["columns"]]
    _check_rows(table, commit, parts, read, recorded)
    if not frames:
        return spark.createDataFrame(
            [], cast(StructType, StructType.fromDDL(", ".join(f"`{c['name']}` {c['type']}" for c in table["columns"])))
        )
    out = frames[0].select(*names)
    for frame in frames[1:]:
        out = out.unionByName(frame.select(*names))
    return out


def _check_rows(
    table: dict,
    commit: dict,
    parts: list,
    frames: list[DataFrame],
    recorded: dict[str, tuple[dict | None, int, datetime]],
) -> None:
    """Refuse a version whose files are not all where its record says: in each partition whose rows a
    commit recorded, the version's directory must hold exactly those rows in files written by the time
    that commit finished (counted in one Spark job; files written after it are plain INSERTs, rows of
    the later versions). So a partition dropped, overwritten or truncated by a plain writer, or a
    directory vacuum emptied or refilled, is an error naming it, never fewer rows."""
    from pyspark.sql import functions as F

    keyed = [macros.partition_key(table, values) for values, _ in parts]
    located = {k: location for k, (_, location) in zip(keyed, parts, strict=True)}
    name = f"the version of {table['name']} after {commit['merge_id']} is not all there"
    for k, (values, rows, _) in sorted(recorded.items()):
        if rows and k not in located:
            raise UnsupportedError(
                f"{name}: partition {_shown(values)} held {rows} row(s) then, and the table has no such partition "
                f"now (ALTER TABLE ... DROP PARTITION, or a write that bypassed spark-merge, removed it)"
            )
    checked = [(k, frame) for k, frame in zip(keyed, frames, strict=True) if k in recorded]
    if not checked:
        return
    selected = [
        frame.where(F.col("_metadata.file_modification_time") <= F.lit(recorded[k][2])).select(F.lit(k).alias("k"))
        for k, frame in checked
    ]
    counted = selected[0]
    for frame in selected[1:]:
        counted = counted.unionAll(frame)
    found = {r["k"]: r["n"] for r in counted.groupBy("k").agg(F.count(F.lit(1)).alias("n")).collect()}
    for k, _ in checked:
        values, rows, _ = recorded[k]
        if found.get(k, 0) != rows:
            raise UnsupportedError(
                f"{name}: partition {_shown(values)} held {rows} row(s) then, and {located[k]} holds "
                f"{found.get(k, 0)} of them now: its files were removed or replaced since, by vacuum (whose "
                f"canonical layout refills a partition's first directory) or by a write that bypassed spark-merge "
                f"(INSERT OVERWRITE, TRUNCATE TABLE); a later version may still be there"
            )


def _shown(values: dict | None) -> str:
    return ", ".join(f"{c} = {v!r}" for c, v in (values or {}).items()) or "(the table)"
