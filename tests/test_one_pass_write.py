"""The one-pass write: a merge whose MATCHED clauses change every row ON matches, with a source whose
ON columns are small enough to broadcast, finds the files holding a matched row by a join of the ON
columns, then writes them and the new rows in one job that counts its own changes
(lifecycle_rewrite_observed); no summary runs before it. A source small enough to broadcast whole is
joined with the files' rows where they are read; a larger one in one FULL join. Each test is an input that would break one of the rules it relies on.

- New rows go to partitions no matched file is in (an existing one, a new one, the NULL one): the
  staged files name them, and the partition's files are carried into its new version.
- A target row matched by two source rows passes through the write's join twice: the write is
  discarded, nothing stays staged, and the summary decides (a duplicate error, or the delete the
  strict rule allows).
- A value check (NOT NULL) fails in the write: nothing stays staged, the table is as it was.
- A MATCHED clause with a condition may leave a matched row unchanged (its file must not be
  rewritten): the summary plans such a merge.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from merge_core import DuplicateMatchError, MergeError, merge

from .conftest import location, rows

UPSERT = "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"


def summarized(trace) -> bool:
    return any(k == "sql" and t.startswith("SELECT op, bys") for k, t in trace)


def observed_stages(trace) -> int:
    return sum(1 for k, t in trace if k == "stage" and "__sm_write" in t)


def staged_dirs(spark, table: str) -> list[Path]:
    return sorted(Path(location(spark, table).removeprefix("file:")).glob("_merge_*"))


def test_an_upsert_writes_in_one_pass(spark, parts, traced):
    """id 2 updated in partition 1 (id 3 copied with it); new rows into partition 2 (which no
    matched file is in: its file is carried), a new partition 7 and the NULL partition."""
    r = merge(
        spark,
        f"MERGE INTO {parts} t USING (SELECT * FROM VALUES (2, 'x', 1), (6, 'n', 2), (7, 'n', 7), (8, 'n', CAST(NULL AS INT)) "
        f"AS s(id, v, p)) s {UPSERT}",
    )
    assert not summarized(traced) and observed_stages(traced) == 1
    # the rows to insert are the source rows the plan's cached pairs do not hold: the write reads the
    # target once, for the files it rewrites, and no more for them
    [stage] = [text for k, text in traced if k == "stage"]
    new_rows = stage.split("UNION ALL")[1]
    reads = re.findall(r"`parts` WHERE (.*?) AS `t`", new_rows)
    assert "__sm_found_" in new_rows and reads and all("(false)" in w for w in reads), new_rows
    m = r.metrics
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"], m["numTargetRowsDeleted"]) == (1, 3, 0)
    # id 3 (copied with id 2's file, or carried in a file of its own); ids 5 and 4 carried into partitions 2
    # and NULL, which gain rows
    assert m["numTargetRowsCopied"] + m["numTargetRowsCarried"] == 3
    assert m["numTargetPartitionsRewritten"] == 4 and m["numTargetFilesRemoved"] == 1
    assert rows(spark, parts, "id") == [
        (1, "a", 0),
        (2, "x", 1),
        (3, "c", 1),
        (4, "d", None),
        (5, "e", 2),
        (6, "n", 2),
        (7, "n", 7),
        (8, "n", None),
    ]
    assert sorted((p["p"] for p in r.partitions), key=str) == ["1", "2", "7", None]


def test_an_upsert_of_new_keys_rewrites_no_file(spark, parts, traced):
    r = merge(spark, f"MERGE INTO {parts} t USING (SELECT * FROM VALUES (9, 'n', 1) AS s(id, v, p)) s {UPSERT}")
    assert not summarized(traced)
    assert (r.metrics["numTargetRowsInserted"], r.metrics["numTargetFilesRemoved"]) == (1, 0)
    assert rows(spark, parts, "id")[-1] == (9, "n", 1) and len(rows(spark, parts)) == 6


def test_a_row_moved_to_another_partition_rewrites_both(spark, parts, traced):
    r = merge(
        spark,
        f"MERGE INTO {parts} t USING (SELECT 1 AS id, 5 AS p) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET p = s.p",
    )
    assert not summarized(traced)
    assert r.metrics["numTargetRowsUpdated"] == 1 and r.metrics["numTargetPartitionsRewritten"] == 2
    assert rows(spark, parts, "id")[0] == (1, "a", 5)


def test_an_unpartitioned_table_deletes_and_inserts_in_one_pass(spark, db, traced):
    t = f"{db}.flat"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING) USING parquet")
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), 'a' FROM range(1, 11)")
    r = merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT * FROM VALUES (3, true), (11, false) AS s(id, gone)) s ON t.id = s.id "
        "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, 'n')",
    )
    assert not summarized(traced)
    assert (r.metrics["numTargetRowsDeleted"], r.metrics["numTargetRowsInserted"]) == (1, 1)
    assert [x[0] for x in rows(spark, t)] == [1, 2, 4, 5, 6, 7, 8, 9, 10, 11]


LARGE = "SELECT CAST(id AS INT) AS id, 'n' AS v, CAST(id % 3 AS INT) AS p FROM range(10, 100010)"


def test_a_source_too_large_to_broadcast_is_full_joined_in_one_pass(spark, parts, traced):
    """100,001 source rows, past what the write broadcasts (source_broadcast_rows): the files holding a
    match are still found by the broadcast ON columns, and the write is one FULL join of their rows with
    the source, spread by partition, that counts as it writes: its source-only rows are inserted, not
    counted as target rows read (which would send the merge to the summary)."""
    r = merge(spark, f"MERGE INTO {parts} t USING (SELECT 2 AS id, 'x' AS v, 1 AS p UNION ALL {LARGE}) s {UPSERT}")
    assert not summarized(traced) and observed_stages(traced) == 1
    [stage] = [text for k, text in traced if k == "stage"]
    assert "FULL JOIN" in stage and "__sm_found_" not in stage and stage.count("REBALANCE") == 1, stage
    m = r.metrics
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"], m["numTargetRowsDeleted"]) == (1, 100_000, 0)
    got = spark.sql(f"SELECT v, count(*), count(DISTINCT id), min(id), max(id) FROM {parts} GROUP BY v ORDER BY v")
    assert [tuple(x) for x in got.collect()] == [
        ("a", 1, 1, 1, 1),
        ("c", 1, 1, 3, 3),
        ("d", 1, 1, 4, 4),
        ("e", 1, 1, 5, 5),
        ("n", 100_000, 100_000, 10, 100_009),
        ("x", 1, 1, 2, 2),
    ]


def test_a_large_source_matching_a_row_twice_gives_way_to_the_summary(spark, parts, traced):
    """The FULL join passes target id 2 twice: the write is discarded and the summary refuses the merge."""
    before = rows(spark, parts)
    with pytest.raises(DuplicateMatchError):
        merge(
            spark,
            f"MERGE INTO {parts} t USING (SELECT * FROM VALUES (2, 'y', 1), (2, 'w', 1) AS s(id, v, p) UNION ALL {LARGE}) s "
            f"{UPSERT}",
        )
    assert observed_stages(traced) == 1 and summarized(traced)
    assert rows(spark, parts) == before and staged_dirs(spark, parts) == []


def test_a_target_row_matched_twice_gives_way_to_the_summary(spark, parts, traced):
    before = rows(spark, parts)
    with pytest.raises(DuplicateMatchError):
        merge(
            spark,
            f"MERGE INTO {parts} t USING (SELECT * FROM VALUES (2, 'y', 1), (2, 'w', 1) AS s(id, v, p)) s {UPSERT}",
        )
    assert observed_stages(traced) == 1 and summarized(traced)
    assert rows(spark, parts) == before and staged_dirs(spark, parts) == []


def test_a_row_deleted_by_two_source_rows_is_deleted_once(spark, parts, traced):
    """strict allows several source rows to delete one row (the only MATCHED clause a DELETE)."""
    r = merge(
        spark,
        f"MERGE INTO {parts} t USING (SELECT * FROM VALUES (2), (2), (3) AS s(id)) s ON t.id = s.id WHEN MATCHED THEN DELETE",
        duplicate_rule="strict",
    )
    assert observed_stages(traced) == 1 and summarized(traced)
    assert r.metrics["numTargetRowsDeleted"] == 2
    assert rows(spark, parts, "id") == [(1, "a", 0), (4, "d", None), (5, "e", 2)]


def test_a_value_check_in_the_write_leaves_nothing_staged(spark, parts, traced):
    spark.sql(f"ALTER TABLE {parts} SET TBLPROPERTIES ('spark_merge.not_null' = 'v')")
    before = rows(spark, parts)
    with pytest.raises(MergeError, match="NOT NULL column v"):
        merge(
            spark,
            f"MERGE INTO {parts} t USING (SELECT 2 AS id, CAST(NULL AS STRING) AS v) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = s.v",
        )
    assert observed_stages(traced) == 1 and not summarized(traced)
    assert rows(spark, parts) == before and staged_dirs(spark, parts) == []


def test_a_conditional_matched_clause_keeps_the_summary(spark, parts, traced):
    r = merge(
        spark,
        f"MERGE INTO {parts} t USING (SELECT * FROM VALUES (2, 'x'), (3, 'y') AS s(id, v)) s ON t.id = s.id "
        "WHEN MATCHED AND s.v = 'x' THEN UPDATE SET v = s.v",
    )
    assert summarized(traced) and observed_stages(traced) == 0
    assert r.metrics["numTargetRowsUpdated"] == 1
    assert rows(spark, parts, "id")[1:3] == [(2, "x", 1), (3, "c", 1)]


def test_a_dry_run_counts_before_writing(spark, parts, traced):
    """A dry run writes nothing, so its counts come from the summary: exact, as a run's."""
    before = rows(spark, parts)
    r = merge(
        spark,
        f"MERGE INTO {parts} t USING (SELECT * FROM VALUES (2, 'x', 1), (6, 'n', 7) AS s(id, v, p)) s {UPSERT}",
        dry_run=True,
    )
    assert summarized(traced) and observed_stages(traced) == 0
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (1, 1)
    assert rows(spark, parts) == before
