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
from typing import Any

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.run_state import RunState
from merge_core.spark import files, metastore

log = logging.getLogger("spark_merge")


class RowChangeParadigm:
    """How the planned changes ``s`` (the lifecycle's planned-changes value) reach the target.
    A paradigm reads ``s`` and the host primitives; it never sees the run object."""

    name = ""

    def write(self, host: Any, s: RunState) -> None:
        """Apply the planned changes (``s['metrics']`` holds the counts) and commit them."""
        raise NotImplementedError

    def record(self, host: Any, s: RunState) -> None:
        """Record a run that changes nothing where the target keeps its history (a target that is no
        file table: its history is not under a table root)."""
        raise NotImplementedError

    def explain(self, spark: SparkSession, s: RunState, ctx: dict) -> list[str]:
        """The write and commit SQL, as comments and statements, for ``explain``."""
        raise NotImplementedError

    def begin(self, table: dict, merge_id: str) -> None:
        """Called once the target is known, before planning."""

    def release(self, spark: SparkSession, s: RunState) -> None:
        """Called when the merge ends, committed or not."""

    def discard_staged(self, s: RunState) -> None:
        """Remove what ``write`` staged before its commit point (on abort)."""
        files.remove(s["ctx"]["stage_location"])


class DeleteRowAndInsertRow(RowChangeParadigm):
    """Copy-on-write for parquet/ORC tables: its write and commit is spark_merge__lifecycle_write
    (Lifecycle.execute), the same statements dbt runs."""

    name = "DELETE_ROW_AND_INSERT_ROW"

    def explain(self, spark: SparkSession, s: RunState, ctx: dict) -> list[str]:
        table = s["table"]
        if s["insert_only"]:
            return [macros.step_comment("write", "insert-only: append, no rewrite"), macros.append_sql(table, ctx)]
        pcols = table["partition_columns"]
        sample = {c: f"<{c}>" for c in pcols} if pcols else None
        repoint = {
            "partition": sample,
            "location": ctx["stage_location"] + "/...",
            "old_location": "...",
            "exists": True,
        }
        return [
            macros.step_comment(
                "write",
                "stage the new version of the touched partitions (the file stats of the partitions it replaces "
                "are taken first) in one join: each row of those partitions written as its clause makes it or "
                "copied, plus the inserted rows (the changes' cache is dropped once the probe shows Spark computes "
                "them the same at every read; when it does not, as for rand(), or when step 4 finds a target row "
                "joined with several source rows that do not all delete it, the stored changes are written instead: "
                "the partitions' rows whose ids they do not name, plus their new rows). A source of at most "
                f"{macros.source_broadcast_rows():,} rows is broadcast: the rows of the files to rewrite are written "
                "by the scan tasks that read them (no shuffle), and the rows to insert, the source rows a join with "
                "the target's ON columns leaves unmatched, are spread by partition (REBALANCE); a larger source is "
                "joined once, as below, and the staged rows spread by partition (into an unpartitioned table, "
                "written by the join's tasks, which have shuffled them already)",
            ),
            *_fold_note(table),
            macros.fused_stage_sql(s["spec"], table, s["resolved"], ctx, [sample] if sample else []),
            macros.step_comment(
                "commit",
                "under the lock: the partitions unchanged since read, the staged rows exactly the plan's (only "
                "planned partitions, each with its rows before plus the plan's change; more rows than planned means "
                "the changes were read from files the table no longer holds: MERGE_CONFLICT; else "
                "MERGE_PLAN_VIOLATION), then the journal (with the history entry), then repoint: ",
            )
            + (
                "all moved partitions in one metastore call (ExternalCatalog.alterPartitions) and created ones in one "
                "ADD, as below"
                if metastore.batch_available(spark) and pcols
                else "one statement per partition, as below"
            )
            + "; then the history entry, mark done, refresh",
            macros.journal_sql(table, ctx["merge_id"], [repoint]),
            *macros.repoint_statements(table, [repoint]),
            macros.journal_done_sql(table, ctx["merge_id"]),
            macros.refresh_sql(table),
        ]


def _fold_note(table: dict) -> list[str]:
    """What the table's auto compaction adds to step 5 (rewrite.sql: fold_policy), if it is set."""
    policy = macros.fold_policy(table)
    if policy.get("error"):
        return [f"-- auto compaction: the run stops here, before it writes: {policy['error']}"]
    if not policy:
        return []
    return [
        f"-- auto compaction (spark_merge.auto_compact.min_files = {policy['min_files']}): a partition step 5 "
        f"rewrites that holds at least {policy['min_files']} files under {policy['below']:,} bytes has those files "
        "rewritten too, into its new files (the file stats taken first name them; numTargetFilesCompacted counts them)"
    ]
