"""WHEN NOT MATCHED BY SOURCE: Spark 4's clause for the target rows no source row matches."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from merge_core import DuplicateMatchError, explain, merge

from .conftest import location, rows, snapshot

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.cluster_extended,
]  # on a standalone cluster in make test-all (test_cluster.py)


@pytest.fixture
def kv(spark, db):
    """kv(id, v, p) partitioned by p, a NULL partition included; src(id, v, p)."""
    t = f"{db}.kv"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 10, 1), (2, 20, 1), (3, 30, 2), (4, 40, 2), (5, 50, 3), (6, 60, NULL)")

    def source(values: str) -> str:
        spark.sql(f"DROP TABLE IF EXISTS {db}.src")
        spark.sql(f"CREATE TABLE {db}.src (id INT, v INT, p INT) USING parquet")
        if values:
            spark.sql(f"INSERT INTO {db}.src VALUES {values}")
        return f"{db}.src"

    return t, source


def test_clauses_of_every_kind_in_order(spark, kv):
    """By-source clauses before, between and after the others; first match wins among them; a row
    with no clause chosen (5 in partition 3, 6 in the NULL partition) stays as it was."""
    t, source = kv
    s = source("(1, 11, 1), (3, 33, 2), (7, 70, 3)")
    r = merge(
        spark,
        f"MERGE INTO {t} AS t USING {s} AS s ON t.id = s.id "
        f"WHEN NOT MATCHED BY SOURCE AND t.p = 2 THEN UPDATE SET v = -t.v "
        f"WHEN MATCHED THEN UPDATE SET v = s.v "
        f"WHEN NOT MATCHED BY SOURCE AND t.v < 30 THEN DELETE "
        f"WHEN NOT MATCHED THEN INSERT * "
        f"WHEN NOT MATCHED BY SOURCE AND t.p = 1 THEN UPDATE SET v = 0",
        duplicate_rule="strict",
    )
    assert rows(spark, t, "id") == [(1, 11, 1), (3, 33, 2), (4, -40, 2), (5, 50, 3), (6, 60, None), (7, 70, 3)]
    m = r.metrics
    assert (m["numTargetRowsUpdated"], m["numTargetRowsDeleted"], m["numTargetRowsInserted"]) == (3, 1, 1)
    assert (m["numTargetRowsNotMatchedBySourceUpdated"], m["numTargetRowsNotMatchedBySourceDeleted"]) == (1, 1)


def test_moves_rows_into_and_out_of_the_null_partition(spark, kv):
    t, source = kv
    s = source("(1, 11, 1)")
    merge(
        spark,
        f"MERGE INTO {t} AS t USING {s} AS s ON t.id = s.id "
        f"WHEN NOT MATCHED BY SOURCE AND t.p IS NULL THEN UPDATE SET p = 9 "
        f"WHEN NOT MATCHED BY SOURCE AND t.p = 3 THEN UPDATE SET p = NULL",
    )
    assert rows(spark, t, "id") == [(1, 10, 1), (2, 20, 1), (3, 30, 2), (4, 40, 2), (5, 50, None), (6, 60, 9)]


def test_an_empty_source_leaves_every_target_row_unmatched(spark, kv):
    """As in Spark: with no source rows, an unconditional NOT MATCHED BY SOURCE DELETE empties the table."""
    t, source = kv
    r = merge(
        spark,
        f"MERGE INTO {t} AS t USING {source('')} AS s ON t.id = s.id "
        f"WHEN MATCHED THEN DELETE WHEN NOT MATCHED BY SOURCE THEN DELETE",
    )
    assert rows(spark, t) == [] and r.metrics["numTargetRowsNotMatchedBySourceDeleted"] == 6


def test_duplicate_rules_are_about_matched_rows(spark, kv):
    """Two source rows for id 1: still a duplicate match under strict; a by-source row is never one."""
    t, source = kv
    s = source("(1, 11, 1), (1, 12, 1)")
    before = snapshot(spark, t)
    with pytest.raises(DuplicateMatchError, match="id='1', source_rows=2"):
        merge(
            spark,
            f"MERGE INTO {t} AS t USING {s} AS s ON t.id = s.id "
            f"WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED BY SOURCE THEN DELETE",
            duplicate_rule="strict",
        )
    assert snapshot(spark, t) == before
    # only NOT MATCHED clauses of both kinds: no target row is modified by a source row, no error
    merge(
        spark,
        f"MERGE INTO {t} AS t USING {s} AS s ON t.id = s.id "
        f"WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE AND t.p = 2 THEN DELETE",
        duplicate_rule="strict",
    )
    assert rows(spark, t, "id") == [(1, 10, 1), (2, 20, 1), (5, 50, 3), (6, 60, None)]


def _corrupt(spark, table: str, partition: str) -> None:
    """A file of garbage in one partition: any job that reads the partition fails."""
    Path(location(spark, table, partition).removeprefix("file:"), "part-99999-garbage.parquet").write_bytes(
        b"not parquet" * 100
    )


def test_a_condition_on_partition_columns_reads_only_those_partitions(spark, kv, caplog):
    """The cost rule: the plan reads the partitions ON can match (here named by the source's p
    values) and those the clause's partition condition names, and no other: a corrupt file in
    partition 3 is never opened. Without a condition, every partition is a candidate, and the
    merge reads partition 3 (and fails on the garbage, changing nothing)."""
    t, source = kv
    s = source("(1, 11, 1)")
    _corrupt(spark, t, "p=3")
    statement = (
        f"MERGE INTO {t} AS t USING {s} AS s ON t.id = s.id AND t.p = s.p "
        f"WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED BY SOURCE AND t.p = 2 {{}}THEN DELETE"
    )
    plan = explain(spark, statement.format(""), verbose=True)
    assert "the target rows where (t.p = 2) are read (Spark prunes partitions" in plan
    with caplog.at_level(logging.INFO, logger="spark_merge"):
        r = merge(spark, statement.format(""))
    assert "WHEN NOT MATCHED BY SOURCE: besides the rows ON can match, the target rows where (t.p = 2)" in caplog.text
    assert r.metrics["numTargetPartitionsRewritten"] == 2 and r.metrics["numTargetRowsNotMatchedBySourceDeleted"] == 2
    assert spark.sql(f"SELECT id, v FROM {t} WHERE p <> 3 OR p IS NULL ORDER BY id").collect() == [
        (1, 11),
        (2, 20),
        (6, 60),
    ]

    unconditional = statement.replace(" AND t.p = 2 {}", " ")
    assert "every target row is read (every partition is a candidate)" in explain(spark, unconditional, verbose=True)
    before = {r[0] for r in spark.sql(f"SHOW PARTITIONS {t}").collect()}
    with pytest.raises(Exception, match="(?i)parquet"):
        merge(spark, unconditional)
    assert {r[0] for r in spark.sql(f"SHOW PARTITIONS {t}").collect()} == before
