"""At most two Python/Jinja crossings in any one call stack of a merge's begin and plan.

Python calls a lifecycle macro (one crossing), the macro calls a host primitive (two); a primitive
never renders a macro again: what it runs, the macros render and hand it. So each primitive reads as
plain Python over SQL it is given, and each macro as the whole decision.
"""

from __future__ import annotations

import pytest

from merge_core import explain, merge
from merge_core.lifecycle.explain_host import ExplainHost
from merge_core.lifecycle.merge_host import MergeHost
from merge_core.spark import lock
from merge_core.spark.host import SparkHost

from .crossings import counted
from .test_schema_evolution import tables  # noqa: F401  (t(id, v, note, p), src(id, v, p, extra))

ROOTS = ("lifecycle_begin", "lifecycle_plan")


CASES = {
    "merge": (
        "MERGE INTO {t} t USING {s} s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v "
        "WHEN NOT MATCHED THEN INSERT (id, v, p) VALUES (s.id, s.v, s.p)",
        {},
    ),
    "schema evolution": (
        "MERGE INTO {t} t USING {s} s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
        {"schema_evolution": True},
    ),
    "update": ("UPDATE {t} SET v = 'z' WHERE id = 2", {}),
    "merge engine": (
        {"target": "{t}", "source": "(SELECT id, v, CAST(NULL AS STRING) AS note, p FROM {s})"},
        {"primary_key": ["id"], "merge_engine": "partial-update"},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_begin_and_plan_cross_between_python_and_jinja_at_most_twice(spark, tables, monkeypatch, case):
    t, s = tables
    statement, options = CASES[case]
    request = (
        statement.format(t=t, s=s)
        if isinstance(statement, str)
        else {k: v.format(t=t, s=s) for k, v in statement.items()}
    )
    # the lock handle's primitives too, and explain's host (it runs the plan too)
    with counted(monkeypatch, SparkHost, MergeHost, lock._Handle, ExplainHost) as c:
        explain(spark, request, verbose=True, **options)
        merge(spark, request, **options)
    for root in ROOTS:
        assert 1 <= c.depth(root) <= 2, f"{case}, {root}: {c.chain(root)}"
