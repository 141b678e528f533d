"""Which data files can hold a row ON matches, from the key ranges in their parquet footers
(merge_core/spark/key_ranges.py): a file is left out only where its footer shows it cannot hold a key
of the source's range; wherever the footer cannot tell, the file stays a candidate."""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from merge_core.spark import key_ranges

LOCAL = fs.LocalFileSystem()


def write(path: Path, table: pa.Table, **kwargs) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, str(path), **kwargs)
    return str(path)


def key(column="id", lo=10, hi=20, null_safe=False) -> dict:
    return {"column": column, "lo": lo, "hi": hi, "null_safe": null_safe}


def holds(path: str, *keys: dict) -> bool:
    return key_ranges.file_can_hold(LOCAL, path, list(keys))


def test_a_file_is_left_out_only_when_every_row_group_misses_the_range(tmp_path):
    """Row groups of ids 0-4 and 30-34: the range 10-20 falls between them, so no row of the file can
    match; a range that touches one row group's edge keeps the file."""
    path = write(tmp_path / "a.parquet", pa.table({"id": [0, 1, 2, 3, 4, 30, 31, 32, 33, 34]}), row_group_size=5)
    assert not holds(path, key(lo=10, hi=20))
    assert holds(path, key(lo=10, hi=30))
    assert holds(path, key(lo=-5, hi=0))
    assert not holds(path, key(lo=35, hi=99))


def test_every_key_must_be_in_range_and_a_key_the_file_lacks_keeps_it(tmp_path):
    """Two ON equalities: a file is out when either key's range misses; a column the file does not have
    (written before it was added) tells nothing, so only the other key decides; a column spelled in
    another case is the same column, as Spark reads it."""
    path = write(tmp_path / "a.parquet", pa.table({"ID": [1, 2, 3], "k": [100, 200, 300]}))
    assert holds(path, key(lo=2, hi=2), key(column="k", lo=150, hi=250))
    assert not holds(path, key(lo=2, hi=2), key(column="k", lo=400, hi=500))
    assert holds(path, key(column="missing", lo=0, hi=0))
    assert not holds(path, key(column="missing", lo=0, hi=0), key(lo=7, hi=9))


def test_nulls_match_only_a_null_safe_key(tmp_path):
    """A row group of NULLs holds nothing `=` matches; under `<=>` a NULL matches a NULL, so a file
    with NULL keys stays a candidate whatever the range."""
    only_nulls = write(tmp_path / "n.parquet", pa.table({"id": pa.array([None, None], pa.int64())}))
    some_nulls = write(tmp_path / "s.parquet", pa.table({"id": pa.array([1, None], pa.int64())}))
    assert not holds(only_nulls, key(lo=0, hi=99))
    assert holds(only_nulls, key(lo=0, hi=99, null_safe=True))
    assert not holds(some_nulls, key(lo=5, hi=9))
    assert holds(some_nulls, key(lo=5, hi=9, null_safe=True))


def test_a_file_without_statistics_is_always_a_candidate(tmp_path):
    """A writer may leave the statistics out: then nothing rules the file out."""
    path = write(tmp_path / "a.parquet", pa.table({"id": [1, 2, 3]}), write_statistics=False)
    assert holds(path, key(lo=10, hi=20))


def test_dates_and_decimals_compare_as_values_and_other_types_are_not_told(tmp_path):
    """The source's min and max arrive as text (CAST AS STRING): a date and a decimal are compared as
    such with the footer's values; a type without an exact comparison here (a timestamp, a double, a
    string) makes partitions_holding answer None: the plan reads as before."""
    d = write(tmp_path / "p=1/d.parquet", pa.table({"day": [datetime.date(2026, 1, 1), datetime.date(2026, 1, 31)]}))
    assert key_ranges.comparable("date")("2026-02-01") == datetime.date(2026, 2, 1)
    assert not holds(d, key(column="day", lo=datetime.date(2026, 2, 1), hi=datetime.date(2026, 2, 5)))
    amounts = pa.array([Decimal("1.50"), Decimal("9.25")], pa.decimal128(10, 2))
    m = write(tmp_path / "p=2/m.parquet", pa.table({"amount": amounts}))
    assert key_ranges.comparable("decimal(10,2)")("9.25") == Decimal("9.25")
    assert holds(m, key(column="amount", lo=Decimal("9.25"), hi=Decimal("10.00")))
    assert not holds(m, key(column="amount", lo=Decimal("9.26"), hi=Decimal("10.00")))
    located = [({"p": "1"}, f"file:{tmp_path}/p=1")]
    for type_ in ("timestamp", "double", "string"):
        assert key_ranges.comparable(type_) is None
        assert key_ranges.partitions_holding(located, [dict(key(column="day"), type=type_, lo="a", hi="b")], 10) is None
    # beside a key compared here, such a key rules nothing out: the date decides
    keys = [
        dict(key(column="day"), type="date", lo="2026-02-01", hi="2026-02-05"),
        dict(key(column="x"), type="string", lo="a", hi="b"),
    ]
    assert key_ranges.partitions_holding(located, keys, 10) == {"partitions": [], "of": 1, "files": 1}


def test_the_partitions_holding_a_candidate_file_and_the_limit_on_footers(tmp_path):
    """Each partition's directory is listed as a scan lists it (a hidden or nested file is not read,
    so not asked); a partition is kept when one of its files can hold a key. More data files than the
    limit: no answer (the footers are not read)."""
    write(tmp_path / "dt=1/a.parquet", pa.table({"id": [1, 5]}))
    write(tmp_path / "dt=1/b.parquet", pa.table({"id": [50, 60]}))
    write(tmp_path / "dt=2/a.parquet", pa.table({"id": [6, 9]}))
    write(tmp_path / "dt=2/_hidden/x.parquet", pa.table({"id": [55]}))
    write(tmp_path / "dt=3/a.parquet", pa.table({"id": [100, 200]}))
    located = [({"dt": str(d)}, f"file:{tmp_path}/dt={d}") for d in (1, 2, 3)]
    keys = [{"column": "id", "type": "bigint", "lo": "52", "hi": "58", "null_safe": False}]
    assert key_ranges.partitions_holding(located, keys, 10) == {"partitions": [{"dt": "1"}], "of": 3, "files": 4}
    keys = [{"column": "id", "type": "bigint", "lo": "300", "hi": "400", "null_safe": False}]
    assert key_ranges.partitions_holding(located, keys, 10) == {"partitions": [], "of": 3, "files": 4}
    assert key_ranges.partitions_holding(located, keys, 3) is None
