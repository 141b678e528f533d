"""Schema evolution: Spark 4's `MERGE WITH SCHEMA EVOLUTION INTO`, the option schema_evolution and the
DataFrame builder's withSchemaEvolution(): UPDATE SET * and INSERT * add the source columns the target
lacks; a target column the source lacks is kept by UPDATE SET * and NULL after INSERT *."""
from __future__ import annotations

import pytest
from pyspark.sql import Row

from merge_core import MergeError, explain, merge, merge_into

from .conftest import snapshot

STAR = ("MERGE {evolve}INTO {t} AS t USING {s} AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


@pytest.fixture
def tables(spark, db):
    """t(id, v, note, p) partitioned by p; src(id, v, p, extra): no `note`, a new `extra`."""
    t, s = f"{db}.t", f"{db}.src"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, note STRING, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 'n1', 1), (2, 'b', 'n2', 1), (3, 'c', 'n3', 2)")
    spark.sql(f"CREATE TABLE {s} USING parquet AS SELECT * FROM VALUES (1, 'A', 1, 10L), (4, 'D', 2, 40L) "
              f"AS x(id, v, p, extra)")
    return t, s


def columns(spark, t):
    return [(f.name, f.dataType.simpleString()) for f in spark.table(t).schema.fields]


def test_merge_with_schema_evolution_adds_the_source_columns(spark, tables):
    t, s = tables
    r = merge(spark, STAR.format(evolve="WITH SCHEMA EVOLUTION ", t=t, s=s))
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (1, 1)
    assert ("extra", "bigint") in columns(spark, t)
    got = {row.id: row for row in spark.table(t).collect()}
    assert got[1] == Row(id=1, v="A", note="n1", extra=10, p=1)      # note kept by UPDATE SET *
    assert got[4] == Row(id=4, v="D", note=None, extra=40, p=2)      # note NULL after INSERT *
    assert got[2].extra is None and got[3].extra is None              # rows the merge did not touch


def test_without_it_the_star_needs_every_target_column_and_nothing_changes(spark, tables):
    t, s = tables
    before, schema = snapshot(spark, t), columns(spark, t)
    with pytest.raises(MergeError, match="note"):
        merge(spark, STAR.format(evolve="", t=t, s=s))
    assert (snapshot(spark, t), columns(spark, t)) == (before, schema)


def test_explain_shows_the_columns_a_dry_run_refuses_and_an_invalid_statement_adds_none(spark, tables):
    t, s = tables
    schema = columns(spark, t)
    plan = explain(spark, STAR.format(evolve="", t=t, s=s), schema_evolution=True)
    assert "ADD COLUMNS (`extra` bigint)" in plan
    with pytest.raises(MergeError, match="a dry run's plan reads them"):
        merge(spark, STAR.format(evolve="WITH SCHEMA EVOLUTION ", t=t, s=s), dry_run=True)
    bad = (f"MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING {s} AS s ON t.id = s.id "
           f"WHEN MATCHED AND s.extra THEN DELETE WHEN NOT MATCHED THEN INSERT *")
    with pytest.raises(MergeError, match="must be a boolean condition"):
        merge(spark, bad)
    assert columns(spark, t) == schema


def test_the_option_and_the_dataframe_builder(spark, tables, db):
    t, s = tables
    merge(spark, {"target": t, "source": s, "on": "t.id = s.id", "target_alias": "t", "source_alias": "s",
                  "clauses": [{"when": "not_matched", "action": "insert", "star": True}]}, schema_evolution=True)
    assert spark.sql(f"SELECT extra FROM {t} WHERE id = 4").collect()[0][0] == 40
    wider = spark.createDataFrame([(2, "B", 1, 20, "x")], "id INT, v STRING, p INT, extra BIGINT, more STRING")
    merge_into(wider, t, "t.id = source.id").whenMatched().updateAll().withSchemaEvolution().merge()
    assert spark.sql(f"SELECT v, note, extra, more FROM {t} WHERE id = 2").collect()[0] == Row(v="B", note="n2", extra=20, more="x")


def test_what_schema_evolution_does_not_do(spark, tables, db):
    t, s = tables
    schema = columns(spark, t)
    # no star: explicit assignments name existing columns only, and nothing is added
    merge(spark, f"MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING {s} AS s ON t.id = s.id "
                 f"WHEN MATCHED THEN UPDATE SET v = s.v")
    assert columns(spark, t) == schema
    # a bare NULL has no type to give the new column
    spark.sql(f"CREATE TABLE {db}.nulls USING parquet AS SELECT 1 AS id, 'z' AS v, 1 AS p, NULL AS unknown")
    with pytest.raises(MergeError, match="source column unknown has no type"):
        merge(spark, STAR.format(evolve="WITH SCHEMA EVOLUTION ", t=t, s=f"{db}.nulls"))
    assert columns(spark, t) == schema
