"""The canonical layout: the live files back where a reader of the directory looks.

A commit never changes files in place: a rewritten partition's new files go to
``<root>/_merge_<id>/<col>=<value>/`` and the catalog points the partition there,
while ``<root>/<col>=<value>/`` keeps the version before (readers that started
earlier finish on it; rollback returns to it). A reader that lists the directory
instead of asking the catalog (``spark.read.parquet(root)``, DuckDB's
``read_parquet('<root>/**')``) skips ``_``-prefixed directories, so it sees that old
version. No layout can serve both at the moment of a commit: the canonical
directory cannot change while a version inside retention still reads it.

So the canonical layout comes back once nothing needs the old directory: for each
partition whose catalog location is a ``_merge_`` directory and whose canonical
directory no version inside retention uses (versions.in_use, the rule vacuum
removes by), the canonical directory is refilled with a copy of the live files
and, in one journaled commit, the partition is pointed back at it. ``vacuum``
runs this step first, so a table vacuumed after its retention period reads the
same by path as by name. The commit's history entry (kind ``canonicalize``) is
the barrier rollback checks: a version older than it named the refilled
directory with other content (rollback._refuse_reused).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import ConflictError
from merge_core.lifecycle.run import Lifecycle, drive
from merge_core.maintenance import history_store
from merge_core.maintenance.versions import current_locations, in_use, retention_hours, settled_table
from merge_core.spark import files

log = logging.getLogger("spark_merge")


@dataclass
class LayoutResult:
    table: str
    dry_run: bool
    planned: list[dict] = field(default_factory=list)  # the moves (plan_moves) made, or that would be
    waiting: list[str] = field(default_factory=list)  # canonical directories a version inside retention uses
    files: int = 0
    bytes: int = 0
    merge_id: str | None = None

    @property
    def moved(self) -> list[str]:
        """The canonical directories (re)filled, or that would be."""
        return [m["canonical"] for m in self.planned]

    def summary(self) -> str:
        verb = "would put" if self.dry_run else "put"
        text = (
            f"canonical layout of {self.table}: {verb} {len(self.moved)} partition(s) back at their "
            f"canonical directory ({self.files} file(s), {self.bytes} bytes copied)"
        )
        if self.waiting:
            text += (
                f"; {len(self.waiting)} wait until no version inside retention reads their canonical "
                f"directory (a path reader sees an older version of them until then)"
            )
        return text


def plan_moves(spark: SparkSession, table: dict, retain_hours: float) -> tuple[list[dict], list[str]]:
    """(partitions to put back, canonical directories still in use). A partition moves when the
    catalog points it into a ``_merge_`` directory and no version inside retention uses its
    canonical one; a LOCATION the user chose is left where it is."""
    cutoff = datetime.now(UTC) - timedelta(hours=retain_hours)
    root = table["root"].rstrip("/")
    locations = current_locations(spark, table)
    keep, _, _ = in_use(
        history_store.load(table).require_readable("vacuum").entries,
        {files.key(location) for _, location in locations.values()},
        cutoff,
    )
    moves, waiting = [], []
    for spec, (values, location) in sorted(locations.items()):
        here, canonical = files.key(location), f"{root}/{spec}" if spec else root
        there = files.key(canonical)
        if here == there or not here.startswith(files.key(root) + "/_merge_"):
            continue
        if spec:
            needed = any(files.is_inside(k, there) or files.is_inside(there, k) for k in keep)
        else:  # the root holds every _merge_ directory: only the root itself counts
            needed = there in keep
        if needed:
            waiting.append(canonical)
        else:
            moves.append({"partition": values, "spec": spec, "location": location, "canonical": canonical})
    return moves, waiting


class CanonicalizeRun(Lifecycle):
    """Put partitions back at their canonical directories through the one lifecycle: begin plans
    the moves (no data touched); execute, under the lock, checks each partition is still where it
    was, refills its canonical directory and commits the repoints with a journal."""

    def __init__(self, spark: SparkSession, table_name: str, retain_hours: float | None):
        super().__init__(spark)
        self.table_name, self.retain_hours = table_name, retain_hours
        self.moves: list[dict] = []
        self.waiting: list[str] = []

    def begin(self) -> dict:
        self._tag(True)
        table = settled_table(self.spark, self.table_name)
        hours = retention_hours(table) if self.retain_hours is None else self.retain_hours
        self.moves, self.waiting = plan_moves(self.spark, table, hours)
        self._start(
            table=table,
            ctx=macros.context({}, table, self.merge_id),
            kind="canonicalize",
            paradigm="CANONICALIZE",
            statement=f"CANONICALIZE {table['name']}",
            commit_repoints=True,
            changes=macros.planned_changes([m["partition"] or {} for m in self.moves], None, None),
        )
        return self._begun()

    def plan(self) -> dict:
        return self._planned_info(0)

    def discard_staged(self) -> None:
        """Nothing to discard: a refilled canonical directory is one no version uses (the next
        canonicalize refills it again, or vacuum removes it)."""

    def execute(self) -> None:
        if not self.moves:
            self.state = "committed"
            return
        s, host = self.s, self.host
        host.lock(s["table"], self.merge_id)
        s["locked"] = True
        macros.lifecycle_unchanged(host, s)  # a commit since begin: plan again (drive)
        now = current_locations(self.spark, s["table"])
        repoints = []
        for m in self.moves:
            at = now.get(m["spec"])
            if at is None or files.key(at[1]) != files.key(m["location"]):
                raise ConflictError(
                    f"{macros.where_in(s['table'], m['partition'])} moved from {m['location']} while "
                    f"vacuum planned; nothing was changed, run it again"
                )
            self.check_not_stopped()
            n, size = files.refill(m["location"], m["canonical"])
            log.info(
                "[%s] canonical layout: copied %d file(s) of %s to %s", self.merge_id, n, m["location"], m["canonical"]
            )
            self.metrics["numTargetFilesAdded"] += n
            self.metrics["numTargetBytesAdded"] += size
            repoints.append(
                {"partition": m["partition"], "location": m["canonical"], "old_location": m["location"], "exists": True}
            )
        s["repoints"] = repoints
        self.metrics["numTargetPartitionsRewritten"] = len(repoints)
        super().execute()

    def finish(self):
        if not self.moves:  # nothing to move: no commit, no history entry
            return self._finished()
        return super().finish()


def canonicalize(
    spark: SparkSession, table_name: str, retain_hours: float | None = None, dry_run: bool = False
) -> LayoutResult:
    """Put every partition whose canonical directory no version inside retention uses back there
    (one journaled commit); ``dry_run`` lists them and changes nothing."""
    runs: list[CanonicalizeRun] = []

    def make() -> CanonicalizeRun:
        runs.append(CanonicalizeRun(spark, table_name, retain_hours))
        return runs[-1]

    result = drive(make, dry_run=dry_run)
    run = runs[-1]
    out = LayoutResult(
        result.target, dry_run, run.moves, run.waiting, merge_id=None if dry_run or not run.moves else result.merge_id
    )
    if dry_run:
        for m in run.moves:
            n, size = files.size(m["location"])
            out.files, out.bytes = out.files + n, out.bytes + size
    else:
        out.files, out.bytes = result.metrics["numTargetFilesAdded"], result.metrics["numTargetBytesAdded"]
    logging.getLogger("spark_merge.summary").info(out.summary())  # the CLI prints it itself
    return out
