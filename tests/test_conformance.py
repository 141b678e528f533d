"""One statement sequence, two hosts: dbt and merge_core issue the same statements, from the first.

The lifecycle (begin, plan, write, commit, finish) is written once in Jinja
(dbt_macros/macros/lifecycle/). dbt runs it with its own macros as host primitives, merge_core
with its SparkHost (a merge's begin primitives: lifecycle/merge_host.py). Both trace every
statement and primitive they issue, from the merge's first; for the same merge into two identical
tables the traces must be equal once merge ids, table names, locations, times, identifier quoting
and the history entry's statement text are replaced. Shapes: a dbt model per MERGE shape (an
upsert, insert-only, delete and update, BY SOURCE, a duplicate match, the upserts, a merge-on-read
upsert), dbt's UPDATE, DELETE and rollback operations, a validation that fails and a conflict with a
live commit.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from merge_core import ConflictError, DuplicateMatchError, ValidationError, merge, rollback
from merge_core.common import macros
from merge_core.spark import host, lock
from merge_core.spark.catalog import describe_table

from .conftest import rows
from .test_dbt import projects, session_project  # noqa: F401  (the dbt project fixtures)

COLUMNS = ["id", "name", "amount", "region"]
T, S = "DBT_INTERNAL_DEST", "DBT_INTERNAL_SOURCE"

# (model config, the MERGE the Python host runs for it: {target} {source}, batch)
SHAPES = {
    "upsert": (
        "unique_key='id', partition_by=['region']",
        f"MERGE INTO {{target}} {T} USING {{source}} {S} ON {T}.`id` = {S}.`id` "
        f"WHEN MATCHED THEN UPDATE SET " + ", ".join(f"`{c}` = {S}.`{c}`" for c in COLUMNS) + " "
        "WHEN NOT MATCHED THEN INSERT ("
        + ", ".join(f"`{c}`" for c in COLUMNS)
        + ") VALUES ("
        + ", ".join(f"{S}.`{c}`" for c in COLUMNS)
        + ")",
        2,
    ),
    "insert_only": (
        "unique_key='id', partition_by=['region'], merge_clauses=[{'when': 'not_matched', 'action': 'insert'}]",
        f"MERGE INTO {{target}} {T} USING {{source}} {S} ON {T}.`id` = {S}.`id` "
        f"WHEN NOT MATCHED THEN INSERT ("
        + ", ".join(f"`{c}`" for c in COLUMNS)
        + ") VALUES ("
        + ", ".join(f"{S}.`{c}`" for c in COLUMNS)
        + ")",
        2,
    ),
    "delete_and_update": (
        "unique_key='id', merge_clauses=[{'when': 'matched', 'condition': \"DBT_INTERNAL_SOURCE.op = 'D'\", "
        "'action': 'delete'}, {'when': 'matched', 'action': 'update', 'set': {'amount': "
        "'DBT_INTERNAL_DEST.amount + DBT_INTERNAL_SOURCE.amount'}}]",
        f"MERGE INTO {{target}} {T} USING {{source}} {S} ON {T}.`id` = {S}.`id` "
        f"WHEN MATCHED AND {S}.op = 'D' THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET amount = {T}.amount + {S}.amount",
        3,
    ),
    # a FULL join; the row of batch 1 that batch 2 lacks is in 'eu', the clause's partition
    "not_matched_by_source": (
        "unique_key='id', partition_by=['region'], merge_clauses=[{'when': 'matched', 'action': 'update'}, "
        "{'when': 'not_matched', 'action': 'insert'}, {'when': 'not_matched_by_source', "
        "'condition': \"DBT_INTERNAL_DEST.region = 'eu'\", 'action': 'update', 'set': {'amount': '0'}}]",
        f"MERGE INTO {{target}} {T} USING {{source}} {S} ON {T}.`id` = {S}.`id` "
        f"WHEN MATCHED THEN UPDATE SET " + ", ".join(f"`{c}` = {S}.`{c}`" for c in COLUMNS) + " "
        "WHEN NOT MATCHED THEN INSERT ("
        + ", ".join(f"`{c}`" for c in COLUMNS)
        + ") VALUES ("
        + ", ".join(f"{S}.`{c}`" for c in COLUMNS)
        + ") "
        f"WHEN NOT MATCHED BY SOURCE AND {T}.region = 'eu' THEN UPDATE SET amount = 0",
        2,
    ),
    "duplicate": (
        "unique_key='id'",
        f"MERGE INTO {{target}} {T} USING {{source}} {S} ON {T}.`id` = {S}.`id` "
        f"WHEN MATCHED THEN UPDATE SET " + ", ".join(f"`{c}` = {S}.`{c}`" for c in COLUMNS) + " "
        "WHEN NOT MATCHED THEN INSERT ("
        + ", ".join(f"`{c}`" for c in COLUMNS)
        + ") VALUES ("
        + ", ".join(f"{S}.`{c}`" for c in COLUMNS)
        + ")",
        4,
    ),
    # upserts: the Python host gets the same options as keywords (a dict spec, dbt's aliases)
    "watermark_upsert": ("unique_key='id', watermark_key='batch'", {"primary_key": "id", "watermark_key": "batch"}, 2),
    "engine_upsert": (
        "unique_key='id', merge_engine='aggregation', aggregate_function={'amount': 'sum'}",
        {"primary_key": "id", "merge_engine": "aggregation", "aggregate_function": {"amount": "sum"}},
        2,
    ),
    "merge_on_read": (
        "unique_key='id', watermark_key='batch', upsert_mode='merge-on-read'",
        {"primary_key": "id", "watermark_key": "batch", "upsert_mode": "merge-on-read"},
        2,
    ),
}
BATCH_SQL = "select id, name, amount, region{op} from {updates} where batch = {batch}"
DUPLICATES = "select id, name, amount, region from {updates} where batch = 2 union all select 2, 'twin', 1.0, 'us'"


def _model(project, name: str, config: str, body: str) -> None:
    project.model(name, "{{ config(materialized='spark_merge', " + config + ") }}\n" + body)


def _normalize(trace: list, names: dict[str, str]) -> list[tuple[str, str]]:
    out = []
    for kind, text in trace:
        text = _unset_journal(_join_journal(text))
        for real, placeholder in names.items():
            text = text.replace(real, placeholder)
        text = re.sub(r"\d{14}_[0-9a-f]{8}", "<id>", text)
        # data files each host's own writes named (the files holding a matched row, which the write reads)
        text = re.sub(r"part-\d{5}-[0-9a-f-]{36}[.\w-]*\.parquet", "<file>", text)
        # the identity's signature binds each table's id to its own creation time
        text = re.sub(r"('spark_merge\.identity' = ')[0-9a-f]{32}'", r"\1<signature>'", text)
        text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00", "<ts>", text)
        text = re.sub(r'(executionTimeMs\\*"\s*:\s*)\d+', r"\1<ms>", text)
        text = re.sub(r'(plan_hash\\*"\s*:\s*\\*")[0-9a-f]*', r"\1<hash>", text)
        text = re.sub(r'(statement\\*"\s*:\s*)(?:null|\\*".*?\\*")(,)', r"\1<statement>\2", text)
        # the specs come from two parsers (sqlglot, dbt's config): they may quote identifiers differently
        out.append((kind, text.replace("`", "")))
    return out


JOURNAL_PART = re.compile(r",\s*'spark_merge\.journal\.(\d+)' = '((?:[^'\\]|\\.)*)'")


def _join_journal(text: str) -> str:
    """A journal's parts as one property: it is split by length, and the hosts' statement texts
    (which the entry carries, and which are replaced only once it is whole) differ in length."""
    parts = JOURNAL_PART.findall(text)
    if not parts:
        return text
    whole = "".join(value for _, value in sorted(parts, key=lambda p: int(p[0])))
    text = JOURNAL_PART.sub("", text)
    return re.sub(r"'spark_merge\.journal\.parts' = '\d+'", lambda _: f"'spark_merge.journal' = '{whole}'", text)


def _unset_journal(text: str) -> str:
    """Unsetting the journal's parts, however many."""
    return re.sub(r"'spark_merge\.journal\.\d+'(, 'spark_merge\.journal\.\d+')*", "'spark_merge.journal.<parts>'", text)


def _assert_same(
    spark, from_python: list, from_dbt: list, py_table: str, dbt_table: str, names: dict, first: str = "own_target"
) -> None:
    """The two traces are equal, step by step, once the tables' names and roots are placeholders; both
    start with the merge's first step (``first``: a merge-on-read upsert's begin starts by listing
    the view, a statement)."""
    for table in (py_table, dbt_table):
        schema, name = table.split(".")
        names[describe_table(spark, [schema, name])["root"].rstrip("/")] = "<root>"
        names[f"`{schema}`.`{name}`"] = "<target>"
        names[table] = "<target>"
        names[f"__sm_lock_{name}"] = "__sm_lock_<t>"
        names[name] = "<t>"  # the alias of an UPDATE or DELETE that names none: the table's name
    python, dbt = _normalize(from_python, names), _normalize(from_dbt, names)
    assert [k for k, _ in python] == [k for k, _ in dbt], f"the hosts took different steps:\n{python}\n{dbt}"
    for number, (p, d) in enumerate(zip(python, dbt)):
        assert p == d, f"statement {number} differs:\npython: {p[1]}\ndbt:    {d[1]}"
    assert len(python) > 3
    assert python[0][0] == first, f"the trace does not start at the merge's first step: {python[0]}"


def _dbt_trace(logs: list[str]) -> list[tuple[str, str]]:
    return [tuple(json.loads(line.split(" ", 1)[1])) for line in logs if line.startswith("spark_merge.trace ")]


@pytest.fixture
def whole_partitions(monkeypatch):
    """The write mode and the summary's join are branches on host capabilities (dbt has no file
    system: can_carry, so it rewrites touched partitions whole, where Python carries unchanged files
    over; target_rows, so its summary never broadcasts a small target; key_candidates, so its scans
    are narrowed by the source's key ranges only, not by the files'; can_observe, so a summary counts
    the changes before its write, where Python's one-pass write counts them): with the same capabilities
    both hosts must issue the same statements, so the Python host here reports dbt's."""

    def can_carry(self, table, old):
        host._trace("can_carry")
        return False

    def target_rows(self, table):
        host._trace("target_rows")
        return None

    def key_candidates(self, table, keys):
        host._trace("key_candidates")
        return None

    def can_observe(self, table, ctx):
        host._trace("can_observe")
        return False

    monkeypatch.setattr(host.SparkHost, "can_carry", can_carry)
    monkeypatch.setattr(host.SparkHost, "target_rows", target_rows)
    monkeypatch.setattr(host.SparkHost, "key_candidates", key_candidates)
    monkeypatch.setattr(host.SparkHost, "can_observe", can_observe)


# shapes whose statements the others already compare, in make test-all only (CI's time)
EXTENDED = {
    "watermark_upsert": "the upsert begin and write of upsert and engine_upsert",
    "duplicate": "the plan of upsert up to the duplicate check, whose failure the hosts' own tests cover",
    "delete_and_update": "the clauses' plan and rewrite of upsert and not_matched_by_source",
}


def _shapes(names) -> list:
    return [pytest.param(n, marks=pytest.mark.extended) if n in EXTENDED else n for n in sorted(names)]


@pytest.mark.parametrize("shape", _shapes(SHAPES))
def test_dbt_and_python_issue_the_same_statements(spark, session_project, shape, whole_partitions):
    config, statement, batch = SHAPES[shape]
    updates = f"{session_project.schema}.account_updates"
    # names of one length for both tables: the journal is split into table properties by length
    name = f"conf_{shape}_db"
    op = {"delete_and_update": ", op", "watermark_upsert": ", batch", "merge_on_read": ", batch"}.get(shape, "")
    _model(session_project, name, config, BATCH_SQL.format(op=op, updates="{{ ref('account_updates') }}", batch=1))
    session_project.dbt("run", "-s", name)
    dbt_table = session_project.table(name)
    py_table = f"{session_project.schema}.conf_{shape}_py"
    for leftover in (py_table, py_table + "__sm_log"):  # a merge-on-read table is a view over its log
        spark.sql(f"DROP VIEW IF EXISTS {leftover}")
        spark.sql(f"DROP TABLE IF EXISTS {leftover}")
    partitioned = "PARTITIONED BY (region)" if "partition_by" in config else ""
    # the Python table starts as the dbt model's first run left it: a CTAS, or for an upsert an empty
    # CTAS and an upsert of the first batch (a merge-on-read one converts the table to log + view)
    upsert = isinstance(statement, dict)
    spark.sql(
        f"CREATE TABLE {py_table} USING parquet {partitioned} AS SELECT * FROM {dbt_table}"
        + (" WHERE false" if upsert else "")
    )
    if upsert:
        first = BATCH_SQL.format(op=op, updates=updates, batch=1)
        merge(spark, {"target": py_table, "source": first, "source_alias": S, "target_alias": T}, **statement)

    body = (
        DUPLICATES.format(updates="{{ ref('account_updates') }}")
        if shape == "duplicate"
        else BATCH_SQL.format(op=op, updates="{{ ref('account_updates') }}", batch=batch)
    )
    _model(session_project, name, config, body)
    session_project.dbt("run", "-s", name, ok=shape != "duplicate")
    from_dbt = _dbt_trace(session_project.logs)

    view = f"{name}__sm_source_20260101000000_00000000"
    source = (
        DUPLICATES.format(updates=updates)
        if shape == "duplicate"
        else BATCH_SQL.format(op=op, updates=updates, batch=batch)
    )
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW `{view}` AS {source}")
    host.trace = []
    try:
        if shape == "duplicate":
            with pytest.raises(DuplicateMatchError):
                merge(spark, statement.format(target=py_table, source=f"`{view}`"))
        elif isinstance(statement, dict):
            merge(spark, {"target": py_table, "source": f"`{view}`", "source_alias": S, "target_alias": T}, **statement)
        else:
            merge(spark, statement.format(target=py_table, source=f"`{view}`"))
        from_python = list(host.trace)
    finally:
        host.trace = None
        spark.sql(f"DROP VIEW IF EXISTS `{view}`")

    names = {}
    if shape == "merge_on_read":  # the log is the table the lifecycle writes; the view reads it
        for table in (py_table, dbt_table):
            names[f"`{table.split('.')[0]}`.`{table.split('.')[1]}__sm_log`"] = "<log>"
            names[f"{table}__sm_log"] = "<log>"
            names[f"__sm_lock_{table.split('.')[1]}__sm_log"] = "__sm_lock_<log>"
        for table in (py_table, dbt_table):
            names[f"`{table.split('.')[0]}`.`{table.split('.')[1]}`"] = "<view>"
        for table in (py_table, dbt_table):  # begin lists the view by its bare name
            names[table.split(".")[1]] = "<view>"
        dbt_table, py_table = dbt_table + "__sm_log", py_table + "__sm_log"
    _assert_same(
        spark,
        from_python,
        from_dbt,
        py_table,
        dbt_table,
        names,
        "sql" if shape == "merge_on_read" else "own_target",
    )
    if shape != "duplicate":
        assert rows(spark, py_table) == rows(spark, dbt_table)
    if shape == "not_matched_by_source":  # ann (id 1, eu) is in batch 1 only: the clause zeroed her amount
        assert spark.sql(f"SELECT amount FROM {dbt_table} WHERE id = 1").collect()[0][0] == 0


# dbt's operations beside the Python statements: (operation, its args, the statement)
OPERATIONS = {
    "update": (
        "update",
        {"set": {"amount": "amount * 2"}, "where": "region = 'eu'"},
        "UPDATE {t} SET amount = amount * 2 WHERE region = 'eu'",
    ),
    "delete": ("delete", {"where": "id = 2"}, "DELETE FROM {t} WHERE id = 2"),
    "failed_validation": ("update", {"set": {"nope": "1"}, "where": "id = 1"}, "UPDATE {t} SET nope = 1 WHERE id = 1"),
    "conflict": ("delete", {"where": "id = 2"}, "DELETE FROM {t} WHERE id = 2"),
}


@pytest.mark.parametrize("shape", _shapes(OPERATIONS))
def test_dbt_operations_and_python_statements_issue_the_same_statements(
    spark, session_project, shape, whole_partitions, monkeypatch
):
    """UPDATE and DELETE through dbt's operations and through merge(); a validation that fails (an
    unknown column) and a conflict (another merge's live commit holds the lock) stop both hosts at
    the same step, before anything is written."""
    operation, args, statement = OPERATIONS[shape]
    schema = session_project.schema
    tables = {h: f"{schema}.op_{shape}_{h}" for h in ("db", "py")}  # names of one length
    for t in tables.values():
        spark.sql(f"DROP TABLE IF EXISTS {t}")
        spark.sql(
            f"CREATE TABLE {t} USING parquet PARTITIONED BY (region) AS "
            f"SELECT id, name, amount, region FROM {schema}.account_updates WHERE batch = 1"
        )
    if shape == "conflict":  # a live holder: its lease runs a minute; each host waits 1 s, then gives up
        now = datetime.now(UTC)
        for t in tables.values():
            spark.sql(
                macros.render(
                    "lock_sql", describe_table(spark, t.split(".")), "20260101000000_11111111", now.isoformat(),
                    (now + timedelta(seconds=60)).isoformat(), "host-a pid 1",
                )
            )  # fmt: skip
        monkeypatch.setitem(lock.settings(), "wait_s", 1)
    before = {h: rows(spark, t) for h, t in tables.items()}
    ok = shape not in ("failed_validation", "conflict")
    session_project.dbt(
        "run-operation", f"spark_merge.{operation}", "--args", json.dumps({"relation": tables["db"], **args}),
        vars={"spark_merge_lock_wait_seconds": 1}, ok=ok,
    )  # fmt: skip
    from_dbt = _dbt_trace(session_project.logs)
    host.trace = []
    try:
        if ok:
            merge(spark, statement.format(t=tables["py"]))
        else:
            with pytest.raises(ValidationError if shape == "failed_validation" else ConflictError):
                merge(spark, statement.format(t=tables["py"]))
        from_python = list(host.trace)
    finally:
        host.trace = None
    _assert_same(spark, from_python, from_dbt, tables["py"], tables["db"], {})
    if ok:
        assert rows(spark, tables["py"]) == rows(spark, tables["db"]) != before["py"]
    else:
        assert rows(spark, tables["py"]) == before["py"] and rows(spark, tables["db"]) == before["db"]
    if shape == "conflict":
        for t in tables.values():
            lock.break_lock(spark, describe_table(spark, t.split(".")))


def test_dbt_and_python_rollbacks_issue_the_same_statements(spark, session_project):
    """A rollback through dbt's operation and through rollback(): two merges into each table (an update
    of one partition; an upsert that updates a row and creates a partition), then both undone: the same
    statements from the first, and each table back to its rows before the merges (the created
    partition emptied)."""

    schema = session_project.schema
    tables = {h: f"{schema}.rb_undo_{h}" for h in ("db", "py")}  # names of one length
    first_row = "(SELECT * FROM {t} ORDER BY id LIMIT 1)"
    undo = {}
    for t in tables.values():
        spark.sql(f"DROP TABLE IF EXISTS {t}")
        spark.sql(
            f"CREATE TABLE {t} USING parquet PARTITIONED BY (region) AS "
            f"SELECT id, name, amount, region FROM {schema}.account_updates WHERE batch = 1"
        )
    before = {h: rows(spark, t) for h, t in tables.items()}
    for h, t in tables.items():
        undo[h] = merge(spark, f"UPDATE {t} SET amount = amount + 1 WHERE region = 'eu'").merge_id
        one = first_row.format(t=t)
        merge(
            spark,
            f"MERGE INTO {t} t USING (SELECT id, 'upd' AS name, amount, region FROM {one} UNION ALL "
            f"SELECT 99, 'new', amount, 'ap' FROM {one}) s ON t.id = s.id "
            f"WHEN MATCHED THEN UPDATE SET name = s.name WHEN NOT MATCHED THEN INSERT *",
        )
    session_project.dbt(
        "run-operation", "spark_merge.rollback", "--args", json.dumps({"relation": tables["db"], "to": undo["db"]})
    )
    from_dbt = _dbt_trace(session_project.logs)
    host.trace = []
    try:
        rollback(spark, tables["py"], undo["py"])
        from_python = list(host.trace)
    finally:
        host.trace = None
    _assert_same(spark, from_python, from_dbt, tables["py"], tables["db"], {}, "catalog")
    assert rows(spark, tables["py"]) == before["py"] and rows(spark, tables["db"]) == before["db"]
    assert rows(spark, f"(SELECT * FROM {tables['db']} WHERE region = 'ap')") == []
