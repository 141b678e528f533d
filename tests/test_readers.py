"""What a concurrent reader sees during commits (README: "What a concurrent reader sees").

Twenty partitions of five rows, v = 0; each merge adds 19 to every row of partition 0 and takes 1
from every other row, so the table's sum stays 0 at every version, while a read that mixes versions
(some partitions new, some old) does not. A reader loops in another thread while merges commit.
"""

from __future__ import annotations

import os
import threading

import pytest

from merge_core import merge
from merge_core.spark import metastore

MERGES = int(os.environ.get("SPARK_MERGE_READER_MERGES", "2"))  # merges a reader overlaps; make test-all: 4


@pytest.fixture
def twenty(spark, db):
    t = f"{db}.t"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), 0, CAST(id % 20 AS INT) FROM range(0, 100)")
    return t


def read_during_merges(spark, t) -> list[list[tuple]]:
    """Per-partition (p, sum, count) of every read made while the merges ran."""
    reads, done = [], threading.Event()

    def reader():
        while not done.is_set():
            reads.append(
                sorted(tuple(r) for r in spark.sql(f"SELECT p, sum(v), count(*) FROM {t} GROUP BY p").collect())
            )

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(MERGES):
            merge(spark, f"UPDATE {t} SET v = v + CASE WHEN p = 0 THEN 19 ELSE -1 END")
    finally:
        done.set()
        thread.join()
    return reads


def versions(read) -> set[int]:
    """Which merge's version each partition shows (partition 0 gains 95 per merge, others lose 5)."""
    return {s // 95 if p == 0 else -s // 5 for p, s, n in read}


def test_a_classic_session_commits_all_partitions_in_one_metastore_call(spark, twenty):
    assert metastore.batch_available(spark)
    reads = read_during_merges(spark, twenty)
    assert len(reads) > MERGES  # the reader really ran during the commits
    torn = [r for r in reads if len(versions(r)) != 1 or sum(s for _, s, _ in r) != 0]
    assert torn == [], f"{len(torn)} of {len(reads)} reads mixed versions: {torn[:2]}"
    assert all(len(r) == 20 and all(n == 5 for _, _, n in r) for r in reads)


def test_statement_by_statement_commits_keep_each_partition_whole(spark, twenty, monkeypatch):
    """Spark Connect sessions and dbt repoint one partition per statement: during a commit a reader
    may see some partitions at the new version and others at the old, but never part of one."""
    monkeypatch.setattr(metastore, "_catalog", lambda spark_: None)
    reads = read_during_merges(spark, twenty)
    assert len(reads) > MERGES
    for r in reads:
        assert len(r) == 20 and all(n == 5 for _, _, n in r)  # no partition is ever partly rewritten
        for p, s, _ in r:  # each partition at some whole version
            assert (s % 95 == 0) if p == 0 else (s % 5 == 0)
        assert max(versions(r)) - min(versions(r)) <= 1  # and at most one commit apart
    torn = sum(1 for r in reads if len(versions(r)) != 1)
    print(f"statement-by-statement commits: {torn} of {len(reads)} reads saw two versions")
