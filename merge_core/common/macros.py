"""Render the dbt package's macros with plain jinja2: one SQL compiler, two hosts.

All macro files are loaded as one template module. Under dbt a package's macros
reach each other only through the package's name (`spark_merge.spark_merge__quote`),
so here the name `spark_merge` stands for that module. The macros are pure (plain
data in, SQL text out, or an `out` container filled with `do`), so the other dbt
features needed are the `do` and loop-control extensions and dbt's `fromjson`. The files sit in folders by phase (core,
table, begin, plan, lifecycle, commit); materializations/ holds the dbt-only orchestration and is not
loaded here.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, cast

import jinja2

from dbt_macros import MACRO_DIR
from merge_core.common.run_state import PlannedChanges, RunState


@functools.lru_cache(maxsize=1)
def _module() -> Any:
    paths = sorted(p for p in MACRO_DIR.rglob("*.sql") if "materializations" not in p.relative_to(MACRO_DIR).parts)
    source = "\n".join(p.read_text() for p in paths)
    # compiling the macros takes most of a command's start (0.8 s); jinja2 keeps the compiled code in
    # the user's temporary folder, keyed by the source's checksum, so an edited macro compiles again
    env = jinja2.Environment(
        loader=jinja2.DictLoader({"spark_merge": source}),
        extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"],  # as dbt's environment
        undefined=jinja2.StrictUndefined,
        bytecode_cache=jinja2.FileSystemBytecodeCache(),
    )
    env.globals["fromjson"] = _fromjson
    env.globals["local_md5"] = _local_md5
    env.globals["spark_merge"] = _Package()
    return env.get_template("spark_merge").module


def _local_md5(text: str) -> str:
    """dbt's local_md5: the MD5 of the text, as hex."""
    return hashlib.md5(str(text).encode("utf-8")).hexdigest()


def _fromjson(text: str, default: Any = None) -> Any:
    """dbt's fromjson: the parsed value, or ``default`` when the text is not JSON."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


class _Package:
    """The package namespace: `spark_merge.<macro>` looks the macro up in the loaded module."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_module(), name)


def render(name: str, *args: Any, **kwargs: Any) -> str:
    """Call macro ``spark_merge__<name>`` and return its text, stripped. For tests of one macro;
    the code calls the typed functions below, so no macro name is spelled outside this module."""
    macro = getattr(_module(), f"spark_merge__{name}")
    return str(macro(*args, **kwargs)).strip()


def fill(name: str, *args: Any, **kwargs: Any) -> dict:
    """Call a macro that fills an ``out`` dict (after its positional arguments) and return it."""
    out: dict = {}
    render(name, *args, out, **kwargs)
    return out


def fill_list(name: str, *args: Any, **kwargs: Any) -> list:
    """Call a macro that fills an ``out`` list (after its positional arguments) and return it."""
    out: list = []
    render(name, *args, out, **kwargs)
    return out


_render, _fill, _fill_list = render, fill, fill_list

# The typed facade: one function per macro the Python code calls, in the order of the macro files
# (dbt_macros/macros/<folder>/<file>.sql). A Record is the plain dict a macro reads or fills: the
# table (spark_merge__table_info), the request (spec), the run's state (s), a context, a plan.
Record = dict[str, Any]


# begin/upsert.sql
def mor_compact_select(table: Record, plan: Record, cutoff: str | None = None) -> str:
    return _render("mor_compact_select", table, plan, cutoff=cutoff)


def mor_rows_sql(table: Record, spec: Record) -> str:
    return _render("mor_rows_sql", table, spec)


def upsert_plan(upsert: Record, table: Record, source_columns: list[str] | None = None) -> Record:
    return _fill("upsert_plan", upsert, table, source_columns=source_columns)


# begin/validate.sql
def describe_parts_sql(spec: Record, table: Record, parts: list[Any]) -> str:
    return _render("describe_parts_sql", spec, table, parts)


def describe_source_sql(spec: Record) -> str:
    return _render("describe_source_sql", spec)


def source_relation(spec: Record) -> str:
    return _render("source_relation", spec)


# commit/commit.sql
def add_partitions_sql(table: Record, repoints: list[Record]) -> str:
    return _render("add_partitions_sql", table, repoints)


def journal_clear_sql(table: Record) -> str:
    return _render("journal_clear_sql", table)


def journal_done_sql(table: Record, merge_id: str) -> str:
    return _render("journal_done_sql", table, merge_id)


def journal_reset_sql(table: Record) -> str:
    return _render("journal_reset_sql", table)


def journal_sql(table: Record, merge_id: str, repoints: list[Record], entry: Record | None = None) -> str:
    return _render("journal_sql", table, merge_id, repoints, entry=entry)


def pending_journal(table: Record) -> Record:
    return _fill("pending_journal", table)


def refresh_sql(table: Record) -> str:
    return _render("refresh_sql", table)


def repoint_statements(table: Record, repoints: list[Record]) -> list[Any]:
    return _fill_list("repoint_statements", table, repoints)


def set_properties_sql(table: Record, properties: dict[str, str]) -> str:
    return _render("set_properties_sql", table, properties)


def unset_properties_sql(table: Record, keys: list[str]) -> str:
    return _render("unset_properties_sql", table, keys)


# commit/lock.sql
def lock_holder(lock: Any, table: Record) -> Record:
    return _fill("lock_holder", lock, table)


def lock_relation(table: Record) -> str:
    return _render("lock_relation", table)


def lock_settings() -> Record:
    return _fill("lock_settings")


def lock_wait(lock: Any, table: Record, merge_id: str | None, finished: str | None, wait_s: float) -> Record:
    return _fill("lock_wait", lock, table, merge_id, finished, wait_s)


def lock_sql(table: Record, merge_id: str, since: Any, expires: Any, owner: str = "") -> str:
    return _render("lock_sql", table, merge_id, since, expires, owner=owner)


def renew_lock_sql(table: Record, expires: Any) -> str:
    return _render("renew_lock_sql", table, expires)


def unlock_sql(table: Record) -> str:
    return _render("unlock_sql", table)


# core/catalog.sql
def describe_columns_sql(relation: str) -> str:
    return _render("describe_columns_sql", relation)


def describe_json_sql(relation: str, partition_spec: str = "") -> str:
    return _render("describe_json_sql", relation, partition_spec=partition_spec)


def describe_query_sql(select: str) -> str:
    return _render("describe_query_sql", select)


def select_sql(columns: list[list[str]], relation: str) -> str:
    return _render("select_sql", columns, relation)


def drop_table_sql(relation: str) -> str:
    return _render("drop_table_sql", relation)


def drop_view_sql(relation: str) -> str:
    return _render("drop_view_sql", relation)


def relation(database: str, name: str) -> str:
    return _render("relation", database, name)


def count_rows_sql(relation: str) -> str:
    return _render("count_rows_sql", relation)


def uncache_sql(relation: str) -> str:
    return _render("uncache_sql", relation)


def rename_table_sql(relation: str, new_relation: str) -> str:
    return _render("rename_table_sql", relation, new_relation)


def describe_relation_sql(relation: str) -> str:
    return _render("describe_relation_sql", relation)


def show_databases_sql(like: str | None = None) -> str:
    return _render("show_databases_sql", like=like)


def show_partitions_sql(relation: str, partition_spec: str = "") -> str:
    return _render("show_partitions_sql", relation, partition_spec=partition_spec)


def show_properties_sql(relation: str) -> str:
    return _render("show_properties_sql", relation)


def show_tables_sql(database: str, like: str | None = None) -> str:
    return _render("show_tables_sql", database, like=like)


def show_views_sql(like: str) -> str:
    return _render("show_views_sql", like)


def drop_database_sql(database: str) -> str:
    return _render("drop_database_sql", database)


def warm_up_statements(database: str, location: str) -> Record:
    return _fill("warm_up_statements", database, location)


# core/codes.sql
def codes() -> Record:
    return _fill("codes")


# core/common.sql
def literal(value: Any) -> str:
    return _render("literal", value)


def partition_spec(table: Record, values: Any) -> str:
    return _render("partition_spec", table, values)


def partition_filter(table: Record, partitions: list[dict[str, Any]]) -> str:
    return _render("partition_filter", table, partitions)


def quote(name: str) -> str:
    return _render("quote", name)


# core/options.sql
def option_errors(values: Any) -> list[Any]:
    return _fill_list("option_errors", values)


def option_table() -> list[Any]:
    return _fill_list("option_table")


# lifecycle/begin.sql
def lifecycle_begin(host: Any, s: RunState) -> None:
    _render("lifecycle_begin", host, s)


def lifecycle_begin_log(host: Any, s: RunState) -> None:
    _render("lifecycle_begin_log", host, s)


def relation_kind(host: Any, database: str, name: str) -> Record:
    return _fill("relation_kind", host, database, name)


def where_in(table: Record, partition: dict[str, Any] | None) -> str:
    return _render("where_in", table, partition)


def lifecycle_begin_rollback(host: Any, s: RunState) -> None:
    _render("lifecycle_begin_rollback", host, s)


def lifecycle_execute_rollback(host: Any, s: RunState) -> None:
    _render("lifecycle_execute_rollback", host, s)


def lifecycle_validate(host: Any, spec: Record, table: Record, source_types: list[list[str]]) -> Record:
    return _fill("lifecycle_validate", host, spec, table, source_types)


def new_merge_id(now: str, entropy: str) -> str:
    return _render("new_merge_id", now, entropy)


# lifecycle/phases.sql
def lifecycle_describe(host: Any, parts: list[str], trusted: bool = True) -> Record:
    return _fill("lifecycle_describe", host, parts, trusted=trusted)


def lifecycle_cleanup(host: Any, s: RunState) -> None:
    _render("lifecycle_cleanup", host, s)


def lifecycle_finish(host: Any, s: RunState) -> None:
    _render("lifecycle_finish", host, s)


def lifecycle_plan(host: Any, s: RunState) -> None:
    _render("lifecycle_plan", host, s)


def lifecycle_settle(host: Any, table: Record) -> Record:
    return _fill("lifecycle_settle", host, table)


def lifecycle_unchanged(host: Any, s: RunState) -> Record:
    return _fill("lifecycle_unchanged", host, s)


# lifecycle/records.sql
def changed_target(s: RunState, version_after: Any) -> bool:
    return _render("changed_target", s, version_after) == "True"


def history_entry(s: RunState, version_after: Any) -> Record:
    return _fill("history_entry", s, version_after)


def lifecycle_plan_log(host: Any, s: RunState) -> None:
    _render("lifecycle_plan_log", host, s)


def planned_changes(
    partitions: list[dict[str, Any]], deltas: list[Record] | None, files: list[str] | None
) -> PlannedChanges:
    return cast(PlannedChanges, _fill("planned_changes", partitions, deltas, files))


def run_state(merge_id: str, fields: Record) -> RunState:
    return cast(RunState, _fill("run_state", merge_id, fields))


def zero_metrics() -> Record:
    return _fill("zero_metrics")


# lifecycle/write.sql
def lifecycle_recover(host: Any, table: Record) -> Record:
    return _fill("lifecycle_recover", host, table)


def lifecycle_rows_now(host: Any, table: Record, partitions: list[dict[str, Any]]) -> Record:
    return _fill("lifecycle_rows_now", host, table, partitions)


def lifecycle_write(host: Any, s: RunState) -> None:
    _render("lifecycle_write", host, s)


# plan/changes.sql
def by_source_reads(spec: Record, resolved: Record) -> Record:
    return _fill("by_source_reads", spec, resolved)


def plan_steps() -> list[str]:
    return _fill_list("plan_steps")


def step_comment(name: str, text: str) -> str:
    """explain's heading of the plan's step ``name``, numbered as plan_steps numbers it (the progress
    lines' step_label too): ``-- 4. summary: <text>``."""
    return f"-- {plan_steps().index(name) + 1}. {name}: {text}"


def cache_changes_sql(spec: Record, table: Record, resolved: Record, ctx: Record) -> str:
    return _render("cache_changes_sql", spec, table, resolved, ctx)


def matched_partitions_sql(
    spec: Record, table: Record, ctx: Record, source_rows: int | None = None, by_range: bool = False
) -> str:
    return _render("matched_partitions_sql", spec, table, ctx, source_rows=source_rows, by_range=by_range)


# plan/checks.sql
def duplicates_sql(spec: Record, table: Record, resolved: Record, ctx: Record, limit: int = 5) -> str:
    return _render("duplicates_sql", spec, table, resolved, ctx, limit=limit)


# plan/context.sql
def broadcast_changed(m: Record) -> Record:
    return _fill("broadcast_changed", m)


def context(spec: Record, table: Record, merge_id: str) -> Record:
    return _fill("context", spec, table, merge_id)


def source_broadcast_rows() -> int:
    return int(_render("source_broadcast_rows"))


# plan/rewrite.sql
def fold_policy(table: Record) -> Record:
    """The table's auto compaction policy: {'min_files', 'below'}, {'error'}, or {} when unset."""
    return _fill("fold_policy", table)


def append_sql(table: Record, ctx: Record) -> str:
    return _render("append_sql", table, ctx)


def empty_partition_sql(table: Record, location: str) -> str:
    return _render("empty_partition_sql", table, location)


def file_stats_sql(table: Record, relation: str, where: str | None = None) -> str:
    return _render("file_stats_sql", table, relation, where=where)


def fused_stage_sql(spec: Record, table: Record, resolved: Record, ctx: Record, partitions: list[Record]) -> str:
    return _render("fused_stage_sql", spec, table, resolved, ctx, partitions)


def stage_select_sql(table: Record, ctx: Record, select: str) -> str:
    return _render("stage_select_sql", table, ctx, select)


# plan/source.sql
def cache_source_sql(spec: Record, ctx: Record) -> str:
    return _render("cache_source_sql", spec, ctx)


def source_stats_sql(table: Record, ctx: Record) -> str:
    return _render("source_stats_sql", table, ctx)


# plan/summary.sql
def change_summary_sql(spec: Record, table: Record, resolved: Record, ctx: Record) -> str:
    return _render("change_summary_sql", spec, table, resolved, ctx)


def decode_partitions(table: Record, rows: list[Any], column: str = "__sm_part") -> list[Any]:
    return _fill_list("decode_partitions", table, rows, column=column)


# table/describe.sql
def column_record(name: str, type: str, facts: Record) -> Record:
    return _fill("column_record", name, type, facts)


def table_info(desc: Record, column_types: list[list[str]]) -> Record:
    return _fill("table_info", desc, column_types)


# table/evolution.sql
def add_columns_sql(table: Record, columns: list[Any]) -> str:
    return _render("add_columns_sql", table, columns)


def evolved_columns(spec: Record, table: Record, source_types: list[list[str]], direct: list[str]) -> Record:
    return _fill("evolved_columns", spec, table, source_types, direct)


def evolved_relation(table: Record, columns: list[Any]) -> str:
    return _render("evolved_relation", table, columns)


# table/metadata.sql
def entry_errors(table: Record, entry: Record | None, path: str) -> list[Any]:
    return _fill_list("entry_errors", table, entry, path)


def changes_location(table: Record, merge_id: str) -> str:
    return _render("changes_location", table, merge_id)


def changes_range(table: Record, entries: list[Record], since: str | None, until: str | None) -> Record:
    return _fill("changes_range", table, entries, since, until)


def changes_read_sql(table: Record, entries: list[Record]) -> str:
    return _render("changes_read_sql", table, entries)


def recorded_rows(table: Record, entries: list[Record]) -> Record:
    return _fill("recorded_rows", table, entries)


def plain_writes(table: Record, chosen: list[Record], recorded: Record, now: Record | None) -> Record:
    return _fill("plain_writes", table, chosen, recorded, now)


def plain_writes_message(table: Record, changed: list[str], accept: str) -> str:
    return " ".join(_render("plain_writes_message", table, changed, accept).split())


def partition_key(table: Record, partition: dict[str, Any] | None) -> str:
    return _render("partition_key", table["partition_columns"], partition or {})


def identity_sign(table_id: str, created: str | None) -> str:
    return _render("identity_sign", table_id, created)


def rebase_entry(table: Record, entry: Record) -> Record:
    _render("rebase_entry", table, entry)
    return entry


def identity(props: dict[str, str], name: str, location: str, created: str | None = None) -> Record:
    return _fill("identity", props, name, location, created=created)


def is_id(value: Any) -> str:
    return _render("is_id", value)
