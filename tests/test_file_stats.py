"""The commit's file statistics, answered two ways: dbt runs file_stats_sql (a query of the files'
metadata columns, Spark's listing), the Python host lists the files and reads their footers
(host.SparkHost.file_stats). The commit compares such answers with each other, so the two must
agree exactly, on the values and the directories that are hardest to spell."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from merge_core.common import macros
from merge_core.spark import files, host
from merge_core.spark.catalog import describe_table


def _both(spark, db: str, name: str) -> tuple[list, list]:
    table = describe_table(spark, [db, name])
    sql = macros.render("file_stats_sql", table, table["relation"], None)
    queried = [r.asDict() for r in spark.sql(sql).collect()]
    partitions = (
        [r["partition"] for r in macros.fill_list("decode_partitions", table, queried)]
        if table["partition_columns"]
        else [{}]
    )
    listed = host.SparkHost(spark, "test")._listed_stats(table, name, partitions)

    def key(r):
        return json.loads(r["__sm_part"]), r["dir"], r["files"], r["bytes"], r["rows"]

    return sorted(map(key, queried), key=json.dumps), sorted(map(key, listed), key=json.dumps)


@pytest.mark.parametrize("provider", ["parquet", "orc"])
def test_the_listing_answers_what_the_query_answers(spark, db, provider):
    spark.sql(f"CREATE TABLE {db}.t (id INT, v STRING, p STRING, d DATE) USING {provider} PARTITIONED BY (p, d)")
    spark.sql(
        f"INSERT INTO {db}.t VALUES (1, 'a', 'x', DATE'2024-01-01'), (2, 'b', NULL, DATE'2024-01-02'), "
        f"(3, 'c', 'a/b c%', NULL), (4, 'd', 'ü+=', DATE'2024-01-03'), (5, 'e', 'None', DATE'2024-01-03')"
    )
    spark.sql(f"INSERT INTO {db}.t VALUES (6, 'f', 'x', DATE'2024-01-01')")  # a second file in one partition
    spark.sql(f"CREATE TABLE {db}.u (id INT, v STRING) USING {provider}")
    spark.sql(f"INSERT INTO {db}.u VALUES (1, 'a'), (2, 'b')")
    # what Spark's listing does not read: hidden files and directories, and (unseen by the query) a file without rows
    location = (
        spark.sql(f"DESCRIBE TABLE EXTENDED {db}.t PARTITION (p = 'x', d = DATE'2024-01-01')")
        .where("col_name = 'Location'")
        .collect()[0][1]
        .removeprefix("file:")
    )
    Path(location, "_SUCCESS").write_text("")
    Path(location, ".part-0.crc").write_text("x")
    Path(location, "_temporary", "0").mkdir(parents=True)
    Path(location, "_temporary", "0", "part-9.parquet").write_bytes(b"not parquet")
    if provider == "parquet":
        pq.write_table(
            pa.table({"id": pa.array([], pa.int32()), "v": pa.array([], pa.string())}), f"{location}/part-empty.parquet"
        )
    for name in ("t", "u"):
        queried, listed = _both(spark, db, name)
        assert queried == listed and queried, name
    assert len(_both(spark, db, "t")[1]) == 5


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
