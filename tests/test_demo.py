"""`make demo` must keep working: run its job against the test session and check what it prints."""

from __future__ import annotations

import runpy
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo.py"


def test_demo_job(spark, capsys):
    runpy.run_path(str(DEMO))["main"]()
    out = capsys.readouterr().out
    after = out.split("== demo.accounts after")[1].split("== metrics")[0]
    lines = [" ".join(line.split()) for line in after.strip().splitlines()]
    assert lines == [
        "Ann Lee 805.00 Centreville east",
        "Joe Shmoe 300.00 Centreville east",
        "Kim Park 190.00 Boston north",
        "Luis Gomez 90.00 Austin south",
        "Aaron Smith 600.00 San Francisco west",
        "Dave Jones 300.00 Menlo Park west",
        "Eve Adams 70.00 Oakland west",
    ]
    assert "inserted 1, updated 4, deleted 1, copied 1; partitions rewritten 3" in out
    assert '"numTargetPartitionsRewritten": 3' in out
    # what the merge did comes first, then the table; the plan last, for a person (no plan columns)
    assert out.index("== what it did") < out.index("== demo.accounts after") < out.index("== the plan")
    plan = out.split("== the plan")[1]
    assert "3. changes: join target and source" in plan and "__sm_" not in plan
