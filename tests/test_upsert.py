"""Primary-key upserts with watermark and tombstone keys, copy-on-write (a guarded MERGE)."""

from __future__ import annotations

import json
import random
from decimal import Decimal

import pytest

from merge_core import MergeError, ValidationError, compact, explain, merge

from .conftest import rows, snapshot


def upsert(spark, target, source_sql, **options):
    options.setdefault("primary_key", "order_id")
    options.setdefault("watermark_key", "ts")
    return merge(spark, {"target": target, "source": source_sql}, **options)


@pytest.fixture
def orders(spark, db):
    t = f"{db}.orders"
    spark.sql(
        f"CREATE TABLE {t} (order_id INT, status STRING, ts BIGINT, deleted BOOLEAN, region STRING) "
        f"USING parquet PARTITIONED BY (region)"
    )
    return t


EVENTS = [  # the definition's examples: order 1 at ts 100 and 200; order 2 deleted by a tombstone at 200
    "(1, 'created', 100, false, 'eu')",
    "(1, 'shipped', 200, false, 'eu')",
    "(2, 'created', 100, false, 'us')",
    "(2, CAST(NULL AS STRING), 200, true, 'us')",
]
EXPECTED = [(1, "shipped", 200, False, "eu"), (2, None, 200, True, "us")]  # the tombstone is kept


def live(spark, table, test="coalesce(deleted, false)"):
    return rows(spark, f"(SELECT * FROM {table} WHERE NOT ({test}))")


def values(events):
    return "SELECT * FROM VALUES " + ", ".join(events) + " AS s(order_id, status, ts, deleted, region)"


@pytest.mark.parametrize(
    "batches",
    [
        [EVENTS],  # one batch holding all records
        [[e] for e in EVENTS],  # one merge per record, in order
        [[e] for e in reversed(EVENTS)],  # ... and newest first
        [EVENTS[1::2], EVENTS[0::2], EVENTS],  # fresh first, then stale, then everything again
    ],
)
@pytest.mark.cluster
@pytest.mark.cluster_extended
def test_definition_examples(spark, orders, batches):
    for batch in batches:
        upsert(spark, orders, values(batch), tombstone_key="deleted")
    assert rows(spark, orders) == EXPECTED
    assert live(spark, orders) == EXPECTED[:1]


@pytest.mark.cluster
@pytest.mark.cluster_ci
def test_reapplying_a_batch_changes_nothing(spark, orders):
    upsert(spark, orders, values(EVENTS), tombstone_key="deleted")
    before = snapshot(spark, orders)
    again = upsert(spark, orders, values(EVENTS), tombstone_key="deleted")
    m = again.metrics
    assert (m["numTargetRowsInserted"], m["numTargetRowsUpdated"], m["numTargetRowsDeleted"]) == (0, 0, 0)
    assert snapshot(spark, orders) == before
    older = upsert(
        spark,
        orders,
        values(["(1, 'returned', 150, false, 'eu')", "(2, 'revived', 150, false, 'us')"]),
        tombstone_key="deleted",
    )
    assert older.metrics["numTargetRowsUpdated"] == 0 and rows(spark, orders) == EXPECTED


def test_composite_watermark_compares_left_to_right(spark, db):
    t = f"{db}.composite"
    spark.sql(f"CREATE TABLE {t} (order_id INT, v STRING, epoch INT, seq INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 2, 5), (2, 'a', 2, 5), (3, 'a', 2, 5)")
    src = "SELECT * FROM VALUES (1, 'b', 2, 6), (2, 'b', 1, 99), (3, 'b', 3, 0) AS s(order_id, v, epoch, seq)"
    upsert(spark, t, src, watermark_key=["epoch", "seq"])
    assert rows(spark, t) == [(1, "b", 2, 6), (2, "a", 2, 5), (3, "b", 3, 0)]


def test_null_watermark_is_older_than_any_value(spark, db):
    t = f"{db}.nulls"
    spark.sql(f"CREATE TABLE {t} (order_id INT, v STRING, ts TIMESTAMP) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'old', NULL), (2, 'old', TIMESTAMP'2026-01-01'), (3, 'old', NULL)")
    src = (
        "SELECT * FROM VALUES (1, 'new', TIMESTAMP'2020-01-01'), (2, 'new', NULL), (3, 'new', NULL), "
        "(4, 'x', NULL), (4, 'y', TIMESTAMP'2020-01-01') AS s(order_id, v, ts)"
    )
    upsert(spark, t, src)
    got = rows(spark, f"(SELECT order_id, v FROM {t})")
    assert got == [(1, "new"), (2, "old"), (3, "old"), (4, "y")]


@pytest.mark.parametrize(
    "column_type, tombstone, alive, options, test",
    [
        ("BOOLEAN", "true", "false", {}, "coalesce(op, false)"),
        ("STRING", "'D'", "'U'", {"tombstone_string_key_value": "D"}, "coalesce(op = 'D', false)"),
        ("STRING", "'gone'", "'here'", "property", "coalesce(op = 'gone', false)"),
        ("INT", "7", "NULL", {}, "op IS NOT NULL"),
        ("TIMESTAMP", "TIMESTAMP'2026-11-22'", "NULL", {}, "op IS NOT NULL"),
    ],
)
def test_each_tombstone_type(spark, db, column_type, tombstone, alive, options, test):
    """At a watermark tie the tombstone wins, whatever the input order: that is where its type matters."""
    t = f"{db}.tomb"
    spark.sql(f"CREATE TABLE {t} (order_id INT, v STRING, ts INT, op {column_type}) USING parquet")
    if options == "property":
        spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.tombstone_string_key_value' = 'gone')")
        options = {}
    spark.sql(
        f"INSERT INTO {t} VALUES (1, 'a', 1, CAST({alive} AS {column_type})), "
        f"(2, 'a', 1, CAST({alive} AS {column_type}))"
    )
    dead, kept = f"CAST({tombstone} AS {column_type})", f"CAST({alive} AS {column_type})"
    src = (
        f"SELECT * FROM VALUES (1, 'dead', 2, {dead}), (1, 'zzz', 2, {kept}), (2, 'b', 2, {kept}), "
        f"(3, 'never', 2, {dead}), (3, 'zzz', 2, {kept}) AS s(order_id, v, ts, op)"
    )
    upsert(spark, t, src, tombstone_key="op", **options)
    assert rows(spark, f"(SELECT order_id, v FROM {t} WHERE NOT ({test}))") == [(2, "b")]
    assert rows(spark, f"(SELECT order_id, v FROM {t} WHERE {test})") == [(1, "dead"), (3, "never")]


def test_tie_on_the_watermark_does_not_depend_on_input_order(spark, db):
    t = f"{db}.ties"
    spark.sql(f"CREATE TABLE {t} (order_id INT, v STRING, ts INT, deleted BOOLEAN) USING parquet")
    results = set()
    for order in (
        "(1, 'x', 5, false), (1, 'y', 5, false), (2, 'x', 5, false), (2, 'z', 5, true)",
        "(2, 'z', 5, true), (2, 'x', 5, false), (1, 'y', 5, false), (1, 'x', 5, false)",
    ):
        spark.sql(f"TRUNCATE TABLE {t}")
        upsert(spark, t, f"SELECT * FROM VALUES {order} AS s(order_id, v, ts, deleted)", tombstone_key="deleted")
        results.add(tuple(rows(spark, t)))
    assert results == {((1, "y", 5, False), (2, "z", 5, True))}


def test_shuffled_and_repeated_batches_give_the_same_table(spark, db):
    rng = random.Random(7)
    events = []
    for key in range(30):
        for ts in rng.sample(range(1, 1000), rng.randint(1, 4)):
            events.append((key, f"v{key}_{ts}", ts, rng.random() < 0.25))
    freshest = {}
    for e in events:
        if e[0] not in freshest or e[2] > freshest[e[0]][2]:
            freshest[e[0]] = e
    expected = sorted(freshest.values())

    def sql(batch):
        return (
            "SELECT * FROM VALUES "
            + ", ".join(f"({k}, '{v}', {ts}, {str(d).lower()})" for k, v, ts, d in batch)
            + " AS s(order_id, v, ts, deleted)"
        )

    assert any(e[3] for e in expected) and any(not e[3] for e in expected)
    outcomes = []
    for attempt in range(3):
        t = f"{db}.stream{attempt}"
        spark.sql(f"CREATE TABLE {t} (order_id INT, v STRING, ts INT, deleted BOOLEAN) USING parquet")
        shuffled = events[:]
        rng.shuffle(shuffled)
        batches = [shuffled] if attempt == 0 else [shuffled[i::3] for i in range(3)]
        if attempt == 2:
            batches = batches[::-1] + batches[:2]  # other order, and some batches again
        for batch in batches:
            upsert(spark, t, sql(batch), tombstone_key="deleted")
        outcomes.append(rows(spark, t))
    assert outcomes[0] == outcomes[1] == outcomes[2] == expected


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"watermark_key": "nope"}, "upsert: unknown column nope"),
        ({"primary_key": "nope"}, "upsert: unknown column nope"),
        ({"tombstone_key": "status"}, "set tombstone_string_key_value"),
        ({"upsert_mode": "sideways"}, "upsert_mode must be copy-on-write or merge-on-read"),
        ({"watermark_key": None, "upsert_mode": "merge-on-read"}, "upsert_mode applies only to watermark upserts"),
    ],
)
def test_bad_upsert_options_are_rejected_before_anything_is_touched(spark, orders, options, fragment):
    upsert(spark, orders, values(EVENTS[:1]))
    before = snapshot(spark, orders)
    with pytest.raises(MergeError, match=fragment):  # the option check, or the validation against the table
        upsert(spark, orders, values(EVENTS), **options)
    assert snapshot(spark, orders) == before


def test_cli_upsert(spark, orders, capsys):
    from merge_core.api.cli import main

    assert (
        main(
            [
                "upsert",
                "--target",
                orders,
                "--source",
                values(EVENTS),
                "--primary-key",
                "order_id",
                "--watermark-key",
                "ts",
                "--tombstone-key",
                "deleted",
                "--json",
                "-q",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["numTargetRowsInserted"] == 2
    assert rows(spark, orders) == EXPECTED


def random_stream(seed, keys=25):
    """Events with repeated watermarks (ties), tombstones and NULL watermarks."""
    rng = random.Random(seed)
    events = []
    for key in range(keys):
        for _ in range(rng.randint(1, 5)):
            ts = rng.choice([None, 1, 2, 3, 3, 4])
            events.append((key, f"v{rng.randint(0, 3)}", ts, rng.random() < 0.3))
    return rng, events


def stream_sql(batch):
    return (
        "SELECT * FROM VALUES "
        + ", ".join(
            f"({k}, '{v}', {'CAST(NULL AS INT)' if ts is None else ts}, {str(d).lower()})" for k, v, ts, d in batch
        )
        + " AS s(order_id, v, ts, deleted)"
    )


@pytest.mark.cluster
@pytest.mark.cluster_extended
@pytest.mark.object_store
def test_merge_on_read_view_agrees_with_copy_on_write(spark, db):
    rng, events = random_stream(11)
    cow, mor = f"{db}.cow", f"{db}.mor"
    for t in (cow, mor):
        spark.sql(f"CREATE TABLE {t} (order_id INT, v STRING, ts INT, deleted BOOLEAN) USING parquet")
    shuffled = events[:]
    rng.shuffle(shuffled)
    batches = [shuffled[i::4] for i in range(4)]
    batches += [batches[2], batches[0]]  # repeated, out of order
    for batch in batches:
        upsert(spark, cow, stream_sql(batch), tombstone_key="deleted")
        upsert(spark, mor, stream_sql(batch), tombstone_key="deleted", upsert_mode="merge-on-read")
        assert rows(spark, mor) == live(spark, cow)
    # a different batching of the same events reads the same
    once = f"{db}.once"
    spark.sql(f"CREATE TABLE {once} (order_id INT, v STRING, ts INT, deleted BOOLEAN) USING parquet")
    upsert(spark, once, stream_sql(events), tombstone_key="deleted", upsert_mode="merge-on-read")
    assert rows(spark, once) == rows(spark, mor)
    assert len(rows(spark, mor)) > 0

    # the writers only appended: the log holds every row offered
    log = f"{db}.mor__sm_log"
    assert spark.table(log).count() == sum(len(b) for b in batches)
    view_before = rows(spark, mor)
    done = compact(spark, mor)
    assert done["rows_after"] == len({e[0] for e in events})  # one row per key, tombstones kept
    assert rows(spark, mor) == view_before
    # late, older rows of deleted keys stay deleted after compaction too
    upsert(
        spark,
        mor,
        stream_sql([(k, "late", 0, False) for k in range(25)]),
        tombstone_key="deleted",
        upsert_mode="merge-on-read",
    )
    upsert(spark, cow, stream_sql([(k, "late", 0, False) for k in range(25)]), tombstone_key="deleted")
    assert rows(spark, mor) == live(spark, cow)


def test_explain_of_a_merge_on_read_upsert_says_it_appends_and_changes_nothing(spark, db):
    """Its begin would convert the table to a view over the log: explain describes the append instead
    (not the copy-on-write MERGE's plan), and the table stays a table."""
    t = f"{db}.mor_explained"
    spark.sql(f"CREATE TABLE {t} (order_id INT, v STRING, ts INT) USING parquet")
    source = "SELECT * FROM VALUES (1, 'a', 1) AS x(order_id, v, ts)"
    options = {"primary_key": ["order_id"], "watermark_key": "ts", "upsert_mode": "merge-on-read"}
    plan = explain(spark, {"target": t, "source": source}, verbose=True, **options)
    assert f"merge-on-read UPSERT into {t}: append the source's rows to the log {t}__sm_log" in plan
    assert "JOIN" not in plan and "SET LOCATION" not in plan
    assert spark.catalog.getTable(t).tableType == "MANAGED"  # not converted to a view
    assert not spark.catalog.tableExists(f"{t}__sm_log")
    # the same request as copy-on-write is a MERGE's plan
    assert "-- 4. summary:" in explain(
        spark, {"target": t, "source": source}, verbose=True, **dict(options, upsert_mode="copy-on-write")
    )


def test_compaction_drops_tombstones_older_than_the_retention(spark, db):
    t = f"{db}.events"
    spark.sql(f"CREATE TABLE {t} (order_id INT, v STRING, ts TIMESTAMP, deleted BOOLEAN) USING parquet")
    src = (
        "SELECT * FROM VALUES (1, 'a', TIMESTAMP'2020-01-01', false), (1, 'x', TIMESTAMP'2020-01-02', true), "
        "(2, 'b', current_timestamp() - INTERVAL 1 HOUR, true), (3, 'c', TIMESTAMP'2020-01-01', false) "
        "AS s(order_id, v, ts, deleted)"
    )
    upsert(spark, t, src, tombstone_key="deleted", upsert_mode="merge-on-read")
    assert rows(spark, f"(SELECT order_id, v FROM {t})") == [(3, "c")]
    done = compact(spark, t, tombstone_retention_hours=24)
    assert done["rows_before"] == 4 and done["rows_after"] == 2  # key 1's old tombstone is gone, key 2's kept
    assert rows(spark, f"(SELECT order_id, deleted FROM {t}__sm_log)") == [(2, True), (3, False)]
    assert rows(spark, f"(SELECT order_id, v FROM {t})") == [(3, "c")]


@pytest.mark.parametrize(
    "source, fragment",
    [
        # errors name the option and the user's columns, never the SQL generated around the source
        (
            "SELECT order_id AS id, status, ts, deleted, region FROM VALUES (1, 'x', 1, false, 'eu') AS s(order_id, status, ts, deleted, region)",
            "upsert: primary_key names column order_id, which the source does not have (its columns: id, status, ts, deleted, region)",
        ),
        (
            "SELECT order_id, status, ts, region FROM VALUES (1, 'x', 1, 'eu') AS s(order_id, status, ts, region)",
            "upsert: the source lacks column(s) deleted of",
        ),
    ],
)
def test_upsert_errors_name_the_option_and_the_users_columns(spark, orders, source, fragment):
    with pytest.raises(ValidationError) as e:
        upsert(spark, orders, source)
    assert fragment in str(e.value) and "max_by" not in str(e.value) and "named_struct" not in str(e.value)


def test_watermark_of_a_wider_type_than_the_stored_one(spark, db):
    """A source watermark decimal(13,2) against a stored decimal(12,2): compared as the stored type."""
    t = f"{db}.amounts"
    spark.sql(f"CREATE TABLE {t} (id INT, amount DECIMAL(12,2), v STRING) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1.50, 'old'), (2, 9.00, 'kept')")
    merge(
        spark,
        {
            "target": t,
            "source": "SELECT * FROM VALUES (1, CAST(2.25 AS DECIMAL(13,2)), 'new'), "
            "(2, CAST(3.00 AS DECIMAL(13,2)), 'stale') AS s(id, amount, v)",
        },
        primary_key="id",
        watermark_key="amount",
    )
    assert rows(spark, t) == [(1, Decimal("2.25"), "new"), (2, Decimal("9.00"), "kept")]


@pytest.mark.cluster
def test_keyed_upsert_without_a_watermark(spark, orders):
    """No watermark: a source row replaces the stored row of its key when it differs (no freshness
    guard), so the same batch again changes nothing; several rows of one key in a batch resolve by a
    fixed rule (a tombstone first, then the largest row as JSON), never by input order."""
    first = [
        (1, "'created'", 100, "false", "'eu'"),
        (1, "'paid'", 50, "false", "'eu'"),
        (2, "'new'", 1, "false", "'us'"),
    ]

    def batch(events):
        return values([f"({', '.join(map(str, e))})" for e in events])

    r = merge(spark, {"target": orders, "source": batch(first)}, primary_key="order_id")
    assert r.metrics["numTargetRowsInserted"] == 2
    once = rows(spark, orders)
    assert once == [
        (1, "paid", 50, False, "eu"),
        (2, "new", 1, False, "us"),
    ]  # '{"order_id":1,"status":"paid"...' is larger
    assert merge(spark, {"target": orders, "source": batch(first[::-1])}, primary_key="order_id").noop
    assert rows(spark, orders) == once
    r = merge(spark, {"target": orders, "source": batch([(2, "'old'", 0, "false", "'us'")])}, primary_key="order_id")
    assert r.metrics["numTargetRowsUpdated"] == 1  # no watermark: an older row replaces a newer one
    assert rows(spark, orders)[1] == (2, "old", 0, False, "us")
