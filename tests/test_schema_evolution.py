"""Schema evolution: Spark 4's `MERGE WITH SCHEMA EVOLUTION INTO`, the option schema_evolution and the
DataFrame builder's withSchemaEvolution(): UPDATE SET * and INSERT * add the source columns the target
lacks; a target column the source lacks is kept by UPDATE SET * and NULL after INSERT *."""

from __future__ import annotations

import pytest
from pyspark.sql import Row

from merge_core import MergeError, explain, merge, merge_into

from .conftest import snapshot

STAR = (
    "MERGE {evolve}INTO {t} AS t USING {s} AS s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
)


@pytest.fixture
def tables(spark, db):
    """t(id, v, note, p) partitioned by p; src(id, v, p, extra): no `note`, a new `extra`."""
    t, s = f"{db}.t", f"{db}.src"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, note STRING, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 'n1', 1), (2, 'b', 'n2', 1), (3, 'c', 'n3', 2)")
    spark.sql(
        f"CREATE TABLE {s} USING parquet AS SELECT * FROM VALUES (1, 'A', 1, 10L), (4, 'D', 2, 40L) "
        f"AS x(id, v, p, extra)"
    )
    return t, s


def columns(spark, t):
    return [(f.name, f.dataType.simpleString()) for f in spark.table(t).schema.fields]


def test_merge_with_schema_evolution_adds_the_source_columns(spark, tables):
    t, s = tables
    r = merge(spark, STAR.format(evolve="WITH SCHEMA EVOLUTION ", t=t, s=s))
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (1, 1)
    assert ("extra", "bigint") in columns(spark, t)
    got = {row.id: row for row in spark.table(t).collect()}
    assert got[1] == Row(id=1, v="A", note="n1", extra=10, p=1)  # note kept by UPDATE SET *
    assert got[4] == Row(id=4, v="D", note=None, extra=40, p=2)  # note NULL after INSERT *
    assert got[2].extra is None and got[3].extra is None  # rows the merge did not touch


def test_without_it_the_star_needs_every_target_column_and_nothing_changes(spark, tables):
    t, s = tables
    before, schema = snapshot(spark, t), columns(spark, t)
    with pytest.raises(MergeError, match="note"):
        merge(spark, STAR.format(evolve="", t=t, s=s))
    assert (snapshot(spark, t), columns(spark, t)) == (before, schema)


def test_explain_shows_the_columns_a_dry_run_refuses_and_an_invalid_statement_adds_none(spark, tables):
    t, s = tables
    schema = columns(spark, t)
    plan = explain(spark, STAR.format(evolve="", t=t, s=s), schema_evolution=True, verbose=True)
    assert "ADD COLUMNS (`extra` bigint)" in plan
    with pytest.raises(MergeError, match="a dry run's plan reads them"):
        merge(spark, STAR.format(evolve="WITH SCHEMA EVOLUTION ", t=t, s=s), dry_run=True)
    bad = (
        f"MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING {s} AS s ON t.id = s.id "
        f"WHEN MATCHED AND s.extra THEN DELETE WHEN NOT MATCHED THEN INSERT *"
    )
    with pytest.raises(MergeError, match="must be a boolean condition"):
        merge(spark, bad)
    assert columns(spark, t) == schema


def test_the_option_and_the_dataframe_builder(spark, tables, db):
    t, s = tables
    merge(
        spark,
        {
            "target": t,
            "source": s,
            "on": "t.id = s.id",
            "target_alias": "t",
            "source_alias": "s",
            "clauses": [{"when": "not_matched", "action": "insert", "star": True}],
        },
        schema_evolution=True,
    )
    assert spark.sql(f"SELECT extra FROM {t} WHERE id = 4").collect()[0][0] == 40
    wider = spark.createDataFrame([(2, "B", 1, 20, "x")], "id INT, v STRING, p INT, extra BIGINT, more STRING")
    merge_into(wider, t, "t.id = source.id").whenMatched().updateAll().withSchemaEvolution().merge()
    assert spark.sql(f"SELECT v, note, extra, more FROM {t} WHERE id = 2").collect()[0] == Row(
        v="B", note="n2", extra=20, more="x"
    )


def test_what_schema_evolution_does_not_do(spark, tables, db):
    t, s = tables
    schema = columns(spark, t)
    # no star: explicit assignments name existing columns only, and nothing is added
    merge(
        spark,
        f"MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING {s} AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
    )
    assert columns(spark, t) == schema
    # a bare NULL has no type to give the new column
    spark.sql(f"CREATE TABLE {db}.nulls USING parquet AS SELECT 1 AS id, 'z' AS v, 1 AS p, NULL AS unknown")
    with pytest.raises(MergeError, match="source column unknown has no type"):
        merge(spark, STAR.format(evolve="WITH SCHEMA EVOLUTION ", t=t, s=f"{db}.nulls"))
    assert columns(spark, t) == schema


def test_a_direct_assignment_adds_its_column_and_a_condition_may_read_it(spark, tables, db):
    """Spark 4's rule: SET c = s.c and INSERT (c) VALUES (s.c) add c; an expression over the source
    (s.c + 1) or another column (SET v = s.more) adds nothing. A WHEN condition may read the new
    column, which is NULL in every existing row."""
    t, _ = tables
    src = f"{db}.src_more"
    spark.sql(
        f"CREATE TABLE {src} USING parquet AS SELECT * FROM VALUES (1, 'A', 1, true, 'm1', 5), "
        f"(2, 'B', 1, false, 'm2', 6), (7, 'G', 2, true, 'm7', 7) AS x(id, v, p, active, more, bump)"
    )
    merge(
        spark,
        f"MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING {src} AS s ON t.id = s.id "
        f"WHEN MATCHED AND s.id = 1 AND t.active IS NULL THEN UPDATE SET v = s.more, active = s.active "
        f"WHEN MATCHED THEN UPDATE SET note = s.more "
        f"WHEN NOT MATCHED THEN INSERT (id, v, p, active) VALUES (s.id, s.v, s.p, s.active)",
    )
    assert columns(spark, t) == [
        ("id", "int"),
        ("v", "string"),
        ("note", "string"),
        ("active", "boolean"),
        ("p", "int"),
    ]
    got = {row.id: row for row in spark.table(t).collect()}
    assert got[1] == Row(id=1, v="m1", note="n1", active=True, p=1)
    assert got[2] == Row(id=2, v="b", note="m2", active=None, p=1)
    assert got[7] == Row(id=7, v="G", note=None, active=True, p=2)
    # an expression is not a direct assignment: bump is not added, and the INSERT names a column
    # the table lacks; nor is anything added without WITH SCHEMA EVOLUTION
    schema = columns(spark, t)
    with pytest.raises(MergeError, match="INSERT names unknown column bump"):
        merge(
            spark,
            f"MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING {src} AS s ON t.id = s.id "
            f"WHEN NOT MATCHED THEN INSERT (id, v, p, bump) VALUES (s.id, s.v, s.p, s.bump + 1)",
        )
    assert columns(spark, t) == schema
    spark.sql(f"CREATE TABLE {db}.src_new USING parquet AS SELECT 1 AS id, 'z' AS new_col")
    with pytest.raises(MergeError, match="unknown column new_col"):
        merge(
            spark,
            f"MERGE INTO {t} AS t USING {db}.src_new AS s ON t.id = s.id "
            f"WHEN MATCHED THEN UPDATE SET new_col = s.new_col",
        )


def test_struct_columns_fill_missing_fields_and_refuse_new_ones(spark, db):
    """A directly assigned source struct with fewer fields than its column is stored as Spark stores it
    under schema evolution (fields matched by name): an INSERT stores the missing fields NULL and a
    NULL struct as NULL; an UPDATE assigns the fields the source has and keeps the target's value of
    the others, a NULL source struct giving NULL to the fields it has; inside an array the missing
    fields are NULL either way. Without schema evolution the narrower struct is refused. A source
    struct with a field the column lacks is refused before anything is added, since a parquet table
    in Spark's catalog cannot take a field inside a struct (Spark refuses ADD COLUMNS (st.f))."""
    t = f"{db}.nested"
    spark.sql(
        f"CREATE TABLE {t} (id INT, st STRUCT<a: INT, b: STRING, c: STRUCT<x: INT, y: INT>>, "
        f"arr ARRAY<STRUCT<c1: INT, c2: STRING>>) USING parquet"
    )
    spark.sql(
        f"INSERT INTO {t} VALUES (1, named_struct('a', 1, 'b', 'one', 'c', named_struct('x', 1, 'y', 1)), "
        f"array(named_struct('c1', 1, 'c2', 'p'))), "
        f"(2, named_struct('a', 2, 'b', 'two', 'c', named_struct('x', 2, 'y', 2)), NULL)"
    )
    narrow = f"{db}.narrow"
    spark.sql(
        f"CREATE TABLE {narrow} USING parquet AS SELECT * FROM VALUES "
        f"(1, named_struct('c', named_struct('y', 9), 'a', 10), array(named_struct('c1', 7)), 'x1'), "
        f"(2, CAST(NULL AS STRUCT<c: STRUCT<y: INT>, a: INT>), array(named_struct('c1', 8)), 'x2'), "
        f"(5, named_struct('c', named_struct('y', 5), 'a', 50), NULL, 'x5') AS x(id, st, arr, tag)"
    )
    star = (
        f"MERGE {{evolve}}INTO {t} AS t USING {narrow} AS s ON t.id = s.id "
        f"WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    before = snapshot(spark, t)
    with pytest.raises(MergeError, match="cannot store a value of type struct<c:struct<y:int>,a:int>"):
        merge(spark, star.format(evolve=""))
    assert snapshot(spark, t) == before
    merge(spark, star.format(evolve="WITH SCHEMA EVOLUTION "))
    got = {row.id: row for row in spark.table(t).collect()}
    assert got[1].st == Row(a=10, b="one", c=Row(x=1, y=9)) and got[1].tag == "x1"  # UPDATE keeps b, c.x
    assert got[2].st == Row(a=None, b="two", c=Row(x=2, y=None))  # NULL source struct
    assert got[5].st == Row(a=50, b=None, c=Row(x=None, y=5)) and got[5].arr is None  # INSERT: NULL
    assert got[1].arr == [Row(c1=7, c2=None)] and got[2].arr == [Row(c1=8, c2=None)]
    # an explicit INSERT (st) VALUES (s.st) is a direct assignment too
    merge(
        spark,
        f"MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING {narrow} AS s ON t.id = s.id + 10 "
        f"WHEN NOT MATCHED THEN INSERT (id, st, tag) VALUES (s.id + 10, s.st, 'direct')",
    )
    got = {row.id: row for row in spark.table(t).collect()}
    assert got[11].st == Row(a=10, b=None, c=Row(x=None, y=9)) and got[12].st is None

    wide = f"{db}.wide"
    spark.sql(
        f"CREATE TABLE {wide} USING parquet AS SELECT 1 AS id, "
        f"named_struct('a', 3, 'b', 'w', 'c', named_struct('x', 3, 'y', 3, 'z', 3)) AS st, 1 AS brand_new"
    )
    schema, before = columns(spark, t), snapshot(spark, t)
    with pytest.raises(MergeError, match=r"field\(s\) st.c.z that column st .*\(Spark refuses ALTER TABLE"):
        merge(
            spark,
            f"MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING {wide} AS s ON t.id = s.id "
            f"WHEN MATCHED THEN UPDATE SET *",
        )
    assert (columns(spark, t), snapshot(spark, t)) == (schema, before)  # brand_new was not added either


def test_a_wider_source_type_is_stored_under_store_assignment(spark, db):
    """Spark cannot change a column's type on a parquet table in its catalog (ALTER COLUMN ... TYPE:
    NOT_SUPPORTED_CHANGE_COLUMN), so Spark 4 leaves the widening out and stores the value in the
    column's type: a BIGINT that fits is stored in the INT column, one that does not fails the
    merge with Spark's overflow error, and nothing is written."""
    t, src = f"{db}.narrow_int", f"{db}.wide_int"
    spark.sql(f"CREATE TABLE {t} (id INT, n INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1), (2, 2)")
    spark.sql(f"CREATE TABLE {src} (id INT, n BIGINT) USING parquet")
    spark.sql(f"INSERT INTO {src} VALUES (1, 5)")
    stmt = f"MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING {src} AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *"
    merge(spark, stmt)
    assert columns(spark, t) == [("id", "int"), ("n", "int")]
    assert spark.sql(f"SELECT n FROM {t} WHERE id = 1").collect()[0][0] == 5
    spark.sql(f"INSERT OVERWRITE {src} VALUES (1, 3000000000)")
    before = snapshot(spark, t)
    with pytest.raises(MergeError, match="CAST_OVERFLOW|overflow"):
        merge(spark, stmt)
    assert (columns(spark, t), snapshot(spark, t)) == ([("id", "int"), ("n", "int")], before)
