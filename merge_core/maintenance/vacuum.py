"""vacuum: remove what no version inside the retention period uses (versions.py says what that is).

Directories replaced before the retention period (a table's original default partition
directories included, which a later DROP and re-ADD of the partition would otherwise bring back),
the staging directories of merges that never committed, and locks of dead processes. Never a path
outside the table's root, nor a data file appended to a directory after the commit that replaced it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import SparkSession

from merge_core.common.errors import MetadataError, SpecError, codes
from merge_core.common.result import new_merge_id
from merge_core.lifecycle.housekeeping import ORPHAN_MIN_AGE_HOURS, drop_dead_stage_tables
from merge_core.maintenance import history_store
from merge_core.maintenance.versions import (
    finished_at,
    in_use,
    late_files,
    live_locations,
    replaced_by,
    retention_hours,
    settled_table,
)
from merge_core.spark import file_index, files, lock, metastore

log = logging.getLogger("spark_merge")


_STAGING = re.compile(r"^_merge_(\d{14})_[0-9a-f]{8}$")


@dataclass
class VacuumResult:
    table: str
    retain_hours: float
    dry_run: bool
    removed: list[str] = field(default_factory=list)  # what was (or, in a dry run, would be) removed
    files: int = 0
    bytes: int = 0
    kept_for_retention: int = 0  # replaced directories still inside the retention period
    layout: Any = None  # the canonical-layout step that ran first (layout.LayoutResult), or None
    late_appends: list[str] = field(default_factory=list)  # data files written after their directory was replaced: kept
    outside: list[str] = field(default_factory=list)  # replaced directories outside the table's root: kept
    # data files a rollback discarded (written by a plain INSERT after the merges it undid): removed, and said
    discarded: list[str] = field(default_factory=list)

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
                f"; {codes()['late_append']}: kept {len(self.late_appends)} data file(s) written into a directory "
                f"after the commit that replaced it, which no version reads: {', '.join(self.late_appends[:5])}"
            )
        if self.outside:
            outside = ", ".join(self.outside[:5])
            text += f"; kept {len(self.outside)} replaced director(ies) outside the table's root: {outside}"
        if self.discarded:
            text += (
                f"; {codes()['late_append']}: {verb} {len(self.discarded)} data file(s) that a write bypassing "
                f"spark-merge added and a rollback with discard_later_writes dropped: {', '.join(self.discarded[:5])}"
            )
        return text


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
    table = settled_table(spark, table_name)
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
    logging.getLogger("spark_merge.summary").info(result.summary())  # the CLI prints it itself
    return result


def _vacuum(spark: SparkSession, table: dict, result: VacuumResult, moves: Sequence[dict] = ()) -> None:
    """Gather what no version inside retention reads, set aside what must stay, remove the rest."""
    now = datetime.now(UTC)
    cutoff = now - timedelta(hours=result.retain_hours)
    entries = {e["merge_id"]: e for e in history_store.load(table).require_readable("vacuum").entries}
    doomed, keep = _unused_directories(spark, table, result, entries, moves, now, cutoff)
    doomed += _dead_staging(table, entries, keep, now, cutoff)
    doomed += _dead_locks(spark, table)
    for location in _kept_apart(table, entries, result, doomed):
        n, size = files.size(location)
        result.files += n
        result.bytes += size
        result.removed.append(location)
        if not result.dry_run:
            log.info("vacuum: removing %s (%d file(s), %d bytes)", location, n, size)
            files.remove(location)
    if result.removed and not result.dry_run:
        try:  # no key range of a removed file's rows stays behind in the index
            file_index.FileIndex(table["root"]).vacuumed(result.removed, new_merge_id())
        except Exception as e:  # noqa: BLE001 - a file system error: say so, the files are gone either way
            where = f"{table['root'].rstrip('/')}/{file_index.INDEX_DIR}"
            log.warning(
                "vacuum: the file index %s was not rewritten (%s): it may keep key ranges of removed rows; "
                "delete it (the next merge reads the footers and indexes them again)",
                where,
                e,
            )


def _unused_directories(
    spark: SparkSession,
    table: dict,
    result: VacuumResult,
    entries: dict,
    moves: Sequence[dict],
    now: datetime,
    cutoff: datetime,
) -> tuple[list[str], set]:
    """Directories (or, in the root, files) commits replaced before the retention period, which no
    version inside it reads. ``moves``: a dry run's canonical-layout commit, as the history entry the
    real run makes just before. Also the locations kept versions read."""
    root = files.key(table["root"])
    live = live_locations(spark, table)
    simulated = []
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
                if files.visible(child.rsplit("/", 1)[1]) and _unused(keep, files.key(child))
            ]
        elif _unused(keep, k):
            doomed.append(location)
    return doomed, keep


def _unused(keep: set, location: str) -> bool:
    return not any(files.is_inside(k, location) for k in keep)


def _dead_staging(table: dict, entries: dict, keep: set, now: datetime, cutoff: datetime) -> list[str]:
    """``_merge_<id>`` directories of commits finished before the retention period, or of merges that
    never committed and started longer ago than the orphan age, which no kept version reads."""
    orphan_cutoff = min(cutoff, now - timedelta(hours=ORPHAN_MIN_AGE_HOURS))
    doomed = []
    for child, is_dir in files.listing(table["root"]):
        match = _STAGING.match(child.rsplit("/", 1)[1])
        if not (is_dir and match):
            continue
        merge_id = child.rsplit("/", 1)[1].removeprefix("_merge_")
        if merge_id in entries:
            old_enough = finished_at(entries[merge_id]) < cutoff
        else:  # never committed (or its history entry was lost): judge by the time it started
            started = datetime.strptime(match.group(1), "%Y%m%d%H%M%S").replace(tzinfo=UTC)
            old_enough = started < orphan_cutoff
        if old_enough and _unused(keep, files.key(child)):
            doomed.append(child)
    return doomed


def _dead_locks(spark: SparkSession, table: dict) -> list[str]:
    """Lock records but the live holder's."""
    holder = lock.holder(spark, table)
    return [
        child
        for child, _ in files.listing(f"{table['root'].rstrip('/')}/_spark_merge/locks")
        if holder is None or child.rsplit("/", 1)[1] != holder["merge_id"]
    ]


def _kept_apart(table: dict, entries: dict, result: VacuumResult, doomed: list[str]) -> list[str]:
    """One entry per directory, none inside another (a whole ``_merge_<id>`` covers its partitions),
    without what vacuum never removes: anything outside the table's root (a replaced partition of a
    custom LOCATION) and a directory holding files appended after the commit that replaced it."""
    root = files.key(table["root"])
    by_key = {files.key(d): d for d in reversed(doomed) if files.exists(d) is not False}
    doomed = [d for k, d in by_key.items() if not any(files.is_inside(k, o) and k != o for o in by_key)]
    replaced = replaced_by(list(entries.values()))
    kept = []
    for location in doomed:
        if not files.is_inside(files.key(location), root):
            result.outside.append(location)
            continue
        gone = [
            p
            for e in entries.values()
            for p in e.get("discarded") or []
            if files.is_inside(files.key(p), files.key(location))
        ]
        result.discarded += [p for p in gone if files.exists(p)]
        late = late_files(location, replaced)
        if late:
            log.warning(
                "%s: %d data file(s) of %s were written into %s after the commit that replaced it, so "
                "no version of the table reads them; vacuum keeps them: %s",
                codes()["late_append"],
                len(late),
                table["name"],
                location,
                ", ".join(late[:5]),
            )
            result.late_appends += late
            continue
        kept.append(location)
    return kept
