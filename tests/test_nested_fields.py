"""Struct fields, arrays and maps: Spark's `SET s.c1 = ...` and its store-assignment rules for nested types.

Spark (AssignmentUtils) rebuilds a struct whose fields are assigned with named_struct: each field
takes its assigned value or its old one, so assigning a field of a NULL struct gives a struct whose
other fields are NULL. Whole and field assignments of one column conflict; only struct fields can be
assigned; an INSERT column cannot be a field.
"""

from __future__ import annotations

import pytest
from pyspark.sql import Row

from merge_core import MergeError, merge, merge_into

from .conftest import snapshot

SCHEMA = "id INT, s STRUCT<c1: INT, c2: STRUCT<a: ARRAY<INT>, m: MAP<STRING, STRING>>>, tags ARRAY<STRING>"


@pytest.fixture
def nested(spark, db):
    """t: one full struct (1), one NULL struct (2); src(id, v): 1 and 2 match, 3 is new."""
    t = f"{db}.t"
    spark.sql(f"CREATE TABLE {t} ({SCHEMA}) USING parquet")
    spark.sql(
        f"INSERT INTO {t} VALUES (1, named_struct('c1', 1, 'c2', named_struct('a', array(1), 'm', map('k', 'v'))), "
        f"array('x')), (2, NULL, NULL)"
    )
    spark.sql(f"CREATE TABLE {db}.src (id INT, v INT) USING parquet")
    spark.sql(f"INSERT INTO {db}.src VALUES (1, 10), (2, 20), (3, 30)")
    return t, f"{db}.src"


def read(spark, t):
    return {r.id: r for r in spark.table(t).collect()}


def test_merge_assigns_struct_fields_and_inserts_structs_with_null_fields(spark, nested):
    t, src = nested
    merge(
        spark,
        f"MERGE INTO {t} AS t USING {src} AS s ON t.id = s.id "
        f"WHEN MATCHED THEN UPDATE SET s.c1 = s.v, s.c2.m = map('a', 'b') "
        f"WHEN NOT MATCHED THEN INSERT (id, s) VALUES (s.id, named_struct('c1', s.v, 'c2', "
        f"named_struct('a', NULL, 'm', NULL)))",
        duplicate_rule="strict",
    )
    got = read(spark, t)
    # the untouched field keeps its value; `tags` is not assigned at all
    assert got[1] == Row(id=1, s=Row(c1=10, c2=Row(a=[1], m={"a": "b"})), tags=["x"])
    # a field of a NULL struct: the struct now exists, its other fields NULL (Spark's rule)
    assert got[2] == Row(id=2, s=Row(c1=20, c2=Row(a=None, m={"a": "b"})), tags=None)
    # named_struct('a', NULL, 'm', NULL) is stored (void fields take the column's types)
    assert got[3] == Row(id=3, s=Row(c1=30, c2=Row(a=None, m=None)), tags=None)


def test_update_assigns_a_deep_field_qualified_or_not(spark, nested):
    t, _ = nested
    merge(spark, f"UPDATE {t} AS t SET t.s.c2.a = array(7, NULL), tags = array('y', NULL) WHERE id = 1")
    merge(spark, f"UPDATE {t} SET s.c2 = named_struct('a', NULL, 'm', map('z', NULL)) WHERE id = 2")
    got = read(spark, t)
    assert got[1] == Row(id=1, s=Row(c1=1, c2=Row(a=[7, None], m={"k": "v"})), tags=["y", None])
    assert got[2] == Row(id=2, s=Row(c1=None, c2=Row(a=None, m={"z": None})), tags=None)


def test_dataframe_builder_assigns_a_field(spark, nested):
    t, src = nested
    (
        merge_into(spark.table(src), t, "t.id = source.id")
        .whenMatched("source.id = 1")
        .update({"s.c1": "source.v + 1"})
        .merge()
    )
    assert read(spark, t)[1].s.c1 == 11


@pytest.mark.parametrize(
    "statement, message",
    [
        ("UPDATE {t} SET s.c1 = 1, s = NULL", "column s is assigned whole and by field"),
        ("UPDATE {t} SET s.c2.a = array(1), s.c2 = NULL", "field s.c2 is assigned more than once"),
        ("UPDATE {t} SET s.x = 1", r"SET s.x: struct s has no field x \(it has: c1, c2\)"),
        (
            "UPDATE {t} SET tags.x = 1",
            "SET tags.x: only struct fields can be assigned, and tags has type array<string>",
        ),
        ("UPDATE {t} SET s.c1.z = 1", "SET s.c1.z: only struct fields can be assigned, and s.c1 has type int"),
        ("UPDATE {t} SET q.c1 = 1", "SET assigns unknown column q.c1"),
        (
            "MERGE INTO {t} AS t USING {src} AS s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, s.c1) VALUES (s.id, 1)",
            r"an INSERT column cannot be a nested field \(s.c1\)",
        ),
        # store assignment, field by field: a string is not stored in an INT field, a struct of another shape nowhere
        (
            "UPDATE {t} SET s = named_struct('x', 'str', 'y', NULL)",
            "cannot store a value of type struct<x:string,y:void>",
        ),
        ("UPDATE {t} SET s = named_struct('x', 5)", "cannot store a value of type struct<x:int>"),
        ("UPDATE {t} SET s.c2.m = map('k', array(1))", "cannot store a value of type struct<"),
    ],
)
def test_refused_before_anything_is_written(spark, nested, statement, message):
    t, src = nested
    before = snapshot(spark, t)
    with pytest.raises(MergeError, match=message):
        merge(spark, statement.format(t=t, src=src))
    assert snapshot(spark, t) == before


def test_a_not_null_struct_field_is_enforced_where_its_struct_exists(spark, nested):
    """spark_merge.not_null may list struct fields (parquet keeps no nested NOT NULL): NULL in s.c1 is refused
    while s exists, as in Spark, and a NULL struct is not a violation; the insert-only path checks it too."""
    t, src = nested
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.not_null' = 's.c1,s.c2.a')")
    before = snapshot(spark, t)
    for statement in (
        f"UPDATE {t} SET s.c1 = NULL WHERE id = 1",
        f"UPDATE {t} SET s.c2.a = NULL WHERE id = 1",
        f"MERGE INTO {t} AS t USING {src} AS s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, s) "
        f"VALUES (s.id, named_struct('c1', CAST(NULL AS INT), 'c2', named_struct('a', array(1), 'm', NULL)))",
    ):
        with pytest.raises(MergeError, match=r"MERGE_NOT_NULL_VIOLATION: .* NOT NULL field s\.c"):
            merge(spark, statement)
        assert snapshot(spark, t) == before
    merge(spark, f"UPDATE {t} SET s = NULL WHERE id = 1")  # no struct, no field to be NULL
    merge(spark, f"UPDATE {t} SET s.c1 = 5 WHERE id = 2")  # c2 becomes a struct-less NULL: fine
    got = read(spark, t)
    assert (got[1].s, got[2].s) == (None, Row(c1=5, c2=None))
