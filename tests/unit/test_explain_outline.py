"""`explain` without --verbose: the plan for a person (its first line, the statement's ON and clauses,
each numbered step's title), built from the plan's own commented steps; no run. The steps' one numbering."""

from __future__ import annotations

import re
from pathlib import Path

from dbt_macros import MACRO_DIR
from merge_core import to_spec
from merge_core.common import macros
from merge_core.lifecycle.merge_run import outline


def test_the_outline_lists_the_clauses_and_the_numbered_steps_titles_without_sql():
    spec = to_spec(
        "MERGE INTO db.t AS t USING s ON t.id = s.id WHEN MATCHED AND s.v IS NULL THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
    ).to_dict()
    parts = [
        "-- spark-merge plan for MERGE into db.t (parquet, partitioned by ['p']); duplicate_rule=trino",
        "-- 0. the source, read once (cached with this merge's id); its count is numSourceRows",
        "CACHE LAZY TABLE x AS SELECT 1",
        "-- schema evolution: first add the source's columns the target lacks",  # a note, not a numbered step
        "-- 3. one aggregation over the changes. The duplicate check",
        "SELECT count(*) FROM x",
    ]
    text = outline(parts, spec)
    lines = text.splitlines()
    assert lines[0] == parts[0].removeprefix("-- ") and lines[1] == "  ON t.id = s.id"
    assert [line[:4] for line in lines[2:5]] == ["  1.", "  2.", "  3."] and "DELETE" in lines[2]
    assert lines[5:8] == ["steps:", "  0. the source, read once", "  3. one aggregation over the changes"]
    assert "SELECT" not in text and "CACHE" not in text and "--verbose" in lines[-1]


def test_the_plan_s_steps_are_numbered_once_for_the_overview_the_docs_progress_and_explain():
    """plan_steps numbers the steps; the plan's overview (plan/changes.sql), docs/architecture.md, the
    progress lines (step_label) and explain's headings (step_comment) all follow it."""
    steps = macros.plan_steps()
    assert steps == ["source", "matched", "changes", "summary", "write", "commit"]
    overview = re.findall(r"^  (\d)\. (\w+):", (MACRO_DIR / "plan" / "changes.sql").read_text(), re.M)
    assert overview == [(str(i), name) for i, name in enumerate(steps, 1)]
    doc = Path(__file__).parents[2] / "docs" / "architecture.md"
    plan_section = doc.read_text().split("## The plan of a copy-on-write merge")[1].split("\n## ")[0]
    listed = re.findall(r"^(\d)\. \*\*(\w+)\*\*", plan_section, re.M)
    assert listed == [(str(i), name.capitalize()) for i, name in enumerate(steps, 1)]
    assert macros.render("step_label", "summary") == "step 4/6 (summary)"
    assert macros.step_comment("write", "stage") == "-- 5. write: stage"
