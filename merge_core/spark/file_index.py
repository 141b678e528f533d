"""The file index: what each data file of a table holds (rows, and each column's range per row group),
read once from its parquet footer and kept in small parquet files under <root>/_spark_merge/file_index/,
so that the next merge plans from one read instead of a footer per file.

A merge lists the directories it reads anyway (the listing is what proves which files are the table's:
a plain INSERT or a copied file has no entry, and is read like any file). For each listed file the index
answers from an entry recorded with the same path, size and modification time; any other file has its
footer read, and the merge's commit records it. An entry therefore only ever describes the bytes it was
read from: an index that is stale, edited, half written, from another release or missing makes a merge
read footers, never plan from a wrong range.

Each commit on the Python host writes one manifest, ``<merge id>.index`` (a parquet file, named so that no
reader globbing a table's ``*.parquet`` takes it for data): the entries it learned (the
footers it read, the files it staged and carried), naming the earlier manifests whose entries still count
(its chain). Every CHAIN-th manifest is a snapshot of every live entry it knows instead, and the
manifests before it are removed: planning reads at most CHAIN small files, and a commit writes what it
changed, not the whole table. The newest manifest (by merge id, which starts with the second its merge
began) is the head. A manifest's rows are sorted by path and decoded a row group at a time, as lookups
need them: a merge touching a few partitions of a large table decodes a few thousand entries.
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
SUFFIX = ".index"
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


Entry = tuple[int, int, Facts]  # (bytes, mtime_ns, facts) of one file


class FileIndex:
    """The index of one table for one merge: the manifests of its chain (read on first use, each
    decoded only in the row groups holding a path asked for), the facts of listed files (from an
    entry or a footer), and what this merge learned, which its commit writes. Safe to use from the
    listing's threads."""

    def __init__(self, root: str):
        self.root = root.rstrip("/")
        self.filesystem, path = files.resolve(self.root)
        self._base = path.rstrip("/") + "/"
        self._dir = f"{self._base}{INDEX_DIR}"
        self._lock = threading.Lock()
        self._chain: list[_Manifest] | None = None  # head first
        self.learned: dict[str, Entry] = {}
        self.retired: set[str] = set()  # directories (relative, ending in /) the commit replaced

    # -- reading ---------------------------------------------------------------
    def _relative(self, path: str) -> str | None:
        return path[len(self._base) :] if path.startswith(self._base) else None

    def _manifests(self) -> list[_Manifest]:
        with self._lock:
            if self._chain is None:
                try:
                    self._chain = self._load()
                except Exception as e:  # unreadable, half written, another format: footers instead
                    log.debug("file index of %s not read: %s", self.root, e)
                    self._chain = []
            return self._chain

    def _load(self) -> list[_Manifest]:
        names = sorted(
            i.base_name
            for i in self.filesystem.get_file_info(fs.FileSelector(self._dir, allow_not_found=True))
            if i.type == fs.FileType.File and i.base_name.endswith(SUFFIX) and files.visible(i.base_name)
        )
        if not names:
            return []
        chain = [_manifest(self.filesystem, self._dir, names[-1])]
        for name in chain[0].chain:
            if name not in names:
                continue
            try:
                chain.append(_manifest(self.filesystem, self._dir, name))
            except Exception as e:  # removed by a snapshot meanwhile: its files' footers are read again
                log.debug("file index manifest %s not read: %s", name, e)
        return chain

    def _known(self, relative: str) -> Entry | None:
        """The newest entry of ``relative``: newest manifest first; one that replaced its directory
        ends the search (the entries before it describe a version the table no longer reads)."""
        if relative in self.learned:
            return self.learned[relative]
        for manifest in self._manifests():
            found = manifest.entry(relative)
            if found is not None:
                return found
            if relative.startswith(manifest.retired):
                return None
        return None

    def facts(self, filesystem: fs.FileSystem, info: fs.FileInfo) -> Facts:
        """The facts of the listed file ``info``: its entry when recorded with this size and
        modification time, else its footer (learned: the commit records it)."""
        relative = self._relative(info.path) if filesystem.type_name == self.filesystem.type_name else None
        stamp = (info.size or 0, info.mtime_ns)
        if relative is not None and info.mtime_ns is not None:
            known = self._known(relative)
            if known is not None and known[:2] == stamp:
                return known[2]
        facts = footer_facts(filesystem, info.path)
        if relative is not None and info.mtime_ns is not None:
            with self._lock:
                self.learned[relative] = (stamp[0], info.mtime_ns, facts)
        return facts

    # -- what the commit changed ---------------------------------------------------
    def carried(self, pairs: list[tuple[str, str]]) -> None:
        """Files linked from one path to another (carry): the copy holds what the original does."""
        dests = [files.resolve(dest)[1] for _, dest in pairs]
        infos = self.filesystem.get_file_info(dests) if dests else []
        for (source, _), info in zip(pairs, infos, strict=True):
            src, dst = self._relative(files.resolve(source)[1]), self._relative(info.path)
            was = self._known(src) if src else None
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
    def write(self, merge_id: str, snapshot: bool = False) -> None:
        """Record this merge's manifest (after its commit): what it learned, naming the chain before
        it; or, when the chain is full (or ``snapshot``), every live entry, and the older manifests go."""
        chain = self._manifests()
        gone = tuple(sorted(self.retired))
        learned = {p: e for p, e in self.learned.items() if not p.startswith(gone)} if gone else self.learned
        name = f"{merge_id}{SUFFIX}"
        if len(chain) + 1 < CHAIN and not snapshot:
            if learned or gone:
                rows = pa.Table.from_pylist([r for p, e in sorted(learned.items()) for r in _rows_of(p, e)], SCHEMA)
                _write_manifest(self.filesystem, self._dir, name, rows, [m.name for m in chain], gone)
            return
        _write_manifest(self.filesystem, self._dir, name, _snapshot(chain, learned, gone), [], gone)
        self._remove_before(name)

    def vacuumed(self, removed: list[str], vacuum_id: str) -> None:
        """After vacuum removed the directories ``removed``: one snapshot without their entries, and every
        older manifest removed, so the index keeps no key range of a row whose file is gone. A table
        without an index gets none."""
        if self._manifests():
            self.retire(removed)
            self.write(vacuum_id, snapshot=True)

    def _remove_before(self, name: str) -> None:
        """Remove every manifest older than ``name`` (a snapshot holds what they count)."""
        for info in self.filesystem.get_file_info(fs.FileSelector(self._dir, allow_not_found=True)):
            if info.base_name.endswith(SUFFIX) and info.base_name < name:
                try:
                    self.filesystem.delete_file(info.path)
                except Exception as e:  # noqa: BLE001 - gone already (another snapshot)
                    log.debug("file index manifest %s not removed: %s", info.base_name, e)


def _snapshot(chain: list[_Manifest], learned: dict[str, Entry], gone: tuple[str, ...]) -> pa.Table:
    """Every live entry of ``chain`` (head first) and ``learned``, as one table of manifest rows: of each
    path the rows of its newest entry, unless a newer manifest (or this commit: ``gone``) replaced
    its directory. Arrow's own operations: no row becomes a Python object."""
    import pyarrow.compute as pc

    parts, later = [], set(gone)
    newest = [pa.Table.from_pylist([r for p, e in learned.items() for r in _rows_of(p, e)], SCHEMA)]
    for age, table in enumerate(newest + [m.table() for m in chain]):
        keep = pc.invert(_under(table["path"], tuple(later))) if later and age else None
        table = table.filter(keep) if keep is not None else table
        parts.append(table.append_column("age", pa.array([age] * len(table), pa.int32())))
        if age:
            later.update(chain[age - 1].retired)
    rows = pa.concat_tables(parts)
    first = rows.group_by("path").aggregate([("age", "min")])
    rows = rows.join(first, "path").filter(pc.equal(pc.field("age"), pc.field("age_min")))
    return rows.select(SCHEMA.names).cast(SCHEMA).sort_by([("path", "ascending"), ("column", "ascending")])


def _under(paths: pa.ChunkedArray, prefixes: tuple[str, ...]) -> Any:
    import pyarrow.compute as pc

    mask = pc.starts_with(paths, prefixes[0])
    for prefix in prefixes[1:]:
        mask = pc.or_(mask, pc.starts_with(paths, prefix))
    return mask


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, date) else str(value)


def _rows_of(path: str, entry: Entry) -> list[dict]:
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


ROW_GROUP = 4096  # manifest rows per row group: a lookup decodes the row groups whose paths hold it


def _write_manifest(
    filesystem: fs.FileSystem, directory: str, name: str, rows: pa.Table, chain: list[str], gone: tuple[str, ...]
) -> None:
    """Write a manifest: ``rows`` (sorted by path) and, in its metadata, ``chain`` (the manifests before
    it whose entries count) and ``gone`` (the directories whose older entries no longer do)."""
    import pyarrow.parquet as pq

    meta = {"spark_merge.file_index": FORMAT, "chain": json.dumps(chain), "retired": json.dumps(list(gone))}
    if not isinstance(filesystem, fs.S3FileSystem):
        filesystem.create_dir(directory, recursive=True)
    with filesystem.open_output_stream(f"{directory}/{name}") as out:
        pq.write_table(rows.replace_schema_metadata(meta), out, row_group_size=ROW_GROUP)


class _Manifest:
    """One manifest, read whole (a few bytes per file it names) and decoded a row group at a time, as
    lookups need: a merge that touches a few partitions of a large table decodes a few row groups."""

    def __init__(self, name: str, data: bytes):
        import pyarrow.parquet as pq

        self.name = name
        self._file = pq.ParquetFile(pa.BufferReader(data))
        meta = {k.decode(): v.decode() for k, v in (self._file.schema_arrow.metadata or {}).items()}
        if meta.get("spark_merge.file_index") != FORMAT:
            raise ValueError(f"{name} is not a file index manifest of format {FORMAT}")
        self.chain: list[str] = json.loads(meta.get("chain", "[]"))
        self.retired: tuple[str, ...] = tuple(json.loads(meta.get("retired", "[]")))
        self._ranges: list[tuple[str | None, str | None]] = []
        for g in range(self._file.metadata.num_row_groups):
            stats = self._file.metadata.row_group(g).column(0).statistics
            self._ranges.append((stats.min, stats.max) if stats is not None and stats.has_min_max else (None, None))
        self._groups: dict[int, dict[str, Entry]] = {}
        self._decoding = threading.Lock()

    def entry(self, relative: str) -> Entry | None:
        for g, (lo, hi) in enumerate(self._ranges):
            if lo is None or hi is None or lo <= relative <= hi:
                found = self._group(g).get(relative)
                if found is not None:
                    return found
        return None

    def _group(self, g: int) -> dict[str, Entry]:
        with self._decoding:
            if g not in self._groups:
                self._groups[g] = _entries_of(self._file.read_row_group(g).to_pylist())
            return self._groups[g]

    def table(self) -> pa.Table:
        return self._file.read().cast(SCHEMA)


def _entries_of(rows: list[dict]) -> dict[str, Entry]:
    grouped: dict[str, tuple[int, int, int, dict[str, list]]] = {}
    for r in rows:
        size, mtime, count, ranges = grouped.setdefault(r["path"], (r["bytes"], r["mtime_ns"], r["rows"], {}))
        if r["column"] is None:
            continue
        lo, hi = (_KINDS[r["kind"]](r[k]) if r["kind"] else None for k in ("lo", "hi"))
        ranges.setdefault(r["column"], []).append((r["row_group"], (lo, hi, r["nulls"], r["rg_rows"])))
    return {
        p: (size, mtime, Facts(count, {c: [g for _, g in sorted(gs)] for c, gs in ranges.items()}))
        for p, (size, mtime, count, ranges) in grouped.items()
    }


_cache: dict[tuple[str, str], _Manifest] = {}  # (file system, path) -> its manifest; manifests never change
_cache_lock = threading.Lock()


def _manifest(filesystem: fs.FileSystem, directory: str, name: str) -> _Manifest:
    """The manifest ``name``, read once per process (a manifest is never rewritten: each has its merge's
    id); one of another format is refused (the caller reads footers instead)."""
    key = (filesystem.type_name, f"{directory}/{name}")
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    with filesystem.open_input_file(key[1]) as f:
        manifest = _Manifest(name, f.read())
    with _cache_lock:
        if len(_cache) >= 64:
            _cache.clear()
        _cache[key] = manifest
    return manifest
