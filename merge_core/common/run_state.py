"""The state a run carries between its phases, declared once for both hosts.

A run's state ``s`` is a plain dict because the lifecycle macros read and set it under both hosts
(dbt passes its own dict; Python passes the one ``macros.run_state`` returns). These TypedDicts are
where its keys are named and typed: every key a macro or a Python phase sets must be declared here,
and every key declared must be set somewhere (tests/unit/test_run_state.py reads the macros and the
Python code for both). ``PlanContext`` is the plan's context ``s.ctx`` (spark_merge__context and the
plan's additions); ``PlannedChanges`` is what the plan hands the write.
"""

from __future__ import annotations

from typing import Any, TypedDict


class PlannedChanges(TypedDict):
    """What the plan hands the write (spark_merge__planned_changes): the partitions the changes touch
    (values by partition column), the rows each gains and loses (None: not checked row by row) and
    the files holding a changed row (None: whole partitions are rewritten)."""

    partitions: list[dict[str, Any]]
    deltas: list[dict[str, Any]] | None
    files: list[str] | None


class RunState(TypedDict, total=False):
    """``s``: one merge, upsert, compaction, canonicalization, rollback or full refresh."""

    # started by spark_merge__run_state (lifecycle/records.sql) for either host
    merge_id: str
    metrics: dict[str, int]  # the one list of metrics (spark_merge__zero_metrics)
    plan_hash: str  # the plan's fingerprint, for the history entry and XCom
    changes: PlannedChanges
    kind: str  # merge, update, delete, upsert, compact, canonicalize, rollback, full_refresh
    statement: str  # what the user ran, as the history shows it
    started: str  # when (dbt's run; Python's merge id carries it)
    target: list[str]  # the target's name parts, before begin describes it
    request: dict[str, Any]  # dbt's model config or operation arguments, shaped into spec at begin
    spec: dict[str, Any]  # the statement (MergeSpec.to_dict())
    upsert: dict[str, Any]  # a primary-key upsert's options
    to_merge_id: str  # rollback: the merge to undo, with every later one
    discard_later_writes: bool  # rollback: remove plain INSERTs written after the merges it undoes
    entry_extra: dict[str, Any]  # fields the history entry carries besides the lifecycle's (run_key)
    schema_changes: str  # schema evolution's columns: "apply" (a run), "preview" (explain), "refuse" (a dry run)
    stage_select: str  # compaction: the query whose rows replace the log's
    rows_before: int  # compaction: the log's rows before it
    # set by begin
    table: dict[str, Any]  # spark_merge__table_info
    resolved: dict[str, Any]  # the clauses resolved against the table (spark_merge__resolve)
    ctx: dict[str, Any]  # the plan's context: PlanContext below names its keys
    paradigm: str  # the row-change paradigm's name
    view: str  # merge-on-read: the view readers query
    log_plan: dict[str, Any]  # merge-on-read: the upsert's plan over the log
    insert_only: bool  # every clause inserts: the write may append in place
    properties: dict[str, str]  # table properties the commit sets besides the identity
    added_columns: list[list[str]]  # schema evolution's columns ([name, type]), added (or, explained, to add)
    cleaned: bool  # this run's leftovers are dropped
    # set by plan
    matched_from_summary: bool  # the summary found the matched partitions (no separate job)
    fused: bool  # the rewrite reads the target once with the changes (rewrite.sql)
    fusable: bool  # the changes are the same at every read: the write may join them again (lifecycle_plan)
    observed: bool  # the one-pass write: it counts its own changes, no summary before it (plan_files)
    append_statements: list[str]  # a merge-on-read upsert's INSERT into its log
    before_append: list[str]  # a merge-on-read upsert's view, (re)created under the lock before its append
    log_partitions: list[dict[str, Any]]  # a merge-on-read upsert: the log's partitions it adds rows to
    log_deltas: dict[str, int]  # ... and how many rows to each, by partition_key
    feed_statements: list[str]  # the change feed's statements, run under the lock
    restore: list[dict[str, Any]]  # rollback: the partitions to point back, and where
    # set by write and commit
    staged: bool  # files were written under the merge's own directory
    repoints: list[dict[str, Any]]  # partitions (or the table) and their new directories
    commit_repoints: bool  # the commit repoints (a rollback, a canonicalization) rather than appends
    locked: bool  # this run holds the commit lock
    checked_at: str  # when the check under the lock listed the partitions
    feed_written: bool
    journaled: bool  # the commit point is passed: roll forward, never back
    version_after: int
    entry: dict[str, Any]  # the history entry (the journal carries it)
    append: dict[str, Any]  # an append's record: its partitions' rows before and after (the journal carries it)
    append_sql: list[str]  # an append's INSERTs, run between its journal and the journal's apply
    partition_rows: list[dict[str, Any]]  # the rows each partition it touched holds after the commit (history)


class PlanContext(TypedDict, total=False):
    """``s.ctx``: the names and choices of one run's plan, made by spark_merge__context, added to as the
    plan finds out about the source and the target."""

    merge_id: str
    source: str  # the source's relation or query
    source_table: str
    source_view: str
    changes_table: str
    changes_view: str
    found_view: str
    stage: str
    stage_name: str
    stage_location: str
    history_location: str
    history_glob: str
    feed: str
    on_keys: list[dict[str, Any]]  # ON's equalities: target, source, null_safe
    source_made: bool  # the source is cached or written once
    source_rows: int
    source_slices: int | None  # the source's read partitions at most (source_stats_sql): an append writes a few as read
    match_filter: str  # the target rows the source can match, as a filter on keys and partitions
    partitions_listed: list[str]  # partition columns whose source values are listed
    broadcast_target: bool
    broadcast_source: bool
    broadcast_changed: bool
    scan_filter: str
    changes: str  # the changes query, inlined where it is read once
    changes_made: bool
    unjoined: bool  # an append no target file can take part in: its changes are the source's rows, read twice
    rewrite_files: list[str]  # file-granular rewrite: the files holding a changed row
    name_matched_files: bool  # the summary names the files holding a matched row (a fused write that inserts)
    matched_files: list[str]  # those files: the fused write's rows that tell inserted source rows from matched ones
    found: str  # the one-pass plan's cached pairs of a matched target row's file and its source row number
    found_made: bool
    fold: dict[str, Any]  # the table's auto compaction: the small files rewritten too (rewrite.sql: fold_plan)
    rebalance: bool
    inserts: bool
    stage_dropped: bool
