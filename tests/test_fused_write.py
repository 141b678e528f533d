"""The fused write: a rewrite joins target and source once more in its write instead of reading a
cached change set (spark_merge__fused_rewrite_select). Each test is an input that would break one
of the rules it relies on, and checks which write ran (the statement trace) and the rows.

- A source row matched by a target row that no clause changes, outside the touched partitions, is
  matched, not inserted: the write's join also reads the rows ON can match elsewhere (of the files the
  summary found holding a matched row, in a merge that inserts).
- A target row outside `partition_filter` is absent for the merge (never matched, no WHEN NOT
  MATCHED BY SOURCE clause applies to it) but copied where its partition is rewritten.
- A target row joined with several source rows that do not all delete it (the trino and postgres
  rules, or strict without a MATCHED clause, allow some) would be copied once per source row: the
  summary counts such rows and the write then anti-joins the changed row ids instead.
- The value checks (NOT NULL, CHAR length) stop the merge in the summary, before anything is staged.
- A non-deterministic value (rand(7), served from a cache yet drawn by row position) keeps the
  cached change set: the summary and the write must see the same values.

These are the summary's fused write, as dbt runs it and as the one-pass write falls back to: the
host here reports that it cannot observe its write (tests/test_one_pass_write.py has that write).
"""

from __future__ import annotations

import logging

import pytest

from merge_core import DuplicateMatchError, MergeError, merge
from merge_core.spark import host

from .conftest import rows


@pytest.fixture(autouse=True)
def summarized(monkeypatch):
    """The plan's summary before the write, as without the one-pass write (can_observe false)."""
    monkeypatch.setattr(host.SparkHost, "can_observe", lambda self, table, ctx: False)


def stage_statements(trace) -> list[str]:
    return [t for k, t in trace if k == "stage"]


def wrote_fused(trace) -> bool:
    """Whether the write was the fused one, not the anti-join of the changed row ids (rewrite_select)."""
    [stage] = stage_statements(trace)
    assert ("__sm_touched" in stage) != ("__sm_d.__sm_row" in stage), stage
    return "__sm_touched" in stage


def summary_of(trace) -> str:
    [summary] = [t for k, t in trace if k == "sql" and t.startswith("SELECT op, bys")]
    return summary


def summary_semi_joined(trace) -> bool:
    """Whether the summary's join read the target through a semi-join with the broadcast source
    (matched_target_rows) rather than shuffling every row ON could match."""
    return "LEFT SEMI JOIN" in summary_of(trace)


def split(stage: str) -> bool:
    """Whether the fused write broadcast the source to the touched files' rows (a LEFT JOIN, the
    inserted rows apart) rather than joining both in one FULL join."""
    return "BROADCAST(" in stage and "FULL JOIN" not in stage


def test_a_source_row_matched_outside_the_touched_partitions_is_not_inserted(spark, parts, traced):
    """id 1 (partition 0) and id 4 (the NULL partition) are matched and left alone by their
    clauses; only partition 1 is rewritten. Taken for unmatched, they would be inserted again."""
    r = merge(
        spark,
        f"""MERGE INTO {parts} t
        USING (SELECT * FROM VALUES (1, 'x', 0), (2, 'y', 1), (4, 'z', CAST(NULL AS INT)), (6, 'n', 1) AS s(id, v, p)) s
        ON t.id = s.id
        WHEN MATCHED AND t.p = 1 THEN UPDATE SET v = s.v
        WHEN NOT MATCHED THEN INSERT *""",
    )
    assert wrote_fused(traced)
    assert r.metrics["numTargetRowsUpdated"] == 1 and r.metrics["numTargetRowsInserted"] == 1
    assert r.metrics["numTargetRowsCopied"] + r.metrics["numTargetRowsCarried"] == 1  # id 3 in partition 1
    assert rows(spark, parts) == [(1, "a", 0), (2, "y", 1), (3, "c", 1), (4, "d", None), (5, "e", 2), (6, "n", 1)]
    assert [p["p"] for p in r.partitions] == ["1"]


@pytest.mark.parametrize("by_source", [True, False])
def test_a_target_row_outside_partition_filter_is_absent_yet_copied(spark, parts, traced, by_source):
    """partition_filter p = 1: id 1 (partition 0) is not a target row for this merge, so source id 1
    is inserted into partition 0, whose old row is copied beside it; WHEN NOT MATCHED BY SOURCE
    deletes id 3 (inside the filter) but never id 1 or id 5 (outside it). Without that clause the
    write is split, and its search for unmatched source rows must skip id 1 too."""
    r = merge(
        spark,
        f"""MERGE INTO {parts} t
        USING (SELECT * FROM VALUES (1, 'x', 0), (2, 'y', 1) AS s(id, v, p)) s
        ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET v = s.v
        WHEN NOT MATCHED THEN INSERT *
        {"WHEN NOT MATCHED BY SOURCE THEN DELETE" if by_source else ""}""",
        partition_filter="p = 1",
    )
    assert wrote_fused(traced)
    assert split(stage_statements(traced)[0]) != by_source
    m = r.metrics
    assert (m["numTargetRowsInserted"], m["numTargetRowsUpdated"], m["numTargetRowsNotMatchedBySourceDeleted"]) == (
        1,
        1,
        1 if by_source else 0,
    )
    kept = [] if by_source else [(3, "c", 1)]
    assert rows(spark, parts, "1, 2") == sorted(
        [(1, "a", 0), (1, "x", 0), (2, "y", 1), (4, "d", None), (5, "e", 2)] + kept
    )


@pytest.mark.parametrize(
    "rule,clauses",
    [
        # one source row updates id 2, the other chooses no clause: allowed by trino (different
        # clauses) and postgres (one modifying action)
        ("trino", "WHEN MATCHED AND s.v = 'y' THEN UPDATE SET v = s.v"),
        ("postgres", "WHEN MATCHED AND s.v = 'y' THEN UPDATE SET v = s.v"),
        # no MATCHED clause: strict lets any number of source rows match, none changes the row
        ("strict", "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE AND t.p = 1 THEN UPDATE SET v = 'gone'"),
    ],
)
def test_a_row_joined_with_several_source_rows_is_written_once(spark, parts, traced, caplog, rule, clauses):
    caplog.set_level(logging.INFO, logger="spark_merge")
    r = merge(
        spark,
        f"""MERGE INTO {parts} t
        USING (SELECT * FROM VALUES (2, 'y', 1), (2, 'w', 1), (7, 'n', 1) AS s(id, v, p)) s
        ON t.id = s.id {clauses}""",
        duplicate_rule=rule,
    )
    assert not wrote_fused(traced)
    assert "1 target row(s) joined with several source rows" in caplog.text
    got = [x for x in rows(spark, parts) if x[2] == 1]
    if rule == "strict":
        assert got == [(2, "b", 1), (3, "gone", 1), (7, "n", 1)]
    else:
        assert got == [(2, "y", 1), (3, "c", 1)] and r.metrics["numTargetRowsUpdated"] == 1


@pytest.mark.parametrize("partitioned", [True, False])
def test_a_row_joined_twice_beside_inserts_only_rewrites_no_file(spark, db, traced, caplog, partitioned):
    """Id 6 is matched by two source rows and changed by neither (postgres allows it), and the other
    source rows insert: the anti-join write then has no file to rewrite (unpartitioned: the rewrite is
    by file), so it keeps no target rows and scans none (Spark fails to analyze an anti-join whose
    scan is filtered by a literal false). The differential test's case that found it, seed 948857870."""
    caplog.set_level(logging.INFO, logger="spark_merge")
    t = f"{db}.twice"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p INT) USING parquet {'PARTITIONED BY (p)' if partitioned else ''}")
    spark.sql(f"INSERT INTO {t} VALUES (6, 7, 1), (7, 1, 1)")
    r = merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT * FROM VALUES (5, 2, 1), (5, 3, 0), (6, 0, 1), (2, -5, 0) AS s(id, v, p)) s "
        "ON t.id = s.id + 1 WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = t.v + 1",
        duplicate_rule="postgres",
    )
    assert "1 target row(s) joined with several source rows" in caplog.text
    [stage] = stage_statements(traced)
    assert "__sm_touched" not in stage and "(false)" not in stage, stage
    assert r.metrics["numTargetRowsInserted"] == 1 and r.metrics["numTargetRowsUpdated"] == 0
    assert rows(spark, t) == [(2, -5, 0), (6, 7, 1), (7, 1, 1)]


def test_several_source_rows_deleting_one_row_keep_the_fused_write(spark, parts, traced):
    merge(
        spark,
        f"""MERGE INTO {parts} t USING (SELECT * FROM VALUES (2), (2), (3) AS s(id)) s
        ON t.id = s.id WHEN MATCHED THEN DELETE""",
        duplicate_rule="strict",
    )
    assert wrote_fused(traced)
    assert rows(spark, parts) == [(1, "a", 0), (4, "d", None), (5, "e", 2)]


def test_an_update_statement_writes_in_one_pass(spark, parts, traced):
    r = merge(spark, f"UPDATE {parts} SET v = upper(v), p = 2 WHERE id IN (2, 4)")
    assert wrote_fused(traced)
    m = r.metrics
    assert m["numTargetRowsUpdated"] == 2 and m["numTargetRowsCopied"] + m["numTargetRowsCarried"] == 2  # id 3, id 5
    assert rows(spark, parts) == [(1, "a", 0), (2, "B", 2), (3, "c", 1), (4, "D", 2), (5, "e", 2)]


@pytest.mark.parametrize(
    "ddl,value,error",
    [
        (
            "ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.not_null' = 'v')",
            "CAST(NULL AS STRING)",
            "NOT NULL column v",
        ),
        ("ALTER TABLE {t} ADD COLUMNS (c CHAR(2))", "'abc'", "longer than 2 characters"),
    ],
)
def test_a_value_check_fails_in_the_plan_before_anything_is_staged(spark, parts, traced, ddl, value, error):
    spark.sql(ddl.format(t=parts))
    column = "c" if "CHAR" in ddl else "v"
    before = rows(spark, parts)
    with pytest.raises(MergeError, match=error):
        merge(
            spark,
            f"MERGE INTO {parts} t USING (SELECT 2 AS id) s ON t.id = s.id "
            f"WHEN MATCHED THEN UPDATE SET {column} = {value}",
        )
    assert stage_statements(traced) == []
    assert rows(spark, parts) == before


def test_a_seeded_random_partition_move_keeps_the_cached_changes(spark, db, traced):
    """rand(7) is served from a cache, yet draws by row position: the summary's join and a second
    join in the write would move rows to different partitions than planned."""
    t = f"{db}.moves"
    spark.sql(f"CREATE TABLE {t} (id INT, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), CAST(id % 5 AS INT) FROM range(0, 300)")
    r = merge(spark, f"UPDATE {t} SET p = CAST(floor(rand(7) * 5) AS INT) WHERE id % 2 = 0")
    assert not wrote_fused(traced)
    assert r.metrics["numTargetRowsUpdated"] == 150
    assert sorted(x[0] for x in rows(spark, t)) == list(range(300))


def test_a_duplicate_still_fails_before_the_write(spark, parts, traced):
    with pytest.raises(DuplicateMatchError):
        merge(
            spark,
            f"MERGE INTO {parts} t USING (SELECT * FROM VALUES (2, 'y'), (2, 'w') AS s(id, v)) s "
            f"ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
        )
    assert stage_statements(traced) == []


def test_staged_partition_directories_are_read_back_as_spark_names_them(spark, db, traced):
    """The Python host stages a rewrite as files (no catalog table) and reads each staged
    partition's values back from its directory name, which Spark escapes ('a/b' is `p=a%2Fb`, NULL
    the default partition). A value read back wrongly would be a partition the plan does not list
    (refused) or a repoint to the wrong directory (rows lost): every partition here is rewritten and
    a new one is added, and the table must hold exactly the expected rows."""
    t = f"{db}.named"
    special = ["a/b", "x=y", "per%cent", "sp ace", "colon:1", "ü", "quote'", 'dq"', "hash#?*"]
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, p STRING) USING parquet PARTITIONED BY (p)")
    values = [(i, "old", p) for i, p in enumerate(special)] + [(len(special), "old", None)]
    spark.createDataFrame(values, "id INT, v STRING, p STRING").write.insertInto(t)
    source = [(i, "new", p) for i, _, p in values] + [(100, "ins", "new/one=1")]
    spark.createDataFrame(source, "id INT, v STRING, p STRING").createOrReplaceTempView("named_src")
    r = merge(
        spark,
        f"MERGE INTO {t} t USING named_src s ON t.id = s.id AND t.p <=> s.p "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
    )
    assert [k for k, _ in traced if k == "stage"] == ["stage"]
    assert r.metrics["numTargetRowsUpdated"] == len(values) and r.metrics["numTargetRowsInserted"] == 1
    assert r.metrics["numTargetPartitionsRewritten"] == len(values) + 1
    expected = sorted([(i, "new", p) for i, _, p in values] + [(100, "ins", "new/one=1")])
    assert rows(spark, t) == expected
    assert spark.sql(f"SHOW TABLES IN {db} LIKE '__sm_stage_*'").collect() == []


@pytest.mark.parametrize(
    "statement,added",
    [
        # no source: each scan task writes the rows it read, one file per partition it reaches
        ("UPDATE {t} SET v = 'u' WHERE id = 1", 1),
        ("UPDATE {t} SET v = 'u', p = 9 WHERE id = 1", 2),
        ("DELETE FROM {t} WHERE id = 1", 1),
        # two files of one partition read
        ("UPDATE {t} SET v = 'u' WHERE id IN (1, 21)", None),
        # a small source, broadcast: the rewritten file unshuffled, the inserted row spread apart
        (
            "MERGE INTO {t} t USING (SELECT * FROM VALUES (1, 'u', 0), (99, 'n', 0) AS s(id, v, p)) s "
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
            2,
        ),
    ],
)
def test_a_write_without_a_shuffled_join_keeps_rows_in_their_scan_tasks(spark, db, traced, statement, added):
    """Partition 0 holds two files (ids 0-9 and 20-29), partition 1 one file. A fused write whose
    join broadcasts the source (or that has none) leaves each target row in the scan task that read
    it, which writes it to its partition: a REBALANCE would only move the rows through a shuffle.
    Only the inserted rows, which come from the source's tasks, are spread by partition. No write
    makes more files than it read, besides the partitions rows move or are inserted into."""
    t = f"{db}.one_file"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, p INT) USING parquet PARTITIONED BY (p)")
    for lo, p in ((0, 0), (20, 0), (10, 1)):
        spark.sql(f"INSERT INTO {t} SELECT /*+ COALESCE(1) */ CAST(id AS INT), 'a', {p} FROM range({lo}, {lo + 10})")
    before = {r[0]: r for r in rows(spark, t)}
    r = merge(spark, statement.format(t=t))
    [stage] = stage_statements(traced)
    assert wrote_fused(traced)
    assert summary_semi_joined(traced) == ("USING" in statement)  # a statement without a source has no join
    inserts = "99" in statement
    assert stage.count("REBALANCE") == (1 if inserts else 0), stage
    assert ("FULL JOIN" in stage, split(stage)) == (False, inserts)
    m = r.metrics
    if added is not None:
        assert (m["numTargetFilesAdded"], m["numTargetFilesRemoved"]) == (added, 1)
    else:
        assert m["numTargetFilesRemoved"] == 2 and 1 <= m["numTargetFilesAdded"] <= 2
    expected = dict(before)
    if statement.startswith("DELETE"):
        del expected[1]
    else:
        expected[1] = (1, "u", 9 if "p = 9" in statement else 0)
    if "21)" in statement:
        expected[21] = (21, "u", 0)
    if inserts:
        expected[99] = (99, "n", 0)
    assert rows(spark, t) == sorted(expected.values())


@pytest.mark.parametrize(
    "on,partitioned", [("t.id = s.id", True), ("t.id = s.id AND t.p = s.p", True), ("t.id = s.id", False)]
)
def test_a_source_too_large_to_broadcast_is_joined_once_and_spread(spark, db, traced, on, partitioned):
    """Past source_broadcast_rows source rows, the write is one FULL join of the touched rows and the
    source, spread by partition (REBALANCE) into a partitioned table. Into an unpartitioned one the
    join's tasks write its rows as they are: the join has shuffled them already, and a REBALANCE would
    shuffle every written row a second time; the files follow the join's partitions (at most
    spark.sql.shuffle.partitions, 2 here). The summary's join still
    semi-joins the target with the source's ON columns when ON has no equality on a partition column
    (it reads every partition), and not when it has one, which narrows the target scans to the
    source's partitions (semi_joins_source); the unpartitioned table's 30 rows are broadcast to it
    instead (target_broadcast_rows). 100,001 source rows: 29 update
    target rows, the rest are inserted, and target id 0, which no source row matches, keeps its row. The
    MATCHED clause's condition (true of every source row) keeps the summary, whose join this is about
    (without one, the one-pass write plans it: test_one_pass_write.py)."""
    t = f"{db}.large_source"
    layout = "PARTITIONED BY (p)" if partitioned else ""
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, p INT) USING parquet {layout}")
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), 'a', CAST(id % 2 AS INT) FROM range(0, 30)")
    r = merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT CAST(id AS INT) AS id, 'n' AS v, CAST(id % 2 AS INT) AS p FROM range(1, 100002)) s "
        f"ON {on} WHEN MATCHED AND s.v = 'n' THEN UPDATE SET v = 'u' WHEN NOT MATCHED THEN INSERT *",
    )
    [stage] = stage_statements(traced)
    assert wrote_fused(traced) and not split(stage)
    assert summary_semi_joined(traced) == ("t.p" not in on and partitioned)
    assert "FULL JOIN" in stage and stage.count("REBALANCE") == (1 if partitioned else 0), stage
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (29, 100001 - 29)
    if not partitioned:
        assert 1 <= r.metrics["numTargetFilesAdded"] <= int(spark.conf.get("spark.sql.shuffle.partitions")), r.metrics
    got = spark.sql(
        f"SELECT v, count(*), min(id), max(id), count(DISTINCT id) FROM {t} GROUP BY v ORDER BY v"
    ).collect()
    assert [tuple(x) for x in got] == [
        ("a", 1, 0, 0, 1),
        ("n", 100001 - 29, 30, 100001, 100001 - 29),
        ("u", 29, 1, 29, 29),
    ]


@pytest.mark.parametrize("new_rows", [2, 100_001])
def test_an_upsert_of_new_keys_beside_old_reads_the_matched_files_not_the_key_range(spark, db, traced, new_rows):
    """Four files of ids 0-9, 10-19, 20-29, 30-39. The source updates id 5, matches id 15 under a clause
    whose condition is false (no change), and inserts new keys below and above every id: its key range
    spans the table. The write must still see id 15 (or insert it a second time), and reads its file,
    named by the summary as holding a matched row, besides the file it rewrites; not the other two,
    which the key range would read (at 100M rows, the whole table shuffled). Both ways the write
    tells inserted rows apart: one FULL join (a large source), and the anti-join of a broadcast one."""
    t = f"{db}.four_files"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING) USING parquet")
    for lo in (0, 10, 20, 30):
        spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), 'a' FROM range({lo}, {lo + 10}, 1, 1)")
    files = {
        r.lo: r.f for r in spark.sql(f"SELECT min(id) AS lo, _metadata.file_path AS f FROM {t} GROUP BY 2").collect()
    }
    assert sorted(files) == [0, 10, 20, 30]
    news = f"SELECT CAST(id AS INT) AS id, 'n' AS v FROM range(1000, {1000 + new_rows - 1})"
    r = merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT * FROM VALUES (5, 'u'), (15, 'same'), (-1, 'n') AS s(id, v) UNION ALL {news}) s "
        "ON t.id = s.id WHEN MATCHED AND s.v <> 'same' THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
    )
    [stage] = stage_statements(traced)
    assert wrote_fused(traced) and split(stage) == (new_rows == 2)
    assert files[10] in stage and files[20] not in stage and files[30] not in stage, stage
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (1, new_rows)
    got = spark.sql(
        f"SELECT v, count(*), count(DISTINCT id), min(id), max(id) FROM {t} GROUP BY v ORDER BY v"
    ).collect()
    assert [tuple(x) for x in got] == [
        ("a", 39, 39, 0, 39),
        ("n", new_rows, new_rows, -1, 1000 + new_rows - 2),
        ("u", 1, 1, 5, 5),
    ]


@pytest.mark.parametrize(
    "shape, broadcast",
    [
        ("unpartitioned", True),
        ("by source", False),  # WHEN NOT MATCHED BY SOURCE: a FULL join, which cannot broadcast a side
        ("partitioned", False),  # the host does not count a partitioned table's rows
        ("too many rows", False),  # more than target_broadcast_rows
    ],
)
def test_a_small_target_is_broadcast_to_the_summary_and_the_inserts(spark, db, traced, shape, broadcast):
    """A target the host counts at most target_broadcast_rows rows of (an unpartitioned table it
    lists, rows from the footers: host.target_rows) is broadcast to the summary's join, which then
    shuffles neither side and needs no semi-join, and to the write's anti-join that finds the
    inserted source rows (one broadcast instead of the source's and the matched row numbers');
    anything else keeps the semi-join with the broadcast source and the anti-join by row number.
    The rows are the same either way: ids 1-3 updated, 4 untouched (deleted by source where a
    clause says so), 0 inserted."""
    t = f"{db}.small_target"
    many = shape == "too many rows"
    spark.sql(
        f"CREATE TABLE {t} (id INT, v STRING, p INT) USING parquet"
        + (" PARTITIONED BY (p)" if shape == "partitioned" else "")
    )
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), 'a', 0 FROM range(1, {100_002 if many else 5})")
    by_source = " WHEN NOT MATCHED BY SOURCE AND t.id = 4 THEN DELETE" if shape == "by source" else ""
    r = merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT * FROM VALUES (1, 'u', 0), (2, 'u', 0), (3, 'u', 0), (0, 'n', 0) AS s(id, v, p)) s "
        f"ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *{by_source}",
    )
    summary = summary_of(traced)
    assert ("BROADCAST(`t`)" in summary) == broadcast, summary
    assert summary_semi_joined(traced) == (shape in ("partitioned", "too many rows")), summary
    assert ("target_rows", "") in traced
    [stage] = stage_statements(traced)
    if not by_source:  # else one FULL join gives the inserted rows too
        anti = stage[stage.index("LEFT ANTI JOIN") :]
        assert ("__sm_srow = __sm_m.__sm_srow" not in anti) == broadcast, stage
        assert ("BROADCAST(`t`)" in stage) == broadcast, stage
    deleted = 1 if by_source else 0
    assert (
        r.metrics["numTargetRowsUpdated"],
        r.metrics["numTargetRowsInserted"],
        r.metrics["numTargetRowsDeleted"],
    ) == (
        3,
        1,
        deleted,
    )
    got = spark.sql(f"SELECT id, v FROM {t} WHERE id < 5 ORDER BY id").collect()
    assert [tuple(x) for x in got] == [(0, "n"), (1, "u"), (2, "u"), (3, "u")] + ([] if deleted else [(4, "a")])
    if many:
        assert spark.sql(f"SELECT count(*) FROM {t}").first()[0] == 100_002
