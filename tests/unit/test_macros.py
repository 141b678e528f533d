"""The SQL macros are pure: plain data in, SQL out (no Spark needed to check them)."""

from __future__ import annotations

import pytest

from merge_core import parse
from merge_core.common import macros

DESC = {
    "namespace": ["db"],
    "table_name": "acc",
    "type": "MANAGED",
    "provider": "parquet",
    "location": "file:/w/acc",
    "partition_columns": ["dt"],
    "columns": [{"name": "id", "nullable": True}, {"name": "v", "nullable": True}, {"name": "dt", "nullable": True}],
    "table_properties": {"spark_merge.not_null": "id"},
}
TYPES = [["id", "int"], ["v", "string"], ["dt", "date"]]


@pytest.fixture
def table():
    return macros.fill("table_info", DESC, TYPES)


def test_table_info(table):
    assert table["relation"] == "`db`.`acc`" and table["root"] == "file:/w/acc"
    assert [c["nullable"] for c in table["columns"]] == [False, True, True]  # from spark_merge.not_null


def test_table_info_reads_describe_table_rows_with_char_columns():
    """DESCRIBE TABLE's rows: the columns, then its sections; CHAR/VARCHAR columns compute as strings and
    keep their declared length, nested ones become strings (their lengths are not checked)."""
    rows = [
        ["id", "int"],
        ["v", "varchar(3)"],
        ["c", "char(5)"],
        ["s", "struct<a:varchar(2),n:int>"],
        ["dt", "date"],
        ["# Partition Information", ""],
        ["# col_name", "data_type"],
        ["dt", "date"],
    ]
    desc = dict(DESC, columns=[{"name": r[0], "nullable": True} for r in rows[:5]])
    table = macros.fill("table_info", desc, rows)
    assert [(c["name"], c["type"], c["char_length"], c["char_type"]) for c in table["columns"]] == [
        ("id", "int", None, None),
        ("v", "string", 3, "varchar(3)"),
        ("c", "string", 5, "char(5)"),
        ("s", "struct<a:string,n:int>", None, None),
        ("dt", "date", None, None),
    ]


@pytest.mark.parametrize(
    "src, dst, ok",
    [
        ("int", "bigint", True),
        ("decimal(10,2)", "double", True),
        ("string", "int", False),
        ("int", "string", True),
        ("date", "timestamp", True),
        ("array<int>", "array<bigint>", True),
        ("array<string>", "date", False),
        ("boolean", "int", False),
        ("void", "date", True),
        # field by field, by position: NULL fields take any type, names need not agree, shapes must
        ("struct<a:void,b:int>", "struct<x:array<int>,y:bigint>", True),
        ("struct<x:string>", "struct<x:int>", False),
        ("struct<a:int>", "struct<a:int,b:int>", False),
        ("map<string,void>", "map<string,string>", True),
        ("map<string,array<int>>", "map<string,string>", False),
        ("struct<d:decimal(10,2),m:map<string,int>>", "struct<d:double,m:map<string,bigint>>", True),
    ],
)
def test_store_assignment_rules(src, dst, ok):
    assert macros.render("can_assign", src, dst) == ("true" if ok else "false")


def test_literals_escape_quotes_and_backslashes():
    assert macros.render("literal", "it's \\ x") == "'it\\'s \\\\ x'"
    assert macros.render("quote", "we`ird") == "`we``ird`"


def test_journal_is_chunked_and_round_trips(table):
    import json
    import re

    repoints = [
        {
            "partition": {"dt": f"2024-01-{d:02d}"},
            "location": f"file:/w/acc/_merge_m/dt=2024-01-{d:02d}",
            "old_location": None,
            "exists": True,
        }
        for d in range(1, 31)
    ]
    sql = macros.render("journal_sql", table, "m", repoints)
    parts = dict(re.findall(r"'spark_merge\.journal\.(\d+)' = '((?:[^'\\]|\\.)*)'", sql))
    assert len(parts) > 1  # long journals are split for metastores with 4000-character values
    text = "".join(parts[str(i)] for i in range(len(parts))).replace("\\'", "'").replace("\\\\", "\\")
    assert json.loads(text)["repoints"] == repoints


def test_the_done_mark_empties_every_journal_text_part_in_the_same_statement():
    """The parts the described table holds text in, and the parts the commit's journal wrote (a part
    empty when described but written since counts too); not the parts count, the merge id, or parts
    already empty and not written; the done mark itself in the same statement."""
    import re

    props = {
        "spark_merge.journal.parts": "2",
        "spark_merge.journal.merge_id": "m",
        "spark_merge.journal.0": "{",
        "spark_merge.journal.1": "",
        "spark_merge.journal.4": "",
        "spark_merge.journal.7": "left over",
    }
    table = macros.fill("table_info", {**DESC, "table_properties": props}, TYPES)
    sql = macros.render("journal_done_sql", table, "m", 2)
    assert sql.startswith("ALTER TABLE `db`.`acc` SET TBLPROPERTIES ('spark_merge.journal.parts' = '0'"), sql
    assert "'spark_merge.last_merge_id' = 'm'" in sql
    emptied = re.findall(r"'spark_merge\.journal\.(\w+)' = ''", sql)
    assert sorted(emptied) == ["0", "1", "7"], sql


def test_rendering_is_deterministic(table):
    spec = parse("MERGE INTO db.acc t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v").to_dict()
    resolved = macros.fill("resolve", spec, table)
    ctx = macros.fill("context", spec, table, "m1")
    first = macros.render("changes_sql", spec, table, resolved, ctx)
    assert first == macros.render("changes_sql", spec, table, resolved, ctx)
    assert "INNER JOIN" in first and "CAST((s.v) AS string)" in first


@pytest.mark.parametrize(
    "clauses, source_rows, join, semi",
    [
        ("WHEN MATCHED THEN UPDATE SET v = s.v", 10, "INNER JOIN", False),
        ("WHEN MATCHED AND s.v IS NULL THEN DELETE", 100_000, "INNER JOIN", False),
        ("WHEN MATCHED THEN UPDATE SET v = s.v", 100_001, "INNER JOIN", True),
        ("WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *", 10, "RIGHT JOIN", True),
    ],
)
def test_the_plan_joins_the_source_inner_unless_a_clause_inserts(table, clauses, source_rows, join, semi):
    """A source row no target row matches changes nothing unless a NOT MATCHED clause inserts it: then
    the plan's join keeps it (RIGHT, the target first semi-joined with the broadcast source's ON
    columns, so only matched target rows are shuffled). Without one the join is INNER, and a source of
    at most 100,000 rows is broadcast to it at full width, one broadcast instead of two; a larger
    source keeps the semi-join, whose broadcast holds its ON columns only."""
    spec = parse(f"MERGE INTO db.acc t USING src s ON t.id = s.id {clauses}").to_dict()
    resolved = macros.fill("resolve", spec, table)
    ctx = {**macros.fill("context", spec, table, "m1"), "source_rows": source_rows}
    sql = macros.render("changes_sql", spec, table, resolved, ctx)
    assert join in sql and ("LEFT SEMI JOIN" in sql) == semi
    assert sql.count("BROADCAST(`s`)") == 1


@pytest.mark.parametrize("matched_files", [None, [], ["file:/w/acc/dt=2024-01-01/a.parquet"]])
def test_the_fused_write_of_an_upsert_reads_the_files_holding_a_matched_row_not_the_key_range(table, matched_files):
    """An upsert's fused write must tell an inserted source row from one a target row matches without
    changing it, so besides the files it rewrites it reads rows ON can match. A source of new keys
    beside old ones spans the whole table in its key range: the summary names the files holding a
    matched row instead (ctx.matched_files), and the write reads only those (none: the files it
    rewrites alone). Where the summary did not name them, the key range as before."""
    spec = parse(
        "MERGE INTO db.acc t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
    ).to_dict()
    resolved = macros.fill("resolve", spec, table)
    ctx = {
        **macros.fill("context", spec, table, "m1"),
        "source_rows": 500_000,
        "match_filter": "`t`.`id` BETWEEN 1 AND 9",
    }
    ctx.update({"rewrite_files": ["file:/w/acc/dt=2024-01-01/b.parquet"], "inserts": True})
    if matched_files is not None:
        ctx["matched_files"] = matched_files
    assert "AS matched_files" in macros.render(
        "change_summary_sql", spec, table, resolved, {**ctx, "name_matched_files": True}
    )
    partitions = [{"dt": "2024-01-01"}]
    scan = macros.render("fused_rewrite_select", spec, table, resolved, ctx, partitions).split(" FULL JOIN ")[0]
    where = scan.split(" WHERE ", 1)[1]
    rewritten = "_metadata.file_path IN ('file:/w/acc/dt=2024-01-01/b.parquet')"
    assert rewritten in where
    if matched_files is None:
        assert where.count("_metadata.file_path") == 1 and "OR ((`t`.`id` BETWEEN 1 AND 9))" in where
    elif matched_files:
        assert "AND (_metadata.file_path IN ('file:/w/acc/dt=2024-01-01/a.parquet'))" in where
    else:
        assert "AND (false)" in where
    # a source the write broadcasts: its unmatched rows anti-joined with the same files' rows, or all of them
    small = {**ctx, "source_rows": 1_000, "broadcast_source": True}
    write = macros.render("fused_rewrite_select", spec, table, resolved, small, partitions)
    insert_part = write.split("UNION ALL", 1)[1]
    assert ("LEFT ANTI JOIN" in insert_part) == (matched_files != [])
    if matched_files:
        assert "_metadata.file_path IN ('file:/w/acc/dt=2024-01-01/a.parquet')" in insert_part


def test_the_summary_names_the_files_holding_a_matched_row_when_asked():
    rows = [
        {
            "op": 3,
            "bys": 0,
            "__sm_old": "[]",
            "__sm_new": "[]",
            "n": 2,
            "files": '["f1"]',
            "matched_files": '["f1", "f2"]',
        },
        {"op": -1, "bys": 0, "__sm_old": "[]", "__sm_new": "[]", "n": 1, "files": "[]", "matched_files": '["f3"]'},
    ]
    table = macros.fill("table_info", dict(DESC, partition_columns=[]), TYPES)
    out = macros.fill("summarize_changes", table, rows)
    assert out["files"] == ["f1"] and out["matched_files"] == ["f1", "f2", "f3"]


def test_a_struct_field_assignment_rebuilds_the_struct_from_its_old_fields():
    """SET s.c2.m = ... (a dict spec's, or dbt merge_clauses' set, key): every field from its old value
    but the assigned one, as Spark's AssignmentUtils; an unknown field names the ones there are."""
    struct = {
        "name": "struct",
        "fields": [
            {"name": "c1", "type": {"name": "int"}},
            {
                "name": "c2",
                "type": {
                    "name": "struct",
                    "fields": [{"name": "a", "type": {"name": "array"}}, {"name": "m", "type": {"name": "map"}}],
                },
            },
        ],
    }
    desc = dict(DESC, columns=DESC["columns"] + [{"name": "s", "type": struct, "nullable": True}])
    table = macros.fill(
        "table_info", desc, TYPES + [["s", "struct<c1:int,c2:struct<a:array<int>,m:map<string,string>>>"]]
    )
    spec = parse("UPDATE db.acc SET s.c2.m = map('k', 'v'), v = 'x' WHERE id = 1").to_dict()
    resolved = macros.fill("resolve", spec, table)
    assert resolved["errors"] == []
    assert resolved["clauses"][0]["outputs"]["s"] == (
        "named_struct('c1', `acc`.`s`.`c1`, 'c2', named_struct('a', `acc`.`s`.`c2`.`a`, 'm', (MAP('k', 'v'))))"
    )
    spec["clauses"][0]["assignments"] = [["s.c3", "1"]]
    assert macros.fill("resolve", spec, table)["errors"] == [
        "WHEN MATCHED clause 1 (UPDATE): SET s.c3: struct s has no field c3 (it has: c1, c2)"
    ]


def _narrow(table, keys, stats):
    import json

    ctx = {"on_keys": [{"target": t, "source": t, "null_safe": ns} for t, ns in keys]}
    stats = dict(stats, **{k: json.dumps(v) for k, v in stats.items() if k.startswith("__sm_key")})
    return macros.fill("match_filter", table, ctx, stats)


def test_match_filter_lists_partition_values_and_ranges_keys(table):
    out = _narrow(
        table,
        [("id", False), ("dt", False)],
        {
            "numSourceRows": 3,
            "__sm_key0": {"type": "int", "lo": "5", "hi": "40"},
            "__sm_key1": {
                "type": "date",
                "lo": "2026-01-01",
                "hi": "2026-01-09",
                "values": ["2026-01-09", "2026-01-01"],
            },
        },
    )
    assert out["filter"] == (
        "(`id` BETWEEN CAST('5' AS int) AND CAST('40' AS int)) AND "
        "(`dt` IN (CAST('2026-01-01' AS date), CAST('2026-01-09' AS date)))"
    )
    assert out["matched_by"] == "filter"  # every partition column listed: no join needed
    assert out["listed"] == ["dt"]  # the target scans read only the source's partitions (semi_joins_source)


@pytest.mark.parametrize(
    "key, rows, matched_by",
    [
        ({"type": "int", "lo": "5", "hi": "16"}, 3, "range"),  # 12 values for 3 rows: dense
        ({"type": "int", "lo": "5", "hi": "17"}, 3, "join"),  # 13 > 4 x 3: sparse
    ],
)
def test_a_dense_integer_key_finds_partitions_by_range(table, key, rows, matched_by):
    assert _narrow(table, [("id", False)], {"numSourceRows": rows, "__sm_key0": key})["matched_by"] == matched_by


def test_match_filter_skips_what_it_cannot_order_the_same_way(table):
    # a source column of another type (ON would coerce both sides), e.g. strings '10' < '9'
    assert _narrow(
        table, [("id", False)], {"numSourceRows": 2, "__sm_key0": {"type": "string", "lo": "10", "hi": "9"}}
    ) == {"filter": "", "listed": [], "matched_by": "join"}
    # a TIMESTAMP's text is local time: in a daylight-saving fall-back hour it names two instants
    stamped = macros.fill("table_info", DESC, [["id", "timestamp"], ["v", "string"], ["dt", "date"]])
    assert (
        _narrow(
            stamped,
            [("id", False)],
            {
                "numSourceRows": 2,
                "__sm_key0": {"type": "timestamp", "lo": "2026-11-01 01:30:00", "hi": "2026-11-01 01:40:00"},
            },
        )["filter"]
        == ""
    )
    # too many partition values for a list: their range
    many = [f"2026-01-{d:02d}" for d in range(1, 29)] * 40
    out = _narrow(
        table,
        [("dt", False)],
        {
            "numSourceRows": 9,
            "__sm_key0": {
                "type": "date",
                "lo": "2026-01-01",
                "hi": "2026-01-28",
                "values": [f"{v}-{i}" for i, v in enumerate(many)],
            },
        },
    )
    assert out["filter"].startswith("(`dt` BETWEEN") and out["matched_by"] == "join" and out["listed"] == []


def test_match_filter_of_an_empty_source_and_of_null_safe_keys(table):
    assert _narrow(table, [("id", False)], {"numSourceRows": 0, "__sm_key0": {"type": "int"}}) == {
        "filter": "false",
        "listed": [],
        "matched_by": "filter",
    }
    out = _narrow(table, [("id", True)], {"numSourceRows": 1, "__sm_key0": {"type": "int"}})
    assert out["filter"] == "(false OR `id` IS NULL)"  # <=> matches a NULL key to a NULL key
    out = _narrow(table, [("id", True)], {"numSourceRows": 50, "__sm_key0": {"type": "int", "lo": "1", "hi": "2"}})
    assert out["filter"] == "(`id` BETWEEN CAST('1' AS int) AND CAST('2' AS int) OR `id` IS NULL)"


def _entry(merge_id, version, repoints, inserted=0, kind="merge", partitions=()):
    return {
        "merge_id": merge_id,
        "finished_at": f"2026-01-0{version}T00:00:00+00:00",
        "version_before": version,
        "version_after": version + 1,
        "repoints": [{"partition": {"p": p}, "old_location": old, "location": new} for p, old, new in repoints],
        "metrics": {"numTargetRowsInserted": inserted},
        "kind": kind,
        "partitions": [{"p": p} for p in partitions],
    }


ROLLBACK_TABLE = {"name": "db.t", "version": 3, "database": "db", "table_name": "t"}
HISTORY = [  # given newest first, as history() lists them: the plan orders by version
    _entry("b", 2, [("1", "/x/m1/p=1", "/x/m2/p=1"), ("2", None, "/x/m2/p=2")]),
    _entry("a", 1, [("1", "/x/p=1", "/x/m1/p=1")]),
]


def test_rollback_plan_restores_each_partition_to_its_directory_before_the_range():
    plan = macros.fill("rollback_plan", ROLLBACK_TABLE, HISTORY, "a")
    a, b = "2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00"
    # each partition's chain: the directories the range made current for it, and since when (the files
    # written there later by anything but a merge of the range are what a rollback would drop)
    assert plan["restore"] == [
        {"partition": {"p": "1"}, "location": "/x/p=1", "current": "/x/m2/p=1", "appends": [],
         "chain": [{"location": "/x/m1/p=1", "since": a, "merge_id": "a"}, {"location": "/x/m2/p=1", "since": b, "merge_id": "b"}]},
        {"partition": {"p": "2"}, "location": None, "current": "/x/m2/p=2", "appends": [],  # created in the range: emptied
         "chain": [{"location": "/x/m2/p=2", "since": b, "merge_id": "b"}]},
    ]  # fmt: skip
    assert plan["rolled_back"] == ["a", "b"] and "error" not in plan
    assert macros.fill("rollback_plan", ROLLBACK_TABLE, HISTORY, "b")["restore"][0]["location"] == "/x/m1/p=1"


@pytest.mark.parametrize(
    "history, version, to, refusal",
    [
        (HISTORY, 3, "zz", ["invalid_spec", "no merge zz in its history"]),
        # the table moved on (version 4) and no entry says how: a commit's entry is missing
        (HISTORY, 4, "a", ["unsupported", "no entry for the commit that moved it from version 3"]),
        # an insert-only merge appended in place to a partition the range never replaced
        (
            HISTORY + [_entry("c", 3, [], inserted=5, partitions=["0"])],
            4,
            "a",
            ["unsupported", "appended rows to p=0 in place"],
        ),
        # the canonical layout refilled the directory p=1 had before the range
        (
            HISTORY + [_entry("c", 3, [("1", "/x/m2/p=1", "/x/p=1")], kind="canonicalize")],
            4,
            "a",
            ["unsupported", "/x/p=1, which partition p=1 had then, was refilled"],
        ),
        ([dict(_entry("a", 1, []), version_after=1)], 1, "a", ["invalid_spec", "changed no data"]),  # a no-op
    ],
)
def test_rollback_plan_refuses_what_it_cannot_undo_faithfully(history, version, to, refusal):
    plan = macros.fill("rollback_plan", dict(ROLLBACK_TABLE, version=version), history, to)
    code, message = plan["error"]
    assert code == refusal[0] and refusal[1] in message, message


@pytest.mark.parametrize(
    "src, dst, loss",
    [
        ("decimal(3,1)", "bigint", "drops the fraction"),
        ("double", "int", "drops the fraction"),
        ("decimal(12,4)", "decimal(12,2)", "rounds it to 2 decimal place(s)"),
        ("double", "decimal(10,2)", "rounds it to 2 decimal place(s)"),
        ("double", "float", "rounds it to a float's precision"),
        ("decimal(10,0)", "int", ""),  # overflow is an error in ANSI mode, not a silent loss
        ("int", "double", ""),
        ("decimal(12,2)", "decimal(14,4)", ""),
        ("string", "string", ""),
    ],
)
def test_narrowing_rule(src, dst, loss):
    from merge_core.common import macros

    assert macros.render("narrowing", src, dst).strip() == loss
