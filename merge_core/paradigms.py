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

from . import files, macros, metastore

log = logging.getLogger("spark_merge")


class RowChangeParadigm:
    name = ""

    def write(self, run: "Any") -> None:
        """Apply the planned changes (``run.metrics`` holds the counts) and commit them."""
        raise NotImplementedError

    def explain(self, run: "Any", ctx: dict) -> list[str]:
        """The write and commit SQL, as comments and statements, for ``explain``."""
        raise NotImplementedError

    def begin(self, run: "Any") -> None:
        """Called once the target is known, before planning."""

    def release(self, run: "Any") -> None:
        """Called when the merge ends, committed or not."""

    def discard_staged(self, run: "Any") -> None:
        """Remove what ``write`` staged before its commit point (on abort)."""
        files.remove(run.ctx["stage_location"])


class DeleteRowAndInsertRow(RowChangeParadigm):
    """Copy-on-write for parquet/ORC tables."""

    name = "DELETE_ROW_AND_INSERT_ROW"

    def write(self, run: "Any") -> None:
        """A file table's write and commit is spark_merge__lifecycle_write (engine.MergeRun.execute)."""
        raise NotImplementedError

    def explain(self, run: "Any", ctx: dict) -> list[str]:
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


def write_journal(spark: SparkSession, table: dict, merge_id: str, repoints: list[dict], entry: dict | None = None) -> None:
    """One atomic metastore write: from here on the commit is rolled forward, never back. The
    journal holds the commit's history ``entry`` too, so whoever completes the commit writes it."""
    spark.sql(macros.render("journal_sql", table, merge_id, repoints, entry))
