"""Which data files can hold a row that ON matches, from the key ranges their parquet footers keep.

Planning from file metadata: a source whose ON keys fall in [lo, hi] can match no row of a file whose
every row group keeps, for one of those keys, a minimum above hi or a maximum below lo. Parquet writes
that minimum and maximum per column and row group; the driver reads the footers (no Spark job), so the
plan's scans read only the partitions holding a candidate file, and none when there is none. Where a
footer cannot tell (no statistics, the column missing from an older file, a type not compared here),
the file is a candidate: the answer is a superset of the files holding a match, never less.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from decimal import Decimal
from typing import Any

from pyarrow import fs

from merge_core.spark import files

THREADS = 16
INTEGRAL = ("tinyint", "smallint", "int", "bigint")


def comparable(type_: str) -> Callable[[str], Any] | None:
    """How a key's text (CAST(... AS STRING) of the source's min or max) becomes a value comparable with
    the footer's statistics, for the types whose statistics compare exactly; None for the others."""
    if type_ in INTEGRAL:
        return int
    if type_ == "date":
        return date.fromisoformat
    if type_.startswith("decimal("):
        return Decimal
    return None


def _key_can_hold(meta: Any, column: int, lo: Any, hi: Any, null_safe: bool) -> bool:
    """Whether some row group of the file can hold a value of the key in [lo, hi] (or a NULL, which a
    `<=>` key matches)."""
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        stats = rg.column(column).statistics
        if stats is None:
            return True
        nulls = stats.null_count if stats.has_null_count else None
        if null_safe and (nulls is None or nulls > 0):
            return True
        if not stats.has_min_max:
            if nulls is None or nulls < rg.num_rows:
                return True  # values without a range
            continue  # only NULLs, which `=` never matches
        try:
            if stats.min <= hi and stats.max >= lo:
                return True
        except TypeError:
            return True
    return False


def file_can_hold(filesystem: fs.FileSystem, path: str, keys: list[dict]) -> bool:
    """Whether the parquet file at ``path`` can hold a row with every key of ``keys`` ({column, lo, hi,
    null_safe}, lo and hi comparable values) in its range, from its footer."""
    import pyarrow.parquet as pq

    with filesystem.open_input_file(path) as f:
        meta = pq.ParquetFile(f).metadata
    top: dict[str, list[int]] = {}
    for i in range(meta.num_columns):
        name = meta.schema.column(i).path
        if "." not in name:
            top.setdefault(name.lower(), []).append(i)
    for k in keys:
        found = top.get(k["column"].lower(), [])
        if len(found) != 1:
            continue  # not in this file, or not told apart: cannot exclude the file by this key
        if not _key_can_hold(meta, found[0], k["lo"], k["hi"], k["null_safe"]):
            return False
    return True


def partitions_holding(located: list[tuple[dict, str]], keys: list[dict], max_files: int) -> dict | None:
    """Of ``located`` ((partition, location) pairs), the partitions with a data file that can hold a row
    of ``keys`` ({column, type, lo, hi, null_safe}, lo and hi as text): {'partitions': those, 'of': how
    many were located, 'files': how many footers were read}. A key whose type is not compared here
    rules nothing out (the others decide); None when none is, or when the data files are more than
    ``max_files`` (their footers are not read)."""
    typed = []
    for k in keys:
        convert = comparable(k["type"])
        if convert is not None:
            typed.append(dict(k, lo=convert(k["lo"]), hi=convert(k["hi"])))
    if not typed:
        return None
    with ThreadPoolExecutor(max_workers=min(THREADS, max(1, len(located)))) as pool:
        listed = list(pool.map(lambda pair: files.scanned_files(pair[1]), located))
    if sum(len(paths) for _, paths in listed) > max_files:
        return None
    jobs = [(i, filesystem, path) for i, (filesystem, paths) in enumerate(listed) for path in paths]
    with ThreadPoolExecutor(max_workers=min(THREADS, max(1, len(jobs)))) as pool:
        holds = list(pool.map(lambda job: file_can_hold(job[1], job[2], typed), jobs))
    held = {i for (i, _, _), can in zip(jobs, holds, strict=True) if can}
    partitions = [part for i, (part, _) in enumerate(located) if i in held]
    return {"partitions": partitions, "of": len(located), "files": len(jobs)}
