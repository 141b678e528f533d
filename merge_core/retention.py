"""Old versions: keep them for a retention period, remove them after, roll back to them.

Every copy-on-write commit leaves the directories it replaced on disk, so readers
that started earlier can finish and a rollback can point back at them. The
history entry of each commit names the directories it replaced (`old_location`)
and the time it finished. A directory is *in use by a version inside retention*
when the table uses it now, or a commit that finished within the retention
period replaced it (it was the current data at some moment of that period).

vacuum removes what no such version uses: directories replaced before the
retention period (including a table's original default partition directories,
which a later DROP and re-ADD of the partition would otherwise bring back), the
staging directories of merges that never committed, and locks of dead
processes.

rollback is itself a journaled commit (so it can be interrupted, recovered and
rolled back in turn): it points every partition that the merge and the later
ones replaced back at the directory it had before.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

from pyspark.sql import SparkSession

from . import files, history_store, host, lock, macros, metastore
from .catalog import SPARK_ERRORS, describe_table
from .engine import ORPHAN_MIN_AGE_HOURS, drop_dead_stage_tables, refuse_foreign_format
from .errors import CODES, ConflictError, MetadataError, SpecError, UnsupportedError
from .lifecycle import Lifecycle, drive
from .result import new_merge_id

log = logging.getLogger("spark_merge")

DEFAULT_RETENTION_HOURS = 168.0  # 7 days, as Delta Lake; table property spark_merge.retention_hours overrides
_STAGING = re.compile(r"^_merge_(\d{14})_[0-9a-f]{8}$")
_EMPTY = re.compile(r"/empty-\d+$")
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # how the catalog spells a NULL partition value
LATE_APPEND = CODES["late_append"]  # a warning: files vacuum keeps


@dataclass
class VacuumResult:
    table: str
    retain_hours: float
    dry_run: bool
    removed: list[str] = field(default_factory=list)  # what was (or, in a dry run, would be) removed
    files: int = 0
    bytes: int = 0
    kept_for_retention: int = 0  # replaced directories still inside the retention period
    layout: object | None = None  # the canonical-layout step that ran first (layout.LayoutResult)
    late_appends: list[str] = field(default_factory=list)  # data files written after their directory was replaced: kept
    outside: list[str] = field(default_factory=list)  # replaced directories outside the table's root: kept

    def summary(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        first = f"{self.layout.summary()}\n" if self.layout is not None else ""
        text = first + (
            f"vacuum {self.table} (retain {self.retain_hours:g} h): {verb} {len(self.removed)} path(s), "
            f"{self.files} file(s), {self.bytes} bytes; kept {self.kept_for_retention} replaced "
            f"director{'y' if self.kept_for_retention == 1 else 'ies'} still inside retention"
        )
        if self.late_appends:
            text += (
                f"; {LATE_APPEND}: kept {len(self.late_appends)} data file(s) written into a directory after the "
                f"commit that replaced it, which no version reads: {', '.join(self.late_appends[:5])}"
            )
        if self.outside:
            outside = ", ".join(self.outside[:5])
            text += f"; kept {len(self.outside)} replaced director(ies) outside the table's root: {outside}"
        return text


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


def _table(spark: SparkSession, name: str) -> dict:
    parts = [p.strip("`") for p in name.split(".")]
    table = describe_table(spark, parts)
    refuse_foreign_format(table)
    if host.recover(spark, table):
        table = describe_table(spark, parts)
    return table


def _partition_key(partition: dict | None) -> tuple:
    """Sortable and NULL apart from every string (a NULL partition value sorts first)."""
    return tuple(sorted((k.lower(), v is not None, v or "") for k, v in (partition or {}).items()))


def _finished(entry: dict) -> datetime:
    return datetime.fromisoformat(entry["finished_at"])


def partition_location(spark: SparkSession, table: dict, partition: dict | None) -> str | None:
    """Where the metastore points a partition (the table for an unpartitioned one); None if it does not exist."""
    if not table["partition_columns"]:
        return table["location"]
    spec = macros.render("partition_spec", table, {c: partition[c] for c in table["partition_columns"]})
    try:
        desc = spark.sql(f"DESCRIBE TABLE EXTENDED {table['relation']} {spec} AS JSON").collect()[0][0]
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
    found = {}
    for (spec,) in spark.sql(f"SHOW PARTITIONS {rel}").collect():
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
    replaced_long_ago, replaced_recently = {}, set()
    for entry in entries:
        recent = _finished(entry) >= cutoff
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


def vacuum(
    spark: SparkSession,
    table_name: str,
    retain_hours: float | None = None,
    dry_run: bool = False,
    moves: list[dict] | None = None,
) -> VacuumResult:
    """Remove the directories no version inside the retention period uses.

    ``moves``: in a dry run, the canonical-layout moves that a real run would commit first
    (layout.plan_moves), so the list of what would be removed is the real run's.
    """
    table = _table(spark, table_name)
    if retain_hours is None:
        retain_hours = retention_hours(table)
    if not dry_run:  # the catalog entries of dead merges' staging and read-once tables
        drop_dead_stage_tables(spark, table)
    if retain_hours < 0:
        raise SpecError(f"retention must be zero or more hours, got {retain_hours:g}")
    result = VacuumResult(table["name"], retain_hours, dry_run)
    claims = metastore.claims_on(spark, table)
    if claims:
        raise MetadataError(
            f"vacuum of {table['name']} would remove files under its root {table['root']} that other "
            f"table(s) read: {'; '.join(claims[:3])}. Drop them, or create them with a LOCATION of "
            f"their own; nothing was removed"
        )
    if dry_run:
        _vacuum(spark, table, result, moves or [])
    else:
        with lock.table_lock(spark, table, f"vacuum_{new_merge_id()}"):  # no commit repoints while we look
            _vacuum(spark, table, result)
    log.info(result.summary())
    return result


def _vacuum(spark: SparkSession, table: dict, result: VacuumResult, moves: list[dict] = ()) -> None:
    now = datetime.now(UTC)
    cutoff = now - timedelta(hours=result.retain_hours)
    orphan_cutoff = min(cutoff, now - timedelta(hours=ORPHAN_MIN_AGE_HOURS))
    root = files.key(table["root"])
    entries = {e["merge_id"]: e for e in history_store.load(table).require_readable("vacuum").entries}

    live = live_locations(spark, table)
    simulated = []  # a dry run: the canonical-layout commit a real run makes just before, as its history entry
    if moves:
        live = (live - {files.key(m["location"]) for m in moves}) | {files.key(m["canonical"]) for m in moves}
        simulated = [
            {
                "merge_id": "",
                "finished_at": (now - timedelta(seconds=1)).isoformat(),
                "repoints": [{"location": m["canonical"], "old_location": m["location"]} for m in moves],
            }
        ]
    keep, replaced_recently, replaced_long_ago = in_use(list(entries.values()) + simulated, live, cutoff)
    result.kept_for_retention = len(replaced_recently - live)

    def unused(location: str) -> bool:
        return not any(files.is_inside(k, location) for k in keep)

    doomed = []
    for k, location in sorted(replaced_long_ago.items()):
        if k == root:
            # an unpartitioned table's original files sit in its root, next to _merge_* and _spark_merge;
            # they are a version in use when the table reads the root again (rolled back, or put back
            # by the canonical layout) or a commit inside retention replaced it
            if root in keep:
                continue
            doomed += [
                child
                for child, _ in files.listing(location)
                if files.visible(child.rsplit("/", 1)[1]) and unused(files.key(child))
            ]
        elif unused(k):
            doomed.append(location)
    for child, is_dir in files.listing(table["root"]):
        match = _STAGING.match(child.rsplit("/", 1)[1])
        if not (is_dir and match):
            continue
        merge_id = child.rsplit("/", 1)[1].removeprefix("_merge_")
        if merge_id in entries:
            old_enough = _finished(entries[merge_id]) < cutoff
        else:  # never committed (or its history entry was lost): judge by the time it started
            started = datetime.strptime(match.group(1), "%Y%m%d%H%M%S").replace(tzinfo=UTC)
            old_enough = started < orphan_cutoff
        if old_enough and unused(files.key(child)):
            doomed.append(child)
    holder = lock.holder(spark, table)
    for child, _ in files.listing(f"{table['root'].rstrip('/')}/_spark_merge/locks"):
        if holder is None or child.rsplit("/", 1)[1] != holder["merge_id"]:
            doomed.append(child)

    # one entry per directory, none inside another (a whole _merge_<id> covers its partitions)
    by_key = {files.key(d): d for d in reversed(doomed) if files.exists(d) is not False}
    doomed = [d for k, d in by_key.items() if not any(files.is_inside(k, o) and k != o for o in by_key)]
    replaced = replaced_by(list(entries.values()))
    for location in list(doomed):
        if not files.is_inside(files.key(location), root):  # a replaced partition of a custom LOCATION
            result.outside.append(location)
            doomed.remove(location)
            continue
        late = late_files(location, replaced)
        if late:
            log.warning(
                "%s: %d data file(s) of %s were written into %s after the commit that replaced it, so "
                "no version of the table reads them; vacuum keeps them: %s",
                LATE_APPEND,
                len(late),
                table["name"],
                location,
                ", ".join(late[:5]),
            )
            result.late_appends += late
            doomed.remove(location)
    for location in doomed:
        n, size = files.size(location)
        result.files += n
        result.bytes += size
        result.removed.append(location)
        if not result.dry_run:
            log.info("vacuum: removing %s (%d file(s), %d bytes)", location, n, size)
            files.remove(location)


class RollbackRun(Lifecycle):
    """A rollback through the lifecycle: begin reads the history and decides where each partition
    goes back to; execute, under the lock, checks each is still where the history says and commits
    the repoints with a journal (spark_merge__lifecycle_journal_commit, the tail of every commit)."""

    def __init__(self, spark: SparkSession, table_name: str, to_merge_id: str):
        super().__init__(spark)
        self.table_name, self.to_merge_id = table_name, to_merge_id

    def begin(self) -> dict:
        self._tag(True)
        table = _table(self.spark, self.table_name)
        to_merge_id = self.to_merge_id
        # commit order is version order (a history entry is written after the lock is released)
        entries = sorted(
            history_store.load(table).require_readable("rollback").entries,
            key=lambda e: (e.get("version_before", 0), _finished(e)),
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
                k = _partition_key(r["partition"])
                restore.setdefault(k, {"partition": r["partition"], "location": r.get("old_location")})
                current[k] = r["location"]
            if not entry.get("repoints") and entry.get("metrics", {}).get("numTargetRowsInserted"):
                for p in entry.get("partitions") or [{}]:
                    k = _partition_key(p)
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
                    f"{_where(target['partition'], table)} is at {now_at}, not at {self.current[k]} as the history of "
                    f"{table['name']} says: it was changed outside spark-merge; nothing was rolled back"
                )
            location = target["location"]
            if location is None or (_EMPTY.search(location) and files.exists(location) is False):
                location = location or f"{s['ctx']['stage_location']}/empty-{n}"
                s["staged"] = True
                host.run(macros.render("empty_partition_sql", table, location))
            elif files.exists(location) is False:
                raise UnsupportedError(
                    f"cannot roll back {table['name']} to before {self.to_merge_id}: {location}, which "
                    f"{_where(target['partition'], table)} had then, was removed by vacuum"
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
                f"{_where(target['partition'], table)} had then, was refilled with later data by "
                f"{written[files.key(location)]} (vacuum's canonical layout, once no version inside retention "
                f"used it); that version is gone, as after a vacuum. Nothing was rolled back"
            )


def _where(partition: dict | None, table: dict) -> str:
    return "partition " + "/".join(f"{c}={v}" for c, v in partition.items()) if partition else table["name"]
