"""explain's host: the plan (spark_merge__lifecycle_plan) run against a host that runs nothing and
records what it is handed.

explain therefore shows the statements a run issues, in the order it issues them, under the plan's
own steps: each progress line ``step N/6 (name): ...`` becomes the heading ``-- N. name: ...`` of
the statements that follow it. Where the plan branches on what a query returns, the host answers
each kind of query (``rows(sql, kind)``) with what stands for any data: the source's key range as
placeholders (``<min of s.id>``), a source small enough to broadcast (its count reads 0), a cache
Spark serves, one sample partition (``<dt>``) holding a matched and changed row, no duplicate. So
explain shows the path of a run that changes rows; a run of real data may take a shorter one (no
matched partitions, nothing to write), which ``explain --counts`` (a dry run) shows.
"""

from __future__ import annotations

import json
import re
from typing import Any

from merge_core.common import macros
from merge_core.common.errors import error_for
from merge_core.common.run_state import RunState

STEP = re.compile(r"step (\d+)/\d+ \((\w+)\): (.*)", re.S)  # step_label's form: "step 4/6 (summary): ..."


def step_notes(s: RunState) -> dict[str, str]:
    """What a person reads under each heading besides the plan's own progress text."""
    ctx, spec = s["ctx"], s["spec"]
    t, s_ = spec["target_alias"], spec["source_alias"]
    keys = ", ".join(f"{t}.{k['target']} = {s_}.{k['source']}" for k in ctx.get("on_keys", [])) or "none"
    return {
        "source": (
            f"Cached with this merge's id in its plan, or written once to {ctx['source_table']} when Spark will not "
            f"serve the cache (as for rand()); its count is numSourceRows; for the ON equalities ({keys}) its values' "
            "range (a partition column's list), to which every target scan below is narrowed"
        ),
        "matched": (
            "step 3 scans only these partitions. Skipped when step 1 listed every partition column; no join, only "
            "the range, for a dense integer key"
        ),
        "changes": "the first matching WHEN clause of each joined row, its new values and their checks",
        "summary": (
            "no target row may receive two modifying actions under any rule "
            f"(duplicate_rule={spec['duplicate_rule']}). A run on a classic session whose last WHEN MATCHED "
            "clause has no condition, with a small source, writes in one pass instead: a join of the ON columns "
            "names the files holding a match, and the write counts its own changes (docs/architecture.md)"
        ),
    }


class ExplainHost:
    """Runs nothing; records each step's heading and the statements handed to it (``parts``). Like
    the run's hosts, its primitives render no macro (tests/test_crossings.py's rule)."""

    def __init__(self, s: RunState):
        self.s = s
        self.notes = step_notes(s)
        self.op = macros.codes()["op"]  # read before the plan: the primitives render no macro
        self.parts: list[str] = []

    def failpoint(self, name: str) -> None:
        pass

    def step(self, text: str) -> None:
        """A numbered step opens a heading; the plan's other progress lines ("plan: the source has
        N row(s)") report data explain does not have."""
        m = STEP.fullmatch(text)
        if m:
            number, name, what = m.groups()
            note = self.notes.get(name)
            self.parts.append(f"-- {number}. {name}: {what}" + (f". {note[0].upper()}{note[1:]}" if note else ""))

    def warn(self, text: str) -> None:
        pass

    def run(self, sql: str, tolerate: bool = False) -> None:
        self.parts.append(str(sql).strip())

    def rows(self, sql: str, kind: str = "rows") -> list[dict]:
        self.parts.append(str(sql).strip())
        return self._answer(kind)

    def key_candidates(self, table: dict, keys: list[dict]) -> dict | None:
        return None  # not read: the plan narrows by the key ranges as the source gives them

    def target_rows(self, table: dict) -> int | None:
        return None  # not counted: the join does not broadcast the target

    def can_observe(self, table: dict, ctx: dict) -> bool:
        return False  # the plan as every host runs it: the summary counts the changes before the write

    def fail(self, code: str, message: str, rows: list | None = None, fields: dict | None = None) -> None:
        raise error_for(code, message, rows, fields)

    def _answer(self, kind: str) -> list[dict[str, Any]]:
        """What stands for any data, by the kind of query (host_contract.StatementHost.rows)."""
        table, ctx, alias = self.s["table"], self.s["ctx"], self.s["spec"]["source_alias"]
        sample = json.dumps([f"<{c}>" for c in table["partition_columns"]])
        if kind == "probe":
            return [{"plan": "InMemoryRelation"}]  # Spark serves the cache
        if kind == "source_stats":
            stats: dict[str, Any] = {"numSourceRows": 0, "sourceSlices": None}  # unknown: an append rebalances
            for i, k in enumerate(ctx.get("on_keys", [])):
                col = table["columns_by_name"].get(k["target"].lower())
                lo, hi = f"<min of {alias}.{k['source']}>", f"<max of {alias}.{k['source']}>"
                stats[f"__sm_key{i}"] = json.dumps({"type": col["type"] if col else None, "lo": lo, "hi": hi})
            return [stats]
        if kind == "matched":
            return [{"__sm_part": sample}]
        if kind == "summary":
            op = self.op["insert" if self.s.get("insert_only") else "update"]
            return [{"op": op, "n": 0, "__sm_old": sample, "__sm_new": sample, "files": "[]"}]
        return []  # duplicates: none
