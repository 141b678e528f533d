"""The PostgreSQL statements of a merge's commit (pg_merge.py), built without a database: each one
PostgreSQL's parser (as sqlglot reads it) takes whole, names quoted however they are spelled, the
user's Spark expressions transpiled, and a statement per step of the transaction."""

from __future__ import annotations

import pytest
import sqlglot

from merge_core.common.errors import ValidationError
from merge_core.targets import pg_merge

HOSTILE = 'a"; DROP TABLE x; --'
SPEC = {"target_alias": "t", "source_alias": "s", "on": "t.id = s.id"}
TABLE = {"columns": [{"name": "id"}, {"name": "When"}, {"name": HOSTILE}], "pg_casts": {"when": "numeric(10,2)"}}
STAGED = pg_merge.Staged(pg_merge.ident("sch", "__sm_stage_1"), [("id", "integer", ""), ("d", "text", "date")])


def clause(index, action, matched=True, by_source=False, condition=None, outputs=None):
    return {"index": index, "action": action, "matched": matched, "by_source": by_source, "condition": condition,
            "outputs": outputs or {}, "label": f"clause {index + 1}"}  # fmt: skip


ALL_KINDS = [
    clause(0, "update", condition="s.d > t.`When`", outputs={"when": "t.`When` + 1"}),
    clause(1, "delete"),
    clause(2, "insert", matched=False, outputs={"id": "s.id", HOSTILE.lower(): "'v'"}),
    clause(3, "update", matched=False, by_source=True, condition="t.id > 1", outputs={"when": "0"}),
    clause(4, "delete", matched=False, by_source=True),
]


def statements(plan: pg_merge.Plan) -> list[str]:
    return [*plan.lock, plan.capture, plan.count, plan.merge, *[st for st, _, _ in plan.by_source], plan.release]


def test_every_statement_of_a_merge_with_every_clause_kind_parses_as_postgresql():
    plan = pg_merge.build(SPEC, TABLE, {"clauses": ALL_KINDS}, STAGED, "sch", "tgt")
    for statement in statements(plan):
        assert statement is not None
        sqlglot.parse_one(statement, read="postgres")  # raises on anything PostgreSQL's grammar refuses
    assert plan.merge_clauses == [0, 1, 2] and [i for _, i, _ in plan.by_source] == [3, 4]
    assert plan.merge.startswith('MERGE INTO "sch"."tgt" AS "t" USING (SELECT "id" AS "id", CAST("d" AS DATE) AS "d"')
    assert 'UPDATE SET "When" = CAST(("t"."When" + 1) AS DECIMAL(10, 2))' in plan.merge
    assert (
        plan.capture.startswith('CREATE TEMPORARY TABLE "__sm_by_source" AS')
        and plan.release == 'DROP TABLE "__sm_by_source"'
    )
    assert all("FOR UPDATE OF" in st for st in plan.lock) and len(plan.lock) == 2


def test_a_name_with_quotes_and_semicolons_stays_one_quoted_name():
    plan = pg_merge.build(SPEC, TABLE, {"clauses": ALL_KINDS}, STAGED, "sch", "tgt")
    quoted = '"a""; DROP TABLE x; --"'
    assert quoted in plan.merge and 'DROP TABLE x; --"' not in plan.merge.replace(quoted, "")
    assert pg_merge.ident("my schema", 'odd"name') == '"my schema"."odd""name"'
    assert pg_merge.drop_table(pg_merge.ident("s", HOSTILE)) == 'DROP TABLE IF EXISTS "s"."a""; DROP TABLE x; --"'


def test_an_update_or_delete_without_a_source_has_no_insert_and_no_capture():
    plan = pg_merge.build(
        SPEC, TABLE, {"clauses": [clause(0, "delete", condition="t.id = 2")]}, pg_merge.Staged("x"), "sch", "tgt"
    )
    assert plan.capture is None and plan.release is None and plan.by_source == []
    assert "SELECT 1 AS __sm_one" in plan.merge and "UNION ALL" not in plan.count


@pytest.mark.parametrize("expression", ["named_struct('a', s.id) = t.id", "to_json(s.d) = 'x'", "s.id = ("])
def test_spark_expressions_postgresql_would_read_otherwise_are_refused_naming_the_clause(expression):
    with pytest.raises(ValidationError) as e:
        pg_merge.build(SPEC, TABLE, {"clauses": [clause(0, "delete", condition=expression)]}, STAGED, "sch", "tgt")
    assert "clause 1 condition" in str(e.value)


def test_the_history_statements_take_their_values_as_parameters():
    h = pg_merge.ident("sch", "__spark_merge_history")
    assert pg_merge.insert_history(h).count("%s") == 3 and pg_merge.select_history(h).count("%s") == 2
    created = pg_merge.create_history(h)
    assert created.startswith('CREATE TABLE IF NOT EXISTS "sch"."__spark_merge_history"') and "PRIMARY KEY" in created


@pytest.mark.parametrize(
    "spark_type, staged, read_back",
    [
        ("int", "integer", ""),
        ("decimal(38,10)", "numeric", ""),  # exact: no rounding on the way
        ("varchar(5)", "text", ""),  # PostgreSQL's assignment checks the column's length
        ("date", "text", "date"),  # a JDBC DATE would be a midnight in the JVM's zone
        ("timestamp", "text", "timestamptz"),
        ("timestamp_ntz", "text", "timestamp"),
        ("array<int>", "integer[]", ""),
        ("array<array<int>>", "text", "jsonb"),
        ("struct<a:int>", "text", "jsonb"),
    ],
)
def test_each_spark_type_travels_as_a_type_postgresql_reads_back_exactly(spark_type, staged, read_back):
    pg_type, _, read = pg_merge.transport(spark_type)
    assert (pg_type, read) == (staged, read_back)
    if read:  # read back with a cast in the USING query
        select = pg_merge.Staged("x", [("c", pg_type, read)]).select().sql(dialect="postgres")
        assert f'CAST("c" AS {read.upper()})' in select
