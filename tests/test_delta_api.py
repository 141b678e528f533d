"""Delta Lake's Python API on parquet tables (merge_core.delta): snippets of Delta's documentation, with
only the import changed, run against real Spark and change the rows as Delta's MERGE would."""

from __future__ import annotations

import pytest
from pyspark.sql.functions import col, lit

from merge_core import SpecError, history

from .conftest import rows


@pytest.fixture
def people(spark, db):
    spark.sql(f"CREATE TABLE {db}.people (id INT, firstName STRING, gender STRING, salary INT) USING parquet")
    spark.sql(f"INSERT INTO {db}.people VALUES (1, 'ann', 'F', 10), (2, 'bob', 'M', 20), (3, 'cy', 'F', 30)")
    spark.sql(f"CREATE TABLE {db}.people_updates USING parquet AS SELECT * FROM VALUES "
              f"(1, 'Ann', 'F', 11), (4, 'di', 'F', 40) AS u(id, firstName, gender, salary)")  # fmt: skip
    spark.sql(f"USE {db}")
    yield f"{db}.people"
    spark.sql("USE default")


# Delta Lake's documentation, "Upsert into a table using merge" (Python), as written there
DELTA_DOC = """
from delta.tables import *

deltaTablePeople = DeltaTable.forName(spark, "people")
deltaTablePeopleUpdates = DeltaTable.forName(spark, "people_updates")

dfUpdates = deltaTablePeopleUpdates.toDF()

deltaTablePeople.alias('people') \\
  .merge(
    dfUpdates.alias('updates'),
    'people.id = updates.id'
  ) \\
  .whenMatchedUpdate(set =
    {
      "id": "updates.id",
      "firstName": "updates.firstName",
      "gender": "updates.gender",
      "salary": "updates.salary"
    }
  ) \\
  .whenNotMatchedInsert(values =
    {
      "id": "updates.id",
      "firstName": "updates.firstName",
      "gender": "updates.gender",
      "salary": "updates.salary"
    }
  ) \\
  .execute()
"""


def test_a_documented_upsert_runs_with_only_the_import_changed(spark, people):
    snippet = DELTA_DOC.replace("from delta.tables import *", "from merge_core.delta import *")
    assert snippet.count("\n") == DELTA_DOC.count("\n") and snippet != DELTA_DOC
    exec(snippet, {"spark": spark})
    assert rows(spark, people) == [(1, "Ann", "F", 11), (2, "bob", "M", 20), (3, "cy", "F", 30), (4, "di", "F", 40)]
    [entry, *_] = history(spark, people)
    m = entry["metrics"]
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"], m["numTargetRowsDeleted"]) == (1, 1, 0)


def test_all_clauses_conditions_and_columns_as_delta_spells_them(spark, people):
    from merge_core.delta import DeltaTable

    target = DeltaTable.forName(spark, people)
    updates = spark.createDataFrame(
        [(1, "ANN", "F", 100, "U"), (2, None, None, None, "D"), (5, "eve", "F", 50, "I")],
        "id INT, firstName STRING, gender STRING, salary INT, op STRING",
    )
    result = (
        target.alias("t")
        .merge(updates.alias("s"), col("t.id") == col("s.id"))
        .whenMatchedDelete(condition="s.op = 'D'")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll(condition=col("s.op") == lit("I"))
        .whenNotMatchedBySourceUpdate(condition="t.gender = 'F'", set={"salary": "t.salary + 1"})
        .whenNotMatchedBySourceDelete()
        .execute()
    )
    # 1 updated from the source, 2 deleted, 5 inserted, 3 (F, no source row) raised, 4 is absent
    assert rows(spark, people) == [(1, "ANN", "F", 100), (3, "cy", "F", 31), (5, "eve", "F", 50)]
    m = result.metrics
    assert (m["numTargetRowsUpdated"], m["numTargetRowsDeleted"], m["numTargetRowsInserted"]) == (2, 1, 1)


def test_update_delete_and_history_as_delta_writes_them(spark, people):
    from merge_core.delta import DeltaTable

    people_table = DeltaTable.forName(spark, people)
    people_table.delete("salary < 15")
    people_table.delete(col("id") == 3)
    people_table.update(condition="gender = 'M'", set={"gender": "'Male'"})
    people_table.update(condition=col("id") == 2, set={"salary": lit(25)})
    assert rows(spark, people) == [(2, "bob", "Male", 25)]
    kinds = [r["operation"] for r in people_table.history().collect()]
    assert kinds == ["UPDATE", "UPDATE", "DELETE", "DELETE"]


def test_what_does_not_carry_over_is_refused_in_one_line(spark, people):
    from merge_core.delta import DeltaTable

    with pytest.raises(SpecError, match="forName"):
        DeltaTable.forPath(spark, "/data/people")
    builder = DeltaTable.forName(spark, people).alias("t").merge(spark.table(people).alias("s"), "t.id = s.id")
    with pytest.raises(SpecError, match="whenMatchedUpdateAll"):
        builder.whenMatchedUpdate()
