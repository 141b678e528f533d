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

from . import faults, files, lock, macros, metastore
from .catalog import describe_table
from .errors import ConflictError, CorruptJournal, PlanViolation, RetryableConflict, TargetError
from .history_store import write_history

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
                faults.reached("before_append")
                run._sql(macros.render("append_sql", run.table, run.ctx))
                run._sql(macros.render("version_sql", fresh))
        run.metrics["numOutputRows"] = run.metrics["numTargetRowsInserted"]

    @staticmethod
    def _rewrite(run: "MergeRun", stage_statement: str | None = None) -> None:
        """Stage the new content of ``run.partitions`` (the merge's by default), then commit it.

        A merge's rewrite is checked against its plan: the changed rows' files are the files
        the commit replaces, and each partition gains exactly the rows the plan says
        (``run.deltas``). Another statement (a compaction) is checked only to stay inside
        ``run.partitions``.
        """
        merging = stage_statement is None
        table, ctx, m = run.table, run.ctx, run.metrics
        stage_statement = stage_statement or macros.render("stage_sql", table, ctx, run.partitions)
        where = macros.render("partition_filter", table, run.partitions) if table["partition_columns"] else None
        with run._step("execute: measure partitions to replace"):
            old = file_stats(run, table["relation"], where)
            if merging:  # its changed rows must come from the files this commit replaces
                stale = run._rows(macros.render("stale_files_sql", table, ctx, where))
                if stale:
                    _unchanged_since_begin(run)  # another merge committed meanwhile: plan again
                    raise ConflictError(
                        f"this merge read rows of {table['name']} from file(s) the table no longer holds "
                        f"({stale[0]['file']}): the data changed while it planned; nothing was written, run it again"
                    )
        with run._step(f"execute: write {len(run.partitions)} partition(s) to staging"):
            run.staged = True
            run._sql(stage_statement)
            new = file_stats(run, ctx["stage"])
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
                current = file_stats(run, table["relation"], where)
                changed = macros.fill_list("changed_partitions", table, old, current)
                if changed:
                    raise ConflictError(
                        f"partition(s) {', '.join(k.replace(chr(34), '').strip('/') or 'all' for k in changed[:5])} of "
                        f"{table['name']} changed since this merge read them; nothing was written, run it again"
                    )
                fresh = _unchanged_since_begin(run)
                # nothing moved under us (checked above): the staged rows must be exactly the plan's
                violations = macros.fill_list("output_errors", table, run.partitions,
                                              run.deltas if merging else None, old, new)
                if violations:
                    raise PlanViolation("; ".join(violations[:5]) + "; nothing was committed")
                gone = [r["location"] for r in repoints if files.exists(r["location"]) is False]
                if gone:
                    raise ConflictError(
                        f"the staged data of this merge ({gone[0]}) was removed, most likely by a vacuum with a "
                        f"retention shorter than the merge took; nothing was written, run it again"
                    )
                entry = run.history_entry(fresh["version"] + 1)
                with run.commit_guard:
                    run.check_not_stopped()
                    write_journal(run.spark, fresh, run.merge_id, repoints, entry)
                    run.journaled = True
                faults.reached("after_journal")
                apply_journal(run.spark, fresh, run.merge_id, repoints, entry)

    def explain(self, run: "MergeRun", ctx: dict) -> list[str]:
        table = run.table
        if run.spec.insert_only:
            return ["-- 5. insert-only: append, no rewrite", macros.render("append_sql", table, ctx)]
        pcols = table["partition_columns"]
        sample = {c: f"<{c}>" for c in pcols} if pcols else None
        repoint = {"partition": sample, "location": ctx["stage_location"] + "/...", "old_location": "...",
                   "exists": True}
        return [
            "-- 5. stage the new version of the touched partitions; before it, the changed rows' files must still "
            "be the table's (no rows below: else MERGE_CONFLICT)",
            macros.render("stale_files_sql", table, ctx, macros.render("partition_filter", table, [sample]) if sample else None),
            macros.render("stage_sql", table, ctx, [sample] if sample else []),
            "-- 6. commit, under the lock: the partitions unchanged since read, the staged rows exactly the plan's "
            "(only planned partitions, each with its rows before plus the plan's change; else MERGE_PLAN_VIOLATION), "
            "then the journal (with the history entry), then repoint: "
            + ("all moved partitions in one metastore call (ExternalCatalog.alterPartitions) and created ones in one "
               "ADD, as below" if metastore.batch_available(run.spark) and pcols
               else "one statement per partition, as below")
            + "; then the history entry, mark done, refresh",
            macros.render("journal_sql", table, ctx["merge_id"], [repoint]),
            *macros.fill_list("repoint_statements", table, [repoint]),
            macros.render("journal_done_sql", table, ctx["merge_id"]),
            macros.render("refresh_sql", table),
        ]


def file_stats(run, relation: str, where: str | None = None) -> list[dict]:
    """Files, bytes, rows and directory per partition of ``relation`` ('partition': {column: value})."""
    return macros.fill_list("decode_partitions", run.table, run._rows(macros.render("file_stats_sql", run.table, relation, where)))


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


def write_journal(spark: SparkSession, table: dict, merge_id: str, repoints: list[dict], entry: dict | None = None) -> None:
    """One atomic metastore write: from here on the commit is rolled forward, never back. The
    journal holds the commit's history ``entry`` too, so whoever completes the commit writes it."""
    spark.sql(macros.render("journal_sql", table, merge_id, repoints, entry))


def apply_journal(spark: SparkSession, table: dict, merge_id: str, repoints: list[dict], entry: dict | None = None,
                  recovered: bool = False) -> None:
    """Repoint (metastore.py: one call for all moved partitions where the session allows), write
    the history entry, mark done, refresh. Every step is idempotent (the entry overwrites its own
    file), so replaying is harmless."""
    window = metastore.repoint(spark, table, repoints)
    log.info("[%s] %d partition location(s) changed within %.3f s", merge_id, len(repoints), window)
    faults.reached("after_last_repoint")
    if entry:
        write_history(spark, table, dict(entry, recovered=True) if recovered else entry)
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
    (its holder died inside the commit): it is released; so is a lock whose
    holder's lease lapsed (lock.py).
    """
    journal = macros.fill("pending_journal", table)
    if journal.get("corrupt"):
        raise CorruptJournal(macros.render("corrupt_journal_message", table, journal))
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
        apply_journal(spark, table, journal["merge_id"], [dict(r, exists=False) for r in repoints],
                      journal.get("entry") if repoints else None, recovered=True)
        finished = journal["merge_id"]
    lock.break_if_dead(spark, table, finished=finished)
    return bool(journal)
