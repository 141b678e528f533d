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
from merge_core.spark import host
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


def test_the_listing_answers_for_many_partitions_at_once(spark, db):
    """A backfill measures thousands of partitions: they are listed side by side (threads), one
    catalog listing for their locations; the answer is still the query's, partition by partition."""
    spark.sql(f"CREATE TABLE {db}.many (id BIGINT, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {db}.many SELECT id, CAST(id % 150 AS INT) FROM range(600)")
    spark.sql(f"INSERT INTO {db}.many VALUES (1000, NULL), (1001, 7)")  # the NULL partition, a second file in one
    queried, listed = _both(spark, db, "many")
    assert len(queried) == 151 and queried == listed
