"""Silent corruption found by outside testing, each as it was reported, against real Spark.

1. two source rows acting on one target row through different clauses (every duplicate rule);
2. a later merge reading a dead merge's cached plan (a real Spark Connect server);
3. a non-deterministic source or condition evaluated more than once;
4. NULL partition values, kept apart from the strings 'None' and 'null'.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from merge_core import (
    ConflictError,
    DuplicateMatchError,
    MergeRun,
    ValidationError,
    compact,
    merge,
    rollback,
    to_spec,
    vacuum,
)
from merge_core.lifecycle.housekeeping import drop_dead_leftovers

from .conftest import rows, snapshot

RULES = ["trino", "postgres", "strict"]


# -- 1. one modifying action per target row, under every rule ---------------------------------


@pytest.fixture
def two_source_rows(spark, db):
    spark.sql(f"CREATE TABLE {db}.target (id BIGINT, p STRING, a BIGINT) USING parquet")
    spark.sql(f"INSERT INTO {db}.target VALUES (1, 'p1', 10), (2, 'p1', 20)")
    spark.sql(f"CREATE TABLE {db}.source (id BIGINT, p STRING, a BIGINT) USING parquet")
    spark.sql(f"INSERT INTO {db}.source VALUES (1, 'p1', 1), (1, 'p1', 2)")
    return db


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("second", ["UPDATE SET a = 200", "DELETE"])
def test_two_source_rows_choosing_different_clauses_for_one_row_are_refused(spark, two_source_rows, rule, second):
    db = two_source_rows
    before = snapshot(spark, f"{db}.target")
    with pytest.raises(DuplicateMatchError) as e:
        merge(
            spark,
            f"MERGE INTO {db}.target t USING {db}.source s ON t.id = s.id "
            f"WHEN MATCHED AND s.a = 1 THEN UPDATE SET a = 100 WHEN MATCHED AND s.a = 2 THEN {second}",
            duplicate_rule=rule,
        )
    assert e.value.examples[0]["id"] == "1"  # the example names the target row by its ON key
    # and the source rows that matched it, each with the clause it chose, in the message too
    assert e.value.examples[0]["matches"] == [
        {"source": {"id": 1, "p": "p1", "a": 1}, "clause": "WHEN MATCHED clause 1 (UPDATE) AND s.a = 1"},
        {"source": {"id": 1, "p": "p1", "a": 2}, "clause": f"WHEN MATCHED clause 2 ({second.split()[0]}) AND s.a = 2"},
    ]
    assert "source row (id=1, p='p1', a=2) chose WHEN MATCHED clause 2" in str(e.value)
    assert snapshot(spark, f"{db}.target") == before


@pytest.mark.parametrize("rule,refused", [("trino", False), ("postgres", False), ("strict", True)])
def test_one_update_and_one_unchosen_match_differ_only_by_rule(spark, two_source_rows, rule, refused):
    """One source row updates the target row, the other matches it but picks no clause: one modifying
    action, so trino and postgres accept it; strict refuses any second match."""
    db = two_source_rows
    statement = (
        f"MERGE INTO {db}.target t USING {db}.source s ON t.id = s.id WHEN MATCHED AND s.a = 1 THEN UPDATE SET a = 100"
    )
    if refused:
        with pytest.raises(DuplicateMatchError):
            merge(spark, statement, duplicate_rule=rule, key_columns=["id"])
        return
    result = merge(spark, statement, duplicate_rule=rule)
    assert rows(spark, f"{db}.target") == [(1, "p1", 100), (2, "p1", 20)]
    assert result.metrics["numTargetRowsUpdated"] == 1


@pytest.mark.parametrize("rule,refused", [("trino", True), ("postgres", True), ("strict", False)])
def test_a_lone_unconditional_delete_matched_twice(spark, two_source_rows, rule, refused):
    """Spark's exception: with only an unconditional DELETE, a row matched twice is deleted once."""
    db = two_source_rows
    statement = f"MERGE INTO {db}.target t USING {db}.source s ON t.id = s.id WHEN MATCHED THEN DELETE"
    if refused:
        with pytest.raises(DuplicateMatchError):
            merge(spark, statement, duplicate_rule=rule)
        return
    result = merge(spark, statement, duplicate_rule=rule)
    assert rows(spark, f"{db}.target") == [(2, "p1", 20)]
    m = result.metrics
    assert m["numTargetRowsDeleted"] == 1 and m["numTargetRowsCopied"] + m["numTargetRowsCarried"] == 1


@pytest.mark.parametrize("rule,refused", [("trino", True), ("postgres", False), ("strict", False)])
def test_only_not_matched_clauses_with_a_repeated_match(spark, two_source_rows, rule, refused):
    """No target row is modified: strict (Spark) and postgres never raise; trino counts the repeated
    "no clause" (-1)."""
    db = two_source_rows
    spark.sql(f"INSERT INTO {db}.source VALUES (3, 'p1', 3)")
    statement = f"MERGE INTO {db}.target t USING {db}.source s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"
    if refused:
        with pytest.raises(DuplicateMatchError):
            merge(spark, statement, duplicate_rule=rule)
        return
    merge(spark, statement, duplicate_rule=rule)
    assert rows(spark, f"{db}.target") == [(1, "p1", 10), (2, "p1", 20), (3, "p1", 3)]


# -- 2. nothing a merge reads comes from another merge -----------------------------------------


def _driver(url: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("stale_cache_driver.py")), url, *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and (lines or args[0] == "setup"), done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(lines[-1].removeprefix("RESULT ")) if lines else {}


@pytest.mark.extended  # CI: the same-session case below; Spark Connect runs in CI in test_dataframe_api.py
def test_a_dead_merges_cache_on_a_connect_server_is_never_read(connect_server):
    """The reported repro: A plans and dies, B commits, C runs A's statement on the same server."""
    a_statement = "UPDATE conc.t SET v = v + 100 WHERE id IN (1000, 1001)"
    _driver(connect_server, "setup")
    _driver(connect_server, "die", a_statement)
    _driver(connect_server, "merge", "UPDATE conc.t SET v = v + 1 WHERE id = 1002")
    c = _driver(connect_server, "merge", a_statement)
    assert c["metrics"]["numOutputRows"] == 200 and c["metrics"]["numTargetRowsUpdated"] == 2
    ids = [r[0] for r in c["rows"]]
    assert len(ids) == len(set(ids)) == 400
    assert {r[0]: r[1] for r in c["rows"] if r[1]} == {1000: 100, 1001: 100, 1002: 1}


def test_a_live_merges_cache_is_not_read_by_another_in_the_same_session(spark, db):
    """Same session: A's cache of the very same statement exists while B commits and C runs."""
    spark.sql(f"CREATE TABLE {db}.t (id BIGINT, v BIGINT, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {db}.t SELECT id, 0, CAST(id % 2 AS INT) FROM range(0, 100)")
    statement = f"UPDATE {db}.t SET v = v + 100 WHERE id IN (10, 12)"
    a = MergeRun(spark, to_spec(statement))
    try:
        a.begin()
        a.plan()
        merge(spark, f"UPDATE {db}.t SET v = v + 1 WHERE id = 14")
        c = merge(spark, statement)
    finally:
        a.abort()
    # the partition's 50 rows: rewritten (the changed files) or carried (the unchanged files)
    m = c.metrics
    assert m["numOutputRows"] + m["numTargetRowsCarried"] == 50
    assert m["numTargetRowsCopied"] + m["numTargetRowsCarried"] == 48
    data = rows(spark, f"{db}.t")
    assert len(data) == 100 and {r[0]: r[1] for r in data if r[1]} == {10: 100, 12: 100, 14: 1}


def test_begin_drops_the_cached_views_of_dead_merges(spark, db):
    """Also one whose table is gone since (a dbt model that failed in Spark, whose table a later run
    dropped): Spark cannot uncache a view it cannot analyze, so that one is dropped only."""
    spark.sql(f"CREATE TABLE {db}.t (id INT, v INT) USING parquet")
    spark.sql(f"INSERT INTO {db}.t VALUES (1, 1)")
    spark.sql(f"CREATE TABLE {db}.gone (id INT) USING parquet")
    dead = "`__sm_changes_20200101000000_deadbeef`"
    spark.sql(f"CACHE TABLE {dead} AS SELECT * FROM {db}.t")
    spark.sql(f"CACHE TABLE `__sm_source_20200101000000_0badf00d` AS SELECT * FROM {db}.gone")
    spark.sql(f"DROP TABLE {db}.gone")
    merge(spark, f"UPDATE {db}.t SET v = 2")
    assert not [v for v in spark.sql("SHOW VIEWS LIKE '__sm_*'").collect() if v.isTemporary]
    assert drop_dead_leftovers(spark) == []


def test_the_commit_refuses_changes_read_from_files_the_table_no_longer_holds(spark, db):
    """A write that bypasses spark-merge between planning and the rewrite: the changed rows' files
    are gone, so the rewrite would keep the old copies next to the new ones. (Within one Spark
    application Spark recaches plans that read an overwritten table; changes written to a table,
    as a non-deterministic assignment's are, or cached by another application sharing the
    metastore, are not.)"""
    spark.sql(f"CREATE TABLE {db}.t (id INT, v INT, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {db}.t VALUES (1, 1, 0), (2, 2, 0), (3, 3, 1)")
    run = MergeRun(spark, to_spec(f"UPDATE {db}.t SET v = v * 10 + CAST(rand() * 0 AS INT) WHERE id = 1"))
    try:
        run.begin()
        run.plan()
        spark.sql(f"INSERT OVERWRITE {db}.t PARTITION (p = 0) VALUES (1, 1), (2, 2)")  # same rows, new files
        with pytest.raises(ConflictError, match="no longer holds"):
            run.execute()
    finally:
        run.abort()
    assert rows(spark, f"{db}.t") == [(1, 1, 0), (2, 2, 0), (3, 3, 1)]


def _append_as_another_application(spark, table: str, partition: str, data: dict) -> None:
    """A parquet file added to a partition's directory as another application's INSERT INTO adds
    it: nothing tells this session, whose cached listing of the directory stays as it was."""
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq

    location = (
        spark.sql(f"DESCRIBE TABLE EXTENDED {table} PARTITION ({partition})")
        .where("col_name = 'Location'")
        .collect()[0][1]
    )
    pq.write_table(pa.table(data), f"{location.removeprefix('file:')}/part-elsewhere-{uuid.uuid4()}.parquet")


@pytest.fixture
def listed(spark, db):
    """A partitioned table whose files this session has listed (and cached the listing of)."""
    t = f"{db}.t"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 'x'), (2, 'b', 'x'), (3, 'c', 'y')")
    assert spark.sql(f"SELECT count(*) FROM {t}").collect()[0][0] == 3
    return t


def test_rows_another_application_appended_before_the_merge_are_kept(spark, listed):
    """The session's cached listing misses the other application's file; a rewrite planned from it
    would repoint the partition without that row (it did, before begin refreshed the listing)."""
    import pyarrow as pa

    _append_as_another_application(spark, listed, "p = 'x'", {"id": pa.array([7], pa.int32()), "v": ["elsewhere"]})
    assert spark.sql(f"SELECT count(*) FROM {listed}").collect()[0][0] == 3  # the session's stale view
    result = merge(
        spark, f"MERGE INTO {listed} t USING (SELECT 1 id, 'z' v) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v"
    )
    m = result.metrics  # partition x's three rows, the appended one among them: rewritten or carried
    assert (
        m["numTargetRowsCopied"] + m["numTargetRowsCarried"] == 2
        and m["numOutputRows"] + m["numTargetRowsCarried"] == 3
    )
    assert rows(spark, listed) == [(1, "z", "x"), (2, "b", "x"), (3, "c", "y"), (7, "elsewhere", "x")]


def test_rows_appended_past_spark_merge_while_it_plans_are_carried(spark, listed):
    """Appended after the plan listed the partition: the rewrite reads only the files holding
    changed rows, and every other file the partition's directory holds when the merge writes is
    carried into the new version, the appended one among them: the row is kept."""
    import pyarrow as pa

    run = MergeRun(spark, to_spec(f"UPDATE {listed} SET v = 'z' WHERE id = 1"))
    try:
        run.begin()
        run.plan()
        _append_as_another_application(spark, listed, "p = 'x'", {"id": pa.array([7], pa.int32()), "v": ["elsewhere"]})
        run.execute()
        result = run.finish()
    finally:
        run.abort()
    assert result.metrics["numTargetRowsUpdated"] == 1 and result.metrics["numTargetRowsCarried"] >= 1
    spark.sql(f"REFRESH TABLE {listed}")
    assert rows(spark, listed) == [(1, "z", "x"), (2, "b", "x"), (3, "c", "y"), (7, "elsewhere", "x")]


def append_once_staging_begins(spark, table: str, partition: str, data: dict):
    """A thread that appends ``data`` to ``partition`` of ``table`` (as another application would)
    as soon as a merge's staging directory appears under the table's root: after its plan listed
    the partition, before its commit. Join it to learn whether it did."""
    import threading
    import time
    from pathlib import Path

    from merge_core.spark.catalog import describe_table

    root = Path(describe_table(spark, table.split("."))["root"].removeprefix("file:"))
    done = threading.Event()

    def watch():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if any(p.name.startswith("_merge_") for p in root.iterdir()):
                _append_as_another_application(spark, table, partition, data)
                done.set()
                return
            time.sleep(0.005)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, done


def test_rows_appended_past_spark_merge_while_it_stages_make_a_conflict(spark, listed):
    """Appended while the merge writes its staged data: the commit's statistics under the lock (the
    files as they are, on either host: a listing, or a query after REFRESH) differ from those the
    merge measured before its write: MERGE_CONFLICT, nothing written, the row kept."""
    import pyarrow as pa

    thread, done = append_once_staging_begins(
        spark, listed, "p = 'x'", {"id": pa.array([7], pa.int32()), "v": ["elsewhere"]}
    )
    with pytest.raises(ConflictError, match="changed since this merge read them"):
        merge(spark, f"UPDATE {listed} SET v = 'z' WHERE id = 1")
    thread.join()
    assert done.is_set()
    spark.sql(f"REFRESH TABLE {listed}")
    assert rows(spark, listed) == [(1, "a", "x"), (2, "b", "x"), (3, "c", "y"), (7, "elsewhere", "x")]


# -- 3. the source and the conditions are evaluated once ---------------------------------------


@pytest.fixture
def nd(spark, db):
    spark.sql(f"CREATE TABLE {db}.t (id INT, v DOUBLE, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {db}.t SELECT CAST(id AS INT), 0, CAST(id % 10 AS INT) FROM range(0, 200)")
    return f"{db}.t"


def test_a_random_partition_move_keeps_every_row(spark, nd):
    for _ in range(3):
        result = merge(
            spark,
            f"MERGE INTO {nd} t USING (SELECT CAST(id AS INT) id, CAST(floor(rand() * 10) AS INT) np "
            f"FROM range(0, 20)) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET p = s.np",
        )
        assert result.metrics["numTargetRowsUpdated"] == 20
        assert sorted(r[0] for r in rows(spark, nd)) == list(range(200))


def test_a_random_source_gives_metrics_that_match_the_data(spark, nd):
    result = merge(
        spark,
        f"MERGE INTO {nd} t USING (SELECT CAST(id AS INT) id, rand() r FROM range(0, 300)) s "
        f"ON t.id = s.id WHEN MATCHED AND s.r < 0.5 THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.r",
    )
    m = result.metrics
    left = rows(spark, nd)
    assert m["numTargetRowsDeleted"] + m["numTargetRowsUpdated"] == 200 and m["numTargetRowsCopied"] == 0
    assert len(left) == m["numTargetRowsUpdated"] == m["numOutputRows"]
    assert all(r[1] >= 0.5 for r in left)  # every row kept was updated with its own draw, never < 0.5


def test_a_random_assignment_of_the_partition_column_keeps_every_row(spark, nd):
    result = merge(spark, f"UPDATE {nd} SET p = CAST(floor(rand() * 10) AS INT) WHERE id < 50")
    assert result.metrics["numTargetRowsUpdated"] == 50
    assert sorted(r[0] for r in rows(spark, nd)) == list(range(200))


@pytest.mark.parametrize(
    "statement,part",
    [
        (
            "MERGE INTO {t} t USING (SELECT CAST(id AS INT) id FROM range(0, 20)) s ON t.id = s.id "
            "WHEN MATCHED AND rand() < 0.5 THEN DELETE",
            "WHEN MATCHED clause 1 (DELETE) condition",
        ),
        (
            "MERGE INTO {t} t USING (SELECT CAST(id AS INT) id FROM range(0, 20)) s ON t.id = s.id AND uuid() > 'a' "
            "WHEN MATCHED THEN DELETE",
            "ON condition",
        ),
        (
            "MERGE INTO {t} t USING (SELECT CAST(id AS INT) id FROM range(300, 320)) s ON t.id = s.id "
            "WHEN NOT MATCHED AND rand() > 0.5 THEN INSERT (id, v, p) VALUES (s.id, 0, 0)",
            "WHEN NOT MATCHED clause 1 (INSERT) condition",
        ),
        ("DELETE FROM {t} WHERE rand() < 0.5", "WHERE condition"),
    ],
)
def test_non_deterministic_conditions_are_refused_before_anything_runs(spark, nd, statement, part):
    before = snapshot(spark, nd)
    with pytest.raises(ValidationError, match="not deterministic") as e:
        merge(spark, statement.format(t=nd))
    assert part in str(e.value)
    assert snapshot(spark, nd) == before


# -- 4. NULL partition values ------------------------------------------------------------------


@pytest.fixture
def nullparts(spark, db):
    spark.sql(f"CREATE TABLE {db}.t (id INT, v STRING, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(
        f"INSERT INTO {db}.t VALUES (1, 'a', NULL), (2, 'b', 'None'), (3, 'c', 'null'), (4, 'd', 'x'), (5, 'e', NULL)"
    )
    return f"{db}.t"


def _by_id(spark, table):
    return {r[0]: (r[1], r[2]) for r in rows(spark, table)}


def test_update_and_delete_in_a_null_partition(spark, nullparts):
    merge(spark, f"UPDATE {nullparts} SET v = 'u' WHERE p IS NULL AND id = 1")
    assert _by_id(spark, nullparts) == {
        1: ("u", None),
        2: ("b", "None"),
        3: ("c", "null"),
        4: ("d", "x"),
        5: ("e", None),
    }
    result = merge(spark, f"DELETE FROM {nullparts} WHERE p IS NULL AND id = 5")
    assert result.metrics["numTargetPartitionsRewritten"] == 1
    assert _by_id(spark, nullparts) == {1: ("u", None), 2: ("b", "None"), 3: ("c", "null"), 4: ("d", "x")}


def test_merge_moves_rows_into_and_out_of_the_null_partition(spark, nullparts):
    result = merge(
        spark,
        f"MERGE INTO {nullparts} t USING (SELECT * FROM VALUES (1, 'x'), (2, NULL), (3, NULL), (6, NULL) "
        f"AS s(id, np)) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET p = s.np "
        f"WHEN NOT MATCHED THEN INSERT (id, v, p) VALUES (s.id, 'new', s.np)",
    )
    assert _by_id(spark, nullparts) == {
        1: ("a", "x"),
        2: ("b", None),
        3: ("c", None),
        4: ("d", "x"),
        5: ("e", None),
        6: ("new", None),
    }
    # touched: NULL (out of it, into it), 'None', 'null', 'x': four partitions, each by itself
    assert result.metrics["numTargetPartitionsRewritten"] == 4
    assert sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {nullparts}").collect()) == [
        "p=None",
        "p=__HIVE_DEFAULT_PARTITION__",
        "p=null",
        "p=x",
    ]


def test_an_integer_null_partition_with_upsert_rollback_and_vacuum(spark, db):
    t = f"{db}.n"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, d INT) USING parquet PARTITIONED BY (d)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1, NULL), (2, 2, 0)")
    first = merge(
        spark,
        {"target": t, "source": "SELECT * FROM VALUES (1, 10, CAST(NULL AS INT)), (3, 3, NULL) AS s(id, v, d)"},
        primary_key="id",
        watermark_key="v",
    )
    assert rows(spark, t) == [(1, 10, None), (2, 2, 0), (3, 3, None)]
    merge(spark, f"DELETE FROM {t} WHERE d IS NULL AND id = 3")
    assert rows(spark, t) == [(1, 10, None), (2, 2, 0)]
    rollback(spark, t, first.merge_id)
    assert rows(spark, t) == [(1, 1, None), (2, 2, 0)]
    vacuum(spark, t, retain_hours=0)
    assert rows(spark, t) == [(1, 1, None), (2, 2, 0)]


def test_null_partitions_through_merge_on_read_compaction_and_a_merge_engine(spark, db):
    mor = f"{db}.mor"
    spark.sql(f"CREATE TABLE {mor} (id INT, v STRING, w BIGINT, p STRING) USING parquet PARTITIONED BY (p)")
    for batch in ("(1, 'a', 1, CAST(NULL AS STRING)), (2, 'b', 1, 'None')", "(1, 'a2', 2, NULL), (3, 'c', 1, NULL)"):
        merge(
            spark,
            {"target": mor, "source": f"SELECT * FROM VALUES {batch} AS s(id, v, w, p)"},
            primary_key="id",
            watermark_key="w",
            upsert_mode="merge-on-read",
        )
    assert rows(spark, mor) == [(1, "a2", 2, None), (2, "b", 1, "None"), (3, "c", 1, None)]
    done = compact(spark, mor)
    assert done["rows_before"] == 4 and done["rows_after"] == 3
    assert rows(spark, f"{mor}__sm_log") == [(1, "a2", 2, None), (2, "b", 1, "None"), (3, "c", 1, None)]

    agg = f"{db}.agg"
    spark.sql(f"CREATE TABLE {agg} (id INT, n BIGINT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {agg} VALUES (1, 1, NULL), (2, 1, 'null')")
    merge(
        spark,
        {"target": agg, "source": "SELECT * FROM VALUES (1, 5, CAST(NULL AS STRING)), (2, 7, 'null') AS s(id, n, p)"},
        primary_key="id",
        merge_engine="aggregation",
        aggregate_function={"n": "sum"},
    )
    assert rows(spark, agg) == [(1, 6, None), (2, 8, "null")]
