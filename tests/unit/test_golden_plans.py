"""The plan's SQL for every clause kind, compared with reviewed files in golden/.

A change to the compiler shows here as a diff of the SQL it writes, statement by statement, before any
Spark runs it. After a deliberate change, write the files again and review the diff:

    SPARK_MERGE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_golden_plans.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from merge_core import parse, to_spec
from merge_core.common import macros
from tests.unit.test_macros import DESC, TYPES

GOLDEN = Path(__file__).parent / "golden"
USING = "MERGE INTO db.acc t USING src s ON t.id = s.id "
# one statement per clause kind (and the two sourceless statements), each with the options it needs
CASES = {
    "matched_update": USING + "WHEN MATCHED THEN UPDATE SET v = s.v",
    "matched_update_set_star": USING + "WHEN MATCHED THEN UPDATE SET *",
    "matched_conditional_delete": USING + "WHEN MATCHED AND s.v IS NULL THEN DELETE",
    "not_matched_insert": USING + "WHEN NOT MATCHED THEN INSERT (id, v, dt) VALUES (s.id, s.v, s.dt)",
    "not_matched_insert_star": USING + "WHEN NOT MATCHED AND s.id > 0 THEN INSERT *",
    "by_source_update": USING + "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET v = 'orphan'",
    "by_source_delete": USING + "WHEN NOT MATCHED BY SOURCE AND t.dt < DATE'2026-01-01' THEN DELETE",
    "every_kind": USING + "WHEN MATCHED AND s.v IS NULL THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v "
    "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE THEN DELETE",
    "update_statement": "UPDATE db.acc SET v = upper(v) WHERE id = 1",
    "delete_statement": "DELETE FROM db.acc WHERE dt = DATE'2026-01-02'",
    "null_safe_key": "MERGE INTO db.acc t USING src s ON t.id <=> s.id WHEN MATCHED THEN UPDATE SET v = s.v",
}
RULES = ["trino", "postgres", "strict"]  # the duplicate rules (options.sql: duplicate_rule)


def table_of(rows: list[list[str]], **desc) -> dict:
    """The table record of DESC's table with the columns of DESCRIBE TABLE's ``rows`` (all nullable),
    and ``desc`` over DESC's other fields."""
    columns = [{"name": r[0], "nullable": True} for r in rows]
    return macros.fill("table_info", dict(DESC, columns=columns, **desc), rows)


def plan(sql: str, **options) -> dict[str, str]:
    """The statements a merge of ``sql`` into DESC's table plans, by name, as both hosts render them."""
    spec = parse(sql).with_options(**options).to_dict()
    table = macros.fill("table_info", DESC, TYPES)
    resolved = macros.fill("resolve", spec, table)
    assert resolved["errors"] == []
    ctx = macros.fill("context", spec, table, "20261129000000_golden")
    statements = {"changes": macros.render("changes_sql", spec, table, resolved, ctx)}
    if spec.get("source"):
        statements["cache_source"] = macros.cache_source_sql(spec, ctx)
        statements["duplicates"] = macros.duplicates_sql(spec, table, resolved, ctx)
    statements["change_summary"] = macros.change_summary_sql(spec, table, resolved, ctx)
    partitions = [{"dt": "2026-01-02"}]
    statements["fused_stage"] = macros.fused_stage_sql(spec, table, resolved, ctx, partitions)
    return statements


def text(statements: dict[str, str]) -> str:
    return "".join(f"-- {name}\n{sql.strip()}\n\n" for name, sql in statements.items())


def check(name: str, statements: dict[str, str]) -> None:
    path = GOLDEN / f"{name}.sql"
    if os.environ.get("SPARK_MERGE_UPDATE_GOLDEN"):
        path.write_text(text(statements))
    assert path.exists(), f"no {path.name}: write it with SPARK_MERGE_UPDATE_GOLDEN=1 and review it"
    assert text(statements) == path.read_text(), f"{path.name} differs: review, then SPARK_MERGE_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("case", CASES)
def test_the_plan_of_each_clause_kind_is_the_reviewed_sql(case):
    check(case, plan(CASES[case]))


def test_the_changes_of_a_table_with_a_change_feed_carry_the_old_values():
    """With spark_merge.change_feed, the changes query passes each target row's old values on (the feed
    records them) and the plan writes them out; the same statement as every_kind."""
    props = {"spark_merge.not_null": "id", "spark_merge.change_feed": "true"}
    table = macros.fill("table_info", dict(DESC, table_properties=props), TYPES)
    spec = parse(CASES["every_kind"]).to_dict()
    resolved = macros.fill("resolve", spec, table)
    ctx = macros.fill("context", spec, table, "20261129000000_golden")
    assert ctx["feed"]
    check("change_feed", {"changes": macros.render("changes_sql", spec, table, resolved, ctx)})


def test_the_value_checks_of_char_and_not_null_struct_fields_are_the_reviewed_sql():
    """CHAR/VARCHAR lengths and a NOT NULL struct field (spark_merge.not_null) checked in each value."""
    rows = [["id", "int"], ["code", "varchar(3)"], ["s", "struct<a:int,b:string>"], ["dt", "date"]]
    table = table_of(rows, table_properties={"spark_merge.not_null": "id, s.a"})
    spec = parse(USING + "WHEN MATCHED THEN UPDATE SET code = s.code, s = s.s WHEN NOT MATCHED THEN INSERT *").to_dict()
    resolved = macros.fill("resolve", spec, table)
    assert resolved["errors"] == []
    ctx = macros.fill("context", spec, table, "20261129000000_golden")
    check("value_checks", {"changes": macros.render("changes_sql", spec, table, resolved, ctx)})


def test_the_table_record_of_a_described_table_is_the_reviewed_one():
    """spark_merge__table_info over DESCRIBE's JSON and rows: columns (CHAR, a struct with a NOT NULL
    field, a default), the partition section, the identity, and the errors of a view and a Hive table."""
    rows = [["id", "int"], ["code", "char(2)"], ["s", "struct<a:int,b:varchar(4)>"], ["n", "bigint"], ["dt", "date"]]
    rows += [["# Partition Information", ""], ["# col_name", "data_type"], ["dt", "date"]]
    struct = {
        "name": "struct",
        "fields": [{"name": "a", "type": {"name": "int"}}, {"name": "b", "type": {"name": "string"}}],
    }
    columns = [
        {"name": "id", "nullable": False},
        {"name": "code", "nullable": True},
        {"name": "s", "type": struct, "nullable": True},
        {"name": "n", "nullable": True, "default": "0"},
        {"name": "dt", "nullable": True},
    ]
    props = {"spark_merge.not_null": "s.a, nope", "spark_merge.version": "3", "spark_merge.table": "db.acc"}
    described = {
        "table": dict(DESC, columns=columns, table_properties=props, created_time="2026-11-01"),
        "view": dict(DESC, type="VIEW"),
        "hive": dict(DESC, provider="hive"),
    }
    records = {k: macros.fill("table_info", d, rows if k == "table" else TYPES) for k, d in described.items()}
    check("table_info", {k: json.dumps(r, indent=1, sort_keys=True) for k, r in records.items()})


def test_the_upsert_plans_are_the_reviewed_ones():
    """spark_merge__upsert_plan: the order that picks a key's row (watermark, tombstone, the row), and
    each refusal (unknown columns, a source lacking columns, a string tombstone without its value)."""
    rows = [
        ["id", "int"],
        ["v", "string"],
        ["wm", "decimal(12,2)"],
        ["gone", "boolean"],
        ["op", "string"],
        ["dt", "date"],
    ]
    table = table_of(rows, table_properties={})
    upserts = {
        "boolean_tombstone": ({"primary_key": ["id"], "watermark_key": ["wm"], "tombstone_key": "gone"}, None),
        "string_tombstone": (
            {
                "primary_key": ["id"],
                "watermark_key": ["wm", "dt"],
                "tombstone_key": "op",
                "tombstone_string_key_value": "D",
            },
            None,
        ),
        "merge_on_read": ({"primary_key": ["id"], "watermark_key": ["wm"], "upsert_mode": "merge-on-read"}, None),
        "refused": ({"primary_key": ["idd"], "tombstone_key": "op", "upsert_mode": "merge-on-read"}, ["id", "v"]),
    }
    plans = {k: macros.upsert_plan(u, table, source_columns=cols) for k, (u, cols) in upserts.items()}
    check("upsert_plans", {k: json.dumps(p, indent=1, sort_keys=True) for k, p in plans.items()})


ENGINE_COLUMNS = [
    ["id", "int"],
    ["a", "int"],
    ["b", "bigint"],
    ["s", "string"],
    ["l", "array<string>"],
    ["n", "array<struct<k1:int,v:string>>"],
    ["ts", "timestamp"],
    ["m", "map<string,int>"],
]
# merge engine options, valid and refused in each way engine_options checks
ENGINE_OPTIONS = {
    "aggregation_fields": {
        "merge_engine": "aggregation",
        "aggregate_function": {"a": "sum", "b": "max", "s": "listagg", "l": "collect", "n": "nested_update"},
        "ignore_retract": {"a": "true"},
        "distinct": {"s": "true", "l": "true"},
        "nested_key": {"n": "k1"},
        "listagg_delimiter": {"s": ";"},
        "row_kind_field": "s",
    },
    "partial_update_groups": {
        "merge_engine": "partial-update",
        "sequence_group": {"ts": "a,b"},
        "aggregate_function": {"b": "max"},
        "default_aggregate_function": "last_non_null_value",
    },
    "deduplicate_sequence": {
        "merge_engine": "deduplicate",
        "sequence_field": ["ts", "a"],
        "remove_record_on_delete": "false",
    },
    "refused_basics": {
        "merge_engine": "dedup",
        "sequence_field": ["nope", "l"],
        "upsert_mode": "merge-on-read",
        "watermark_key": ["a"],
        "primary_key": [],
    },
    "refused_first_row": {"merge_engine": "first-row", "sequence_field": ["a"], "aggregate_function": {"a": "sum"}},
    "refused_functions": {
        "merge_engine": "aggregation",
        "aggregate_function": {"id": "sum", "zz": "max", "a": "median", "s": "sum"},
        "ignore_retract": {"b": "true"},
        "distinct": {"a": "true"},
        "nested_key": {"a": "k", "n": "nope"},
        "listagg_delimiter": {"b": ","},
        "default_aggregate_function": "nope",
    },
    "refused_not_a_mapping": {"merge_engine": "aggregation", "aggregate_function": "sum", "sequence_group": "ts"},
    "refused_groups": {
        "merge_engine": "partial-update",
        "sequence_group": {"ts": "a,id,zz", "s": "a", "b": ""},
        "aggregate_function": {"m": "max"},
        "remove_record_on_delete": "true",
        "ignore_delete": "true",
    },
    "refused_remove_on_delete": {
        "merge_engine": "deduplicate",
        "remove_record_on_delete": True,
        "sequence_group": {"ts": "a"},
    },
    "refused_default_function": {"merge_engine": "deduplicate", "default_aggregate_function": "sum"},
    "refused_default_type": {"merge_engine": "aggregation", "default_aggregate_function": "sum"},
    "refused_groups_and_removal": {
        "merge_engine": "partial-update",
        "sequence_group": {"ts": "a"},
        "remove_record_on_delete": "true",
    },
    "refused_nested_key": {
        "merge_engine": "aggregation",
        "aggregate_function": {"n": "nested_update"},
        "nested_key": {"n": "k9"},
    },
}


def test_the_merge_engine_options_are_read_as_reviewed():
    """spark_merge__engine_options over every option a merge engine takes: what it makes of them, and each
    refusal (the engine, the keys, functions and their types, sequence groups, the per-field flags)."""
    table = table_of(ENGINE_COLUMNS, partition_columns=[], table_properties={})
    read = {}
    for name, options in ENGINE_OPTIONS.items():
        e = macros.fill("engine_options", dict({"primary_key": ["id"]}, **options), table)
        e.pop("functions")  # the function catalogue itself, the same for every case
        read[name] = json.dumps(e, indent=1, sort_keys=True)
    check("engine_options", read)


RESOLVED = {
    "every_kind": CASES["every_kind"],
    "set_columns_and_struct_fields": USING + "WHEN MATCHED THEN UPDATE SET v = s.v, st.a = 1, st.b = 'x'",
    "insert_list_with_defaults": USING + "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, DEFAULT)",
    "refused_set": USING + "WHEN MATCHED THEN UPDATE SET vv = 1, v = 1, v = 2, st = s.st, st.a = 1, dt.x = 1",
    "refused_insert_count": USING + "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id)",
    "refused_insert_names": USING + "WHEN NOT MATCHED THEN INSERT (id, id, vv) VALUES (1, 2, 3)",
    "refused_insert_not_null": USING + "WHEN NOT MATCHED THEN INSERT (v) VALUES ('x')",
    "refused_clauses": USING
    + "WHEN MATCHED THEN DELETE WHEN MATCHED THEN DELETE WHEN NOT MATCHED BY SOURCE THEN UPDATE SET *",
    "refused_sourceless_star": "UPDATE db.acc SET v = 'x'",
}


def test_each_statement_resolves_against_the_table_as_reviewed():
    """spark_merge__resolve: each clause's output per column and the parts validation analyzes, and
    each refusal of SET and INSERT lists (unknown, repeated, whole and by field, counts, NOT NULL)."""
    rows = [["id", "int"], ["v", "string"], ["st", "struct<a:int,b:string>"], ["n", "bigint"], ["dt", "date"]]
    struct = {
        "name": "struct",
        "fields": [{"name": "a", "type": {"name": "int"}}, {"name": "b", "type": {"name": "string"}}],
    }
    columns = [{"name": "id", "nullable": False}, {"name": "v", "nullable": True}, {"name": "st", "type": struct, "nullable": True},
               {"name": "n", "nullable": True, "default": "7"}, {"name": "dt", "nullable": True}]  # fmt: skip
    table = macros.fill("table_info", dict(DESC, columns=columns, table_properties={}), rows)
    resolved = {}
    for name, sql in RESOLVED.items():
        spec = parse(sql).to_dict()
        if name == "refused_sourceless_star":
            spec["clauses"][0].update(star=True, assignments=[])
        resolved[name] = json.dumps(macros.fill("resolve", spec, table), indent=1, sort_keys=True, default=str)
    check("resolved", resolved)


@pytest.mark.parametrize("rule", RULES)
def test_the_duplicate_check_of_each_rule_is_the_reviewed_sql(rule):
    statements = plan(CASES["every_kind"], duplicate_rule=rule)
    check(f"duplicate_rule_{rule}", {"duplicates": statements["duplicates"]})


def test_the_rules_check_duplicates_differently():
    """Not three copies of one file: each rule writes its own check."""
    checks = {rule: plan(CASES["every_kind"], duplicate_rule=rule)["duplicates"] for rule in RULES}
    assert len(set(checks.values())) == len(RULES)


# each merge engine (Paimon's), with the options that shape its fold
ENGINES = {
    "deduplicate": {"merge_engine": "deduplicate", "sequence_field": ["dt"], "row_kind_field": "v"},
    "partial_update": {"merge_engine": "partial-update", "sequence_group": {"dt": "v"}},
    "aggregation": {"merge_engine": "aggregation", "aggregate_function": {"v": "max"}, "input_order": "values"},
    "first_row": {"merge_engine": "first-row"},
    # a function that cannot retract, under a row kind: the fold refuses a retraction of it
    "aggregation_retracting": {
        "merge_engine": "aggregation",
        "aggregate_function": {"dt": "max"},
        "row_kind_field": "v",
    },
}


@pytest.mark.parametrize("engine", ENGINES)
def test_each_merge_engine_folds_the_source_with_the_reviewed_sql(engine):
    """The engine's upsert as a MERGE (spark_merge__engine_spec): the source folded to one row per key."""
    options = dict(ENGINES[engine])
    input_order = options.pop("input_order", None)
    data = to_spec({"target": "db.acc", "source": "src"}, primary_key=["id"], **options).to_dict()
    if input_order:
        data["input_order"] = input_order
    out = macros.fill("engine_spec", data, macros.fill("table_info", DESC, TYPES))
    assert out["errors"] == []
    clauses = "\n".join(f"{c['action']} when {c['condition']}" for c in out["clauses"])
    check(f"engine_{engine}", {"source": out["source"], "on": out["on"], "clauses": clauses})


# every aggregate function on a column of its type, with and without a row kind (retractions)
FUNCTION_COLUMNS = [
    ["id", "int"], ["s1", "int"], ["p1", "double"], ["c1", "bigint"], ["mx", "date"], ["mn", "string"], ["ba", "boolean"],
    ["bo", "boolean"], ["fv", "string"], ["fn", "string"], ["lv", "string"], ["ln", "string"], ["la", "string"],
    ["co", "array<string>"], ["mm", "map<string,int>"], ["nu", "array<struct<k:int,v:string>>"], ["op", "string"],
]  # fmt: skip
FUNCTIONS = {"s1": "sum", "p1": "product", "c1": "count", "mx": "max", "mn": "min", "ba": "bool_and", "bo": "bool_or",
             "fv": "first_value", "fn": "first_non_null_value", "lv": "last_value", "ln": "last_non_null_value",
             "la": "listagg", "co": "collect", "mm": "merge_map", "nu": "nested_update"}  # fmt: skip


@pytest.mark.parametrize("kind", [None, "op"], ids=["insert_only", "row_kind"])
def test_each_aggregate_function_folds_as_reviewed(kind):
    """spark_merge__engine_step for every function (engine_spec's fold), plain and with retractions."""
    table = table_of(FUNCTION_COLUMNS, partition_columns=[], table_properties={})
    options = {"merge_engine": "aggregation", "aggregate_function": dict(FUNCTIONS), "nested_key": {"nu": "k"},
               "distinct": {"co": "true", "la": "true"}, "listagg_delimiter": {"la": "|"}}  # fmt: skip
    if kind:
        options.update(row_kind_field=kind, ignore_retract={c: "true" for c, f in FUNCTIONS.items() if f in ("max", "min",
                       "bool_and", "bool_or", "first_value", "first_non_null_value", "listagg")})  # fmt: skip
        options["aggregate_function"].pop("lv")  # op is the row kind, not a value
    spec = to_spec({"target": "db.acc", "source": "src"}, primary_key=["id"], **options).to_dict()
    out = macros.fill("engine_spec", spec, table)
    assert out["errors"] == []
    check(f"functions_{'row_kind' if kind else 'insert_only'}", {"source": out["source"]})


def test_every_golden_file_belongs_to_a_case():
    """A case that was renamed or removed leaves no stale file that nothing compares."""
    expected = {f"{c}.sql" for c in CASES} | {f"duplicate_rule_{r}.sql" for r in RULES}
    expected |= {f"engine_{e}.sql" for e in ENGINES} | {
        "value_checks.sql",
        "table_info.sql",
        "upsert_plans.sql",
        "resolved.sql",
        "change_feed.sql",
        "functions_insert_only.sql",
        "functions_row_kind.sql",
        "engine_options.sql",
        "explain_merge.sql",  # test_explain_host.py
    }
    assert {p.name for p in GOLDEN.glob("*.sql")} == expected
