"""What the Python host reads from a table's directories without Spark (files.data_files: the files a
scan reads, from the listing and the footers; the strays no scan reads) and how it writes a history
record next to one a query wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from merge_core.spark import files


def test_only_the_files_a_scan_of_the_table_reads_are_counted_and_the_others_are_named(tmp_path):
    """Spark's scan of a catalog table reads a partition's (or an unpartitioned table's) own files, not
    those in a subdirectory (tests/test_catalog_operations.py shows it on real Spark); a staged
    version's root holds them one `col=value` level per partition column down. Hidden names (`_x`,
    `.x`) are never read; a visible file no scan reads is a stray, named for the report."""
    for relative in (
        "a.parquet",
        "sub/b.parquet",
        "k=1/c.parquet",
        "_hidden/d.parquet",
        ".dot/e.parquet",
        "sub/_f.parquet",
        "g.parquet._COPYING_",
    ):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"x": [1, 2]}), str(path))
    strays: list[str] = []
    found = files.data_files(f"file:{tmp_path}", "parquet", strays=strays)
    assert found == {f"file:{tmp_path}": [1, path_size(tmp_path / "a.parquet"), 2]}
    assert sorted(strays) == [f"file:{tmp_path}/k=1/c.parquet", f"file:{tmp_path}/sub/b.parquet"]
    staged = files.data_files(f"file:{tmp_path}", "parquet", depth=1)
    assert staged == {f"file:{tmp_path}/k=1": [1, path_size(tmp_path / "k=1/c.parquet"), 2]}
    assert files.data_files(f"file:{tmp_path}/missing", "parquet") == {}


def path_size(path: Path) -> int:
    return path.stat().st_size


def test_a_history_record_written_again_replaces_the_one_a_query_wrote(tmp_path):
    """Recovery writes a commit's history record again (host.history_write): over a record dbt's query
    wrote under Spark's own file name, the directory must end with one record, or the entry would read
    as two lines and be rejected."""
    from pyarrow import fs as pafs

    from merge_core.maintenance import history_store

    record = tmp_path / "20261127100000_0123abcd"
    record.mkdir()
    (record / "part-00000-5f1c-c000.json").write_text('{"merge_id": "old"}\n')
    (record / "_SUCCESS").write_text("")
    line = json.dumps({"merge_id": "m", "finished_at": "2026-11-27T10:00:01+00:00", "entry": json.dumps({"k": 1})})
    files.write_only(f"file:{record}", "part-00000.json", line + "\n")
    assert sorted(p.name for p in record.iterdir()) == ["_SUCCESS", "part-00000.json"]
    entry, why = history_store._read_entry(pafs.LocalFileSystem(), str(record), record.name)
    assert why is None and entry == {"k": 1, "finished_at": "2026-11-27T10:00:01+00:00"}
    files.write_only(f"file:{record}", "part-00000.json", line + "\n")  # and again: idempotent
    assert sorted(p.name for p in record.iterdir()) == ["_SUCCESS", "part-00000.json"]


def _write(root: Path, relative: str, rows: int = 2) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"x": list(range(rows))}), str(path))
    return path


@pytest.mark.parametrize(
    "marker, found",
    [
        ("_delta_log/00000000000000000000.json", "Delta Lake"),
        (".hoodie/hoodie.properties", "Apache Hudi"),
        ("metadata/v1.metadata.json", "Apache Iceberg"),
    ],
)
def test_another_formats_metadata_stops_the_listing_and_is_named(tmp_path, marker, found):
    """A directory spark-merge would rewrite as plain files holds another format's log: rewriting it
    would leave that log describing files that are gone."""
    _write(tmp_path, "a.parquet")
    (tmp_path / marker).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / marker).write_text("{}")
    with pytest.raises(files.ForeignFormat) as e:
        files.data_files(f"file:{tmp_path}", "parquet")
    assert found in e.value.found and files.foreign_format(f"file:{tmp_path}").startswith(found)


def test_a_metadata_folder_of_the_users_own_is_no_iceberg_table(tmp_path):
    _write(tmp_path, "a.parquet")
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "notes.txt").write_text("mine")
    assert files.foreign_format(f"file:{tmp_path}") is None
    assert list(files.data_files(f"file:{tmp_path}", "parquet").values()) == [[1, path_size(tmp_path / "a.parquet"), 2]]


def test_a_small_table_is_counted_from_its_footers_and_a_large_one_is_not_read(tmp_path):
    for i in range(3):
        _write(tmp_path, f"part-{i}.parquet", rows=i + 1)
    _write(tmp_path, "_merge_x/part-9.parquet", rows=50)  # a staged version: hidden, not the table's
    where = f"file:{tmp_path}"
    assert files.small_row_count(where, "parquet", max_files=3, max_bytes=10**9) == 6
    assert files.small_row_count(where, "parquet", max_files=2, max_bytes=10**9) is None
    assert files.small_row_count(where, "parquet", max_files=3, max_bytes=10) is None


def test_a_refill_copies_the_visible_files_and_leaves_hidden_entries_alone(tmp_path):
    """vacuum refills a canonical directory from the version that uses it: a path reader of it then
    reads what the table reads; spark-merge's own hidden entries there stay."""
    source, dest = tmp_path / "src", tmp_path / "dst"
    _write(source, "a.parquet")
    _write(source, "nested/b.parquet")  # no scan of the partition reads it: not copied
    _write(dest, "old.parquet")
    _write(dest, "_spark_merge/keep.parquet")
    assert files.refill(f"file:{source}", f"file:{dest}") == (1, path_size(source / "a.parquet"))
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.parquet")) == [
        "_spark_merge/keep.parquet",
        "a.parquet",
    ]


def test_one_spelling_per_directory():
    assert files.key("file:/w/t/") == files.key("file:///w/t") == files.key("/w/t") == "file:///w/t"
    assert files.is_inside("file:///w/t/p=1", "file:///w/t") and not files.is_inside("file:///w/tt", "file:///w/t")
    assert (
        files.location_of_uri("file:/w/t/p=a%20b/x.parquet") == "file:/w/t/p=a b/x.parquet"
    )  # a URI is percent-encoded


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("2026-01-01", "2026-01-01"),
        ("50%25", "50%"),
        ("a%20b", "a b"),
        ("a%2Fb%3Ac", "a/b:c"),
        ("%C3%A9", "\u00c3\u00a9"),  # one char per escape, as Spark decodes it (Spark writes é unescaped)
        ("100%", None),
        ("%%41", None),
        ("%+1", None),
        ("%4g", None),
    ],
)
def test_a_partition_name_is_unescaped_in_python_where_it_agrees_with_spark(name, expected):
    """files.unescape_path_name decodes `%XX` escapes itself only when every `%` starts two ASCII hex
    digits; any other `%` goes to Spark's own unescapePathName (here a stand-in that records the call).
    tests/test_cost_and_commit.py compares the Python decoding with Spark's on the same names."""
    asked = []

    def spark_unescape(text: str) -> str:
        asked.append(text)
        return "<spark>"

    got = files.unescape_path_name(name, spark_unescape)
    if expected is None:
        assert (got, asked) == ("<spark>", [name])
    else:
        assert (got, asked) == (expected, [])
