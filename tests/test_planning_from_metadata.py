"""Planning from the files' key ranges (lifecycle/phases.sql: plan_candidates, the Python host's
key_candidates): where ON's keys do not name the partitions, the target's scans read only the
partitions with a data file whose footer's key range can hold a source key, and none when no file can.
Each test is an input that would break it: a file a plain INSERT put in another partition (and in the
NULL partition) holding a source key, NULL keys under `<=>`, keys beyond every file's range, an
unpartitioned table; the rows are checked, and the statements and the scans' own metrics (files
read) show what was read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from merge_core import merge
from merge_core.spark import file_index, key_ranges

from .conftest import rows


@pytest.fixture
def ranged(spark, db):
    """Ids 0-9 in partition 0, 10-19 in 1, 20-29 in 2: one file each, key ranges apart."""
    t = f"{db}.ranged"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), 'old', CAST(id DIV 10 AS INT) FROM range(30)")
    return t


def target_reads(spark, table: str, fn) -> dict:
    """fn()'s reads of ``table`` by the scans' own metrics (bench/tally.py: scanned): files, bytes and
    the scans that ran."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from tally import last_execution, scanned

    since = last_execution(spark)
    fn()
    return scanned(spark, since)["read"].get(f"spark_catalog.{table}", {"files": 0, "bytes": 0, "scans": 0})


def plan_reads(trace) -> list[str]:
    """The plan's reads of the target: the summary, or the one-pass write's join of the rows ON matches
    (summary.sql: matched_files_sql, or for a merge that inserts cache_found_sql, which it fills)."""
    return [
        t
        for k, t in trace
        if k == "sql" and (t.startswith(("SELECT op, bys", "CACHE LAZY TABLE `__sm_found_")) or " AS files\nFROM " in t)
    ]


def summary_of(trace) -> str:
    [summary] = plan_reads(trace)
    return summary


UPSERT = "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"


def test_only_the_partitions_whose_files_can_hold_a_key_are_read(spark, ranged, traced):
    """Source keys 12 and 15 fall in partition 1's range only: the summary reads partition 1 alone, and
    every scan of the target opens partition 1's files and no other (the scans' own metrics)."""
    [(in_p1,)] = spark.sql(f"SELECT count(DISTINCT _metadata.file_path) FROM {ranged} WHERE p = 1").collect()
    done = []
    read = target_reads(
        spark,
        ranged,
        lambda: done.append(
            merge(
                spark,
                f"MERGE INTO {ranged} t USING (SELECT * FROM VALUES (12, 'x', 1), (15, 'y', 1) AS s(id, v, p)) s {UPSERT}",
            )
        ),
    )
    [r] = done
    assert read["scans"] > 0 and read["files"] == read["scans"] * in_p1  # each scan read partition 1's files only
    assert ("key_candidates", "") in traced
    assert "(`p` = CAST('1' AS int)) AND (`id` BETWEEN" in summary_of(traced)
    assert r.metrics["numTargetRowsUpdated"] == 2 and r.metrics["numTargetRowsInserted"] == 0
    assert [row for row in rows(spark, ranged) if row[1] != "old"] == [(12, "x", 1), (15, "y", 1)]


def test_a_plain_insert_into_another_partition_is_read_when_its_file_can_hold_a_key(spark, ranged, traced):
    """A plain INSERT puts id 14 into partition 2 and id 13 into the NULL partition: their files'
    ranges hold source keys, so both partitions are read, and those rows are updated where they are,
    not inserted again; partition 0 is not read."""
    spark.sql(f"INSERT INTO {ranged} VALUES (14, 'late', 2), (13, 'null part', NULL)")
    r = merge(
        spark,
        f"MERGE INTO {ranged} t USING (SELECT * FROM VALUES (13, 'x', 1), (14, 'y', 1), (40, 'n', 1) AS s(id, v, p)) s {UPSERT}",
    )
    assert "((`p` IN (CAST('1' AS int), CAST('2' AS int)) OR `p` IS NULL)) AND (`id` BETWEEN" in summary_of(traced)
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (4, 1)
    changed = [row for row in rows(spark, ranged, "id, p") if row[1] != "old"]
    assert sorted(changed, key=lambda row: (row[0], row[2] is None, row[2] or 0)) == [
        (13, "x", 1),
        (13, "x", None),
        (14, "y", 1),
        (14, "y", 2),
        (40, "n", 1),
    ]


@pytest.fixture
def planning_footers(monkeypatch) -> list[int]:
    """The footers each merge's key_candidates read (the files the file index did not answer for)."""
    counts: list[int] = []
    real = key_ranges.partitions_holding

    def counted(*args, **kwargs):
        before = file_index.footers_read
        try:
            return real(*args, **kwargs)
        finally:
            counts.append(file_index.footers_read - before)

    monkeypatch.setattr(key_ranges, "partitions_holding", counted)
    return counts


def test_a_plain_insert_between_two_merges_is_read_then_indexed(spark, ranged, planning_footers):
    """The first merge reads every file's footer, and its commit indexes them and the file it wrote. A
    plain INSERT then puts id 99 into partition 0, whose indexed file holds ids 0-9 only: the next merge
    reads that one new file's footer, so id 99 is matched where it is (updated, not inserted again);
    its commit indexes the file, and a third merge reads no footer at all."""
    [(data_files,)] = spark.sql(f"SELECT count(DISTINCT _metadata.file_path) FROM {ranged}").collect()
    merge(spark, f"MERGE INTO {ranged} t USING (SELECT * FROM VALUES (12, 'a', 1) AS s(id, v, p)) s {UPSERT}")
    spark.sql(f"INSERT INTO {ranged} VALUES (99, 'late', 0)")
    r = merge(spark, f"MERGE INTO {ranged} t USING (SELECT * FROM VALUES (99, 'b', 5) AS s(id, v, p)) s {UPSERT}")
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (1, 0)
    merge(spark, f"MERGE INTO {ranged} t USING (SELECT * FROM VALUES (25, 'c', 2) AS s(id, v, p)) s {UPSERT}")
    assert planning_footers == [data_files, 1, 0]
    assert [row for row in rows(spark, ranged) if row[1] != "old"] == [(12, "a", 1), (25, "c", 2), (99, "b", 0)]


@pytest.mark.parametrize("partitioned", [True, False])
def test_keys_beyond_every_files_range_read_no_target_file(spark, db, traced, partitioned):
    """New keys only (30-31): no file's range holds them, so no scan reads the target (the summary's
    target filter is `false`), and the rows are inserted; partitioned or not."""
    t = f"{db}.newkeys"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, p INT) USING parquet {'PARTITIONED BY (p)' if partitioned else ''}")
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), 'old', CAST(id DIV 10 AS INT) FROM range(30)")
    r = merge(
        spark, f"MERGE INTO {t} t USING (SELECT * FROM VALUES (30, 'n', 3), (31, 'n', 3) AS s(id, v, p)) s {UPSERT}"
    )
    # the one-pass write plans it: no file can hold a match, so no query of the target, and its write
    # joins the source with the target filtered by `false` (which Spark reads nothing of)
    [stage] = [text for k, text in traced if k == "stage"]
    relation = f"`{db}`.`newkeys`"
    assert plan_reads(traced) == [] and stage.count(relation) == stage.count(f"{relation} WHERE ((false))"), stage
    assert r.metrics["numTargetRowsInserted"] == 2 and r.metrics["numTargetRowsUpdated"] == 0
    assert len(rows(spark, t)) == 32 and rows(spark, f"(SELECT * FROM {t} WHERE v = 'n')") == [
        (30, "n", 3),
        (31, "n", 3),
    ]


@pytest.mark.parametrize("partitioned", [True, False])
def test_an_append_whose_keys_no_file_holds_joins_nothing(spark, db, traced, partitioned):
    """An insert-only merge whose keys (30-33) lie beyond every file's range: no changes cache, no join
    (no statement reads the target), one aggregation of the source per partition, and the rows of the
    clause each source row chooses land in their partitions, the NULL one included. A row the second
    clause skips (id 32: neither condition) is not inserted; the history names the partitions added to."""
    t = f"{db}.appended"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, p INT) USING parquet {'PARTITIONED BY (p)' if partitioned else ''}")
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), 'old', CAST(id DIV 10 AS INT) FROM range(30)")
    source = (
        "(SELECT * FROM VALUES (30, 'n', 3), (31, 'n', CAST(NULL AS INT)), (32, 'x', 3), (33, 'n', 1) AS s(id, v, p))"
    )
    done = []
    statement = (
        f"MERGE INTO {t} t USING {source} s ON t.id = s.id "
        "WHEN NOT MATCHED AND s.id = 33 THEN INSERT (id, v, p) VALUES (s.id, 'first', s.p) "
        "WHEN NOT MATCHED AND s.v = 'n' THEN INSERT *"
    )
    read = target_reads(spark, t, lambda: done.append(merge(spark, statement)))
    [r] = done
    statements = [text for k, text in traced if k == "sql"]
    assert read["files"] == 0, read
    assert not [s for s in statements if s.startswith("CACHE") and "__sm_changes" in s]
    [summary] = [s for s in statements if s.startswith("SELECT __sm_op AS op")]
    assert f"`{db}`.`appended` WHERE ((false))" in summary  # the join's target side, which Spark prunes
    assert r.metrics["numTargetRowsInserted"] == 3 and r.metrics["numSourceRows"] == 4
    assert rows(spark, f"(SELECT * FROM {t} WHERE id >= 30)") == [(30, "n", 3), (31, "n", None), (33, "first", 1)]
    assert len(rows(spark, t)) == 33
    if partitioned:
        assert sorted(r.partitions, key=str) == sorted([{"p": "3"}, {"p": None}, {"p": "1"}], key=str)


def test_a_null_key_under_null_safe_equality_is_matched_in_its_file(spark, ranged, traced):
    """`<=>` matches NULL with NULL: the file in partition 0 holding a NULL id stays a candidate though
    the source's other key (25) is outside its range; the NULL row is updated, not inserted again."""
    spark.sql(f"INSERT INTO {ranged} VALUES (CAST(NULL AS INT), 'null id', 0)")
    r = merge(
        spark,
        f"""MERGE INTO {ranged} t USING (SELECT * FROM VALUES (CAST(NULL AS INT), 'x', 0), (25, 'y', 2) AS s(id, v, p)) s
        ON t.id <=> s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *""",
    )
    assert "(`p` IN (CAST('0' AS int), CAST('2' AS int))) AND (`id` BETWEEN" in summary_of(traced)
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (2, 0)
    assert [row for row in rows(spark, ranged) if row[1] != "old"] == [(None, "x", 0), (25, "y", 2)]
