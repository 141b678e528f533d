"""The SQL macros are pure: plain data in, SQL out (no Spark needed to check them)."""
from __future__ import annotations

import pytest

from merge_core import macros, parse

DESC = {"namespace": ["db"], "table_name": "acc", "type": "MANAGED", "provider": "parquet",
        "location": "file:/w/acc", "partition_columns": ["dt"],
        "columns": [{"name": "id", "nullable": True}, {"name": "v", "nullable": True}, {"name": "dt", "nullable": True}],
        "table_properties": {"spark_merge.not_null": "id"}}
TYPES = [["id", "int"], ["v", "string"], ["dt", "date"]]


@pytest.fixture
def table():
    return macros.fill("table_info", DESC, TYPES)


def test_table_info(table):
    assert table["relation"] == "`db`.`acc`" and table["root"] == "file:/w/acc"
    assert [c["nullable"] for c in table["columns"]] == [False, True, True]  # from spark_merge.not_null


@pytest.mark.parametrize("src, dst, ok", [
    ("int", "bigint", True), ("decimal(10,2)", "double", True), ("string", "int", False),
    ("int", "string", True), ("date", "timestamp", True), ("array<int>", "array<bigint>", True),
    ("array<string>", "date", False), ("boolean", "int", False), ("void", "date", True),
])
def test_store_assignment_rules(src, dst, ok):
    assert macros.render("can_assign", src, dst) == ("true" if ok else "false")


def test_literals_escape_quotes_and_backslashes():
    assert macros.render("literal", "it's \\ x") == "'it\\'s \\\\ x'"
    assert macros.render("quote", "we`ird") == "`we``ird`"


def test_journal_is_chunked_and_round_trips(table):
    import json
    import re
    repoints = [{"partition": {"dt": f"2024-01-{d:02d}"}, "location": f"file:/w/acc/_merge_m/dt=2024-01-{d:02d}",
                 "old_location": None, "exists": True} for d in range(1, 31)]
    sql = macros.render("journal_sql", table, "m", repoints)
    parts = dict(re.findall(r"'spark_merge\.journal\.(\d+)' = '((?:[^'\\]|\\.)*)'", sql))
    assert len(parts) > 1  # long journals are split for metastores with 4000-character values
    text = "".join(parts[str(i)] for i in range(len(parts))).replace("\\'", "'").replace("\\\\", "\\")
    assert json.loads(text)["repoints"] == repoints


def test_rendering_is_deterministic(table):
    spec = parse("MERGE INTO db.acc t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v").to_dict()
    resolved = macros.fill("resolve", spec, table)
    ctx = macros.fill("context", spec, table, "m1")
    first = macros.render("changes_sql", spec, table, resolved, ctx)
    assert first == macros.render("changes_sql", spec, table, resolved, ctx)
    assert "RIGHT JOIN" in first and "CAST((s.v) AS string)" in first
