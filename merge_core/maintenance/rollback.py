"""rollback: point a table back at the version before a merge.

A rollback is itself a journaled commit (so it can be interrupted, recovered and rolled back in
turn): it points every partition that the merge and the later ones replaced back at the directory
it had before.
"""

from __future__ import annotations

import logging
from datetime import datetime

from pyspark.sql import SparkSession

from merge_core.common import host_contract, macros
from merge_core.common.errors import UnsupportedError
from merge_core.lifecycle.housekeeping import refuse_foreign_format
from merge_core.lifecycle.run import Lifecycle, drive
from merge_core.maintenance import history_store
from merge_core.maintenance.versions import partition_location
from merge_core.spark import files
from merge_core.spark.host import SparkHost, _trace

log = logging.getLogger("spark_merge")


class RollbackHost(SparkHost, host_contract.RollbackHost):
    """SparkHost with rollback's primitives (spark_merge__lifecycle_begin_rollback and
    spark_merge__lifecycle_execute_rollback, dbt_macros/macros/lifecycle/rollback.sql)."""

    def check_files(self, table: dict, listing_sql: str) -> list[str]:
        """Refuse another format's metadata; a rollback drops no staging tables (a merge's begin does)."""
        _trace("check_files")
        refuse_foreign_format(table)
        return []

    def history(self, table: dict) -> list[dict]:
        """Its entries, read file by file and checked; refused while one is rejected."""
        _trace("history")
        return history_store.load(table).require_readable("rollback").entries

    def partition_location(self, table: dict, partition: dict | None) -> str | None:
        _trace("partition_location")
        return partition_location(self.spark, table, partition)

    def require(self, location: str, message: str) -> None:
        _trace("require")
        if files.exists(location) is False:
            raise UnsupportedError(message)

    def written_after(self, table: dict, location: str, since: str, during: list[list[str]]) -> list[str]:
        """The data files Spark reads in ``location`` written after ``since``, but not during one of the
        periods ``during`` (their modification times)."""
        _trace("written_after")
        moment = datetime.fromisoformat(since)
        periods = [(datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in during]
        base = location.rstrip("/")
        return [
            f"{base}/{name}"
            for name, mtime in files.data_file_times(location)
            if mtime > moment and not any(a <= mtime <= b for a, b in periods)
        ]


class RollbackRun(Lifecycle):
    """A rollback through the lifecycle (lifecycle/rollback.sql, the statements dbt's
    `spark_merge.rollback` operation runs): begin reads the history and decides where each partition
    goes back to; execute, under the lock, checks each is still where the history says and commits
    the repoints with a journal."""

    def __init__(self, spark: SparkSession, table_name: str, to_merge_id: str, discard_later_writes: bool = False):
        super().__init__(spark)
        self.table_name, self.to_merge_id = table_name, to_merge_id
        self.discard_later_writes = discard_later_writes
        self.host = RollbackHost(spark, self.merge_id, stop_check=self.check_not_stopped)

    def begin(self) -> dict:
        self._tag(True)
        parts = [p.strip("`") for p in self.table_name.split(".")]
        self._start(
            target=parts, to_merge_id=self.to_merge_id, kind="rollback", discard_later_writes=self.discard_later_writes
        )
        macros.lifecycle_begin_rollback(self.host, self.s)
        return self._begun()

    def plan(self) -> dict:
        return self._planned_info(0)

    def execute(self) -> None:
        macros.lifecycle_execute_rollback(self.host, self.s)
        self.state = "committed"


def rollback(spark: SparkSession, table_name: str, to_merge_id: str, discard_later_writes: bool = False) -> dict:
    """Point the table back at the version it had before merge ``to_merge_id``; its history entry.

    Walks the history from that merge to now: each partition a commit in that
    range replaced goes back to the directory it had before the first of them; a
    partition the range created is emptied (as a merge that deletes every row
    of a partition does). Refused, with nothing changed, when an insert-only
    merge in the range appended files to a directory the rollback keeps, when a
    partition is no longer where the history says (changed by something else),
    or when vacuum already removed a directory it needs. Rows that a write bypassing spark-merge (a
    plain INSERT) added to a partition after the merges it undoes would be dropped: refused, unless
    ``discard_later_writes``; then the entry lists their files (``discarded``).
    """
    runs: list[RollbackRun] = []

    def make() -> RollbackRun:
        runs.append(RollbackRun(spark, table_name, to_merge_id, discard_later_writes))
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
    if entry.get("discarded"):
        log.warning(
            "the rollback dropped the rows of %d data file(s) written after the merges it undid by a write that "
            "bypassed spark-merge: %s",
            len(entry["discarded"]),
            ", ".join(entry["discarded"][:5]),
        )
    return entry
