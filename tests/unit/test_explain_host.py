"""explain runs the plan (spark_merge__lifecycle_plan) against a host that runs nothing and records
what it is handed (lifecycle/explain_host.py): its headings are the plan's own numbered steps, and each
statement stands under the step that issues it, on the path the plan takes for the statement."""

from __future__ import annotations

import re

import pytest

from merge_core import parse
from merge_core.common import macros
from merge_core.lifecycle.explain_host import ExplainHost
from tests.unit.test_macros import DESC, TYPES

MERGE = (
    "MERGE INTO db.acc t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
)


def explained(sql: str, deterministic: bool = True, **desc) -> tuple[list[str], dict]:
    """The parts explain's host records for ``sql`` into DESC's table (``desc`` over its fields), and
    the run state the plan left."""
    spec = parse(sql).to_dict()
    names = [c["name"] for c in desc.get("columns", DESC["columns"])]
    table = macros.fill("table_info", dict(DESC, **desc), [t for t in TYPES if t[0] in names])
    resolved = macros.fill("resolve", spec, table)
    resolved["deterministic"] = deterministic
    ctx = macros.fill("context", spec, table, "20261130000000_explain")
    ctx["on_keys"] = [{"target": "id", "source": "id", "null_safe": False}] if spec["source_kind"] != "none" else []
    s = macros.run_state("20261130000000_explain", {"spec": spec, "table": table, "resolved": resolved, "ctx": ctx})
    s["insert_only"] = resolved["insert_only"]
    host = ExplainHost(s)
    macros.lifecycle_plan(host, s)
    return host.parts, s


def sections(parts: list[str]) -> dict[str, list[str]]:
    """The statements under each numbered heading, by the step's name."""
    out: dict[str, list[str]] = {}
    name = None
    for part in parts:
        m = re.match(r"-- (\d)\. (\w+): ", part)
        if m:
            name = m.group(2)
            assert int(m.group(1)) == macros.plan_steps().index(name) + 1, part
            out[name] = []
        else:
            assert name is not None, f"a statement before the first step: {part[:80]}"
            out[name].append(part)
    return out


def test_a_deterministic_merge_is_explained_fused_under_the_plan_s_own_steps():
    parts, s = explained(MERGE)
    steps = sections(parts)
    assert list(steps) == ["source", "matched", "changes", "summary"]  # in plan_steps' order
    assert steps["source"][0].startswith("CACHE LAZY TABLE") and "numSourceRows" in steps["source"][-1]
    assert steps["matched"] == []  # the summary names the matched partitions
    assert "-- 2. matched: the partitions holding matched rows come from the summary" in "\n".join(parts)
    assert steps["changes"] == []  # fused: no cache, the summary reads the join as a subquery
    assert len(steps["summary"]) == 1 and "RIGHT JOIN" in steps["summary"][0]
    # the key range stands for the data's: every target scan is narrowed to it
    assert "BETWEEN CAST('<min of s.id>' AS int) AND CAST('<max of s.id>' AS int)" in steps["summary"][0]
    assert s["fused"] and s["ctx"]["scan_filter"] == "(`dt` = CAST('<dt>' AS date))"


def test_a_non_deterministic_merge_caches_its_changes_under_step_3():
    parts, s = explained(MERGE.replace("v = s.v", "v = CAST(rand() AS STRING)"), deterministic=False)
    steps = sections(parts)
    assert list(steps) == ["source", "matched", "changes", "summary"]
    assert steps["matched"] and "DISTINCT" in steps["matched"][0]  # its own join, not the summary's
    assert steps["changes"][0].startswith("CACHE LAZY TABLE `__sm_changes_") and not s["fused"]
    assert "FROM `__sm_changes_20261130000000_explain`" in steps["summary"][0]


@pytest.mark.parametrize(
    "sql, expected",
    [
        ("UPDATE db.acc SET v = 'x' WHERE id = 1", ["changes", "summary"]),
        (MERGE, ["source", "changes", "summary"]),
    ],
)
def test_an_unpartitioned_table_or_a_sourceless_statement_has_no_step_it_does_not_take(sql, expected):
    columns = [{"name": "id", "nullable": True}, {"name": "v", "nullable": True}]
    parts, _ = explained(sql, partition_columns=[], columns=columns)
    assert list(sections(parts)) == expected


def test_the_recorded_plan_of_a_merge_is_the_reviewed_one():
    """What explain --verbose prints for steps 1-4 of a partitioned MERGE, in golden/ (review a change there)."""
    from tests.unit.test_golden_plans import check

    parts, _ = explained(MERGE)
    check("explain_merge", {f"part {i}": part for i, part in enumerate(parts, 1)})
