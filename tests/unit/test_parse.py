"""Parsing SQL text into specs (pure functions: no Spark)."""

from __future__ import annotations

import pytest

from merge_core import MergeSpec, ParseError, SpecError, UnsupportedError, parse, to_spec


def test_merge_with_every_clause_kind():
    spec = parse("""MERGE INTO db.acc AS t USING (SELECT * FROM u WHERE x > 1) AS s
        ON t.id = s.id AND t.dt = s.dt
        WHEN MATCHED AND s.op = 'D' THEN DELETE
        WHEN MATCHED THEN UPDATE SET t.amount = t.amount + s.amount, note = 'x'
        WHEN NOT MATCHED AND s.amount > 0 THEN INSERT (id, amount) VALUES (s.id, s.amount)
        WHEN NOT MATCHED THEN INSERT *""")
    assert spec.target == ["db", "acc"] and spec.target_alias == "t" and spec.source_alias == "s"
    assert spec.source_kind == "query" and spec.source.startswith("SELECT * FROM u")
    assert spec.on == "t.id = s.id AND t.dt = s.dt"
    assert spec.key_columns == ["id", "dt"]
    delete, update, insert, star = spec.clauses
    assert (delete.matched, delete.action, delete.condition) == (True, "delete", "s.op = 'D'")
    assert update.assignments == [("amount", "t.amount + s.amount"), ("note", "'x'")]
    assert (insert.matched, insert.insert_columns, insert.insert_values) == (
        False,
        ["id", "amount"],
        ["s.id", "s.amount"],
    )
    assert star.star and star.action == "insert"


def test_update_and_delete_become_sourceless_specs():
    up = parse("UPDATE db.t AS x SET a = a + 1, b = 'q' WHERE id IN (SELECT id FROM other)")
    assert (up.kind, up.source_kind, up.target_alias) == ("update", "none", "x")
    assert up.on == "id IN (SELECT id FROM other)"
    assert up.clauses[0].assignments == [("a", "a + 1"), ("b", "'q'")]
    de = parse("DELETE FROM db.t")
    assert (de.kind, de.on, de.clauses[0].action) == ("delete", "true", "delete")


def test_trino_functions_are_transpiled():
    sql = "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET d = date_add('day', 1, s.d)"
    assert to_spec(sql, dialect="trino").clauses[0].assignments == [("d", "DATE_ADD(s.d, 1)")]
    # read as Spark SQL by default: Spark's own three-argument date_add
    assert parse(sql).clauses[0].assignments == [("d", "DATE_ADD(DAY, 1, s.d)")]
    with pytest.raises(ParseError, match="unknown dialect"):
        parse(sql, "mysql")


def test_values_source_keeps_its_column_aliases():
    spec = parse("MERGE INTO t USING (VALUES (1, 2)) AS s(id, v) ON t.id = s.id WHEN MATCHED THEN DELETE")
    assert spec.source_kind == "query" and spec.source == "SELECT * FROM VALUES (1, 2) AS s(id, v)"


@pytest.mark.parametrize(
    "using, source",
    [
        ("(SELECT 1, 2) s (id, v)", "SELECT * FROM (SELECT 1, 2) AS s(id, v)"),
        ("src AS s(id, v)", "SELECT * FROM src AS s(id, v)"),
    ],
)
def test_subquery_and_table_sources_keep_their_column_aliases(using, source):
    spec = parse(f"MERGE INTO t USING {using} ON t.id = s.id WHEN MATCHED THEN DELETE")
    assert (spec.source_kind, spec.source, spec.source_alias) == ("query", source, "s")


@pytest.mark.parametrize(
    "sql, error, fragment",
    [
        ("", ParseError, "empty statement"),
        ("MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN DELET", ParseError, "did you mean DELETE"),
        ("MERGE INTO t USING s WHEN MATCHED THEN DELETE", ParseError, "needs an ON condition"),
        ("MERGE INTO t USING (SELECT 1) ON true WHEN MATCHED THEN DELETE", ParseError, "needs an alias"),
        ("MERGE INTO t USING s AS t ON true WHEN MATCHED THEN DELETE", ParseError, "share the alias"),
        (
            "MERGE INTO t USING s ON t.a = s.a WHEN NOT MATCHED THEN INSERT (a, x.b) VALUES (1, 2)",
            UnsupportedError,
            r"an INSERT column cannot be a nested field \(x.b\)",
        ),
        ("SELECT 1", UnsupportedError, "got SELECT"),
        # Spark's grammar requires THEN; sqlglot alone would read these as if it were there
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED UPDATE SET v = s.v",
            ParseError,
            "clause 1: THEN is missing before UPDATE",
        ),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED INSERT *",
            ParseError,
            "clause 2: THEN is missing before INSERT",
        ),
        (
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED AND CASE WHEN s.a THEN true END DELETE",
            ParseError,
            "clause 1: THEN is missing before DELETE",
        ),
        ("DELETE FROM t WHERE a = 1; DELETE FROM t", ParseError, "exactly one statement"),
    ],
)
def test_bad_statements(sql, error, fragment):
    with pytest.raises(error, match=fragment):
        parse(sql)


@pytest.mark.parametrize(
    "assignment, key",
    [
        ("v = 1", "v"),
        ("t.v = 1", "v"),
        ("s.c1 = 1", "s.c1"),
        ("t.s.c1 = 1", "s.c1"),
        ("s.c2.m.k = 1", "s.c2.m.k"),
        ("t.s.c2.m.k = 1", "s.c2.m.k"),
    ],
)
def test_an_assignment_names_a_column_or_a_struct_field_path(assignment, key):
    """As in Spark, a leading target alias qualifies and anything else is a field path into a column
    (resolved against the table's schema later, where an unknown column is an error)."""
    assert parse(f"UPDATE t SET {assignment}").clauses[0].assignments[0][0] == key
    merge = parse(f"MERGE INTO t USING src AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET {assignment}")
    assert merge.clauses[0].assignments[0][0] == key


def test_not_matched_by_source_clauses_keep_their_kind_and_order():
    spec = parse(
        "MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED BY SOURCE AND t.p = 1 THEN UPDATE SET v = 0 "
        "WHEN MATCHED THEN DELETE WHEN NOT MATCHED BY TARGET THEN INSERT * "
        "WHEN NOT MATCHED BY SOURCE THEN DELETE"
    )
    assert [(c.when, c.action, c.condition) for c in spec.clauses] == [
        ("not_matched_by_source", "update", "t.p = 1"),
        ("matched", "delete", None),
        ("not_matched", "insert", None),
        ("not_matched_by_source", "delete", None),
    ]
    assert spec.clauses[0].describe() == "WHEN NOT MATCHED BY SOURCE AND t.p = 1 THEN UPDATE"
    # the dict form (Airflow, dbt's merge_clauses) names the kind with the same word
    clause = to_spec(
        {
            "target": "a",
            "source": "s",
            "on": "t.id = s.id",
            "clauses": [{"when": "not_matched_by_source", "action": "update", "set": {"v": "0"}}],
        }
    ).clauses[0]
    assert (clause.when, clause.matched, clause.by_source) == ("not_matched_by_source", False, True)
    with pytest.raises(SpecError, match="when must be one of matched, not_matched, not_matched_by_source"):
        to_spec({"target": "a", "source": "s", "on": "true", "clauses": [{"when": "by_source", "action": "delete"}]})


def test_then_check_reads_past_case_expressions_and_columns_named_like_actions():
    spec = parse(
        "MERGE INTO t USING s ON t.id = s.id "
        "WHEN MATCHED AND CASE WHEN s.op = 'WHEN MATCHED UPDATE' THEN t.update = 1 ELSE false END THEN DELETE "
        "WHEN NOT MATCHED AND s.insert > 0 THEN INSERT *"
    )
    assert [c.action for c in spec.clauses] == ["delete", "insert"]


def test_leading_with_is_inlined_where_the_statement_names_it():
    spec = parse(
        "WITH c(id, v) AS (SELECT 1, 2), d AS (SELECT id FROM c WHERE v > 1) "
        "MERGE INTO db.t USING d ON t.id = d.id AND t.id IN (SELECT id FROM c) WHEN MATCHED THEN DELETE"
    )
    assert (spec.source_kind, spec.source_alias) == ("query", "d")
    assert spec.source == "SELECT id FROM (SELECT 1, 2) AS c(id, v) WHERE v > 1"
    assert spec.on == "t.id = d.id AND t.id IN (SELECT id FROM (SELECT 1, 2) AS c(id, v))"
    # a CTE named like the target does not replace the target
    assert parse("WITH t AS (SELECT 1 AS id) DELETE FROM t WHERE id IN (SELECT id FROM t)").target == ["t"]
    with pytest.raises(UnsupportedError, match="WITH RECURSIVE"):
        parse("WITH RECURSIVE r AS (SELECT 1 AS id) DELETE FROM t WHERE id IN (SELECT id FROM r)")


def test_dict_spec_and_options():
    spec = to_spec(
        {
            "target": "db.acc",
            "source": "staging.updates",
            "on": "t.id = s.id",
            "clauses": [
                {"when": "matched", "action": "update", "set": {"v": "s.v"}},
                {"when": "not_matched", "action": "insert", "star": True},
            ],
        },
        duplicate_rule="strict",
    )
    assert isinstance(spec, MergeSpec)
    assert (spec.target, spec.source_kind, spec.duplicate_rule) == (["db", "acc"], "table", "strict")
    assert spec.clauses[0].assignments == [("v", "s.v")]
    with pytest.raises(SpecError, match="unknown field"):
        to_spec({"target": "a", "on": "true", "clauses": [{"when": "matched", "action": "delete", "oops": 1}]})
    with pytest.raises(SpecError, match="at least one WHEN clause"):
        to_spec({"target": "a", "on": "true", "clauses": []})


@pytest.mark.parametrize(
    "on, expected",
    [
        ("t.id = s.id AND t.dt = s.dt", [("id", "id", False), ("dt", "dt", False)]),
        ("(s.k = t.id) AND (t.x > 3 AND t.dt = s.day)", [("id", "k", False), ("dt", "day", False)]),
        ("`t`.k <=> `s`.k AND t.a = t.b", [("k", "k", True)]),
        ("t.id = s.id OR t.dt = s.dt", []),  # not a conjunct: a match need not satisfy it
        ("t.id = s.id + 1", []),  # an expression, not a column
        ("t.id = u.id AND t.id > s.id", []),  # another alias; not an equality
        ("t.id = s.id AND NOT (t.dt = s.dt)", [("id", "id", False)]),
    ],
)
def test_on_equalities_are_the_conjuncts_equating_a_target_and_a_source_column(on, expected):
    from merge_core.request.parse import on_equalities

    found = [(e["target"], e["source"], e["null_safe"]) for e in on_equalities(on, "t", "s")]
    assert found == expected


def test_direct_assignments_are_the_same_named_source_column():
    """What Spark's MERGE WITH SCHEMA EVOLUTION calls a direct assignment (and only that evolves)."""
    from merge_core.request.parse import direct_source_columns, is_direct_assignment, nested_field_paths

    assert is_direct_assignment("c", "s.c", "s") and is_direct_assignment("C", "(`S`.`c`)", "s")
    assert not is_direct_assignment("c", "s.c + 1", "s") and not is_direct_assignment("c", "s.d", "s")
    assert not is_direct_assignment("c", "c", "s") and not is_direct_assignment("c", "t.c", "s")
    assert not is_direct_assignment("st.f", "s.st.f", "s")
    spec = parse(
        "MERGE INTO t USING src AS y ON t.id = y.id WHEN MATCHED THEN UPDATE SET a = y.a, b = y.a "
        "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET e = 1 "
        "WHEN NOT MATCHED THEN INSERT (id, d) VALUES (y.id, y.d)"
    ).to_dict()
    assert direct_source_columns(spec) == ["a", "id", "d"]
    assert nested_field_paths("struct<a:int,b:array<struct<c:int>>,m:map<string,struct<k:int>>>") == {
        "a",
        "b",
        "b.element.c",
        "m",
        "m.value.k",
    }
    assert nested_field_paths("decimal(5,2)") == set()


def test_one_sided_clauses_get_their_side_s_alias():
    """A NOT MATCHED clause's unqualified names are the source's, a NOT MATCHED BY SOURCE clause's the
    target's, as Spark resolves them; a matched clause, a lambda variable, a name neither side has and
    a name inside a subquery (its own FROM comes first) are left as written."""
    from merge_core.request.parse import qualify_one_sided

    spec = parse(
        "MERGE INTO t USING src AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET n = n "
        "WHEN NOT MATCHED AND n > 1 THEN INSERT (id, n, st) VALUES (id, transform(arr, x -> x + n), "
        "(SELECT max(k) FROM o WHERE o.j = id)) "
        "WHEN NOT MATCHED BY SOURCE AND nope IS NULL THEN UPDATE SET n = n + 1"
    ).to_dict()
    asked = []
    qualify_one_sided(spec, lambda: asked.append(1) or ["id", "n", "arr", "st"], ["id", "n", "st"])
    matched, not_matched, by_source = spec["clauses"]
    assert matched["assignments"] == [["n", "n"]] and asked == [1]
    assert not_matched["condition"] == "`s`.`n` > 1"
    assert not_matched["insert_values"][:2] == ["`s`.`id`", "TRANSFORM(`s`.`arr`, x -> x + `s`.`n`)"]
    assert "o.j = id" in not_matched["insert_values"][2]
    assert by_source["condition"] == "nope IS NULL" and by_source["assignments"] == [["n", "`t`.`n` + 1"]]


@pytest.mark.parametrize(
    "sql, message",
    [
        (
            "UPDATE t SET amount = WHERE id = 1",
            "syntax error at line 1, column 27 after `UPDATE t SET amount =`: a value is missing after = (found `WHERE`)",
        ),
        ("UPDATE t SET a = 1 WHERE id IN (1, 2", "expected ) at the end of the statement"),
        ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDAT SET a = 1", "did you mean UPDATE?"),
        ("DELET FROM t WHERE id = 1", "expected MERGE INTO, UPDATE or DELETE FROM, got 'DELET'; did you mean DELETE?"),
    ],
)
def test_a_syntax_error_says_where_and_what_in_one_line_without_the_parser_s_names(sql, message):
    with pytest.raises(ParseError) as caught:
        parse(sql)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert "sqlglot" not in text and "<class" not in text and "Required keyword" not in text
