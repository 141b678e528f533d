"""File-system work SQL cannot do, through pyarrow's file systems (local, HDFS, S3 as object_store.py
configures it, GCS)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlparse

from pyarrow import fs

from merge_core.spark import object_store

log = logging.getLogger("spark_merge")


def resolve(location: str) -> tuple[fs.FileSystem, str]:
    """A metastore location (a Hadoop path string: not percent-encoded, so a partition
    directory `p=a%2Fb` is literally named that) as a file system and a path in it."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return fs.LocalFileSystem(), parsed.path
    return object_store.resolve(location)


def location_of_uri(uri: str) -> str:
    """A file URI as Spark's inputFiles() gives it (percent-encoded) as a metastore location."""
    return unquote(uri)


_ESCAPED = re.compile(r"%([0-9A-Fa-f]{2})")


def unescape_path_name(name: str, unescape: Callable[[str], str]) -> str:
    """A partition directory's name part as Spark reads it (ExternalCatalogUtils.unescapePathName, which
    ``unescape`` calls): in Python when every ``%`` in it starts two ASCII hex digits, where the two agree,
    and by ``unescape`` otherwise (Java's parseInt also takes a sign and non-ASCII digits). Spark escapes
    only unusual characters, so a staged write of 10,000 partitions makes no call at all, where one call
    per level and directory cost 20,000 round trips to the JVM."""
    if "%" not in name:
        return name
    if name.count("%") == len(_ESCAPED.findall(name)):
        return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), name)
    return unescape(name)


def key(location: str) -> str:
    """One spelling per directory: file:/x, file:///x/ and /x compare equal."""
    parsed = urlparse(location)
    scheme = "file" if parsed.scheme in ("", "file") else parsed.scheme
    return f"{scheme}://{parsed.netloc}{parsed.path.rstrip('/') or '/'}"


def is_inside(location: str, parent: str) -> bool:
    """Whether ``location`` is ``parent`` or below it (both as returned by key())."""
    return location == parent or location.startswith(parent.rstrip("/") + "/")


def listing(location: str) -> list[tuple[str, bool]]:
    """(child location, is a directory) for each entry directly in a directory; [] if missing."""
    filesystem, path = resolve(location)
    selector = fs.FileSelector(path, allow_not_found=True)
    base = location.rstrip("/")
    return [
        (f"{base}/{info.base_name}", info.type == fs.FileType.Directory) for info in filesystem.get_file_info(selector)
    ]


def size(location: str) -> tuple[int, int]:
    """(files, bytes) below a path, or of a single file."""
    filesystem, path = resolve(location)
    info = filesystem.get_file_info(path)
    if info.type == fs.FileType.File:
        return 1, info.size or 0
    if info.type != fs.FileType.Directory:
        return 0, 0
    found = [i for i in filesystem.get_file_info(fs.FileSelector(path, recursive=True)) if i.type == fs.FileType.File]
    return len(found), sum(i.size or 0 for i in found)


def remove(location: str) -> bool:
    """Delete a file or a directory tree; False (with a warning) when it cannot be reached."""
    try:
        filesystem, path = resolve(location)
        info = filesystem.get_file_info(path)
        if info.type == fs.FileType.File:
            filesystem.delete_file(path)
        elif info.type == fs.FileType.Directory:
            filesystem.delete_dir(path)
        return True
    except (OSError, ValueError, NotImplementedError) as e:
        log.warning("could not remove %s: %s (vacuum will retry)", location, e)
        return False


def exists(uri: str) -> bool | None:
    """Whether a path exists; None when its file system cannot be reached from here."""
    try:
        filesystem, path = resolve(uri)
        return filesystem.get_file_info(path).type != fs.FileType.NotFound
    except (OSError, ValueError, NotImplementedError) as e:
        log.warning("cannot check %s: %s", uri, e)
        return None


def reachable(location: str) -> bool:
    """Whether this process reaches the file system of ``location``: its parent directory can be
    looked up (the location itself need not exist yet)."""
    try:
        filesystem, path = resolve(location)
        filesystem.get_file_info(path.rstrip("/").rsplit("/", 1)[0] or "/")
        return True
    except (OSError, ValueError, NotImplementedError):
        return False


class ForeignFormat(Exception):
    """A directory spark-merge was about to read as plain files holds another table format's metadata."""

    def __init__(self, location: str, found: str):
        super().__init__(f"{location} holds {found} metadata")
        self.location, self.found = location, found


def _foreign_marker(relative: str) -> str | None:
    """The table format whose metadata the path ``relative`` (below a table or partition directory) is."""
    first, _, rest = relative.partition("/")
    if first == "_delta_log" and rest:
        return "Delta Lake (_delta_log/)"
    if first == ".hoodie" and rest:
        return "Apache Hudi (.hoodie/)"
    if first == "metadata" and rest.endswith(".metadata.json") and "/" not in rest:
        return "Apache Iceberg (metadata/*.metadata.json)"
    return None


def foreign_format(location: str) -> str | None:
    """The other table format whose metadata ``location`` holds (Delta Lake's ``_delta_log/``,
    Iceberg's ``metadata/*.metadata.json``, Hudi's ``.hoodie/``), or None. Rewriting such a
    directory as plain parquet would leave that format's metadata describing files that are gone."""
    base = location.rstrip("/")
    if exists(f"{base}/_delta_log"):
        return "Delta Lake (_delta_log/)"
    if exists(f"{base}/.hoodie"):
        return "Apache Hudi (.hoodie/)"
    if any(name.endswith(".metadata.json") for name, is_dir in listing(f"{base}/metadata") if not is_dir):
        return "Apache Iceberg (metadata/*.metadata.json)"
    return None


def visible(name: str) -> bool:
    """Whether Spark's file listing reads an entry: names starting with `_` or `.` are hidden."""
    return not name.startswith(("_", "."))


def refill(source: str, dest: str) -> tuple[int, int]:
    """Make ``dest``'s visible entries exactly copies of ``source``'s visible files; (files, bytes).

    Hidden entries of ``dest`` (``_merge_*``, ``_spark_merge`` in a table root) are left alone,
    so a path reader of ``dest`` afterwards reads what a reader of ``source`` reads. A subdirectory
    of ``source`` (a file a user copied there, which no scan of the table reads) is not copied.
    """
    filesystem, src = resolve(source)
    _, dst = resolve(dest)
    entries = [i for i in filesystem.get_file_info(fs.FileSelector(src, allow_not_found=True)) if visible(i.base_name)]
    nested = [i.base_name for i in entries if i.type != fs.FileType.File]
    if nested:
        log.warning(
            "%s holds directories no scan of the table reads (%s): not copied to %s",
            source,
            ", ".join(nested[:3]),
            dest,
        )
        entries = [i for i in entries if i.type == fs.FileType.File]
    _make_dir(filesystem, dst)
    for info in filesystem.get_file_info(fs.FileSelector(dst, allow_not_found=True)):
        if visible(info.base_name):
            (filesystem.delete_dir if info.type == fs.FileType.Directory else filesystem.delete_file)(info.path)
    for info in entries:
        filesystem.copy_file(info.path, f"{dst.rstrip('/')}/{info.base_name}")
    return len(entries), sum(i.size or 0 for i in entries)


def _spark_reads(relative: str, depth: int = 0) -> bool:
    """Whether a scan of the table reads the file at ``relative`` below a location whose data files
    lie ``depth`` partition directories (``col=value``) down: a table's or a partition's location
    (0: its own files only; Spark's scan of a catalog table does not descend into other
    subdirectories), or a staged version's root (one level per partition column). Hidden names
    (`_x`, `.x`) are never read."""
    *dirs, name = relative.split("/")
    return (
        visible(name)
        and not name.endswith("._COPYING_")
        and len(dirs) == depth
        and all("=" in d and not d.startswith(("_", ".")) for d in dirs)
    )


def _stray(relative: str) -> bool:
    """A file a user may have put there that no scan reads: not hidden, nor below a hidden directory
    (spark-merge's `_merge_*`, `_spark_merge`, Spark's `_temporary`), and not read (_spark_reads)."""
    return all(visible(part) for part in relative.split("/")) and not relative.endswith("._COPYING_")


def _row_count(filesystem: fs.FileSystem, path: str, provider: str) -> int:
    """Rows of a data file, from its footer alone."""
    with filesystem.open_input_file(path) as f:
        if provider == "parquet":
            import pyarrow.parquet as pq

            return pq.ParquetFile(f).metadata.num_rows
        import pyarrow.orc as orc

        return orc.ORCFile(f).nrows


def _files_below(filesystem: fs.FileSystem, root: str) -> list[tuple[fs.FileInfo, str]]:
    """(info, path relative to ``root``) of every file below ``root``, hidden ones included."""
    return [
        (info, info.path[len(root) :].lstrip("/"))
        for info in filesystem.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True))
        if info.type == fs.FileType.File
    ]


def _row_counts(filesystem: fs.FileSystem, infos: list[fs.FileInfo], provider: str, index: Any = None) -> list[int]:
    """Rows of each file, from the file index (``index``, a parquet table's file_index.FileIndex) or the
    footers, read in parallel: on an object store each is a request of its own. One file is read in the
    calling thread (file_stats lists partitions 8 at a time, mostly of one file each: a pool per
    partition cost 10,000 partitions 4 s of their 7)."""

    def rows(info: fs.FileInfo) -> int:
        if index is not None and provider == "parquet":
            return int(index.facts(filesystem, info).rows)
        return _row_count(filesystem, info.path, provider)

    if len(infos) < 2:
        return [rows(info) for info in infos]
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(infos)))) as pool:
        return list(pool.map(rows, infos))


def data_files(
    location: str,
    provider: str,
    names: dict[str, dict[str, tuple[int, int]]] | None = None,
    depth: int = 0,
    strays: list[str] | None = None,
    index: Any = None,
) -> dict[str, list[int]]:
    """{directory: [files, bytes, rows]} of the data files a scan of the table reads below
    ``location`` (``depth``: see _spark_reads), counted from the listing and the files' footers (no
    Spark job). Files without rows are left out, as a query of the files' metadata columns does not
    see them; so is everything Spark's file index hides. A directory is spelled as the location is,
    so it compares with the catalog's. ``names``: filled with {key(directory): {name: (bytes, rows)}
    of every data file listed in it}; ``strays``: with the other files there no scan reads (a file
    copied into a subdirectory); ``index``: the table's file index, which answers for the files it
    knows."""
    filesystem, path = resolve(location)
    base, root = location.rstrip("/"), path.rstrip("/")
    found = _files_below(filesystem, root)
    for _, relative in found:
        marker = _foreign_marker(relative)
        if marker:
            raise ForeignFormat(location, marker)
    if strays is not None:
        strays += [f"{base}/{r}" for _, r in found if not _spark_reads(r, depth) and _stray(r)]
    found = [(info, relative) for info, relative in found if _spark_reads(relative, depth)]
    counts = _row_counts(filesystem, [info for info, _ in found], provider, index)
    out: dict[str, list[int]] = {}
    if names is not None:
        names.setdefault(key(location), {})
    for (info, relative), rows in zip(found, counts, strict=True):
        directory = base + ("/" + relative.rsplit("/", 1)[0] if "/" in relative else "")
        if names is not None:
            names.setdefault(key(directory), {})[info.base_name] = (info.size or 0, rows)
        if rows:
            d = out.setdefault(directory, [0, 0, 0])
            d[0], d[1], d[2] = d[0] + 1, d[1] + (info.size or 0), d[2] + rows
    return out


def scanned_files(location: str) -> tuple[fs.FileSystem, list[fs.FileInfo]]:
    """The file system of ``location`` and the data files a scan of the table reads below it (as
    data_files picks them). One listing, no footer read."""
    filesystem, path = resolve(location)
    below = _files_below(filesystem, path.rstrip("/"))
    return filesystem, [info for info, relative in below if _spark_reads(relative)]


def small_row_count(location: str, provider: str, max_files: int, max_bytes: int) -> int | None:
    """The rows of the data files Spark reads below ``location``, from their footers, when they are
    at most ``max_files`` files of at most ``max_bytes`` bytes in all; None when they are more (their
    footers are not read: a large table is not counted on every merge). One listing, no Spark job."""
    filesystem, path = resolve(location)
    found = [info for info, relative in _files_below(filesystem, path.rstrip("/")) if _spark_reads(relative)]
    if len(found) > max_files or sum(info.size or 0 for info in found) > max_bytes:
        return None
    return sum(_row_counts(filesystem, found, provider))


def data_file_times(location: str) -> list[tuple[str, datetime]]:
    """(path relative to ``location``, modification time in UTC) of each data file Spark reads below it."""

    filesystem, path = resolve(location)
    out = []
    for info, relative in _files_below(filesystem, path.rstrip("/")):
        if _spark_reads(relative) and info.mtime is not None:
            mtime = info.mtime if info.mtime.tzinfo else info.mtime.replace(tzinfo=UTC)
            out.append((relative, mtime))
    return out


def link(source: str, dest: str) -> None:
    """Make the file ``dest`` the file ``source`` without copying its bytes where the file system
    allows: a hard link on a local file system (one file, two names), a server-side copy on an object
    store (pyarrow's copy_file); elsewhere a byte copy. The file itself is never re-encoded."""
    import os

    filesystem, src = resolve(source)
    _, dst = resolve(dest)
    _make_dir(filesystem, dst.rsplit("/", 1)[0])
    if isinstance(filesystem, fs.LocalFileSystem):
        os.link(src, dst)
    else:
        filesystem.copy_file(src, dst)


def write_only(location: str, name: str, text: str) -> None:
    """Make ``text``, as the file ``name``, the one data file of the directory ``location`` (created),
    as INSERT OVERWRITE DIRECTORY would: the file is written whole before a reader can see it (a
    hidden name renamed into place on a local file system; one PUT, atomic, on an object store), and
    any other visible file there (the same record written earlier by a query, under its own name) is
    removed."""
    filesystem, path = resolve(location)
    _make_dir(filesystem, path)
    final = f"{path}/{name}"
    temporary = final if isinstance(filesystem, fs.S3FileSystem) else f"{path}/.{name}.tmp"
    with filesystem.open_output_stream(temporary) as f:
        f.write(text.encode("utf-8"))
    for info in filesystem.get_file_info(fs.FileSelector(path)):
        if info.type == fs.FileType.File and visible(info.base_name) and info.path.rstrip("/") != final:
            filesystem.delete_file(info.path)
    if temporary != final:
        filesystem.move(temporary, final)


def link_all(pairs: list[tuple[str, str]]) -> None:
    """link() each (source, dest), several at once: on an object store each is a request of its own."""
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(pairs)))) as pool:
        list(pool.map(lambda p: link(*p), pairs))


def _make_dir(filesystem: fs.FileSystem, path: str) -> None:
    """Create the directory ``path``; nothing on an object store, where a directory is a key prefix
    (pyarrow would write an empty marker object for each level of it)."""
    if not isinstance(filesystem, fs.S3FileSystem):
        filesystem.create_dir(path, recursive=True)
