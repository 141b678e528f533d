"""CHAR(n) and VARCHAR(n) columns: what spark-merge stores and refuses is what Spark's own INSERT does.

Spark computes such columns as strings and applies the declared length where it writes: a longer
value is refused with EXCEED_LIMIT_LENGTH unless dropping trailing spaces beyond n makes it fit, and a
CHAR value is padded to n when read. spark-merge rewrites partitions through a staging table of plain
strings, so it must apply the same rule itself (changes_sql), while planning, before any write.
"""

from __future__ import annotations

import pytest

from merge_core import LengthViolation, ValidationError, merge, merge_into

from .conftest import snapshot

SCHEMA = "id INT, c CHAR(5), v VARCHAR(3), dt STRING"
# every kind of value the rule distinguishes: short, exact, NULL, empty, too long only by trailing
# spaces (stored trimmed), too long (refused); for CHAR(5) and VARCHAR(3)
VALUES = ["ab", "abc", None, "", "xyz   ", "abcd", "abcdefg", "ab    c", "abcde  "]


@pytest.fixture
def tables(spark, db):
    """t (spark-merge's target) and twin (written by Spark's INSERT), both partitioned by dt, two rows each."""
    out = []
    for name in ("t", "twin"):
        spark.sql(f"CREATE TABLE {db}.{name} ({SCHEMA}) USING parquet PARTITIONED BY (dt)")
        spark.sql(f"INSERT INTO {db}.{name} VALUES (1, 'a', 'a', 'd1'), (2, 'b', 'b', 'd2')")
        out.append(f"{db}.{name}")
    return out


def _lit(value):
    return "NULL" if value is None else "'" + value + "'"


def _spark_insert(spark, twin, id_, col, value):
    """Spark's own verdict and stored value: INSERT the value into the twin."""
    other = "v" if col == "c" else "c"
    try:
        spark.sql(f"INSERT INTO {twin} (id, {col}, {other}, dt) VALUES ({id_}, {_lit(value)}, 'q', 'd1')")
    except Exception as e:  # noqa: BLE001 - the verdict is the error class
        assert "EXCEED_LIMIT_LENGTH" in str(e), e
        return "refused"
    return "stored"


def _spark_verdict(spark, insert: str) -> str:
    """Spark's own verdict on an INSERT: stored, or refused with EXCEED_LIMIT_LENGTH."""
    try:
        spark.sql(insert)
    except Exception as e:  # noqa: BLE001 - the verdict is the error class
        assert "EXCEED_LIMIT_LENGTH" in str(e), e
        return "refused"
    return "stored"


def _rows(spark, table):
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, c, v, dt, length(c), length(v) FROM {table}").collect())


@pytest.mark.extended  # CI: the update, builder and partition-column cases below
@pytest.mark.parametrize("col", ["c", "v"])
def test_insert_and_update_store_or_refuse_exactly_as_spark(spark, tables, col):
    """Each value through spark-merge's MERGE (insert and update) and UPDATE, beside Spark's INSERT into
    a twin: the same verdict, and after all statements the same rows (CHAR padded on read)."""
    t, twin = tables
    other = "v" if col == "c" else "c"
    refused = 0
    for i, value in enumerate(VALUES):
        new_id = 100 + i
        verdict = _spark_insert(spark, twin, new_id, col, value)
        before = snapshot(spark, t)
        statements = [
            f"MERGE INTO {t} AS t USING (SELECT {new_id} AS id, {_lit(value)} AS x) AS s ON t.id = s.id "
            f"WHEN NOT MATCHED THEN INSERT (id, {col}, {other}, dt) VALUES (s.id, s.x, 'q', 'd1')",
        ]
        if verdict == "refused":
            refused += 1
            for statement in statements + [
                f"UPDATE {t} SET {col} = {_lit(value)} WHERE id = 1",
                f"MERGE INTO {t} AS t USING (SELECT 2 AS id) AS s ON t.id = s.id "
                f"WHEN MATCHED THEN UPDATE SET {col} = {_lit(value)}",
            ]:
                with pytest.raises(LengthViolation, match=rf"MERGE_EXCEED_LIMIT_LENGTH: .* column {col} "):
                    merge(spark, statement, duplicate_rule="strict")
                assert snapshot(spark, t) == before  # nothing written
        else:
            merge(spark, statements[0], duplicate_rule="strict")
    assert refused == {"c": 2, "v": 4}[col]  # CHAR(5): abcdefg, ab    c; VARCHAR(3): and abcd, abcde
    assert _rows(spark, t) == _rows(spark, twin)


def test_an_update_stores_the_trimmed_value_and_a_nondeterministic_value_is_checked_once(spark, tables):
    """UPDATE through the rewrite: 'xyz   ' into VARCHAR(3) is stored as 'xyz' (Spark trims the spaces
    beyond the limit). A value drawn by rand() is checked and stored as one value: each run either
    stores 'pq ' in both rows or refuses with nothing written, never stores 'toolong'."""
    t, twin = tables
    merge(spark, f"UPDATE {t} SET v = 'xyz   ' WHERE id = 1")
    spark.sql(f"INSERT OVERWRITE {twin} VALUES (1, 'a', 'xyz   ', 'd1'), (2, 'b', 'b', 'd2')")
    assert _rows(spark, t) == _rows(spark, twin)
    outcomes = set()
    for _ in range(4):
        before = snapshot(spark, t)
        try:
            merge(spark, f"UPDATE {t} SET v = CASE WHEN rand() < 0.7 THEN 'pq  ' ELSE 'toolong' END, c = 'e'")
        except LengthViolation:
            assert snapshot(spark, t) == before
            outcomes.add("refused")
            continue
        assert {(r.c, r.v) for r in spark.table(t).collect()} == {("e    ", "pq ")}
        outcomes.add("stored")


def test_the_dataframe_builder_and_the_insert_only_path_refuse_too(spark, tables):
    t, _ = tables
    before = snapshot(spark, t)
    source = spark.createDataFrame([(3, "toolong")], "id INT, x STRING")
    with pytest.raises(LengthViolation, match="column v VARCHAR\\(3\\)"):
        (
            merge_into(source, t, "t.id = source.id")
            .whenNotMatched()
            .insert({"id": "source.id", "v": "source.x", "dt": "'d9'"})
            .merge()
        )
    with pytest.raises(LengthViolation, match="column c CHAR\\(5\\)"):
        merge(
            spark,
            f"MERGE INTO {t} AS t USING (SELECT 4 AS id) AS s ON t.id = s.id "
            f"WHEN NOT MATCHED THEN INSERT (id, c, dt) VALUES (s.id, 'toolong', 'd9')",
        )
    assert snapshot(spark, t) == before


@pytest.mark.extended  # CI: CHAR/VARCHAR data columns (the tests above); partition columns in make test-all
@pytest.mark.parametrize("kind", ["CHAR(4)", "VARCHAR(3)"])
def test_a_char_or_varchar_partition_column_is_stored_or_refused_as_spark(spark, db, kind):
    """The partition column declared CHAR/VARCHAR: each value inserted by a MERGE, and rows moved
    between partitions by an UPDATE, against a twin Spark writes itself (INSERT for the verdict,
    INSERT OVERWRITE for the moved rows): the same verdicts, the same rows and partitions."""
    t, twin = f"{db}.pt", f"{db}.ptwin"
    for name in (t, twin):
        spark.sql(f"CREATE TABLE {name} (id INT, v STRING, p {kind}) USING parquet PARTITIONED BY (p)")
        spark.sql(f"INSERT INTO {name} VALUES (1, 'a', 'x'), (2, 'b', 'y')")
    refused = 0
    for i, value in enumerate(["ab", "abc", None, "", "xy   ", "abcd", "abcdefg"]):
        new_id = 100 + i
        verdict = _spark_verdict(spark, f"INSERT INTO {twin} VALUES ({new_id}, 'n', {_lit(value)})")
        before = snapshot(spark, t)
        statement = (
            f"MERGE INTO {t} AS t USING (SELECT {new_id} AS id, {_lit(value)} AS x) AS s ON t.id = s.id "
            "WHEN NOT MATCHED THEN INSERT (id, v, p) VALUES (s.id, 'n', s.x)"
        )
        if verdict == "refused":
            refused += 1
            with pytest.raises(LengthViolation, match=r"MERGE_EXCEED_LIMIT_LENGTH: .* column p "):
                merge(spark, statement)
            assert snapshot(spark, t) == before
        else:
            merge(spark, statement)
    assert refused == {"CHAR(4)": 1, "VARCHAR(3)": 2}[kind]  # abcdefg; and abcd
    # an UPDATE that moves rows into other partitions, one value short, one trimmed to fit: for a
    # VARCHAR that leaves a trailing space, which the metastore would drop from the partition's name
    statement = (
        f"MERGE INTO {t} AS t USING (SELECT * FROM VALUES (1, 'z'), (2, 'ab   ') AS s(id, x)) AS s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET p = s.x"
    )
    moved = {1: "z", 2: "ab   "}
    if kind.startswith("VARCHAR"):
        before = snapshot(spark, t)
        with pytest.raises(ValidationError, match=r'partition p = "ab " .* ends with a space'):
            merge(spark, statement)
        assert snapshot(spark, t) == before
        statement, moved = statement.replace(", (2, 'ab   ')", ""), {1: "z"}
    r = merge(spark, statement)
    assert r.metrics["numTargetRowsUpdated"] == len(moved)
    rows = [f"({r.id}, {_lit(r.v)}, {_lit(moved.get(r.id, r.p))})" for r in spark.table(twin).collect()]
    spark.sql(f"INSERT OVERWRITE TABLE {twin} VALUES {', '.join(rows)}")
    query = "SELECT id, v, p, length(p) FROM {}"
    assert sorted(map(tuple, spark.sql(query.format(t)).collect())) == sorted(
        map(tuple, spark.sql(query.format(twin)).collect())
    )
    parts = "SELECT DISTINCT p, length(p) FROM {}"
    assert sorted(map(tuple, spark.sql(parts.format(t)).collect()), key=str) == sorted(
        map(tuple, spark.sql(parts.format(twin)).collect()), key=str
    )


NESTED = "id INT, st STRUCT<a: VARCHAR(3), c: CHAR(4), ok: STRUCT<z: CHAR(2)>>, arr ARRAY<VARCHAR(2)>, m MAP<CHAR(2), CHAR(2)>"
# one row's values each: fits (CHAR padded), too long only by trailing spaces (trimmed), NULLs;
# then one too-long string per place: a struct field, a nested struct's, an array element, a map key
# and value
NESTED_VALUES = [
    "named_struct('a', 'ab', 'c', 'x', 'ok', named_struct('z', 'q')), array('ab', NULL), map('k', 'y')",
    "named_struct('a', 'abc   ', 'c', NULL, 'ok', NULL), array('a '), map('kk', 'yy  ')",
    "NULL, NULL, NULL",
    "named_struct('a', 'abcd', 'c', 'x', 'ok', NULL), array('ab'), map('k', 'y')",
    "named_struct('a', 'ab', 'c', 'x', 'ok', named_struct('z', 'qqq')), array('ab'), map('k', 'y')",
    "named_struct('a', 'ab', 'c', 'x', 'ok', NULL), array('abc'), map('k', 'y')",
    "named_struct('a', 'ab', 'c', 'x', 'ok', NULL), array('ab'), map('kkk', 'y')",
    "named_struct('a', 'ab', 'c', 'x', 'ok', NULL), array('ab'), map('k', 'yyy')",
]


@pytest.mark.extended  # CI: the top-level columns; nested fields in test_nested_fields.py
def test_char_and_varchar_inside_structs_arrays_and_maps_as_spark(spark, db):
    """Spark checks the length of a CHAR/VARCHAR inside a struct, array or map too, and stores a nested
    CHAR padded: each value through a MERGE that updates a row (the rewrite) beside Spark's INSERT into
    a twin, the same verdict and, at the end, the same rows."""
    t, twin = f"{db}.nested_t", f"{db}.nested_twin"
    for name in (t, twin):
        spark.sql(f"CREATE TABLE {name} ({NESTED}) USING parquet")
    spark.sql(f"INSERT INTO {t} SELECT id, NULL, NULL, NULL FROM range(8) AS r(id)")
    verdicts = []
    for i, value in enumerate(NESTED_VALUES):
        spark_verdict = _spark_verdict(spark, f"INSERT INTO {twin} VALUES ({i}, {value})")
        before = snapshot(spark, t)
        try:
            merge(
                spark,
                f"MERGE INTO {t} AS t USING (SELECT {i} AS id, {value}) AS s(id, st, arr, m) ON t.id = s.id "
                f"WHEN MATCHED THEN UPDATE SET *",
            )
            ours = "stored"
        except LengthViolation:
            ours = "refused"
            assert snapshot(spark, t) == before
        verdicts.append((spark_verdict, ours))
    assert verdicts == [("stored", "stored")] * 3 + [("refused", "refused")] * 5
    got = sorted(map(str, spark.sql(f"SELECT * FROM {t} WHERE id < 3").collect()))
    assert got == sorted(map(str, spark.table(twin).collect()))
    assert spark.sql(f"SELECT length(st.c), length(st.ok.z), m['k '] FROM {t} WHERE id = 0").collect()[0] == (
        4,
        2,
        "y ",
    )
