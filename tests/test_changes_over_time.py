"""Changes over time, against real Spark: the change feed (table_changes), time travel (read_as_of).

The feed's strongest check is a replay: the table's rows before the first recorded commit, with each
commit's change rows applied in order (a delete or pre-image removes its row, an insert or post-image
adds its row), are the table's rows now.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime

import pytest
from pyspark.sql.types import TimestampType

from merge_core import MergeError, compact, history, merge, read_as_of, rollback, table_changes, vacuum

from .conftest import rows

MERGE = (
    "MERGE INTO {t} t USING (SELECT * FROM VALUES (1, 15, 'a', 'U'), (2, 0, 'a', 'D'), (4, 40, 'b', 'I') "
    "AS s(id, v, p, op)) s ON t.id = s.id "
    "WHEN MATCHED AND s.op = 'D' THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v "
    "WHEN NOT MATCHED THEN INSERT (id, v, p) VALUES (s.id, s.v, s.p)"
)


def feed_rows(spark, t: str, **range_) -> list[tuple]:
    return sorted((tuple(r) for r in table_changes(spark, t, **range_).drop("_commit_timestamp").collect()), key=str)


def replay(start: list[tuple], changes: list[tuple]) -> list[tuple]:
    """The rows after applying change rows (the table's columns, _change_type, _merge_id), commit by commit."""
    state = Counter(start)
    for *row, kind, _ in changes:
        state[tuple(row)] += 1 if kind in ("insert", "update_postimage") else -1
        assert state[tuple(row)] >= 0, f"{kind} of a row the table did not hold: {row}"
    return sorted(state.elements(), key=str)


@pytest.fixture(params=[True, False], ids=["partitioned", "unpartitioned"])
def recorded(spark, db, request):
    t = f"{db}.fed"
    part = "PARTITIONED BY (p)" if request.param else ""
    spark.sql(
        f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet {part} TBLPROPERTIES ('spark_merge.change_feed' = 'true')"
    )
    spark.sql(f"INSERT INTO {t} VALUES (1, 10, 'a'), (2, 20, 'a'), (3, 30, 'b')")
    return t


def ordered_feed(spark, t: str) -> list[tuple]:
    """The feed's rows in commit order (history order), rows of one commit sorted."""
    order = [e["merge_id"] for e in reversed(history(spark, t))]
    found = [tuple(r) for r in table_changes(spark, t).drop("_commit_timestamp").collect()]
    return sorted(found, key=lambda r: (order.index(r[-1]), r[:-1]))


def test_the_feed_records_every_change_of_every_commit_and_replays_to_the_table(spark, recorded):
    t = recorded
    start = rows(spark, t)
    m1 = merge(spark, MERGE.format(t=t))
    m2 = merge(spark, f"UPDATE {t} SET v = v + 1 WHERE id = 3")
    m3 = merge(spark, f"DELETE FROM {t} WHERE id = 4")
    assert feed_rows(spark, t) == sorted([
        (1, 10, "a", "update_preimage", m1.merge_id), (1, 15, "a", "update_postimage", m1.merge_id),
        (2, 20, "a", "delete", m1.merge_id), (4, 40, "b", "insert", m1.merge_id),
        (3, 30, "b", "update_preimage", m2.merge_id), (3, 31, "b", "update_postimage", m2.merge_id),
        (4, 40, "b", "delete", m3.merge_id),
    ], key=str)  # fmt: skip
    assert replay(start, ordered_feed(spark, t)) == sorted(rows(spark, t), key=str)
    # the range: after `since`, up to `until`, both merge ids
    assert {r[-1] for r in feed_rows(spark, t, since=m1.merge_id, until=m2.merge_id)} == {m2.merge_id}
    assert feed_rows(spark, t, since=m3.merge_id) == []
    frame = table_changes(spark, t, until=m1.merge_id)
    assert frame.schema["_commit_timestamp"].dataType == TimestampType()
    [(moment,)] = frame.select("_commit_timestamp").distinct().collect()
    finished = datetime.fromisoformat(next(e for e in history(spark, t) if e["merge_id"] == m1.merge_id)["finished_at"])
    assert abs((moment.replace(tzinfo=UTC) - finished).total_seconds()) < 1  # the session's time zone is UTC here
    # a rollback is a commit too: its change rows undo the commits it undoes
    back = rollback(spark, t, m2.merge_id)
    assert rows(spark, t) == sorted([(1, 15, "a"), (3, 30, "b"), (4, 40, "b")])
    assert replay(start, ordered_feed(spark, t)) == sorted(rows(spark, t), key=str)
    assert {r[-1] for r in feed_rows(spark, t, since=m3.merge_id)} == {back["merge_id"]}
    # an insert-only merge appends in place, and records its rows too
    m4 = merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT 9 AS id, 90 AS v, 'c' AS p) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *",
    )
    assert m4.metrics["numTargetPartitionsRewritten"] == 0
    assert feed_rows(spark, t, since=back["merge_id"]) == [(9, 90, "c", "insert", m4.merge_id)]
    assert replay(start, ordered_feed(spark, t)) == sorted(rows(spark, t), key=str)


def test_a_range_with_a_commit_that_recorded_nothing_or_was_vacuumed_is_an_error(spark, db):
    t = f"{db}.late"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1)")
    before = merge(spark, f"UPDATE {t} SET v = 2")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.change_feed' = 'true')")
    after = merge(spark, f"UPDATE {t} SET v = 3")
    with pytest.raises(MergeError, match=f"commit {before.merge_id} .* changed rows without recording them"):
        table_changes(spark, t)
    assert feed_rows(spark, t, since=before.merge_id) == [(1, 2, "update_preimage", after.merge_id),
                                                         (1, 3, "update_postimage", after.merge_id)]  # fmt: skip
    with pytest.raises(MergeError, match="has no commit nope"):
        table_changes(spark, t, since="nope")
    merge(spark, f"UPDATE {t} SET v = 4")
    time.sleep(1)
    vacuum(spark, t, retain_hours=0)  # the version `after` made is replaced, and removed with its change rows
    with pytest.raises(MergeError, match=f"change rows of merge {after.merge_id} .* were removed by vacuum"):
        table_changes(spark, t, since=before.merge_id)


@pytest.mark.parametrize(
    "engine, options, paimon",
    [
        ("deduplicate", {}, "lookup: -U/+U for a changed key, +I for a new one"),
        ("partial-update", {}, "lookup: the merged row before and after"),
        ("aggregation", {"aggregate_function": {"v": "sum"}}, "lookup: the aggregate before and after"),
        ("first-row", {}, "first-row's own: +I only, a key seen before changes nothing"),
    ],
)
def test_each_merge_engine_records_the_changelog_paimon_would(spark, db, engine, options, paimon):
    t = f"{db}.eng"
    spark.sql(
        f"CREATE TABLE {t} (id INT, v INT, w STRING) USING parquet TBLPROPERTIES ('spark_merge.change_feed' = 'true')"
    )
    spark.sql(f"INSERT INTO {t} VALUES (1, 10, 'x'), (2, 20, 'y')")
    source = "SELECT * FROM VALUES (1, 5, CAST(NULL AS STRING)), (3, 30, 'z') AS s(id, v, w)"
    r = merge(spark, {"target": t, "source": source}, merge_engine=engine, primary_key="id", **options)
    found = feed_rows(spark, t)
    print(f"\n{engine} ({paimon}): {[row[:-1] for row in found]}")
    expected = {
        "deduplicate": [(1, 5, None, "update_postimage"), (1, 10, "x", "update_preimage"), (3, 30, "z", "insert")],
        "partial-update": [(1, 5, "x", "update_postimage"), (1, 10, "x", "update_preimage"), (3, 30, "z", "insert")],
        "aggregation": [(1, 10, "x", "update_preimage"), (1, 15, "x", "update_postimage"), (3, 30, "z", "insert")],
        "first-row": [(3, 30, "z", "insert")],
    }[engine]
    assert sorted((row[:-1] for row in found), key=str) == sorted(expected, key=str)
    assert {row[-1] for row in found} == {r.merge_id}
    assert replay([(1, 10, "x"), (2, 20, "y")], found) == sorted(rows(spark, t), key=str)


def test_a_merge_on_read_upsert_records_the_views_changes(spark, db):
    """Merge-on-read upserts append to a log under a view; their change rows are the view's (Paimon's
    lookup producer), read under the table's own name: each upsert's rows take the view from what it
    was to what it is, across a compaction (which records nothing): inserts, a fresher row's update, a
    tombstone's delete, a deleted key coming back; a stale row, a row sent again and a tombstone of an
    unknown key record nothing."""
    t = f"{db}.mor_fed"
    spark.sql(
        f"CREATE TABLE {t} (id INT, v STRING, ts INT, deleted BOOLEAN) USING parquet "
        "TBLPROPERTIES ('spark_merge.change_feed' = 'true')"
    )
    batches = [
        ([(1, "a", 1, False), (2, "b", 1, False), (3, "c", 1, False)], {"insert": 3}),
        ([(1, "a2", 2, False), (2, "x", 2, True), (3, "stale", 0, False), (4, "d", 1, False)],
         {"update_preimage": 1, "update_postimage": 1, "delete": 1, "insert": 1}),
        ([(2, "back", 3, False), (4, "d", 1, False), (9, "gone", 1, True)], {"insert": 1}),
        ([(1, "a3", 3, False), (1, "a4", 4, False)], {"update_preimage": 1, "update_postimage": 1}),
    ]  # fmt: skip
    state: list[tuple] = []
    since = None
    for i, (batch, kinds) in enumerate(batches):
        if i == 2:
            compact(spark, t)
        source = (
            "SELECT * FROM VALUES "
            + ", ".join(f"({k}, '{v}', {ts}, {str(d).lower()})" for k, v, ts, d in batch)
            + " AS s(id, v, ts, deleted)"
        )
        r = merge(
            spark, {"target": t, "source": source}, primary_key="id", watermark_key="ts",
            tombstone_key="deleted", upsert_mode="merge-on-read",
        )  # fmt: skip
        found = feed_rows(spark, t, since=since)
        assert {row[-1] for row in found} == {r.merge_id}
        assert Counter(row[-2] for row in found) == kinds, found
        state = replay(state, found)
        assert state == sorted(rows(spark, t), key=str)
        since = r.merge_id
    assert [row[0] for row in state] == [1, 2, 3, 4] and state[0][1] == "a4"
    assert len(feed_rows(spark, t)) == 10  # every upsert's rows, the compaction's none


def test_read_as_of_reads_each_version_without_touching_the_table(spark, recorded):
    t = recorded
    v0 = rows(spark, t)
    m1 = merge(spark, MERGE.format(t=t))
    v1 = rows(spark, t)
    time.sleep(1.1)
    between = datetime.now(UTC)
    time.sleep(1.1)
    m2 = merge(spark, f"UPDATE {t} SET v = 0 WHERE id = 3")
    spark.sql(f"INSERT INTO {t} VALUES (7, 70, 'a')")  # a plain insert after m2: not in m2's version
    m3 = merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT 8 AS id, 80 AS v, 'b' AS p) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *",
    )
    now = rows(spark, t)
    assert sorted(map(tuple, read_as_of(spark, t, merge_id=m1.merge_id).collect())) == v1
    assert sorted(map(tuple, read_as_of(spark, t, timestamp=between).collect())) == v1
    assert sorted(map(tuple, read_as_of(spark, t, timestamp=between.replace(tzinfo=None)).collect())) == v1
    m2_rows = sorted(map(tuple, read_as_of(spark, t, merge_id=m2.merge_id).collect()))
    assert m2_rows == sorted([r if r[0] != 3 else (3, 0, "b") for r in v1])
    assert sorted(map(tuple, read_as_of(spark, t, merge_id=m3.merge_id).collect())) == now
    assert read_as_of(spark, t, merge_id=m1.merge_id).columns == ["id", "v", "p"]
    assert rows(spark, t) == now and v0 != v1
    with pytest.raises(MergeError, match="has no commit nope"):
        read_as_of(spark, t, merge_id="nope")
    with pytest.raises(MergeError, match="no commit at or before"):
        read_as_of(spark, t, timestamp=datetime(2000, 1, 1, tzinfo=UTC))
    with pytest.raises(MergeError, match="exactly one of"):
        read_as_of(spark, t)
    vacuum(spark, t, retain_hours=0)
    with pytest.raises(MergeError, match=f"the version of {t} after {m1.merge_id} is gone"):
        read_as_of(spark, t, merge_id=m1.merge_id).collect()


def test_the_command_line_prints_changes_and_old_versions(spark, db, capsys):
    from merge_core.api.cli import main

    t = f"{db}.cli_feed"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT) USING parquet TBLPROPERTIES ('spark_merge.change_feed' = 'true')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1)")
    first = merge(spark, f"UPDATE {t} SET v = 2")
    merge(spark, f"UPDATE {t} SET v = 3")
    assert main(["changes", t, "--since", first.merge_id, "-q"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split("\t")[:3] == ["id", "v", "_change_type"] and len(printed) == 3
    assert {line.split("\t")[2] for line in printed[1:]} == {"update_preimage", "update_postimage"}
    assert main(["show", t, "--as-of", first.merge_id, "-q"]) == 0
    assert capsys.readouterr().out.splitlines() == ["id\tv", "1\t2"]
    assert main(["show", t, "-q"]) == 0
    assert capsys.readouterr().out.splitlines() == ["id\tv", "1\t3"]


def _as_of(spark, t: str, merge_id: str) -> list[tuple]:
    return sorted(map(tuple, read_as_of(spark, t, merge_id=merge_id).collect()), key=str)


def test_a_version_whose_files_vacuum_replaced_is_an_error_not_fewer_rows(spark, db):
    """vacuum(retain 0) puts each rewritten partition back into its first directory, refilled with
    today's files: an older version that read that directory is no longer there, and says so."""
    t = f"{db}.vacuumed"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 10, 'a'), (2, 20, 'a'), (3, 30, 'b')")
    m1 = merge(
        spark, f"MERGE INTO {t} t USING (SELECT 4 AS id, 40 AS v, 'a' AS p) s ON 1 = 0 WHEN NOT MATCHED THEN INSERT *"
    )
    v1 = rows(spark, t)
    m2 = merge(spark, f"DELETE FROM {t} WHERE id IN (1, 4)")
    assert _as_of(spark, t, m1.merge_id) == sorted(v1, key=str)
    vacuum(spark, t, retain_hours=0)
    with pytest.raises(
        MergeError, match=rf"the version of {t} after {m1.merge_id} is not all there: partition p = 'a' held 3 row"
    ):
        read_as_of(spark, t, merge_id=m1.merge_id)
    assert _as_of(spark, t, m2.merge_id) == sorted(rows(spark, t), key=str)  # the current version is all there


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT OVERWRITE {t} PARTITION (p = 'a') SELECT 9, 90",
        "ALTER TABLE {t} DROP PARTITION (p = 'a')",
        "TRUNCATE TABLE {t} PARTITION (p = 'a')",
    ],
)
def test_a_version_a_plain_writer_overwrote_is_an_error_not_fewer_rows(spark, db, statement):
    """An insert-only merge appends in place: a plain INSERT OVERWRITE, DROP PARTITION or TRUNCATE of that
    partition removes the version's rows there, and reading the version says so instead of returning fewer."""
    t = f"{db}.overwritten"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 10, 'a'), (3, 30, 'b')")
    m1 = merge(
        spark, f"MERGE INTO {t} t USING (SELECT 4 AS id, 40 AS v, 'a' AS p) s ON 1 = 0 WHEN NOT MATCHED THEN INSERT *"
    )
    assert _as_of(spark, t, m1.merge_id) == [(1, 10, "a"), (3, 30, "b"), (4, 40, "a")]
    spark.sql(statement.format(t=t))
    with pytest.raises(
        MergeError, match=rf"after {m1.merge_id} is not all there: partition p = 'a' held 2 row\(s\) then"
    ):
        read_as_of(spark, t, merge_id=m1.merge_id)


def test_an_inverted_range_and_a_moment_that_is_no_moment_are_errors(spark, db):
    t = f"{db}.ranges"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT) USING parquet TBLPROPERTIES ('spark_merge.change_feed' = 'true')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1)")
    first = merge(spark, f"UPDATE {t} SET v = 2")
    second = merge(spark, f"UPDATE {t} SET v = 3")
    assert len(table_changes(spark, t, since=first.merge_id, until=second.merge_id).collect()) == 2
    assert table_changes(spark, t, since=second.merge_id, until=second.merge_id).collect() == []  # empty, not inverted
    with pytest.raises(
        MergeError, match=rf"MERGE_INVALID_SPEC: the range of changes of {t} is inverted: since={second.merge_id}"
    ):
        table_changes(spark, t, since=second.merge_id, until=first.merge_id)
    for moment in (1234567890, "yesterday", None.__class__):
        with pytest.raises(MergeError, match=r"MERGE_INVALID_SPEC: timestamp .* is not a moment: pass a datetime"):
            read_as_of(spark, t, timestamp=moment)
    assert read_as_of(spark, t, timestamp=datetime.now(UTC).date().isoformat() + "T23:59:59").collect()[0]["v"] == 3


def test_a_feed_that_plain_writes_contradict_says_so(spark, db):
    """After a plain INSERT OVERWRITE of a partition a commit appended to, the feed would still list the
    inserts the table no longer holds: an error naming the partition, unless the reader accepts it."""
    t = f"{db}.contradicted"
    spark.sql(
        f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p) "
        "TBLPROPERTIES ('spark_merge.change_feed' = 'true')"
    )
    spark.sql(f"INSERT INTO {t} VALUES (1, 10, 'a'), (3, 30, 'b')")
    merge(
        spark, f"MERGE INTO {t} t USING (SELECT 4 AS id, 40 AS v, 'a' AS p) s ON 1 = 0 WHEN NOT MATCHED THEN INSERT *"
    )
    spark.sql(f"INSERT INTO {t} VALUES (5, 50, 'c')")  # a partition no commit touched: no contradiction
    assert [r["id"] for r in table_changes(spark, t).collect()] == [4]
    spark.sql(f"INSERT OVERWRITE {t} PARTITION (p = 'a') SELECT 9, 90")
    with pytest.raises(
        MergeError,
        match=r"does not tell the whole story: partition \{\"p\": \"a\"\} holds 1 row\(s\), where its last commit left 2",
    ):
        table_changes(spark, t)
    assert [r["id"] for r in table_changes(spark, t, accept_plain_writes=True).collect()] == [4]
