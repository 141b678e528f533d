"""Row-change paradigms: how a planned set of changes reaches the target.

The plan (changes, duplicate check, counts, touched partitions) is the same for
every target; the paradigm decides how rows change there, as in Trino:

- DELETE_ROW_AND_INSERT_ROW (file tables, copy-on-write): rewrite the touched
  partitions into a new directory, then repoint them with a journaled commit.
- CHANGE_ONLY_UPDATED_COLUMNS (tables that update columns in place by a row id,
  such as a database table keyed by its primary key): postgres.py.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from . import faults, files, lock, macros
from .catalog import describe_table
from .errors import ConflictError, RetryableConflict, TargetError

if TYPE_CHECKING:
    from .engine import MergeRun

log = logging.getLogger("spark_merge")


class RowChangeParadigm:
    name = ""

    def write(self, run: "MergeRun") -> None:
        """Apply the planned changes (``run.metrics`` holds the counts) and commit them."""
        raise NotImplementedError

    def explain(self, run: "MergeRun", ctx: dict) -> list[str]:
        """The write and commit SQL, as comments and statements, for ``explain``."""
        raise NotImplementedError

    def begin(self, run: "MergeRun") -> None:
        """Called once the target is known, before planning."""

    def release(self, run: "MergeRun") -> None:
        """Called when the merge ends, committed or not."""

    def discard_staged(self, run: "MergeRun") -> None:
        """Remove what ``write`` staged before its commit point (on abort)."""
        files.remove(run.ctx["stage_location"])


class DeleteRowAndInsertRow(RowChangeParadigm):
    """Copy-on-write for parquet/ORC tables."""

    name = "DELETE_ROW_AND_INSERT_ROW"

    def write(self, run: "MergeRun") -> None:
        if run.spec.insert_only:
            self._append(run)
        else:
            self._rewrite(run)

    @staticmethod
    def _append(run: "MergeRun") -> None:
        with run._step("execute: append inserted rows (under the commit lock)"):
            with lock.table_lock(run.spark, run.table, run.merge_id):
                fresh = _unchanged_since_begin(run)
                run._sql(macros.render("append_sql", run.table, run.ctx))
                run._sql(macros.render("version_sql", fresh))
        run.metrics["numOutputRows"] = run.metrics["numTargetRowsInserted"]

    @staticmethod
    def _rewrite(run: "MergeRun", stage_statement: str | None = None) -> None:
        """Stage the new content of ``run.partitions`` (the merge's by default), then commit it."""
        table, ctx, m = run.table, run.ctx, run.metrics
        stage_statement = stage_statement or macros.render("stage_sql", table, ctx, run.partitions)
        where = macros.render("partition_filter", table, run.partitions) if table["partition_columns"] else None
        with run._step("execute: measure partitions to replace"):
            old = run._rows(macros.render("file_stats_sql", table, table["relation"], where))
        with run._step(f"execute: write {len(run.partitions)} partition(s) to staging"):
            run.staged = True
            run._sql(stage_statement)
            new = run._rows(macros.render("file_stats_sql", table, ctx["stage"]))
            run._sql(f"DROP TABLE IF EXISTS {ctx['stage']}")
        faults.reached("after_staging")
        planned = macros.fill("repoints", table, ctx, run.partitions, old, new)
        for location in planned["empty"]:
            run._sql(macros.render("empty_partition_sql", table, location))
        m.update(planned["metrics"])
        m["numTargetRowsCopied"] = m["numOutputRows"] - m["numTargetRowsInserted"] - m["numTargetRowsUpdated"]
        run.repoints = repoints = planned["repoints"]
        with run._step("commit: lock, check for conflicts, journal, repoint"):
            with lock.table_lock(run.spark, table, run.merge_id):
                current = run._rows(macros.render("file_stats_sql", table, table["relation"], where))
                changed = macros.fill_list("changed_partitions", table, old, current)
                if changed:
                    raise ConflictError(
                        f"partition(s) {', '.join(k.replace(chr(34), '').strip('/') or 'all' for k in changed[:5])} of "
                        f"{table['name']} changed since this merge read them; nothing was written, run it again"
                    )
                fresh = _unchanged_since_begin(run)
                gone = [r["location"] for r in repoints if files.exists(r["location"]) is False]
                if gone:
                    raise ConflictError(
                        f"the staged data of this merge ({gone[0]}) was removed, most likely by a vacuum with a "
                        f"retention shorter than the merge took; nothing was written, run it again"
                    )
                with run.commit_guard:
                    run.check_not_stopped()
                    write_journal(run.spark, fresh, run.merge_id, repoints)
                    run.journaled = True
                faults.reached("after_journal")
                apply_journal(run.spark, fresh, run.merge_id, repoints)

    def explain(self, run: "MergeRun", ctx: dict) -> list[str]:
        table = run.table
        if run.spec.insert_only:
            return ["-- 5. insert-only: append, no rewrite", macros.render("append_sql", table, ctx)]
        pcols = table["partition_columns"]
        sample = {c: f"<{c}>" for c in pcols} if pcols else None
        repoint = {"partition": sample, "location": ctx["stage_location"] + "/...", "old_location": "...",
                   "exists": True}
        return [
            "-- 5. stage the new version of the touched partitions",
            macros.render("stage_sql", table, ctx, [sample] if sample else []),
            "-- 6. commit: journal, then repoint each partition, then mark done and refresh",
            macros.render("journal_sql", table, ctx["merge_id"], [repoint]),
            *macros.fill_list("repoint_statements", table, [repoint]),
            macros.render("journal_done_sql", table, ctx["merge_id"]),
            macros.render("refresh_sql", table),
        ]


def _unchanged_since_begin(run: "MergeRun") -> dict:
    """The table as it is now; RetryableConflict if another merge committed since our begin."""
    fresh = describe_table(run.spark, [run.table["database"], run.table["table_name"]])
    if fresh["version"] != run.table["version"]:
        raise RetryableConflict(
            f"{fresh['name']} moved from version {run.table['version']} to {fresh['version']} since this merge began"
        )
    return fresh


def choose(table: dict, target=None) -> RowChangeParadigm:
    if table["provider"] == "jdbc" and target is not None:
        from .postgres import ChangeOnlyUpdatedColumns

        return ChangeOnlyUpdatedColumns(target)
    if table["provider"] in ("parquet", "orc"):
        return DeleteRowAndInsertRow()
    raise TargetError(f"no row-change paradigm for {table['name']} ({table['provider']})")


def write_journal(spark: SparkSession, table: dict, merge_id: str, repoints: list[dict]) -> None:
    """One atomic metastore write: from here on the commit is rolled forward, never back."""
    spark.sql(macros.render("journal_sql", table, merge_id, repoints))


def apply_journal(spark: SparkSession, table: dict, merge_id: str, repoints: list[dict]) -> None:
    """Repoint, mark done, refresh. Every statement is idempotent, so replaying is harmless."""
    statements = macros.fill_list("repoint_statements", table, repoints)
    for n, stmt in enumerate(statements, start=1):
        spark.sql(stmt)
        if n < len(statements):
            faults.reached("between_repoints")
    faults.reached("after_last_repoint")
    spark.sql(macros.render("journal_done_sql", table, merge_id))
    # re-read the properties so the clean-up removes exactly the journal keys present now
    clear = macros.render("journal_clear_sql", describe_table(spark, [table["database"], table["table_name"]]))
    if clear:
        spark.sql(clear)
    faults.reached("before_refresh")
    spark.sql(macros.render("refresh_sql", table))


def recover(spark: SparkSession, table: dict) -> bool:
    """Finish an interrupted commit from its journal. True if there was one.

    Staged data is only ever removed before its journal exists, so a journal whose
    new locations are missing was never applied (its write reported failure but
    reached the metastore): it is discarded rather than replayed.

    A commit lock held by the merge whose journal was just replayed, or by the
    merge the table records as its last finished commit, guards no work any more
    (its holder died inside the commit): it is released.
    """
    journal = macros.fill("pending_journal", table)
    finished = table["properties"].get("spark_merge.last_merge_id")
    if journal:
        repoints = journal["repoints"]
        missing = [r["location"] for r in repoints if files.exists(r["location"]) is False]
        if missing:
            log.warning("discarding journal of merge %s on %s: its staged data %s is gone, nothing was repointed",
                        journal["merge_id"], table["name"], missing[0])
            repoints = []
        else:
            log.warning("recovering interrupted merge %s on %s: replaying %d repoint(s)",
                        journal["merge_id"], table["name"], len(repoints))
        apply_journal(spark, table, journal["merge_id"], [dict(r, exists=False) for r in repoints])
        finished = journal["merge_id"]
    owner = lock.holder(spark, table)
    if owner is not None and owner["merge_id"] == finished:
        log.warning("releasing the commit lock of merge %s on %s: its commit is complete", finished, table["name"])
        lock.break_lock(spark, table)
    return bool(journal)
