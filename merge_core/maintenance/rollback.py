"""rollback: point a table back at the version before a merge.

A rollback is itself a journaled commit (so it can be interrupted, recovered and rolled back in
turn): it points every partition that the merge and the later ones replaced back at the directory
it had before.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import ConflictError, SpecError, UnsupportedError
from merge_core.lifecycle.run import Lifecycle, drive
from merge_core.maintenance import history_store
from merge_core.maintenance.versions import (
    EMPTY_PARTITION,
    finished_at,
    partition_key,
    partition_location,
    settled_table,
    where_in,
)
from merge_core.spark import files

log = logging.getLogger("spark_merge")


class RollbackRun(Lifecycle):
    """A rollback through the lifecycle: begin reads the history and decides where each partition
    goes back to; execute, under the lock, checks each is still where the history says and commits
    the repoints with a journal (spark_merge__lifecycle_journal_commit, the tail of every commit)."""

    def __init__(self, spark: SparkSession, table_name: str, to_merge_id: str):
        super().__init__(spark)
        self.table_name, self.to_merge_id = table_name, to_merge_id

    def begin(self) -> dict:
        self._tag(True)
        table = settled_table(self.spark, self.table_name)
        to_merge_id = self.to_merge_id
        # commit order is version order (a history entry is written after the lock is released)
        entries = sorted(
            history_store.load(table).require_readable("rollback").entries,
            key=lambda e: (e.get("version_before", 0), finished_at(e)),
        )
        ids = [e["merge_id"] for e in entries]
        if to_merge_id not in ids:
            raise SpecError(
                f"{table['name']} has no merge {to_merge_id} in its history "
                f"(`spark-merge history {table['name']}` lists them)"
            )
        _check_history_complete(table, entries[ids.index(to_merge_id) :], to_merge_id)
        restore: dict[tuple, dict] = {}  # partition -> {'partition', 'location' before the range}
        current: dict[tuple, str] = {}  # partition -> its directory after the range, per history
        for entry in entries[ids.index(to_merge_id) :]:
            for r in entry.get("repoints") or []:
                k = partition_key(r["partition"])
                restore.setdefault(k, {"partition": r["partition"], "location": r.get("old_location")})
                current[k] = r["location"]
            if not entry.get("repoints") and entry.get("metrics", {}).get("numTargetRowsInserted"):
                for p in entry.get("partitions") or [{}]:
                    k = partition_key(p)
                    before = restore.get(k, {}).get("location")
                    if k not in current or (before and files.key(before) == files.key(current[k])):
                        where = "/".join(f"{c}={v}" for c, v in p.items()) or "the table"
                        raise UnsupportedError(
                            f"cannot roll back {table['name']} to before {to_merge_id}: insert-only merge "
                            f"{entry['merge_id']} appended rows to {where} in place; delete them with a DELETE instead"
                        )
        if not restore:
            raise SpecError(
                f"merge {to_merge_id} and the later ones changed no data in {table['name']}; nothing to roll back"
            )
        _refuse_reused(table, entries[ids.index(to_merge_id) :], restore, to_merge_id)
        self.restore, self.current = restore, current
        self._planned(
            table=table,
            ctx=macros.fill("context", {}, table, self.merge_id),
            kind="rollback",
            paradigm="ROLLBACK",
            statement=f"ROLLBACK {table['name']} TO BEFORE {to_merge_id}",
            commit_repoints=True,
            entry_extra={"rolled_back": ids[ids.index(to_merge_id) :]},
        )
        self.state = "begun"
        return {
            "merge_id": self.merge_id,
            "target": table["name"],
            "paradigm": "ROLLBACK",
            "plan_hash": "",
            "kind": "rollback",
        }

    def plan(self) -> dict:
        self.state = "planned"
        return {
            "merge_id": self.merge_id,
            "target": self.s["table"]["name"],
            "paradigm": "ROLLBACK",
            "plan_hash": "",
            "partitions_to_rewrite": [t["partition"] for t in self.restore.values()],
            "changed_rows": 0,
        }

    def execute(self) -> None:
        s, host = self.s, self.host
        host.lock(s["table"], self.merge_id)
        s["locked"] = True
        table = s["table"] = host.describe(s["table"])
        repoints = []
        for n, (k, target) in enumerate(sorted(self.restore.items())):
            now_at = partition_location(self.spark, table, target["partition"])
            if now_at is None or files.key(now_at) != files.key(self.current[k]):
                raise ConflictError(
                    f"{where_in(target['partition'], table)} is at {now_at}, not at {self.current[k]} as the "
                    f"history of {table['name']} says: it was changed outside spark-merge; nothing was rolled back"
                )
            location = target["location"]
            if location is None or (EMPTY_PARTITION.search(location) and files.exists(location) is False):
                location = location or f"{s['ctx']['stage_location']}/empty-{n}"
                s["staged"] = True
                host.run(macros.render("empty_partition_sql", table, location))
            elif files.exists(location) is False:
                raise UnsupportedError(
                    f"cannot roll back {table['name']} to before {self.to_merge_id}: {location}, which "
                    f"{where_in(target['partition'], table)} had then, was removed by vacuum"
                )
            repoints.append(
                {"partition": target["partition"], "location": location, "old_location": now_at, "exists": True}
            )
        s.update(repoints=repoints, partitions=[r["partition"] or {} for r in repoints])
        self.metrics["numTargetPartitionsRewritten"] = len(repoints)
        super().execute()


def rollback(spark: SparkSession, table_name: str, to_merge_id: str) -> dict:
    """Point the table back at the version it had before merge ``to_merge_id``; its history entry.

    Walks the history from that merge to now: each partition a commit in that
    range replaced goes back to the directory it had before the first of them; a
    partition the range created is emptied (as a merge that deletes every row
    of a partition does). Refused, with nothing changed, when an insert-only
    merge in the range appended files to a directory the rollback keeps, when a
    partition is no longer where the history says (changed by something else),
    or when vacuum already removed a directory it needs.
    """
    runs: list[RollbackRun] = []

    def make() -> RollbackRun:
        runs.append(RollbackRun(spark, table_name, to_merge_id))
        return runs[-1]

    result = drive(make)
    entry = runs[-1].s["entry"]
    log.info(
        "rolled %s back to before %s: %d partition(s) repointed (rollback %s)",
        entry["target"],
        to_merge_id,
        len(entry["repoints"]),
        result.merge_id,
    )
    return entry


def _version_after(entry: dict) -> int | None:
    """The table version an entry's commit left (older entries: inferred from what it changed)."""
    if "version_after" in entry:
        return entry["version_after"]
    if entry.get("version_before") is None:
        return None
    changed = entry.get("repoints") or (entry.get("metrics") or {}).get("numTargetRowsInserted")
    return entry["version_before"] + (1 if changed else 0)


def _check_history_complete(table: dict, entries: list[dict], to_merge_id: str) -> None:
    """Refuse, changing nothing, unless every commit from ``to_merge_id`` to now has its entry.

    Every commit moves the table's version by one, so the entries from that merge on must chain
    its version to the table's current one without a gap: a gap is a commit whose entry is
    missing (its process died before writing it), and rolling back past it would keep its
    changes while undoing earlier ones, a state that never existed.
    """
    expected = entries[0].get("version_before")
    for entry in entries:
        after = _version_after(entry)
        if entry.get("version_before") is None or after is None or expected is None:
            raise UnsupportedError(
                f"cannot roll back {table['name']} to before {to_merge_id}: history entry {entry['merge_id']} does not "
                f"record the table version it changed; nothing was rolled back"
            )
        if after == entry["version_before"]:
            continue  # changed nothing
        if entry["version_before"] != expected:
            break
        expected = after
    if expected != table["version"]:
        raise UnsupportedError(
            f"cannot roll back {table['name']} to before {to_merge_id}: its history has no entry for the commit that "
            f"moved it from version {expected} (the table is at version {table['version']}); a commit whose "
            f"entry is missing would be kept while earlier ones are undone, a state that never existed. "
            f"Nothing was rolled back"
        )


def _refuse_reused(table: dict, entries: list[dict], restore: dict[tuple, dict], to_merge_id: str) -> None:
    """Refuse a rollback that would point a partition at a directory a later commit wrote again.

    A merge points partitions at directories it wrote new, and a rollback at ones it found
    unchanged. Only `vacuum`'s canonical-layout step (layout.CanonicalizeRun) writes into a
    directory an older version used: it refills a partition's canonical directory once no
    version inside retention uses it. A version older than that refill named the directory with
    other content: it is out of reach, as if vacuum had removed it.
    """
    written = {
        files.key(r["location"]): e["merge_id"]
        for e in entries
        if e.get("kind") == "canonicalize"
        for r in e.get("repoints") or []
    }
    for target in restore.values():
        location = target["location"]
        if location and files.key(location) in written:
            raise UnsupportedError(
                f"cannot roll back {table['name']} to before {to_merge_id}: {location}, which "
                f"{where_in(target['partition'], table)} had then, was refilled with later data by "
                f"{written[files.key(location)]} (vacuum's canonical layout, once no version inside retention "
                f"used it); that version is gone, as after a vacuum. Nothing was rolled back"
            )
