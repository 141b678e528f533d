"""Bad input gets a clear error naming the problem, and the target stays exactly as it was."""

from __future__ import annotations

import os

import pytest

from merge_core import NotNullViolation, ParseError, SpecError, TargetError, UnsupportedError, ValidationError, merge

from .conftest import snapshot


def make_tables(spark, db: str) -> tuple[str, str]:
    spark.sql(
        f"CREATE TABLE {db}.acc (id INT, name STRING, amount DOUBLE, opened DATE, dt STRING) "
        f"USING parquet PARTITIONED BY (dt) TBLPROPERTIES ('spark_merge.not_null' = 'id')"
    )
    spark.sql(f"INSERT INTO {db}.acc VALUES (1, 'a', 10.0, DATE'2024-01-01', 'x'), (2, 'b', 20.0, NULL, 'y')")
    spark.sql(f"CREATE TABLE {db}.src (id INT, name STRING, amount DOUBLE, tags ARRAY<STRING>) USING parquet")
    spark.sql(f"INSERT INTO {db}.src VALUES (1, 'A', 1.5, array('t')), (3, 'c', 3.0, NULL)")
    return f"{db}.acc", f"{db}.src"


@pytest.fixture
def tables(spark, db):
    return make_tables(spark, db)


@pytest.fixture(scope="module")
def refused_tables(spark):
    """One pair of tables for every refusal case: each must leave them as they were, which each case
    checks against its own snapshot, so sharing them hides nothing and saves making them 31 times."""
    name = f"refused_{os.getpid()}"
    spark.sql(f"CREATE DATABASE {name}")
    yield make_tables(spark, name)
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


def M(tables, clauses: str, on: str = "t.id = s.id") -> str:
    acc, src = tables
    return f"MERGE INTO {acc} t USING {src} s ON {on} {clauses}"


CASES = [
    # (id, statement builder, error class, expected fragments of the message)
    (
        "unknown SET column",
        lambda T: M(T, "WHEN MATCHED THEN UPDATE SET amout = s.amount"),
        ValidationError,
        ["WHEN MATCHED clause 1 (UPDATE)", "unknown column amout", "has: id, name, amount, opened, dt"],
    ),
    (
        "unknown source column",
        lambda T: M(T, "WHEN MATCHED THEN UPDATE SET amount = s.amout"),
        ValidationError,
        ["WHEN MATCHED clause 1 (UPDATE) value for column amount", "UNRESOLVED_COLUMN", "amout"],
    ),
    (
        "unknown column in ON",
        lambda T: M(T, "WHEN MATCHED THEN DELETE", on="t.id = s.idd"),
        ValidationError,
        ["ON condition", "UNRESOLVED_COLUMN", "idd"],
    ),
    (
        "ambiguous column",
        lambda T: M(T, "WHEN MATCHED AND name = 'A' THEN DELETE"),
        ValidationError,
        ["WHEN MATCHED clause 1 (DELETE) condition", "AMBIGUOUS_REFERENCE", "name"],
    ),
    (
        "string into double",
        lambda T: M(T, "WHEN MATCHED THEN UPDATE SET amount = s.name"),
        ValidationError,
        ["value for column amount", "cannot store a value of type string in column amount of type double"],
    ),
    (
        "array into string is fine, array into date is not",
        lambda T: M(T, "WHEN MATCHED THEN UPDATE SET opened = s.tags"),
        ValidationError,
        ["cannot store a value of type array<string> in column opened of type date"],
    ),
    (
        "insert misses NOT NULL column",
        lambda T: M(T, "WHEN NOT MATCHED THEN INSERT (name) VALUES (s.name)"),
        ValidationError,
        ["WHEN NOT MATCHED clause 1 (INSERT)", "no value for NOT NULL column id"],
    ),
    (
        "NULL into NOT NULL column",
        lambda T: M(T, "WHEN MATCHED THEN UPDATE SET id = NULL"),
        ValidationError,
        ["value for column id", "assigns NULL to NOT NULL column id"],
    ),
    (
        "column assigned twice",
        lambda T: M(T, "WHEN MATCHED THEN UPDATE SET name = s.name, NAME = 'x'"),
        ValidationError,
        ["column NAME is assigned more than once"],
    ),
    (
        "insert count mismatch",
        lambda T: M(T, "WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id)"),
        ValidationError,
        ["INSERT lists 2 column(s) but 1 value(s)"],
    ),
    (
        "NOT MATCHED sees no target row",
        lambda T: M(T, "WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, t.name)"),
        ValidationError,
        ["WHEN NOT MATCHED clause 1 (INSERT) value for column name", "UNRESOLVED_COLUMN"],
    ),
    (
        "condition is not boolean",
        lambda T: M(T, "WHEN MATCHED AND s.amount THEN DELETE"),
        ValidationError,
        ["WHEN MATCHED clause 1 (DELETE) condition: must be a boolean condition, got double"],
    ),
    (
        "unreachable clause",
        lambda T: M(T, "WHEN MATCHED THEN DELETE WHEN MATCHED AND s.id = 1 THEN UPDATE SET name = 'q'"),
        ValidationError,
        ["WHEN MATCHED clause 2 (UPDATE): unreachable", "clause 1 (DELETE) before it has no condition"],
    ),
    (
        "missing source",
        lambda T: f"MERGE INTO {T[0]} t USING {T[0]}_nope s ON t.id = s.id WHEN MATCHED THEN DELETE",
        ValidationError,
        ["source", "_nope", "TABLE_OR_VIEW_NOT_FOUND"],
    ),
    (
        "several problems at once",
        lambda T: M(T, "WHEN MATCHED THEN UPDATE SET nope = 1 WHEN NOT MATCHED THEN INSERT (id) VALUES (s.zzz)"),
        ValidationError,
        ["unknown column nope", "WHEN NOT MATCHED clause 2 (INSERT) value for column id", "zzz"],
    ),
    (
        "UPDATE unknown column",
        lambda T: f"UPDATE {T[0]} SET nope = 1 WHERE id = 1",
        ValidationError,
        ["WHEN MATCHED clause 1 (UPDATE): SET assigns unknown column nope"],
    ),
    (
        "DELETE bad WHERE",
        lambda T: f"DELETE FROM {T[0]} WHERE nope = 1",
        ValidationError,
        ["WHERE condition", "UNRESOLVED_COLUMN", "nope"],
    ),
    (
        "unparsable SQL",
        lambda T: f"MERGE INTO {T[0]} t USING {T[1]} s ON t.id = s.id WHEN MATCHED THEN DELET",
        ParseError,
        ["syntax error at line 1", "unexpected word `DELET`; did you mean DELETE?"],
    ),
    (
        "MERGE without ON",
        lambda T: f"MERGE INTO {T[0]} t USING {T[1]} s WHEN MATCHED THEN DELETE",
        ParseError,
        ["MERGE needs an ON condition after USING"],
    ),
    # a NOT MATCHED BY SOURCE clause has no source row: Spark resolves it against the target alone
    (
        "NOT MATCHED BY SOURCE reads the source",
        lambda T: M(T, "WHEN NOT MATCHED BY SOURCE AND s.amount > 1 THEN DELETE"),
        ValidationError,
        ["WHEN NOT MATCHED BY SOURCE clause 1 (DELETE) condition", "UNRESOLVED_COLUMN", "amount"],
    ),
    (
        "NOT MATCHED BY SOURCE assigns from the source",
        lambda T: M(T, "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET name = s.name"),
        ValidationError,
        ["WHEN NOT MATCHED BY SOURCE clause 1 (UPDATE) value for column name", "UNRESOLVED_COLUMN"],
    ),
    (
        "NOT MATCHED BY SOURCE inserts",
        lambda T: M(T, "WHEN NOT MATCHED BY SOURCE THEN INSERT (id) VALUES (1)"),
        ValidationError,
        ["WHEN NOT MATCHED BY SOURCE clause 1 (INSERT): INSERT is only allowed in WHEN NOT MATCHED clauses"],
    ),
    (
        "NOT MATCHED BY SOURCE sets star",
        lambda T: M(T, "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET *"),
        ValidationError,
        ["WHEN NOT MATCHED BY SOURCE clause 1 (UPDATE): UPDATE SET * needs a source row"],
    ),
    (
        "NOT MATCHED BY SOURCE unreachable",
        lambda T: M(
            T,
            "WHEN NOT MATCHED BY SOURCE THEN DELETE WHEN NOT MATCHED BY SOURCE AND t.id = 1 THEN UPDATE SET name = 'q'",
        ),
        ValidationError,
        ["WHEN NOT MATCHED BY SOURCE clause 2 (UPDATE): unreachable"],
    ),
    (
        "NOT MATCHED BY SOURCE non-deterministic",
        lambda T: M(T, "WHEN NOT MATCHED BY SOURCE AND rand() < 0.5 THEN DELETE"),
        ValidationError,
        ["WHEN NOT MATCHED BY SOURCE clause 1 (DELETE) condition is not deterministic"],
    ),
    (
        "not a DML statement",
        lambda T: f"SELECT * FROM {T[0]}",
        UnsupportedError,
        ["expected MERGE INTO, UPDATE or DELETE FROM, got SELECT"],
    ),
    (
        "two statements",
        lambda T: f"DELETE FROM {T[0]} WHERE id = 1; DELETE FROM {T[0]} WHERE id = 2",
        ParseError,
        ["expected exactly one statement, got 2"],
    ),
    # a literal that cannot take the type it is compared with: Spark fails while folding constants
    (
        "string id in an IN list",
        lambda T: f"DELETE FROM {T[0]} WHERE id IN (17, 'x42')",
        ValidationError,
        ["WHERE condition fails when Spark folds its constants", "id IN (17, 'x42')"],
    ),
    (
        "malformed date literal",
        lambda T: f"UPDATE {T[0]} SET name = 'z' WHERE opened = '2024-13-45'",
        ValidationError,
        ["WHERE condition fails when Spark folds its constants", "DATE'2026-11-23'"],
    ),
    (
        "bad literal in a WHEN condition",
        lambda T: M(T, "WHEN MATCHED AND s.amount > 'many' THEN DELETE"),
        ValidationError,
        ["WHEN MATCHED clause 1 (DELETE) condition fails when Spark folds its constants"],
    ),
    (
        "missing target",
        lambda T: f"MERGE INTO {T[0]}_gone t USING {T[1]} s ON t.id = s.id WHEN MATCHED THEN DELETE",
        TargetError,
        ["target table", "acc_gone not found"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rejected_before_anything_is_touched(spark, refused_tables, case):
    _, build, error, fragments = case
    before = snapshot(spark, refused_tables[0])
    with pytest.raises(error) as e:
        merge(spark, build(refused_tables))
    for fragment in fragments:
        assert fragment in str(e.value)
    assert snapshot(spark, refused_tables[0]) == before


def test_unknown_option_and_rule(spark, tables):
    with pytest.raises(SpecError, match="unknown option"):
        merge(spark, M(tables, "WHEN MATCHED THEN DELETE"), duplicate_rul="trino")
    with pytest.raises(SpecError, match="unknown value 'mysql'"):
        merge(spark, M(tables, "WHEN MATCHED THEN DELETE"), duplicate_rule="mysql")


def test_null_found_at_run_time_fails_before_writing(spark, tables):
    """An expression that is NULL only for some rows is caught while planning, not after a write."""
    acc, _ = tables
    before = snapshot(spark, acc)
    with pytest.raises(NotNullViolation, match="NOT NULL column id"):
        merge(spark, f"UPDATE {acc} SET id = CASE WHEN name = 'b' THEN NULL ELSE id END")
    assert snapshot(spark, acc) == before


@pytest.mark.parametrize(
    "ddl, fragment",
    [
        ("CREATE VIEW {db}.v AS SELECT * FROM {db}.acc", "is a view"),
        ("CREATE TABLE {db}.v (id INT, name STRING) STORED AS PARQUET", "Hive-format table"),
        ("CREATE TABLE {db}.v (id INT, name STRING) USING json", "uses format json"),
    ],
)
def test_target_kinds_that_cannot_be_rewritten(spark, db, tables, ddl, fragment):
    spark.sql(ddl.format(db=db))
    with pytest.raises(TargetError, match=fragment):
        merge(spark, f"MERGE INTO {db}.v t USING {tables[1]} s ON t.id = s.id WHEN MATCHED THEN DELETE")


def test_lossy_assignments_warn_refuse_or_pass(spark, tables, caplog):
    """27.5 into an INT column: Spark stores 27 without a word. spark-merge says so at validation
    (default), refuses with lossy_assignments='refuse', and stays quiet for an explicit CAST."""
    import logging
    import re

    acc, src = tables
    before = snapshot(spark, acc)
    statement = f"MERGE INTO {acc} t USING {src} s ON t.id = s.id WHEN MATCHED THEN UPDATE SET id = s.amount + 1"
    with pytest.raises(ValidationError) as e:
        merge(spark, statement, lossy_assignments="refuse")
    assert (
        "WHEN MATCHED clause 1 (UPDATE) value for column id: storing a value of type double in column id "
        "of type int drops the fraction"
    ) in str(e.value)
    assert snapshot(spark, acc) == before
    with pytest.raises(SpecError, match="option lossy_assignments: unknown value 'sometimes'"):
        merge(spark, statement, lossy_assignments="sometimes")

    with caplog.at_level(logging.WARNING, logger="spark_merge"):
        merge(spark, statement)  # warns, and stores as Spark does: 1.5 + 1 -> 2
    warned = [r.getMessage() for r in caplog.records if "lossy assignment" in r.getMessage()]
    assert [re.sub(r"^\[\d{14}_[0-9a-f]{8}\] ", "", w) for w in warned] == [  # the merge's id, then the warning
        "lossy assignment: WHEN MATCHED clause 1 (UPDATE) value for column id: storing a value of type double in column id "
        "of type int drops the fraction (expression: s.amount + 1); CAST it explicitly to say you mean it "
        "(option lossy_assignments: warn, refuse, allow)"
    ]
    assert spark.sql(f"SELECT id FROM {acc} WHERE name = 'a'").collect()[0][0] == 2
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="spark_merge"):
        merge(
            spark, f"UPDATE {acc} SET amount = 2.25, id = CAST(id * 1.5 AS INT) WHERE id = 2"
        )  # double column; explicit CAST
        merge(spark, f"UPDATE {acc} SET amount = 1.5 WHERE id = 3", lossy_assignments="allow")
    assert not [r for r in caplog.records if "lossy" in r.getMessage()]
