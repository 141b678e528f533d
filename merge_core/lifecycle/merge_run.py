"""A merge's run through the lifecycle: begin (describe, recover, validate, schema evolution, the
upsert's generated spec) and plan (spark_merge__lifecycle_plan: source, changes, duplicate check,
counts, partitions and files to rewrite); execute, finish and abort are the lifecycle's
(lifecycle.py). Nothing is written before the plan has validated the spec, built the changes and
passed the duplicate check. ``run()`` is the entry point: it plans again when another merge
committed elsewhere in the table meanwhile.
"""

from __future__ import annotations

import copy
import json
import logging
import re

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.result import MergeResult
from merge_core.lifecycle.explain_host import ExplainHost
from merge_core.lifecycle.housekeeping import drop_dead_leftovers
from merge_core.lifecycle.merge_host import MergeHost
from merge_core.lifecycle.run import Lifecycle, drive
from merge_core.request.spec import MergeSpec, WhenClause
from merge_core.targets.paradigms import RowChangeParadigm

log = logging.getLogger("spark_merge")


def broadcasts_changed(metrics: dict) -> bool:
    """Whether the rewrite broadcasts the row ids of updated and deleted rows to its anti-join
    (spark_merge__broadcast_changed, as the plan decides it; bench/ uses it)."""
    return macros.broadcast_changed(metrics)["broadcast"]


class MergeRun(Lifecycle):
    """One MERGE, UPDATE, DELETE or copy-on-write upsert through the lifecycle. Use ``merge()``
    unless you need the steps."""

    paradigm: RowChangeParadigm  # set by begin (MergeHost.target_begin): how rows change in the target

    def __init__(
        self, spark: SparkSession, spec: MergeSpec, target=None, dry_run: bool = False, run_key: str | None = None
    ):
        super().__init__(spark, run_key)
        self.spec = spec
        self.target = target  # a postgres.PostgresTarget, or None for a Spark catalog table
        self.spec_data = spec.to_dict()
        # schema evolution's new columns: added at begin ("apply"), shown by explain ("preview"), or,
        # in a dry run, whose plan would read them from the table, refused ("refuse"): begin.sql
        self.schema_changes = "refuse" if dry_run else "apply"
        self.added_columns: list[list[str]] = []
        self.host = MergeHost(self)  # the begin primitives of this run (merge_host.py)
        # a dry run reports the plan's counts, which only the summary gives before a write
        self.host.observes = not dry_run

    def begin(self) -> dict:
        """Read the target, finish any interrupted commit, validate (spark_merge__lifecycle_begin, the
        statements dbt runs; this run's host binds its primitives). Touches no data."""
        self._tag(True)
        drop_dead_leftovers(self.spark)  # what merges that died left in this session
        if self.target is not None:  # a PostgreSQL table: its catalog is PostgreSQL's (lifecycle: own_target)
            from merge_core.targets import postgres

            self.table = postgres.describe(self.spark, self.target, list(self.spec.target), self.merge_id)
        self._start(spec=self.spec_data, kind=self.spec.kind, statement=self.spec.sql)
        self.s["schema_changes"] = self.schema_changes
        macros.lifecycle_begin(self.host, self.s)
        self.table, self.spec_data, self.resolved, self.ctx = (
            self.s["table"],
            self.s["spec"],
            self.s["resolved"],
            self.s["ctx"],
        )
        self.plan_hash = self.s["plan_hash"]
        self.added_columns = self.s["added_columns"]
        info = self._begun()
        log.debug("BEGIN %s", json.dumps(info))
        return info

    def explain(self, verbose: bool = True) -> str:
        """The plan, before anything runs: each step's SQL in order (``verbose``), or the statement
        and each step's title (outline)."""
        parts = self._plan_parts()
        return ";\n\n".join(parts) + ";\n" if verbose else outline(parts, self.spec_data)

    def _plan_parts(self) -> list[str]:
        """The plan's steps, each a heading saying what it does, then its statements: the plan run
        against explain's host (explain_host.py, which runs nothing), then the paradigm's write."""
        state = copy.deepcopy(self.s)  # the plan's updates stay in this copy
        spec, table, ctx = state["spec"], state["table"], state["ctx"]
        parts = [
            f"-- spark-merge plan for {spec['kind'].upper()} into {table['name']} "
            f"({table['provider']}, partitioned by {table['partition_columns'] or 'nothing'}); "
            f"duplicate_rule={spec['duplicate_rule']}",
        ]
        if self.added_columns:
            parts += [
                "-- schema evolution: first add the source's columns the target lacks (UPDATE SET * and "
                "INSERT * carry them)",
                macros.add_columns_sql(table, self.added_columns),
            ]
        by_source = macros.by_source_reads(spec, state["resolved"])
        if by_source["note"]:
            parts.append(f"-- {by_source['note']}")
        host = ExplainHost(state)
        macros.lifecycle_plan(host, state)
        parts += host.parts
        dup = macros.duplicates_sql(spec, table, state["resolved"], ctx)
        if dup:
            parts += [
                "-- (step 4, only when it finds duplicates) which target rows, and up to 5 source rows that "
                "matched each with the clause it chose, for the error",
                dup,
            ]
        return parts + self.paradigm.explain(self.spark, state, ctx)

    def plan(self) -> dict:
        """Build the changes, run the duplicate check, count, find partitions. No writes.
        (spark_merge__lifecycle_plan, the same statements dbt runs.)"""
        macros.lifecycle_plan(self.host, self.s)
        changed = sum(
            self.metrics[k] for k in ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
        )
        log.debug(
            "PLAN %s",
            json.dumps({"merge_id": self.merge_id, "partitions": len(self.partitions), "changed_rows": changed}),
        )
        # a one-pass write counts its changes as it writes them: not known yet
        return self._planned_info(None if self.s.get("observed") else changed)

    def execute(self) -> None:
        """Write the changes the paradigm's way and commit them atomically."""
        if self.target is None:  # a file table: spark_merge__lifecycle_write, as under dbt
            super().execute()
            return
        if any(self.metrics[k] for k in ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")):
            self.paradigm.write(self.host, self.s)
        else:  # nothing to change: the history row alone, where the target keeps its history
            self.paradigm.record(self.host, self.s)
        self.state = "committed"

    def discard_staged(self) -> None:
        self.paradigm.discard_staged(self.s)

    def release(self) -> None:
        if hasattr(self, "paradigm"):
            self.paradigm.release(self.spark, self.s)
        if self.target is not None and hasattr(self, "table"):  # also when begin failed after describe
            from merge_core.targets import postgres

            postgres.forget(self.spark, self.table)


def outline(parts: list[str], spec: dict) -> str:
    """The plan for a person: its first line, the statement's ON and clauses, each step's title (its
    comment up to the first parenthesis or full stop), without the SQL and the plan's own columns."""
    comments = [p.removeprefix("-- ") for p in parts if p.startswith("-- ")]
    lines = [comments[0], f"  ON {spec['on']}"]
    lines += [f"  {i}. {WhenClause(**c).describe()}" for i, c in enumerate(spec["clauses"], 1)]
    lines.append("steps:")
    for text in comments[1:]:
        number, dot, rest = text.partition(". ")
        if number.isdigit() and dot:
            lines.append(f"  {number}. " + re.split(r" \(|\. ", rest, maxsplit=1)[0])
    lines.append("(explain(..., verbose=True), or spark-merge explain --verbose, prints each step's SQL)")
    return "\n".join(lines) + "\n"


def new_run(
    spark: SparkSession, spec: MergeSpec, target=None, dry_run: bool = False, run_key: str | None = None
) -> Lifecycle:
    """The lifecycle of ``spec``: a merge-on-read upsert appends to a log, anything else merges."""
    if target is None and merges_on_read(spec):
        from merge_core.lifecycle.merge_on_read import UpsertRun

        return UpsertRun(spark, spec, run_key)
    return MergeRun(spark, spec, target, dry_run, run_key)


def merges_on_read(spec: MergeSpec) -> bool:
    """A merge-on-read upsert: it appends to the log ``<target>__sm_log`` under a view."""
    return bool(
        spec.upsert and spec.upsert.get("upsert_mode") == "merge-on-read" and not spec.upsert.get("merge_engine")
    )


def run(
    spark: SparkSession,
    spec: MergeSpec,
    max_retries: int = 3,
    on_planned=None,
    on_start=None,
    target=None,
    dry_run: bool = False,
    run_key: str | None = None,
) -> MergeResult:
    """Run a merge; when another merge committed elsewhere in the table meanwhile, plan it again.

    ``target``: a ``postgres.PostgresTarget`` when the target is a PostgreSQL table, else the
    target is a Spark catalog table. ``on_start(abort)`` is called as each attempt starts with a
    function that aborts it (from another thread or a signal handler: the Airflow hook's on_kill);
    ``on_planned(info)`` after the checks, before anything is written, with the merge id, target,
    paradigm, plan hash, partitions to rewrite and changed rows (the operator's XCom begin record).
    ``run_key``: recorded in the commit's history entry (merge()'s durable runs look it up first:
    maintenance/durable.py).
    """
    return drive(
        lambda: new_run(spark, spec, target, dry_run, run_key), max_retries, on_planned, on_start, dry_run=dry_run
    )
