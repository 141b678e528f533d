"""The file index: what each data file of a table holds (rows, and each column's range per row group),
read once from its parquet footer and kept in small parquet files under <root>/_spark_merge/file_index/,
so that the next merge plans from one read instead of a footer per file.

A merge lists the directories it reads anyway (the listing is what proves which files are the table's:
a plain INSERT or a copied file has no entry, and is read like any file). For each listed file the index
answers from an entry recorded with the same path, size and modification time; any other file has its
footer read, and the merge's commit records it. An entry therefore only ever describes the bytes it was
read from: an index that is stale, edited, half written, from another release or missing makes a merge
read footers, never plan from a wrong range.

Each commit on the Python host writes one manifest, ``<merge id>.parquet``: the entries it learned (the
footers it read, the files it staged and carried), naming the earlier manifests whose entries still count
(its chain). Every CHAIN-th manifest is a snapshot of every live entry it knows instead, and the
manifests before it are removed: planning reads at most CHAIN small files, and a commit writes what it
changed, not the whole table. The newest manifest (by merge id, which starts with the second its merge
began) is the head.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyarrow import fs

from merge_core.spark import files

log = logging.getLogger("spark_merge")

INDEX_DIR = "_spark_merge/file_index"
FORMAT = "1"
CHAIN = 8  # manifests a head may name, itself included; the next commit writes a snapshot
COLUMNS = 32  # the first this many columns of a comparable type are indexed, as Delta keeps 32
footers_read = 0  # footers read in this process (tests; bench)
_counted = threading.Lock()

SCHEMA = pa.schema(
    [
        ("path", pa.string()),  # relative to the table's root
        ("bytes", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("rows", pa.int64()),
        ("column", pa.string()),  # lower case; NULL: the file's row with no column range
        ("row_group", pa.int32()),
        ("rg_rows", pa.int64()),
        ("kind", pa.string()),  # how lo and hi read back: i(nteger), d(ate), n(umeric, a decimal)
        ("lo", pa.string()),
        ("hi", pa.string()),
        ("nulls", pa.int64()),
    ]
)
_KINDS: dict[str, Callable[[str], Any]] = {"i": int, "d": date.fromisoformat, "n": Decimal}

# a column's range in one row group: (min, max, null count or None, rows); min and max are None when
# the row group holds only NULLs in it
Range = tuple[Any, Any, int | None, int]


@dataclass(frozen=True)
class Facts:
    """What a data file holds: its rows, and for each column whose every row group has statistics of a
    comparable type (lower-case name), the row groups' ranges. A column missing here tells nothing."""

    rows: int
    ranges: dict[str, list[Range]] = field(default_factory=dict)


def _kind(value: Any) -> str | None:
    if isinstance(value, bool) or isinstance(value, datetime):
        return None
    if isinstance(value, int):
        return "i"
    if isinstance(value, date):
        return "d"
    if isinstance(value, Decimal):
        return "n"
    return None


def footer_facts(filesystem: fs.FileSystem, path: str) -> Facts:
    """The facts of the parquet file at ``path``, from its footer alone."""
    import pyarrow.parquet as pq

    global footers_read
    with _counted:
        footers_read += 1
    with filesystem.open_input_file(path) as f:
        meta = pq.ParquetFile(f).metadata
    top: dict[str, list[int]] = {}
    for i in range(meta.num_columns):
        name = meta.schema.column(i).path
        if "." not in name:
            top.setdefault(name.lower(), []).append(i)
    ranges: dict[str, list[Range]] = {}
    for name, found in top.items():
        if len(found) != 1:
            continue  # two columns that differ only in case: not told apart
        groups = _column_ranges(meta, found[0])
        if groups is not None:
            ranges[name] = groups
        if len(ranges) == COLUMNS:
            break
    return Facts(meta.num_rows, ranges)


def _column_ranges(meta: Any, column: int) -> list[Range] | None:
    """Each row group's range of one column, or None where one row group cannot tell (no statistics,
    values without a range, a type not compared)."""
    out: list[Range] = []
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        stats = rg.column(column).statistics
        if stats is None:
            return None
        nulls = stats.null_count if stats.has_null_count else None
        if not stats.has_min_max:
            if nulls is None or nulls < rg.num_rows:
                return None
            out.append((None, None, nulls, rg.num_rows))
            continue
        lo, hi = stats.min, stats.max
        if _kind(lo) is None or _kind(lo) != _kind(hi):
            return None
        out.append((lo, hi, nulls, rg.num_rows))
    return out


def can_hold(facts: Facts, keys: list[dict]) -> bool:
    """Whether the file can hold a row with every key of ``keys`` ({column, lo, hi, null_safe}, lo and
    hi comparable values) in its range: no key's every row group misses it (a NULL, which `<=>`
    matches, is in range of a null-safe key)."""
    for k in keys:
        groups = facts.ranges.get(k["column"].lower())
        if groups is not None and not _in_some_group(groups, k["lo"], k["hi"], k["null_safe"]):
            return False
    return True


def _in_some_group(groups: list[Range], lo: Any, hi: Any, null_safe: bool) -> bool:
    for g_lo, g_hi, nulls, _ in groups:
        if null_safe and (nulls is None or nulls > 0):
            return True
        if g_lo is None:
            continue  # only NULLs, which `=` never matches
        try:
            if g_lo <= hi and g_hi >= lo:
                return True
        except TypeError:
            return True
    return False


class FileIndex:
    """The index of one table for one merge: the entries its manifests hold (read once, on first use),
    the facts of listed files (from an entry or a footer), and what this merge learned, which its commit
    writes. Safe to use from the listing's threads."""

    def __init__(self, root: str):
        self.root = root.rstrip("/")
        self.filesystem, path = files.resolve(self.root)
        self._base = path.rstrip("/") + "/"
        self._dir = f"{self._base}{INDEX_DIR}"
        self._lock = threading.Lock()
        self._known: dict[str, tuple[int, int, Facts]] | None = None  # path -> (bytes, mtime_ns, facts)
        self._chain: list[str] = []  # the manifests read, head first
        self.learned: dict[str, tuple[int, int, Facts]] = {}
        self.retired: set[str] = set()  # directories (relative) the commit replaced

    # -- reading ---------------------------------------------------------------
    def _relative(self, path: str) -> str | None:
        return path[len(self._base) :] if path.startswith(self._base) else None

    def _entries(self) -> dict[str, tuple[int, int, Facts]]:
        with self._lock:
            if self._known is None:
                self._known, self._chain = {}, []
                try:
                    self._load()
                except Exception as e:  # unreadable, half written, another format: footers instead
                    log.debug("file index of %s not read: %s", self.root, e)
                    self._known, self._chain = {}, []
            return self._known

    def _load(self) -> None:
        names = sorted(
            i.base_name
            for i in self.filesystem.get_file_info(fs.FileSelector(self._dir, allow_not_found=True))
            if i.type == fs.FileType.File and i.base_name.endswith(".parquet") and files.visible(i.base_name)
        )
        if not names:
            return
        head = _read_manifest(self.filesystem, f"{self._dir}/{names[-1]}")
        chain = [names[-1]] + [n for n in json.loads(head[1].get("chain", "[]")) if n in names]
        found = {names[-1]: head}
        for name in chain[1:]:
            try:
                found[name] = _read_manifest(self.filesystem, f"{self._dir}/{name}")
            except Exception as e:  # removed by a snapshot meanwhile: its entries are read again
                log.debug("file index manifest %s not read: %s", name, e)
        for name in reversed(chain):  # oldest first: a later manifest's retirements and entries win
            if name not in found:
                continue
            entries, meta = found[name]
            gone = tuple(json.loads(meta.get("retired", "[]")))
            if gone:
                self._known = {p: e for p, e in self._known.items() if not p.startswith(gone)}  # type: ignore[union-attr]
            self._known.update(entries)  # type: ignore[union-attr]
        self._chain = [n for n in chain if n in found]

    def facts(self, filesystem: fs.FileSystem, info: fs.FileInfo) -> Facts:
        """The facts of the listed file ``info``: its entry when recorded with this size and
        modification time, else its footer (learned: the commit records it)."""
        relative = self._relative(info.path) if filesystem.type_name == self.filesystem.type_name else None
        stamp = (info.size or 0, info.mtime_ns)
        if relative is not None and info.mtime_ns is not None:
            known = self._entries().get(relative) or self.learned.get(relative)
            if known is not None and known[:2] == stamp:
                return known[2]
        facts = footer_facts(filesystem, info.path)
        if relative is not None and info.mtime_ns is not None:
            with self._lock:
                self.learned[relative] = (*stamp, facts)  # type: ignore[assignment]
        return facts

    # -- what the commit changed ---------------------------------------------------
    def carried(self, pairs: list[tuple[str, str]]) -> None:
        """Files linked from one path to another (carry): the copy holds what the original does."""
        dests = [files.resolve(dest)[1] for _, dest in pairs]
        infos = self.filesystem.get_file_info(dests) if dests else []
        for (source, _), info in zip(pairs, infos, strict=True):
            src, dst = self._relative(files.resolve(source)[1]), self._relative(info.path)
            was = self.learned.get(src) or self._entries().get(src) if src else None
            if was is not None and dst is not None and info.size == was[0] and info.mtime_ns is not None:
                with self._lock:
                    self.learned[dst] = (was[0], info.mtime_ns, was[2])

    def forget(self, directory: str) -> None:
        """Staged files this merge removed again: nothing to record of them."""
        relative = self._relative(files.resolve(directory)[1].rstrip("/"))
        if relative is not None:
            with self._lock:
                self.learned = {p: e for p, e in self.learned.items() if not p.startswith(relative + "/")}

    def retire(self, directories: list[str]) -> None:
        """Directories the commit replaced: their files are not the table's any more."""
        for directory in directories:
            relative = self._relative(files.resolve(directory)[1].rstrip("/"))
            if relative is not None:
                self.retired.add(relative + "/")

    # -- writing -----------------------------------------------------------------
    def write(self, merge_id: str) -> None:
        """Record this merge's manifest (after its commit): what it learned, naming the chain before
        it; or, when the chain is full, a snapshot of every live entry, and the older manifests go."""
        known = self._entries()
        snapshot = len(self._chain) + 1 >= CHAIN
        entries = dict(known) if snapshot else {}
        entries.update(self.learned)
        gone = tuple(sorted(self.retired))
        entries = {p: e for p, e in entries.items() if not p.startswith(gone)} if gone else entries
        if not entries and not gone and not snapshot:
            return
        chain = [] if snapshot else self._chain
        name = f"{merge_id}.parquet"
        _write_manifest(self.filesystem, self._dir, name, entries, {"chain": chain, "retired": list(gone)})
        if snapshot:
            for old in self._chain:
                if old < name:
                    try:
                        self.filesystem.delete_file(f"{self._dir}/{old}")
                    except Exception as e:  # noqa: BLE001 - gone already, or not ours to remove
                        log.debug("file index manifest %s not removed: %s", old, e)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, date) else str(value)


def _rows_of(path: str, entry: tuple[int, int, Facts]) -> list[dict]:
    size, mtime, facts = entry
    base = {"path": path, "bytes": size, "mtime_ns": mtime, "rows": facts.rows}
    out = []
    for column, groups in facts.ranges.items():
        for g, (lo, hi, nulls, rg_rows) in enumerate(groups):
            kind = _kind(lo) if lo is not None else None
            out.append(
                dict(
                    base,
                    column=column,
                    row_group=g,
                    rg_rows=rg_rows,
                    kind=kind,
                    nulls=nulls,
                    lo=_text(lo),
                    hi=_text(hi),
                )
            )
    return out or [dict(base, column=None, row_group=None, rg_rows=None, kind=None, lo=None, hi=None, nulls=None)]


def _write_manifest(filesystem: fs.FileSystem, directory: str, name: str, entries: dict, lists: dict) -> None:
    """Write a manifest: ``entries`` ({path: (bytes, mtime_ns, facts)}) and, in its metadata, ``lists``
    ({'chain': the manifests before it whose entries count, 'retired': directories whose entries
    no longer do})."""
    import pyarrow.parquet as pq

    rows = [r for path, entry in sorted(entries.items()) for r in _rows_of(path, entry)]
    meta = {"spark_merge.file_index": FORMAT, **{k: json.dumps(v) for k, v in lists.items()}}
    table = pa.Table.from_pylist(rows, schema=SCHEMA).replace_schema_metadata(meta)
    if not isinstance(filesystem, fs.S3FileSystem):
        filesystem.create_dir(directory, recursive=True)
    with filesystem.open_output_stream(f"{directory}/{name}") as out:
        pq.write_table(table, out)


_cache: dict[tuple[str, str], tuple[dict, dict]] = {}  # (file system, path) -> its entries; manifests never change


def _read_manifest(filesystem: fs.FileSystem, path: str) -> tuple[dict[str, tuple[int, int, Facts]], dict]:
    """The entries of one manifest and its metadata ({'chain': ...}); a manifest of another format is
    refused (the caller reads footers instead)."""
    import pyarrow.parquet as pq

    cached = _cache.get((filesystem.type_name, path))
    if cached is not None:
        return cached
    with filesystem.open_input_file(path) as f:
        table = pq.read_table(f)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    if meta.get("spark_merge.file_index") != FORMAT:
        raise ValueError(f"not a file index manifest of format {FORMAT}")
    grouped: dict[str, tuple[int, int, int, dict[str, list]]] = {}
    for r in table.to_pylist():
        size, mtime, rows, ranges = grouped.setdefault(r["path"], (r["bytes"], r["mtime_ns"], r["rows"], {}))
        if r["column"] is None:
            continue
        lo, hi = (_KINDS[r["kind"]](r[k]) if r["kind"] else None for k in ("lo", "hi"))
        ranges.setdefault(r["column"], []).append((r["row_group"], (lo, hi, r["nulls"], r["rg_rows"])))
    entries = {
        p: (size, mtime, Facts(rows, {c: [g for _, g in sorted(gs)] for c, gs in ranges.items()}))
        for p, (size, mtime, rows, ranges) in grouped.items()
    }
    if len(_cache) > 256:
        _cache.clear()
    _cache[(filesystem.type_name, path)] = (entries, meta)
    return entries, meta
