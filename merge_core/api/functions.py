"""The public functions: a statement run, explained or planned; a table's history, recovery,
repair, vacuum, rollback and compaction. ``merge_core`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack

from pyspark.sql import SparkSession

from merge_core.common.errors import (
    SpecError,
)
from merge_core.common.result import MergeResult
from merge_core.lifecycle import merge_on_read
from merge_core.lifecycle.merge_run import MergeRun, merges_on_read, run
from merge_core.request.options import MergeOptions
from merge_core.request.parse import parse
from merge_core.request.spec import MergeSpec, lift_upsert_options
from merge_core.spark.catalog import reports_spark_errors


def to_spec(
    sql_or_spec: str | dict | MergeSpec, dialect: str | None = None, **options: Unpack[MergeOptions]
) -> MergeSpec:
    """SQL text, a dict or a MergeSpec, with options: any declared option (duplicate_rule,
    partition_filter, primary_key, watermark_key, merge_engine, ...; ``spark-merge options`` lists
    them all).

    ``dialect`` ("spark" or "trino") fixes how SQL text is read; by default Spark's
    grammar is tried first and Trino's second.
    """
    rest: dict[str, Any] = dict(options)
    if isinstance(sql_or_spec, MergeSpec):
        spec = sql_or_spec
    elif isinstance(sql_or_spec, dict):
        data = dict(sql_or_spec)
        upsert = lift_upsert_options(rest, data.get("upsert"))  # before from_dict: an upsert has no clauses
        if upsert:
            data["upsert"] = upsert
        spec = MergeSpec.from_dict(data)
    elif isinstance(sql_or_spec, str):
        spec = parse(sql_or_spec, dialect)
    else:
        raise SpecError(f"expected SQL text, a dict or a MergeSpec, got {type(sql_or_spec).__name__}")
    return spec.with_options(**rest) if rest else spec


@reports_spark_errors
def merge(
    spark: SparkSession,
    sql_or_spec: str | dict | MergeSpec,
    max_retries: int = 3,
    jdbc_url: str | None = None,
    jdbc_user: str | None = None,
    jdbc_password: str | None = None,
    on_start: Callable | None = None,
    on_planned: Callable | None = None,
    dry_run: bool = False,
    run_key: str | None = None,
    **options: Unpack[MergeOptions],
) -> MergeResult:
    """Run a MERGE, UPDATE or DELETE to completion and return its metrics.

    ``max_retries``: how often to plan again when another merge committed elsewhere
    in the table meanwhile (a conflict in the rewritten partitions is never retried).
    ``jdbc_url`` (``jdbc:postgresql://host:5432/db``): the target is that database's table
    (``schema.table``), changed in place by primary key (CHANGE_ONLY_UPDATED_COLUMNS).
    ``on_start(abort)``: called as each attempt starts with a function that aborts it from another
    thread; ``on_planned(info)``: after the checks, before any write, with the merge id, target,
    paradigm, plan hash, partitions to rewrite and changed rows. ``dry_run``: plan only (the planning
    jobs run) and return what a run would insert, update, delete and rewrite; nothing is written.
    ``run_key``: the caller's name for this run (a scheduler's task instance). The commit records it,
    and when the table's history already holds a commit with it (a retry of a run that committed,
    perhaps crashing mid-commit: that commit is finished first), that commit's result is returned,
    marked ``replayed``, and nothing is merged again.
    """
    spec, target = to_spec(sql_or_spec, **options), jdbc_target(jdbc_url, jdbc_user, jdbc_password)
    if run_key and not dry_run:
        from merge_core.maintenance.durable import committed_run

        done = committed_run(spark, spec, target, run_key)
        if done is not None:
            return done
    return run(
        spark,
        spec,
        max_retries=max_retries,
        on_start=on_start,
        on_planned=on_planned,
        target=target,
        dry_run=dry_run,
        run_key=run_key,
    )


def jdbc_target(url: str | None, user: str | None = None, password: str | None = None):
    """A PostgreSQL target for ``url``, or None (a Spark catalog table)."""
    if url is None:
        return None
    from merge_core.targets.postgres import PostgresTarget

    return PostgresTarget(url, user, password)


@reports_spark_errors
def recover(spark: SparkSession, table: str, break_lock: bool = False) -> bool:
    """Finish an interrupted commit on ``table`` now (begin does it too). True if there was one."""
    from merge_core.spark import host, lock
    from merge_core.spark.catalog import describe_table

    info = describe_table(spark, [p.strip("`") for p in table.split(".")])
    if break_lock and lock.exists(spark, info):  # whatever its properties say
        lock.break_lock(spark, info)
    return host.recover(spark, info)


@reports_spark_errors
def repair_journal(spark: SparkSession, table: str, dry_run: bool = False) -> dict | None:
    """Clear a commit journal that cannot be used from ``table``'s properties, changing nothing else.

    A journal cannot be used when it is not the JSON a commit writes, has another shape, belongs to
    another table, or points a partition outside the table's root (spark_merge__pending_journal).
    Returns {'why', 'text'} (the journal as it was), or None when there was nothing to repair;
    ``dry_run`` only returns it. A usable journal is never cleared: ``recover`` completes its commit
    instead. The partitions stay where the metastore points them now; ``SHOW PARTITIONS`` and
    ``history`` tell which commit they show.
    """
    from merge_core.common import macros
    from merge_core.spark.catalog import describe_table

    info = describe_table(spark, [p.strip("`") for p in table.split(".")], trusted=False)
    journal = macros.pending_journal(info)
    if not journal.get("corrupt"):
        if journal:
            raise SpecError(
                f"the commit journal of {info['name']} (merge {journal['merge_id']}) can be used: "
                f"`spark-merge recover {info['name']}` completes its commit"
            )
        return None
    found = {"why": journal["corrupt"], "text": journal["text"]}
    if dry_run:
        return found
    spark.sql(macros.journal_reset_sql(info))
    clear = macros.journal_clear_sql(describe_table(spark, [info["database"], info["table_name"]], trusted=False))
    if clear:
        spark.sql(clear)
    return found


@reports_spark_errors
def adopt(spark: SparkSession, table: str, dry_run: bool = False) -> dict:
    """Give ``table`` spark-merge properties of its own (identity.py): after a copy of another
    table's DDL, a move, a rename, or an edited version. Returns what it set, unset and why."""
    from merge_core.maintenance.identity import adopt as _adopt

    return _adopt(spark, table, dry_run)


@reports_spark_errors
def repair_history(spark: SparkSession, table: str, dry_run: bool = False) -> list[tuple[str, str]]:
    """Move ``table``'s history entries that cannot be used (not JSON, another shape, another
    table's) aside, under <root>/_spark_merge/history_rejected/; returns them as (path, why)."""
    from merge_core.maintenance.history_store import repair
    from merge_core.spark.catalog import describe_table

    return repair(describe_table(spark, [p.strip("`") for p in table.split(".")]), dry_run)


@reports_spark_errors
def explain(
    spark: SparkSession,
    sql_or_spec: str | dict | MergeSpec,
    jdbc_url: str | None = None,
    jdbc_user: str | None = None,
    jdbc_password: str | None = None,
    verbose: bool = False,
    **options: Unpack[MergeOptions],
) -> str:
    """Validate and return the plan without running it: the statement and each step's title, or
    (``verbose``) each step's SQL in order."""
    spec, target = to_spec(sql_or_spec, **options), jdbc_target(jdbc_url, jdbc_user, jdbc_password)
    if target is None and merges_on_read(spec):  # nothing to plan; its begin would convert the table
        return merge_on_read.explain(spec, verbose)
    merge_run = MergeRun(spark, spec, target)
    merge_run.schema_changes = "preview"  # show the columns schema evolution would add; add none
    try:
        merge_run.begin()
        return merge_run.explain(verbose=verbose)
    finally:
        merge_run.close()


@reports_spark_errors
def history(spark: SparkSession, table: str, limit: int = 20) -> list[dict]:
    """The newest ``limit`` merges into ``table``, newest first."""
    from merge_core.maintenance.history_store import read_history

    return read_history(spark, table, limit)


@reports_spark_errors
def vacuum(
    spark: SparkSession, table: str, retain_hours: float | None = None, dry_run: bool = False, canonicalize: bool = True
):
    """Remove the directories no version inside the retention period uses (default 7 days).

    First (unless ``canonicalize=False``) it puts each partition whose canonical directory
    ``<root>/<col>=<value>`` no such version uses back there, in one journaled commit, so that a
    reader of the directory (spark.read.parquet(root), DuckDB) reads the table's current rows
    (layout.py).
    """
    from merge_core.maintenance.layout import canonicalize as _canonicalize
    from merge_core.maintenance.vacuum import vacuum as _vacuum

    layout = _canonicalize(spark, table, retain_hours, dry_run) if canonicalize else None
    result = _vacuum(spark, table, retain_hours, dry_run, moves=layout.planned if layout and dry_run else None)
    result.layout = layout
    return result


@reports_spark_errors
def rollback(spark: SparkSession, table: str, to_merge_id: str, discard_later_writes: bool = False) -> dict:
    """Point ``table`` back at the version before ``to_merge_id``; returns the rollback's history entry.
    Rows another writer added (a plain INSERT) to a partition it restores after those merges make it
    refuse, unless ``discard_later_writes`` (the entry's ``discarded`` lists their files)."""
    from merge_core.maintenance.rollback import rollback as _rollback

    return _rollback(spark, table, to_merge_id, discard_later_writes)


@reports_spark_errors
def read_as_of(spark: SparkSession, table: str, merge_id: str | None = None, timestamp: Any = None):
    """The rows of ``table`` right after commit ``merge_id``, or after the latest commit at or before
    ``timestamp`` (a datetime; a naive one is read as UTC), as a DataFrame of exactly the table's
    columns, read from that version's files without touching the table. A version vacuum removed, or
    an id not in the history, is a MergeError."""
    from merge_core.maintenance.time_travel import read_as_of as _read_as_of

    return _read_as_of(spark, table, merge_id, timestamp)


@reports_spark_errors
def table_changes(
    spark: SparkSession,
    table: str,
    since: str | None = None,
    until: str | None = None,
    accept_plain_writes: bool = False,
):
    """The change feed: one row per row change of every commit after merge ``since`` (exclusive) up
    to merge ``until`` (inclusive), None meaning from the first or to the latest; the table's
    columns, ``_change_type`` (insert, update_preimage, update_postimage, delete), ``_merge_id`` and
    ``_commit_timestamp``. The table records them when its property spark_merge.change_feed is true.
    When a write that bypassed spark-merge changed a partition those commits touched since (the feed
    then contradicts the table), an error, unless ``accept_plain_writes``."""
    from merge_core.maintenance.change_feed import table_changes as _table_changes

    return _table_changes(spark, table, since, until, accept_plain_writes)


@reports_spark_errors
def drop_table(spark: SparkSession, table: str, dry_run: bool = False) -> dict:
    """Drop ``table`` with every version and its history (Spark's DROP TABLE of a merged unpartitioned
    table leaves its root, which blocks the name), or, when a plain DROP TABLE already ran, remove the
    root it left under the name's directory. Returns {'table', 'dropped', 'removed', 'kept'}."""
    from merge_core.maintenance.drop import drop

    return drop(spark, table, dry_run)


@reports_spark_errors
def compact(spark: SparkSession, table: str, tombstone_retention_hours: float | None = None) -> dict:
    """Rewrite a merge-on-read table's log to one row per key (see merge_on_read.py)."""
    from merge_core.lifecycle.merge_on_read import compact as _compact

    return _compact(spark, table, tombstone_retention_hours)
