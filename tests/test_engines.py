"""Paimon's merge engines on real Spark tables: every example of Paimon's merge-engine
documentation, applied as successive merges and as one batch holding all records,
plus sequence order, deletes, retraction for each function that supports it, and
configuration errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from merge_core import EngineRejected, ValidationError, merge

from .conftest import location, rows, snapshot
from .unit.test_engine_options import ENGINE_CONFIGURATIONS


def engine_merge(spark, table, columns, records, **options):
    """Merge `records` (SQL tuples, in input order) into `table` with an engine."""
    source = f"SELECT * FROM VALUES {', '.join(records)} AS s({columns})"
    return merge(spark, {"target": table, "source": source}, **options)


def apply_in_both_ways(spark, make_table, columns, batches, expected_after, **options):
    """Apply each batch as its own merge (checking the table after each), then the
    same records as one batch into a fresh table; both must end the same."""
    one_by_one = make_table("one_by_one")
    for batch, expected in zip(batches, expected_after):
        engine_merge(spark, one_by_one, columns, batch, **options)
        if expected is not None:
            assert rows(spark, one_by_one) == expected
    all_at_once = make_table("all_at_once")
    engine_merge(spark, all_at_once, columns, [r for b in batches for r in b], **options)
    assert rows(spark, all_at_once) == rows(spark, one_by_one)
    return rows(spark, all_at_once)


@pytest.fixture
def make_table(spark, db):
    def make(ddl):
        def create(suffix):
            name = f"{db}.t_{suffix}"
            spark.sql(f"CREATE TABLE {name} ({ddl}) USING parquet")
            return name

        return create

    return make


# -- partial-update -----------------------------------------------------------------------------


def test_partial_update_fills_fields_with_the_latest_non_null(spark, make_table):
    records = [
        "(1, 23.0D, 10, CAST(NULL AS STRING))",
        "(1, CAST(NULL AS DOUBLE), CAST(NULL AS INT), 'This is a book')",
        "(1, 25.2D, CAST(NULL AS INT), CAST(NULL AS STRING))",
    ]
    final = apply_in_both_ways(
        spark,
        make_table("k INT, a DOUBLE, b INT, c STRING"),
        "k, a, b, c",
        [[r] for r in records],
        [None, None, [(1, 25.2, 10, "This is a book")]],
        merge_engine="partial-update",
        primary_key="k",
    )
    assert final == [(1, 25.2, 10, "This is a book")]


def test_sequence_groups(spark, make_table):
    batches = [
        ["(1, 1, 1, 1, 1, 1, 1)"],
        ["(1, 2, 2, 2, 2, 2, CAST(NULL AS INT))"],  # g_2 is null: c, d not updated
        ["(1, 3, 3, 1, 3, 3, 3)"],
    ]  # g_1 is smaller: a, b not updated
    final = apply_in_both_ways(
        spark,
        make_table("k INT, a INT, b INT, g_1 INT, c INT, d INT, g_2 INT"),
        "k, a, b, g_1, c, d, g_2",
        batches,
        [None, [(1, 2, 2, 2, 1, 1, 1)], [(1, 2, 2, 2, 3, 3, 3)]],
        merge_engine="partial-update",
        primary_key="k",
        sequence_group={"g_1": "a,b", "g_2": "c,d"},
    )
    assert final == [(1, 2, 2, 2, 3, 3, 3)]


@pytest.mark.extended  # CI: test_sequence_groups
def test_sequence_group_with_two_sequence_fields(spark, make_table):
    batches = [
        ["(1, 1, 1, 1, 1, 1, 1, 1)"],
        ["(1, 2, 2, 2, 2, 2, 1, CAST(NULL AS INT))"],  # (g_2, g_3) = (1, NULL) < (1, 1)
        ["(1, 3, 3, 1, 3, 3, 3, 1)"],
    ]  # g_1 = 1 < 2
    final = apply_in_both_ways(
        spark,
        make_table("k INT, a INT, b INT, g_1 INT, c INT, d INT, g_2 INT, g_3 INT"),
        "k, a, b, g_1, c, d, g_2, g_3",
        batches,
        [None, [(1, 2, 2, 2, 1, 1, 1, 1)], [(1, 2, 2, 2, 3, 3, 3, 1)]],
        merge_engine="partial-update",
        primary_key="k",
        sequence_group={"g_1": ["a", "b"], "g_2,g_3": ["c", "d"]},
    )
    assert final == [(1, 2, 2, 2, 3, 3, 3, 1)]


@pytest.mark.extended  # CI: partial-update and aggregation each on their own
def test_aggregation_inside_partial_update(spark, make_table):
    n = "CAST(NULL AS INT)"
    batches = [[f"(1, 1, 1, {n}, {n})"], [f"(1, {n}, {n}, 1, 1)"], [f"(1, 2, 2, {n}, {n})"], [f"(1, {n}, {n}, 2, 2)"]]
    final = apply_in_both_ways(
        spark,
        make_table("k INT, a INT, b INT, c INT, d INT"),
        "k, a, b, c, d",
        batches,
        [None, None, None, [(1, 2, 1, 2, 3)]],
        merge_engine="partial-update",
        primary_key="k",
        sequence_group={"a": "b", "c": "d"},
        aggregate_function={"b": "first_value", "d": "sum"},
    )
    assert final == [(1, 2, 1, 2, 3)]


@pytest.mark.extended  # CI: test_aggregation_inside_partial_update
def test_default_aggregate_function_in_partial_update(spark, make_table):
    n = "CAST(NULL AS INT)"
    batches = [[f"(1, 1, 1, {n}, {n})"], [f"(1, {n}, {n}, 1, 1)"], [f"(1, 2, 2, {n}, {n})"], [f"(1, {n}, {n}, 2, 2)"]]
    final = apply_in_both_ways(
        spark,
        make_table("k INT, a INT, b INT, c INT, d INT"),
        "k, a, b, c, d",
        batches,
        [None, None, None, [(1, 2, 2, 2, 3)]],
        merge_engine="partial-update",
        primary_key="k",
        sequence_group={"a": "b", "c": "d"},
        default_aggregate_function="last_non_null_value",
        aggregate_function={"d": "sum"},
    )
    assert final == [(1, 2, 2, 2, 3)]


@pytest.mark.extended  # CI: test_sequence_groups
def test_aggregation_in_a_group_with_two_sequence_fields(spark, make_table):
    batches = [
        ["(1, 1, 1, 1, '1', 1, 1)"],
        ["(1, 2, 2, 2, '2', CAST(NULL AS INT), 2)"],  # g_2 null: c not updated
        ["(1, 3, 3, 2, '3', 3, 1)"],
    ]  # (g_1, g_3) older: a still sums
    final = apply_in_both_ways(
        spark,
        make_table("k INT, a INT, b INT, g_1 INT, c STRING, g_2 INT, g_3 INT"),
        "k, a, b, g_1, c, g_2, g_3",
        batches,
        [None, [(1, 3, 2, 2, "1", 1, 2)], [(1, 6, 3, 2, "3", 3, 2)]],
        merge_engine="partial-update",
        primary_key="k",
        aggregate_function={"a": "sum"},
        sequence_group={"g_1,g_3": "a", "g_2": "c"},
    )
    assert final == [(1, 6, 3, 2, "3", 3, 2)]


@pytest.mark.extended  # CI: the refusals of test_configuration_errors_name_the_problem and test_functions_that_cannot_retract_*
def test_partial_update_rejects_deletes_unless_ignored_or_retracting_a_group(spark, db):
    t = f"{db}.pu"
    spark.sql(f"CREATE TABLE {t} (k INT, a INT, g INT, b STRING) USING parquet")
    cols = "k, a, g, b, op"
    engine_merge(
        spark, t, cols, ["(1, 5, 1, 'x', '+I')"], merge_engine="partial-update", primary_key="k", row_kind_field="op"
    )
    before = snapshot(spark, t)
    with pytest.raises(EngineRejected, match=r"does not accept DELETE.*\(key \{\"k\":1\}\)"):
        engine_merge(
            spark,
            t,
            cols,
            ["(1, 5, 1, 'x', '-D')"],
            merge_engine="partial-update",
            primary_key="k",
            row_kind_field="op",
        )
    assert snapshot(spark, t) == before
    engine_merge(
        spark,
        t,
        cols,
        ["(1, 5, 1, 'x', '-D')", "(2, 7, 1, 'y', '-D')"],
        merge_engine="partial-update",
        primary_key="k",
        row_kind_field="op",
        ignore_delete=True,
    )
    assert snapshot(spark, t) == before
    # with a sequence group, a retraction not older than the group's sequence empties the group's fields
    engine_merge(
        spark,
        t,
        cols,
        ["(1, 9, 0, 'x', '-D')"],
        merge_engine="partial-update",
        primary_key="k",
        row_kind_field="op",
        sequence_group={"g": "a"},
    )
    assert rows(spark, t) == [(1, 5, 1, "x")]  # g = 0 < 1: too old
    engine_merge(
        spark,
        t,
        cols,
        ["(1, 9, 2, 'z', '-U')"],
        merge_engine="partial-update",
        primary_key="k",
        row_kind_field="op",
        sequence_group={"g": "a"},
    )
    assert rows(spark, t) == [(1, None, 2, "x")]  # a retracted; b is in no group: kept


def test_remove_record_on_delete_removes_the_row_and_the_key_starts_afresh(spark, make_table):
    """Paimon's partial-update.remove-record-on-delete example: a -D removes the whole row; later
    records of the key build a new one from nothing; a -U is dropped. Successive merges and one
    batch give the same table."""
    batches = [
        ["(1, CAST(NULL AS STRING), 'apple', '+I')", "(2, 'B', 'pear', '+I')"],
        ["(1, CAST(NULL AS STRING), CAST(NULL AS STRING), '-D')", "(2, 'x', 'x', '-U')"],
        ["(1, CAST(NULL AS STRING), 'apache', '+I')"],
        ["(1, 'A', CAST(NULL AS STRING), '+I')"],
    ]
    final = apply_in_both_ways(
        spark,
        make_table("k INT, a STRING, b STRING, op STRING"),
        "k, a, b, op",
        batches,
        [
            [(1, None, "apple", "+I"), (2, "B", "pear", "+I")],
            [(2, "B", "pear", "+I")],  # 1 removed; the -U changed nothing
            [(1, None, "apache", "+I"), (2, "B", "pear", "+I")],  # not 'apple': the key started afresh
            None,
        ],
        merge_engine="partial-update",
        primary_key="k",
        row_kind_field="op",
        remove_record_on_delete=True,
    )
    assert final == [(1, "A", "apache", "+I"), (2, "B", "pear", "+I")]


@pytest.mark.extended  # CI: the partial-update case
def test_remove_record_on_delete_in_aggregation(spark, make_table):
    """aggregation.remove-record-on-delete: a -D removes the row (sum and count start again, first_value
    takes the next value); a -U still retracts (last_value to NULL)."""
    batches = [
        ["(1, 10, 1, 'first', '+I')", "(1, 5, 1, 'second', '+I')"],
        ["(1, 5, 1, 'x', '-U')"],
        ["(1, 0, 0, 'gone', '-D')"],
        ["(1, 7, 1, 'again', '+I')"],
    ]
    final = apply_in_both_ways(
        spark,
        make_table("k INT, total INT, n INT, f STRING, op STRING"),
        "k, total, n, f, op",
        batches,
        [[(1, 15, 2, "first", "+I")], [(1, 10, 1, "first", None)], [], [(1, 7, 1, "again", "+I")]],
        merge_engine="aggregation",
        primary_key="k",
        row_kind_field="op",
        remove_record_on_delete=True,
        aggregate_function={"total": "sum", "n": "count", "f": "first_value", "op": "last_value"},
        ignore_retract=["f"],  # first_value cannot retract
    )
    assert final == [(1, 7, 1, "again", "+I")]


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(merge_engine="deduplicate"), "applies to the partial-update and aggregation engines, not deduplicate"),
        (dict(merge_engine="first-row"), "not first-row"),
        (dict(merge_engine="partial-update", ignore_delete=True), "contradict each other"),
        (dict(merge_engine="partial-update", sequence_group={"n": "v"}), "remove_record_on_delete and sequence_group"),
    ],
)
def test_remove_record_on_delete_refused_where_it_means_nothing_or_contradicts(spark, db, options, message):
    t = f"{db}.rrd"
    spark.sql(f"CREATE TABLE {t} (k INT, v STRING, n INT, op STRING) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 1, '+I')")
    before = snapshot(spark, t)
    with pytest.raises(ValidationError, match=message):
        engine_merge(
            spark,
            t,
            "k, v, n, op",
            ["(1, 'b', 2, '-D')"],
            primary_key="k",
            row_kind_field="op",
            remove_record_on_delete=True,
            **options,
        )
    assert snapshot(spark, t) == before


# -- aggregation ---------------------------------------------------------------------------------


def test_aggregation_max_and_sum(spark, make_table):
    final = apply_in_both_ways(
        spark,
        make_table("product_id BIGINT, price DOUBLE, sales BIGINT"),
        "product_id, price, sales",
        [["(1, 23.0D, 15)"], ["(1, 30.2D, 20)"]],
        [[(1, 23.0, 15)], [(1, 30.2, 35)]],
        merge_engine="aggregation",
        primary_key="product_id",
        aggregate_function={"price": "max", "sales": "sum"},
    )
    assert final == [(1, 30.2, 35)]


@pytest.mark.extended  # CI: the partial-update and sequence-group tests
def test_nested_update_builds_a_wide_order(spark, make_table, db):
    sub = "ARRAY<STRUCT<sub_order_id: BIGINT, product_name: STRING, price: BIGINT>>"
    none = f"CAST(NULL AS {sub})"

    def so(i, name, price):
        return f"array(named_struct('sub_order_id', {i}L, 'product_name', '{name}', 'price', {price}L))"

    ns = "CAST(NULL AS STRING)"
    batches = [
        [f"(1L, 'Alice', 'Main St 1', {none})"],  # from orders
        [f"(1L, {ns}, {ns}, {so(1, 'book', 10)})"],  # from sub_orders ...
        [f"(1L, {ns}, {ns}, {so(2, 'pen', 2)})"],
        [f"(1L, {ns}, {ns}, {so(1, 'book', 12)})"],  # sub order 1 changed
        [f"(2L, {ns}, {ns}, {so(3, 'ink', 5)})"],  # a sub order before its order
        [f"(2L, 'Bob', 'Side St 2', {none})"],
    ]
    apply_in_both_ways(
        spark,
        make_table(f"order_id BIGINT, user_name STRING, address STRING, sub_orders {sub}"),
        "order_id, user_name, address, sub_orders",
        batches,
        [None] * len(batches),
        merge_engine="aggregation",
        primary_key="order_id",
        aggregate_function={"sub_orders": "nested_update"},
        nested_key={"sub_orders": "sub_order_id"},
    )
    for table in ("one_by_one", "all_at_once"):
        flat = spark.sql(
            f"SELECT order_id, user_name, address, so.sub_order_id, so.product_name, so.price "
            f"FROM {db}.t_{table} LATERAL VIEW explode(sub_orders) AS so "
            f"ORDER BY order_id, sub_order_id"
        ).collect()
        assert [tuple(r) for r in flat] == [
            (1, "Alice", "Main St 1", 1, "book", 12),
            (1, "Alice", "Main St 1", 2, "pen", 2),
            (2, "Bob", "Side St 2", 3, "ink", 5),
        ]


RETRACT_DDL = (
    "k INT, s INT, p BIGINT, n BIGINT, c ARRAY<STRING>, m MAP<STRING, INT>, "
    "nu ARRAY<STRUCT<id: INT, v: STRING>>, lv STRING, lnn STRING"
)
RETRACT_FUNCTIONS = {
    "s": "sum",
    "p": "product",
    "n": "count",
    "c": "collect",
    "m": "merge_map",
    "nu": "nested_update",
    "lv": "last_value",
    "lnn": "last_non_null_value",
}


@pytest.mark.extended  # CI: retraction through test_each_function's functions and the row-kind tests
def test_retraction_of_every_function_that_supports_it(spark, make_table):
    def rec(op, s, p, c, m, nu, lv, lnn):
        return f"(1, {s}, {p}L, 1L, array({c}), map({m}), array({nu}), {lv}, {lnn}, '{op}')"

    batches = [
        [rec("+I", 10, 6, "'a', 'b'", "'x', 1", "named_struct('id', 1, 'v', 'one')", "'v1'", "'w1'")],
        [rec("+I", 5, 7, "'a'", "'y', 2", "named_struct('id', 2, 'v', 'two')", "'v2'", "'w2'")],
        [rec("-U", 10, 6, "'a'", "'x', 0", "named_struct('id', 1, 'v', 'one')", "'v1'", "'w1'")],
    ]
    options = dict(
        merge_engine="aggregation",
        primary_key="k",
        row_kind_field="op",
        aggregate_function=RETRACT_FUNCTIONS,
        nested_key={"nu": "id"},
    )
    final = apply_in_both_ways(
        spark,
        make_table(RETRACT_DDL),
        "k, s, p, n, c, m, nu, lv, lnn, op",
        batches,
        [[(1, 10, 6, 1, ["a", "b"], {"x": 1}, [(1, "one")], "v1", "w1")], None, None],
        **options,
    )
    # sum 10+5-10, product 6*7/6, count 1+1-1, collect minus one 'a', merge_map minus key x,
    # nested_update minus id 1, last_value and last_non_null_value set to NULL by a retraction
    assert final == [(1, 5, 7, 1, ["b", "a"], {"y": 2}, [(2, "two")], None, None)]


def test_functions_that_cannot_retract_fail_unless_ignore_retract(spark, db):
    t = f"{db}.agg_max"
    spark.sql(f"CREATE TABLE {t} (k INT, hi INT, total INT) USING parquet")
    opts = dict(
        merge_engine="aggregation",
        primary_key="k",
        row_kind_field="op",
        aggregate_function={"hi": "max", "total": "sum"},
    )
    engine_merge(spark, t, "k, hi, total, op", ["(1, 7, 7, '+I')"], **opts)
    before = snapshot(spark, t)
    with pytest.raises(EngineRejected, match=r"cannot retract: hi \(max\)"):
        engine_merge(spark, t, "k, hi, total, op", ["(1, 7, 7, '-D')"], **opts)
    assert snapshot(spark, t) == before
    engine_merge(spark, t, "k, hi, total, op", ["(1, 7, 7, '-D')"], ignore_retract=["hi"], **opts)
    assert rows(spark, t) == [(1, 7, 0)]


FUNCTIONS = [  # function, column type, three values in input order, the result
    ("product", "BIGINT", ["2L", "3L", "CAST(NULL AS BIGINT)"], 6),
    ("count", "BIGINT", ["5L", "CAST(NULL AS BIGINT)", "1L"], 2),
    ("min", "DATE", ["DATE'2024-03-01'", "DATE'2024-01-01'", "DATE'2024-02-01'"], "2024-01-01"),
    ("max", "STRING", ["'b'", "'c'", "'a'"], "c"),
    ("last_value", "STRING", ["'a'", "'b'", "CAST(NULL AS STRING)"], None),
    ("first_value", "STRING", ["CAST(NULL AS STRING)", "'b'", "'c'"], None),
    ("first_non_null_value", "STRING", ["CAST(NULL AS STRING)", "'b'", "'c'"], "b"),
    ("listagg", "STRING", ["'a'", "CAST(NULL AS STRING)", "'b'"], "a,b"),
    ("bool_and", "BOOLEAN", ["true", "CAST(NULL AS BOOLEAN)", "false"], False),
    ("bool_or", "BOOLEAN", ["false", "CAST(NULL AS BOOLEAN)", "true"], True),
    ("collect", "ARRAY<INT>", ["array(1, 2)", "CAST(NULL AS ARRAY<INT>)", "array(2)"], [1, 2, 2]),
    (
        "merge_map",
        "MAP<STRING, INT>",
        ["map('a', 1)", "map('a', 2, 'b', 3)", "CAST(NULL AS MAP<STRING, INT>)"],
        {"a": 2, "b": 3},
    ),
]


def test_each_function(spark, make_table):
    """One column per function; three records, merged one by one and all at once."""
    ddl = ", ".join(f"v_{fn} {ty}" for fn, ty, _, _ in FUNCTIONS)
    columns = ", ".join(f"v_{fn}" for fn, _, _, _ in FUNCTIONS)
    records = [[f"(1, {', '.join(values[i] for _, _, values, _ in FUNCTIONS)})"] for i in range(3)]
    final = apply_in_both_ways(
        spark,
        make_table(f"k INT, {ddl}"),
        f"k, {columns}",
        records,
        [None] * 3,
        merge_engine="aggregation",
        primary_key="k",
        aggregate_function={f"v_{fn}": fn for fn, _, _, _ in FUNCTIONS},
    )
    got = dict(zip([fn for fn, _, _, _ in FUNCTIONS], final[0][1:]))
    got["min"] = str(got["min"])
    assert got == {fn: expected for fn, _, _, expected in FUNCTIONS}


@pytest.mark.extended  # CI: test_each_function
def test_distinct_collect_and_listagg_with_delimiter(spark, make_table):
    final = apply_in_both_ways(
        spark,
        make_table("k INT, tags ARRAY<STRING>, names STRING"),
        "k, tags, names",
        [["(1, array('a', 'b'), 'x;y')"], ["(1, array('b', 'c'), 'y;z')"]],
        [None, None],
        merge_engine="aggregation",
        primary_key="k",
        aggregate_function={"tags": "collect", "names": "listagg"},
        distinct=["tags", "names"],
        listagg_delimiter={"names": ";"},
    )
    assert final == [(1, ["a", "b", "c"], "x;y;z")]


# -- deduplicate and first-row -------------------------------------------------------------------


def test_deduplicate_keeps_the_latest_by_sequence_field_out_of_order(spark, make_table):
    batches = [["(1, 'b', 20)", "(2, 'x', 5)"], ["(1, 'a', 10)"], ["(1, 'c', 20)"]]  # 10 is late; 20 ties: later wins
    final = apply_in_both_ways(
        spark,
        make_table("k INT, v STRING, ts INT"),
        "k, v, ts",
        batches,
        [[(1, "b", 20), (2, "x", 5)], [(1, "b", 20), (2, "x", 5)], [(1, "c", 20), (2, "x", 5)]],
        merge_engine="deduplicate",
        primary_key="k",
        sequence_field="ts",
    )
    assert final == [(1, "c", 20), (2, "x", 5)]


def test_deduplicate_stale_record_changes_nothing(spark, db):
    t = f"{db}.dd"
    spark.sql(f"CREATE TABLE {t} (k INT, v STRING, ts INT) USING parquet")
    engine_merge(
        spark, t, "k, v, ts", ["(1, 'new', 50)"], merge_engine="deduplicate", primary_key="k", sequence_field="ts"
    )
    before = snapshot(spark, t)
    result = engine_merge(
        spark, t, "k, v, ts", ["(1, 'old', 40)"], merge_engine="deduplicate", primary_key="k", sequence_field="ts"
    )
    assert result.metrics["numTargetRowsUpdated"] == 0
    assert snapshot(spark, t) == before


def test_deduplicate_latest_delete_removes_the_key_unless_ignore_delete(spark, make_table, db):
    batches = [["(1, 'a', '+I')", "(2, 'b', '+I')"], ["(1, 'a2', '+U')", "(1, 'a2', '-D')"], ["(3, 'c', '-D')"]]
    final = apply_in_both_ways(
        spark,
        make_table("k INT, v STRING"),
        "k, v, op",
        batches,
        [None, [(2, "b")], [(2, "b")]],
        merge_engine="deduplicate",
        primary_key="k",
        row_kind_field="op",
    )
    assert final == [(2, "b")]
    t = f"{db}.dd_ignore"
    spark.sql(f"CREATE TABLE {t} (k INT, v STRING) USING parquet")
    for batch in batches:
        engine_merge(
            spark,
            t,
            "k, v, op",
            batch,
            merge_engine="deduplicate",
            primary_key="k",
            row_kind_field="op",
            ignore_delete=True,
        )
    assert rows(spark, t) == [(1, "a2"), (2, "b")]


def test_first_row_keeps_the_first_row(spark, make_table, db):
    batches = [["(1, 'first', 1)", "(1, 'second', 2)"], ["(1, 'third', 0)", "(2, 'x', 9)"]]
    final = apply_in_both_ways(
        spark,
        make_table("k INT, v STRING, n INT"),
        "k, v, n",
        batches,
        [[(1, "first", 1)], [(1, "first", 1), (2, "x", 9)]],
        merge_engine="first-row",
        primary_key="k",
    )
    assert final == [(1, "first", 1), (2, "x", 9)]
    t = f"{db}.fr"
    spark.sql(f"CREATE TABLE {t} (k INT, v STRING) USING parquet")
    engine_merge(
        spark, t, "k, v, op", ["(1, 'a', '+I')"], merge_engine="first-row", primary_key="k", row_kind_field="op"
    )
    again = engine_merge(
        spark, t, "k, v, op", ["(1, 'b', '+I')"], merge_engine="first-row", primary_key="k", row_kind_field="op"
    )
    assert again.metrics["numTargetRowsUpdated"] == 0
    with pytest.raises(EngineRejected, match="first-row does not accept DELETE"):
        engine_merge(
            spark, t, "k, v, op", ["(1, 'a', '-D')"], merge_engine="first-row", primary_key="k", row_kind_field="op"
        )
    engine_merge(
        spark,
        t,
        "k, v, op",
        ["(1, 'a', '-D')", "(5, 'e', '+I')"],
        merge_engine="first-row",
        primary_key="k",
        row_kind_field="op",
        ignore_delete=True,
    )
    assert rows(spark, t) == [(1, "a"), (5, "e")]


def test_bad_row_kind_is_rejected(spark, db):
    t = f"{db}.rk"
    spark.sql(f"CREATE TABLE {t} (k INT, v STRING) USING parquet")
    with pytest.raises(EngineRejected, match=r"row_kind_field op must be one of"):
        engine_merge(
            spark, t, "k, v, op", ["(1, 'a', 'U')"], merge_engine="deduplicate", primary_key="k", row_kind_field="op"
        )
    assert rows(spark, t) == []


@pytest.mark.parametrize("engine", ["partial-update", "deduplicate"])
def test_a_source_lacking_a_column_of_the_table_is_refused_naming_it_and_the_fix(spark, db, engine):
    """An engine writes whole rows: a source without one of the table's columns is refused before anything
    is read, naming the column and how to give it (not as the generated MERGE's unresolved columns)."""
    t = f"{db}.narrow"
    spark.sql(f"CREATE TABLE {t} (k INT, v STRING, note STRING) USING parquet")
    with pytest.raises(ValidationError) as caught:
        engine_merge(spark, t, "k, v", ["(1, 'a')"], merge_engine=engine, primary_key="k")
    assert str(caught.value).count("note") == 2 and "the source lacks column(s) note of" in str(caught.value)
    assert "NULL AS note" in str(caught.value) and "__sm_" not in str(caught.value)
    assert rows(spark, t) == []


# -- command line --------------------------------------------------------------------------------


def test_cli_engine_upsert_with_paimon_style_field_options(spark, db, capsys):
    from merge_core.api.cli import main

    t = f"{db}.cli_agg"
    spark.sql(f"CREATE TABLE {t} (product_id BIGINT, price DOUBLE, sales BIGINT) USING parquet")
    for record in ("(1L, 23.0D, 15L)", "(1L, 30.2D, 20L)"):
        assert (
            main(
                [
                    "upsert",
                    "--target",
                    t,
                    "--source",
                    f"SELECT * FROM VALUES {record} AS s(product_id, price, sales)",
                    "--primary-key",
                    "product_id",
                    "--merge-engine",
                    "aggregation",
                    "--json",
                    "-q",
                    "--field",
                    "price.aggregate-function=max",
                    "--field",
                    "fields.sales.aggregate-function=sum",
                ]
            )
            == 0
        )
        metrics = json.loads(capsys.readouterr().out)
    assert metrics["numTargetRowsUpdated"] == 1 and metrics["numTargetRowsInserted"] == 0
    assert rows(spark, t) == [(1, 30.2, 35)]
    assert (
        main(
            [
                "upsert",
                "--target",
                t,
                "--source",
                "SELECT 1L AS product_id, 1D AS price, 1L AS sales",
                "--primary-key",
                "product_id",
                "--merge-engine",
                "aggregation",
                "--field",
                "price=max",
                "-q",
            ]
        )
        == 2
    )
    assert "expected NAME.OPTION=VALUE" in capsys.readouterr().err


# -- configuration errors at begin ----------------------------------------------------------------


@pytest.mark.parametrize("options, message", ENGINE_CONFIGURATIONS)
def test_configuration_errors_name_the_problem(spark, db, options, message):
    """The refusals of unit/test_engine_options.py, through a merge: raised in begin, before anything
    is written."""
    t = f"{db}.cfg"
    spark.sql(f"CREATE TABLE {t} (k INT, v STRING, n INT, ts INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 1, 1)")
    before = snapshot(spark, t)
    if message is None:  # aggregation gives every field a function (last_non_null_value): allowed
        engine_merge(spark, t, "k, v, n, ts", ["(1, 'b', 2, 2)"], primary_key="k", **options)
        assert rows(spark, t) == [(1, "b", 2, 2)]
        return
    with pytest.raises(ValidationError, match=message):
        engine_merge(spark, t, "k, v, n, ts", ["(1, 'b', 2, 2)"], primary_key="k", **options)
    assert snapshot(spark, t) == before


@pytest.fixture
def three_files(spark, db):
    """Paimon's partial-update example as a parquet table of three files, one record each: by path
    (a, b, c) the records come in Paimon's order; by size (Spark packs files into tasks largest
    first) they come b, c, a."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = f"{db}.src"
    spark.sql(f"CREATE TABLE {src} (k INT, a DOUBLE, b INT, c STRING) USING parquet")
    where = Path(location(spark, src).removeprefix("file:"))
    schema = pa.schema([("k", pa.int32()), ("a", pa.float64()), ("b", pa.int32()), ("c", pa.string())])
    for name, (a, b, c), pad in [
        ("a", (23.0, 10, None), 0),
        ("b", (None, None, "This is a book"), 4000),
        ("c", (25.2, None, None), 1000),
    ]:
        data = pa.table({"k": [1], "a": [a], "b": [b], "c": [c]}, schema=schema)
        pq.write_table(data.replace_schema_metadata({"pad": "x" * pad}), where / f"part-{name}.parquet")
    sizes = {p.name: p.stat().st_size for p in where.glob("part-*")}
    assert sizes["part-b.parquet"] > sizes["part-c.parquet"] > sizes["part-a.parquet"]
    spark.sql(f"REFRESH TABLE {src}")
    return src


def test_input_order_is_the_source_tables_files_and_rows_whatever_order_spark_reads_them(spark, db, three_files):
    """Folded in Spark's scan order the one batch gave 23.0, not Paimon's 25.2: the order of a
    several-file source is whatever order Spark reads it in. A table source's order is its files'
    paths, then row positions: the same result however Spark splits it into tasks."""
    results = []
    for n, split in enumerate(["64", str(128 << 20)]):  # a task per 64 bytes of each file, or one task
        t = f"{db}.t{n}"
        spark.sql(f"CREATE TABLE {t} (k INT, a DOUBLE, b INT, c STRING) USING parquet")
        spark.conf.set("spark.sql.files.maxPartitionBytes", split)
        try:
            engine = merge(spark, {"target": t, "source": three_files}, merge_engine="partial-update", primary_key="k")
        finally:
            spark.conf.unset("spark.sql.files.maxPartitionBytes")
        assert engine.metrics["numTargetRowsInserted"] == 1
        results.append(rows(spark, t))
    assert results[0] == results[1] == [(1, 25.2, 10, "This is a book")]


def test_a_query_source_with_a_repeated_key_needs_a_sequence_field(spark, db, three_files):
    """A query keeps no row order Spark will repeat: a key repeated in its batch, with nothing that
    orders its records, is refused (naming the key) rather than folded in an order of the day."""
    t = f"{db}.t"
    spark.sql(f"CREATE TABLE {t} (k INT, a DOUBLE, b INT, c STRING) USING parquet")
    with pytest.raises(
        EngineRejected,
        match=r"a key repeats in this batch with records that differ.*sequence_field.*\(key \{\"k\":1\}\)",
    ):
        merge(
            spark,
            {"target": t, "source": f"SELECT * FROM {three_files} WHERE k > 0"},
            merge_engine="partial-update",
            primary_key="k",
        )
    assert rows(spark, t) == []
    merge(
        spark,
        {"target": t, "source": f"SELECT * FROM {three_files} WHERE k > 0"},
        merge_engine="deduplicate",
        primary_key="k",
        sequence_field="a",
    )  # the sequence tells the records apart: the largest wins
    assert rows(spark, t) == [(1, 25.2, None, None)]
    # an order-insensitive fold needs no order: sums and maxima of a repeated key, from a query
    totals = f"{db}.totals"
    spark.sql(f"CREATE TABLE {totals} (k INT, a DOUBLE, b INT) USING parquet")
    merge(
        spark,
        {"target": totals, "source": f"SELECT k, a, b FROM {three_files} WHERE k > 0"},
        merge_engine="aggregation",
        primary_key="k",
        aggregate_function={"a": "sum", "b": "max"},
    )
    assert rows(spark, totals) == [(1, 48.2, 10)]
