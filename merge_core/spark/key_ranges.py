"""Which data files can hold a row that ON matches, from the key ranges their parquet footers keep.

Planning from file metadata: a source whose ON keys fall in [lo, hi] can match no row of a file whose
every row group keeps, for one of those keys, a minimum above hi or a maximum below lo. Parquet writes
that minimum and maximum per column and row group; the driver reads them (no Spark job) from the table's
file index (file_index.py) or, for a file it does not know, the footer, so the
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

from merge_core.spark import file_index, files

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


def file_can_hold(filesystem: fs.FileSystem, path: str, keys: list[dict]) -> bool:
    """Whether the parquet file at ``path`` can hold a row with every key of ``keys`` ({column, lo, hi,
    null_safe}, lo and hi comparable values) in its range, from its footer."""
    return file_index.can_hold(file_index.footer_facts(filesystem, path), keys)


def partitions_holding(
    located: list[tuple[dict, str]], keys: list[dict], max_files: int, index: file_index.FileIndex | None = None
) -> dict | None:
    """Of ``located`` ((partition, location) pairs), the partitions with a data file that can hold a row
    of ``keys`` ({column, type, lo, hi, null_safe}, lo and hi as text): {'partitions': those, 'of': how
    many were located, 'files': how many files were asked}. Each file's ranges come from ``index``
    (the table's file index, which reads the footers of the files it does not know) or its footer. A
    key whose type is not compared here rules nothing out (the others decide); None when none is, or
    when the data files are more than ``max_files`` (not asked)."""
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
    jobs = [(i, filesystem, info) for i, (filesystem, infos) in enumerate(listed) for info in infos]

    def can_hold(job: tuple) -> bool:
        _, filesystem, info = job
        facts = index.facts(filesystem, info) if index is not None else file_index.footer_facts(filesystem, info.path)
        return file_index.can_hold(facts, typed)

    with ThreadPoolExecutor(max_workers=min(THREADS, max(1, len(jobs)))) as pool:
        holds = list(pool.map(can_hold, jobs))
    held = {i for (i, _, _), can in zip(jobs, holds, strict=True) if can}
    partitions = [part for i, (part, _) in enumerate(located) if i in held]
    return {"partitions": partitions, "of": len(located), "files": len(jobs)}
