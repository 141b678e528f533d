"""Malformed and hostile inputs: a clear error with the table untouched, or a correct result."""

from __future__ import annotations

import pytest

from merge_core import MergeError, SpecError, TargetError, ValidationError, merge

from .conftest import rows, snapshot


@pytest.fixture
def pair(spark, db):
    spark.sql(f"CREATE TABLE {db}.acc (id INT, v STRING, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {db}.acc VALUES (1, 'a', 1), (2, 'b', 2)")
    spark.sql(f"CREATE TABLE {db}.src (id INT, v STRING, p INT) USING parquet")
    spark.sql(f"INSERT INTO {db}.src VALUES (1, 'A', 1)")
    return f"{db}.acc", f"{db}.src"


def tables_in(spark, db):
    return sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN {db}").collect())


@pytest.mark.parametrize(
    "target",
    [
        "acc`; DROP TABLE {db}.src; --",
        "acc; DROP TABLE {db}.src",
        "acc` (id) VALUES (1); --",
    ],
)
def test_injection_in_a_dict_spec_target_name(spark, db, pair, target):
    before = snapshot(spark, pair[0]), tables_in(spark, db)
    with pytest.raises(TargetError, match="target table"):
        merge(
            spark,
            {
                "target": f"{db}.{target.format(db=db)}",
                "source": pair[1],
                "on": "t.id = s.id",
                "clauses": [{"when": "matched", "action": "delete"}],
            },
        )
    assert (snapshot(spark, pair[0]), tables_in(spark, db)) == before


@pytest.mark.parametrize(
    "options, error, fragment",
    [
        ({"duplicate_rule": "trino'; DROP TABLE x; --"}, SpecError, "unknown value"),
        ({"partition_filter": "p = 1; DROP TABLE {src}"}, ValidationError, "option partition_filter"),
    ],
)
def test_injection_in_option_values(spark, db, pair, options, error, fragment):
    before = snapshot(spark, pair[0]), tables_in(spark, db)
    options = {k: v.format(src=pair[1]) for k, v in options.items()}
    with pytest.raises(error, match=fragment):
        merge(spark, f"MERGE INTO {pair[0]} t USING {pair[1]} s ON t.id = s.id WHEN MATCHED THEN DELETE", **options)
    assert (snapshot(spark, pair[0]), tables_in(spark, db)) == before


def test_expression_cannot_escape_its_parentheses(spark, db, pair):
    """What validation analysed is exactly what runs: `p = 1) OR (p = 2` stays one predicate."""
    r = merge(
        spark,
        f"MERGE INTO {pair[0]} t USING {pair[1]} s ON t.id = s.id WHEN MATCHED THEN DELETE",
        partition_filter="p = 1) OR (p = 2",
    )
    assert r.metrics["numTargetRowsDeleted"] == 1 and rows(spark, pair[0]) == [(2, "b", 2)]
    assert pair[1].split(".")[1] in tables_in(spark, db)


def test_statement_smuggled_after_a_valid_one(spark, db, pair):
    before = snapshot(spark, pair[0]), tables_in(spark, db)
    with pytest.raises(MergeError, match="exactly one statement"):
        merge(spark, f"DELETE FROM {pair[0]} WHERE id = 1; DROP TABLE {pair[1]}")
    assert (snapshot(spark, pair[0]), tables_in(spark, db)) == before


def test_quotes_in_a_literal_stay_a_literal(spark, db, pair):
    value = "x'; DROP TABLE " + pair[1] + "; --"
    merge(spark, f"UPDATE {pair[0]} SET v = '{value.replace(chr(39), chr(39) * 2)}' WHERE id = 1", dialect="trino")
    assert rows(spark, pair[0])[0] == (1, value, 1) and pair[1].split(".")[1] in tables_in(spark, db)


def test_huge_literal(spark, pair):
    big = "z" * 200_000
    merge(spark, f"UPDATE {pair[0]} SET v = '{big}' WHERE id = 2")
    assert rows(spark, pair[0])[1] == (2, big, 2)


def test_empty_source_changes_nothing(spark, pair):
    before = snapshot(spark, pair[0])
    r = merge(
        spark,
        f"MERGE INTO {pair[0]} t USING (SELECT * FROM {pair[1]} WHERE false) s ON t.id = s.id "
        f"WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *",
    )
    assert r.metrics["numSourceRows"] == 0 and snapshot(spark, pair[0])[:2] == before[:2]


def test_source_with_only_null_keys_inserts_and_matches_nothing(spark, pair):
    r = merge(
        spark,
        f"MERGE INTO {pair[0]} t USING (SELECT CAST(NULL AS INT) AS id, 'n' AS v, 3 AS p "
        f"UNION ALL SELECT NULL, 'm', 3) s ON t.id = s.id "
        f"WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *",
    )
    assert (r.metrics["numTargetRowsDeleted"], r.metrics["numTargetRowsInserted"]) == (0, 2)
    assert len(rows(spark, pair[0])) == 4


def test_column_and_table_names_that_need_quoting(spark, db):
    spark.sql(
        f"CREATE TABLE {db}.odd_table (`my id` INT, `we``ird` STRING, `part col` INT) "
        f"USING parquet PARTITIONED BY (`part col`)"
    )
    spark.sql(f"INSERT INTO {db}.odd_table VALUES (1, 'a', 1), (2, 'b', 2)")
    merge(
        spark,
        f"MERGE INTO {db}.odd_table t USING (SELECT 1 AS `my id`, 'A' AS `we``ird`, 5 AS `part col`) s "
        f"ON t.`my id` = s.`my id` WHEN MATCHED THEN UPDATE SET `we``ird` = s.`we``ird`, `part col` = s.`part col`",
    )
    assert rows(spark, f"{db}.odd_table") == [(1, "A", 5), (2, "b", 2)]


def test_columns_named_like_the_plans_own_work_or_are_refused_by_name(spark, db):
    """A user column named as a plan column (__sm_case, __sm_op, __sm_c0) is kept apart from it (the
    plan's names live in their own query level); the few the plan adds beside the user's columns in
    one relation (__sm_file beside a target, __sm_srow beside a source) are refused, naming them."""
    from merge_core import ValidationError, merge

    t = f"{db}.named"
    spark.sql(f"CREATE TABLE {t} (id INT, __sm_case STRING, __sm_op INT, __sm_c0 INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 1, 1), (2, 'b', 2, 2)")
    merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT 1 AS id, 'z' AS __sm_case, 9 AS __sm_x0) s ON t.id = s.id "
        f"WHEN MATCHED AND s.__sm_case = 'z' THEN UPDATE SET __sm_case = s.__sm_case, __sm_op = s.__sm_x0 "
        f"WHEN NOT MATCHED THEN INSERT (id, __sm_case) VALUES (s.id, s.__sm_case)",
    )
    assert sorted(tuple(r) for r in spark.table(t).collect()) == [(1, "z", 9, 1), (2, "b", 2, 2)]
    with pytest.raises(ValidationError, match="column __sm_srow of the source: spark-merge names a column"):
        merge(
            spark, f"MERGE INTO {t} t USING (SELECT 1 AS id, 3 AS __sm_srow) s ON t.id = s.id WHEN MATCHED THEN DELETE"
        )
