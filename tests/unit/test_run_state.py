"""The run state's keys (merge_core/common/run_state.py) against what the macros and the Python phases
set: a key set anywhere is declared there, and a key declared there is set somewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from merge_core.common.run_state import PlanContext, RunState

ROOT = Path(__file__).resolve().parents[2]


def macro_text() -> str:
    return "".join(
        re.sub(r"\{#.*?#\}", "", p.read_text(), flags=re.S) for p in (ROOT / "dbt_macros/macros").rglob("*.sql")
    )


def dict_literals_after(text: str, opener: str) -> list[str]:
    """The bodies of the ``{...}`` literals that follow each match of the regex ``opener``."""
    bodies = []
    for m in re.finditer(opener, text):
        i = j = m.end()
        depth = 1
        while depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        bodies.append(text[i : j - 1])
    return bodies


def top_level_keys(body: str) -> set[str]:
    """The quoted keys of a Jinja dict literal's body, not those of dicts nested in it."""
    keys, depth = set(), 0
    for m in re.finditer(r"[{}\[\]()]|'(\w+)'\s*:", body):
        token = m.group(0)
        if token in "{[(":
            depth += 1
        elif token in "}])":
            depth -= 1
        elif depth == 0:
            keys.add(m.group(1))
    return keys


def set_in_macros(var: str, starts: list[str]) -> set[str]:
    text = macro_text()
    keys: set[str] = set()
    for opener in [rf"\b{var}\.update\(\{{", *starts]:
        for body in dict_literals_after(text, opener):
            keys |= top_level_keys(body)
    return keys


def set_in_python() -> set[str]:
    """Keys of ``s`` the Python phases set: ``_start(key=...)``, ``s["key"] = ...``, ``s.update(key=...)``."""
    keys: set[str] = set()
    for path in (ROOT / "merge_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                receiver = ast.unparse(node.func.value)
                if node.func.attr == "_start" or (node.func.attr == "update" and receiver in ("s", "self.s")):
                    keys |= {k.arg for k in node.keywords if k.arg}
                if node.func.attr == "run_state" and len(node.args) == 2 and isinstance(node.args[1], ast.Dict):
                    keys |= {k.value for k in node.args[1].keys if isinstance(k, ast.Constant)}
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and ast.unparse(target.value) in ("s", "self.s"):
                        if isinstance(target.slice, ast.Constant):
                            keys.add(target.slice.value)
            if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "entry_extra" for k in node.keys
            ):
                keys.add("entry_extra")
    return keys


def test_every_key_of_the_run_state_is_declared_and_set():
    macros = set_in_macros(
        "s", [r"spark_merge__run_state\(merge_id, \{", r"(?s)macro spark_merge__run_state\(.*?\{%- do out\.update\(\{"]
    )
    found = macros | set_in_python()
    declared = set(RunState.__annotations__)
    assert found - declared == set(), "set but not declared in RunState"
    assert declared - found == set(), "declared in RunState but set nowhere"


def test_every_key_of_the_plan_context_is_declared_and_set():
    found = set_in_macros("ctx", [r"(?s)macro spark_merge__context\(.*?\{%- do out\.update\(\{"])
    declared = set(PlanContext.__annotations__)
    assert found - declared == set(), "set but not declared in PlanContext"
    assert declared - found == set(), "declared in PlanContext but set nowhere"


def test_the_key_finder_reads_nested_literals_as_values_not_keys():
    assert top_level_keys("'a': 1, 'b': {'c': 2}, 'd': [{'e': 3}], 'f': x.get('g')") == {"a", "b", "d", "f"}
