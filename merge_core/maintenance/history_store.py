"""Reading the per-commit history entries: one JSON file per commit.

They are written by the lifecycle only (spark_merge__history_entry builds them,
spark_merge__lifecycle_finish or, for a journaled commit, spark_merge__lifecycle_apply_journal
writes them into <root>/_spark_merge/history/<merge id>/: the Python host as a file of its own, dbt
with INSERT OVERWRITE DIRECTORY), so a commit completed by recovery has its entry too.

They are files under the table's root, which anyone can edit, empty or copy there from another
table. So they are read here directly, file by file (no Spark job, and no checksum file of Spark's
to trip over), and each is checked: one JSON line, the entry's declared shape
(spark_merge__entry_errors), and this table's identity. An entry that fails is *rejected*, never
skipped silently: `history` lists the others and warns, while vacuum and rollback, which decide what
to keep and where to point from the whole history, refuse until `spark-merge repair-history` has
moved the rejected entries aside.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pyarrow import fs

from merge_core.common import macros
from merge_core.common.errors import MetadataError
from merge_core.common.result import run_key_tag
from merge_core.spark import files

log = logging.getLogger("spark_merge")

HISTORY_DIR = "_spark_merge/history"
REJECTED_DIR = "_spark_merge/history_rejected"
WRITING_GRACE = timedelta(hours=1)  # a merge this young may still be writing its entry


@dataclass
class History:
    """A table's history: its readable entries (newest first) and the rejected ones (path, why)."""

    table: str
    entries: list[dict] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)

    def require_readable(self, what: str) -> History:
        """Refuse ``what`` (vacuum, rollback) while an entry is rejected: it decides from all of them."""
        if self.rejected:
            path, why = self.rejected[0]
            more = f" (and {len(self.rejected) - 1} more)" if len(self.rejected) > 1 else ""
            raise MetadataError(
                f"{what} of {self.table} needs every history entry, and {path} cannot be used: "
                f"{why}{more}; nothing was changed. Restore it, or `spark-merge repair-history "
                f"{self.table}` moves it aside (under {REJECTED_DIR})"
            )
        return self


def history_dir(table: dict) -> str:
    return f"{table['root'].rstrip('/')}/{HISTORY_DIR}"


def _started(merge_id: str) -> datetime | None:
    try:
        return datetime.strptime(merge_id[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def _read_entry(filesystem: fs.FileSystem, path: str, name: str) -> tuple[dict | None, str | None]:
    """(entry, None), (None, why it is rejected), or (None, None) for an entry still being written."""
    parts = [
        i
        for i in filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
        if i.type == fs.FileType.File and files.visible(i.base_name)
    ]
    if not parts:
        started = _started(name)
        if started is not None and datetime.now(UTC) - started < WRITING_GRACE:
            return None, None
        return None, "it holds no entry file"
    lines = []
    for info in parts:
        with filesystem.open_input_stream(info.path) as f:
            lines += [line for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    if len(lines) != 1:
        return None, f"it holds {len(lines)} lines where a commit writes one"
    try:
        record = json.loads(lines[0])
        entry = json.loads(record["entry"]) if isinstance(record, dict) else None
    except (ValueError, KeyError, TypeError):
        return None, "it is not the JSON a commit writes"
    if not isinstance(entry, dict):
        return None, "it is not the JSON a commit writes"
    if entry.get("finished_at") is None and isinstance(record.get("finished_at"), str):
        entry["finished_at"] = record["finished_at"]
    return entry, None


def load(table: dict) -> History:
    """Every history entry of ``table`` (the dict describe_table gives), checked."""
    out = History(table["name"])
    root = history_dir(table)
    filesystem, path = files.resolve(root)
    for info in filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True)):
        if info.type != fs.FileType.Directory or not files.visible(info.base_name):
            continue
        entry, why = _checked_entry(table, filesystem, info)
        if why is not None:
            out.rejected.append((f"{root}/{info.base_name}", why))
        elif entry is not None:
            out.entries.append(entry)
    out.entries.sort(key=lambda e: e["finished_at"], reverse=True)
    out.rejected.sort()
    return out


def _checked_entry(table: dict, filesystem: fs.FileSystem, info: fs.FileInfo) -> tuple[dict | None, str | None]:
    """The entry in the directory ``info`` checked against ``table``: (entry, None), (None, why it is
    rejected), or (None, None) for an entry still being written."""
    entry, why = _read_entry(filesystem, info.path, info.base_name)
    if entry is None:
        return None, why
    problems = macros.entry_errors(table, entry, "the entry")
    if not problems and entry["merge_id"] != info.base_name:
        problems = [f"the entry is of merge {entry['merge_id']}, not {info.base_name}"]
    if not problems:
        try:
            datetime.fromisoformat(entry["finished_at"])
        except (TypeError, ValueError):
            problems = ["the entry's finished_at is not a time"]
    if problems:
        return None, problems[0]
    return macros.rebase_entry(table, entry), None


def find_run(table: dict, run_key: str) -> dict | None:
    """The committed entry of ``table`` recorded with ``run_key``, or None. One listing of the
    history; only the entries whose merge id carries the key's tag are read (new_merge_id)."""
    tag = run_key_tag(run_key)
    filesystem, path = files.resolve(history_dir(table))
    for info in filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True)):
        name = info.base_name
        if info.type != fs.FileType.Directory or name[15:19] != tag or not files.visible(name):
            continue
        entry, _ = _checked_entry(table, filesystem, info)
        if entry is not None and entry.get("run_key") == run_key and entry.get("status", "committed") == "committed":
            return entry
    return None


def read_history(spark, table_name: str, limit: int = 20) -> list[dict]:
    """The newest ``limit`` readable entries of ``table_name``, newest first; a warning names the
    rejected ones (`spark-merge repair-history` moves them aside)."""
    from merge_core.spark.catalog import describe_table

    table = describe_table(spark, [p.strip("`") for p in table_name.split(".")])
    history = load(table)
    missing = lost_commits(table, history)
    if missing:
        log.warning(missing)
    for path, why in history.rejected:
        log.warning(
            "history entry %s of %s is not shown: %s (`spark-merge repair-history %s` moves it aside)",
            path,
            history.table,
            why,
            history.table,
        )
    return history.entries[: int(limit)]


def lost_commits(table: dict, history: History) -> str | None:
    """What the table's version says its history should hold and does not: every commit moves the
    version by one, so entries that stop short of it were lost. TRUNCATE TABLE, or INSERT OVERWRITE of
    the whole table, deletes a table's directory, and with it the history and the older versions
    under its root. None when the history reaches the table's version."""
    newest = max((e.get("version_after") or 0 for e in history.entries), default=0)
    if table["version"] <= newest:
        return None
    if not history.entries:
        return (
            f"the history of {table['name']} is gone: the table is at version {table['version']} and "
            f"{history_dir(table)} holds no entry (TRUNCATE TABLE, or INSERT OVERWRITE of the whole table, deletes "
            f"the table's directory, its history and older versions with it); later commits are recorded again"
        )
    return (
        f"the history of {table['name']} stops at version {newest} and the table is at version {table['version']}: "
        f"the entries of {table['version'] - newest} commit(s) are lost (a TRUNCATE TABLE or an INSERT OVERWRITE "
        f"of the whole table deletes them), and rollback cannot reach past them"
    )


def repair(table: dict, dry_run: bool = False) -> list[tuple[str, str]]:
    """Move the rejected entries of ``table`` under <root>/_spark_merge/history_rejected/, where
    nothing reads them (kept for inspection); returns them (path, why)."""
    history = load(table)
    target = f"{table['root'].rstrip('/')}/{REJECTED_DIR}"
    for where, why in history.rejected:
        if dry_run:
            continue
        filesystem, src = files.resolve(where)
        _, dst_dir = files.resolve(target)
        filesystem.create_dir(dst_dir, recursive=True)
        name = where.rsplit("/", 1)[1]
        filesystem.move(src, f"{dst_dir}/{name}_{datetime.now(UTC):%Y%m%d%H%M%S}")
        log.warning("moved history entry %s of %s aside: %s", where, table["name"], why)
    return history.rejected
