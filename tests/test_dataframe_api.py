"""merge_into: PySpark 4's DataFrame.mergeInto builder, for parquet tables, on real Spark."""

from __future__ import annotations

import pytest
from pyspark.sql.functions import col, expr, lit

from merge_core import SpecError, merge_into

from .conftest import rows, snapshot


@pytest.fixture
def accounts(spark, db):
    t = f"{db}.accounts"
    spark.sql(f"CREATE TABLE {t} (id INT, amount INT, region STRING) USING parquet PARTITIONED BY (region)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 10, 'eu'), (2, 20, 'us'), (3, 30, 'eu')")
    return t


def changes(spark):
    return spark.createDataFrame(
        [(1, 5, "eu", "U"), (3, 0, "eu", "D"), (4, 40, "apac", "I")], "id INT, amount INT, region STRING, op STRING"
    )


def test_sql_text_builder(spark, accounts):
    result = (
        merge_into(changes(spark), accounts, "accounts.id = source.id")
        .whenMatched("source.op = 'D'")
        .delete()
        .whenMatched()
        .update({"amount": "accounts.amount + source.amount"})
        .whenNotMatched()
        .insert({"id": "source.id", "amount": "source.amount", "region": "source.region"})
        .merge()
    )
    m = result.metrics
    assert (m["numTargetRowsUpdated"], m["numTargetRowsDeleted"], m["numTargetRowsInserted"]) == (1, 1, 1)
    assert rows(spark, accounts) == [(1, 15, "eu"), (2, 20, "us"), (4, 40, "apac")]
    # the source's temporary view is gone with the merge
    assert not [v for v in spark.catalog.listTables() if v.name.startswith("__sm_df_")]


def test_when_not_matched_by_source(spark, accounts):
    """Spark's whenNotMatchedBySource: the target rows the DataFrame lacks (2 in 'us'); a Column condition."""
    source = changes(spark).where("op <> 'D'")  # ids 1 and 4
    result = (
        merge_into(source, accounts, col("t.id") == col("s.id"), source_alias="s", target_alias="t")
        .whenMatched()
        .update({"amount": "s.amount"})
        .whenNotMatchedBySource(col("t.region") == lit("us"))
        .update({"amount": lit(0)})
        .whenNotMatchedBySource()
        .delete()
        .merge()
    )
    m = result.metrics
    assert (m["numTargetRowsUpdated"], m["numTargetRowsDeleted"]) == (2, 1)
    assert (m["numTargetRowsNotMatchedBySourceUpdated"], m["numTargetRowsNotMatchedBySourceDeleted"]) == (1, 1)
    assert rows(spark, accounts) == [(1, 5, "eu"), (2, 0, "us")]  # 3 (eu, not in the source) deleted; 4 not inserted


def test_column_builder_with_aliases_and_all_columns(spark, accounts):
    source = changes(spark).drop("op").withColumn("amount", col("amount") * 2)
    result = (
        merge_into(source, accounts, col("t.id") == col("s.id"), source_alias="s", target_alias="t")
        .whenMatched(col("s.amount") > lit(5))
        .updateAll()
        .whenNotMatched(expr("s.region = 'apac'"))
        .insertAll()
        .merge(dry_run=True)
    )
    assert result.dry_run and (result.metrics["numTargetRowsUpdated"], result.metrics["numTargetRowsInserted"]) == (
        1,
        1,
    )
    before = snapshot(spark, accounts)
    assert snapshot(spark, accounts) == before  # the dry run wrote nothing
    (
        merge_into(source, accounts, col("t.id") == col("s.id"), source_alias="s", target_alias="t")
        .whenMatched(col("s.amount") > lit(5))
        .updateAll()
        .whenNotMatched(expr("s.region = 'apac'"))
        .insertAll()
        .merge()
    )
    assert rows(spark, accounts) == [
        (1, 10, "eu"),
        (2, 20, "us"),
        (3, 30, "eu"),
        (4, 80, "apac"),
    ]  # 1 set to 2 * 5; 3 kept (0 is not > 5)


def test_what_the_builder_refuses(spark, accounts):
    w = merge_into(changes(spark), accounts, "accounts.id = source.id")
    with pytest.raises(SpecError, match="add at least one whenMatched or whenNotMatched clause"):
        w.merge()
    with pytest.raises(SpecError, match="value for amount: give SQL text"):
        w.whenMatched().update({"amount": 5})


CONNECT_DRIVER = """
import json, sys
from pyspark.sql import SparkSession
from pyspark.sql.functions import col
from merge_core import SpecError, merge_into

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
spark.sql("CREATE DATABASE IF NOT EXISTS dfapi")
spark.sql("DROP TABLE IF EXISTS dfapi.acc")
spark.sql("CREATE TABLE dfapi.acc (id INT, amount INT) USING parquet")
spark.sql("INSERT INTO dfapi.acc VALUES (1, 10), (2, 20)")
df = spark.createDataFrame([(2, 25), (3, 30)], "id INT, amount INT")
r = merge_into(df, "dfapi.acc", "acc.id = source.id").whenMatched().updateAll().whenNotMatched().insertAll().merge()
try:
    merge_into(df, "dfapi.acc", col("acc.id") == col("source.id"))
    refused = ""
except SpecError as e:
    refused = str(e)
print(json.dumps({"metrics": r.metrics, "rows": [list(x) for x in spark.sql("SELECT * FROM dfapi.acc ORDER BY id").collect()],
                  "refused": refused}))
"""


def test_over_spark_connect(connect_server):
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", CONNECT_DRIVER, connect_server], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["rows"] == [[1, 10], [2, 25], [3, 30]]
    assert (out["metrics"]["numTargetRowsUpdated"], out["metrics"]["numTargetRowsInserted"]) == (1, 1)
    assert "a Column works only in a classic session" in out["refused"]
