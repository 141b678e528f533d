"""The rules the code base keeps, checked on its source (no Spark): the layers import only downwards,
Python reaches the macros only through the typed facade (merge_core/common/macros.py), Spark SQL text
lives in the macros, and functions and macro files stay small enough to read."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from merge_core.common import macros

ROOT = Path(__file__).resolve().parents[2]
CODE = sorted(p for d in ("merge_core", "airflow_provider") for p in (ROOT / d).rglob("*.py"))
FACADE = ROOT / "merge_core/common/macros.py"
# the floors, lowest first: a module imports from its own floor or the ones below
FLOORS = ["common", "request", "spark", "targets", "lifecycle", "maintenance", "api"]


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _floor(module: str) -> int:
    parts = module.split(".")
    if parts[0] != "merge_core" or len(parts) < 2 or parts[1] not in FLOORS:
        return len(FLOORS)  # the package root and merge_core.session: the public face, above every floor
    return FLOORS.index(parts[1])


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _macro_calls(tree: ast.Module):
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "macros"
        ):
            yield node


def test_imports_only_run_down_the_floors():
    upward = []
    for path in CODE:
        name = _module_name(path)
        if not name.startswith("merge_core"):
            continue
        for node in ast.walk(_tree(path)):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target.startswith("merge_core.") and _floor(target) > _floor(name) and _floor(target) < len(FLOORS):
                    upward.append(f"{name} imports {target}")
    assert not upward, upward


def _by_name(paths: list[Path]) -> list[str]:
    """Calls that spell a macro's name (macros.render/fill/fill_list), and calls of no facade function."""
    found = []
    for path in paths:
        for call in _macro_calls(_tree(path)):
            if call.func.attr in ("render", "fill", "fill_list") or not hasattr(macros, call.func.attr):
                found.append(f"{path.name}:{call.lineno}: macros.{call.func.attr}")
    return found


def test_python_reaches_macros_only_through_the_typed_facade():
    """Outside the facade no module spells a macro name: macros.render/fill/fill_list are for tests."""
    assert not _by_name([p for p in CODE if p != FACADE])


def test_every_facade_function_names_a_macro_that_exists():
    called = [
        call.args[0].value
        for call in _macro_calls(_tree(FACADE))
        if isinstance(call.args[0], ast.Constant) and call.func.attr in ("_render", "_fill", "_fill_list")
    ]
    called += [
        node.args[0].value
        for node in ast.walk(_tree(FACADE))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("_render", "_fill", "_fill_list")
        and isinstance(node.args[0], ast.Constant)
    ]
    module = macros._module()
    assert len(called) > 50
    missing = [name for name in called if not hasattr(module, f"spark_merge__{name}")]
    assert not missing, missing


def _inline_sql(paths: list[Path]) -> list[str]:
    """`spark.sql(...)` and the host's statement primitives given a literal or an f-string."""
    found = []
    for path in paths:
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
                continue
            first = node.args[0]
            literal = isinstance(first, ast.JoinedStr) or (
                isinstance(first, ast.Constant) and isinstance(first.value, str)
            )
            if node.func.attr in ("sql", "_sql", "rows", "run_sql") and literal:
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_spark_sql_text_comes_from_the_macros():
    """Spark statements take text a macro built, never text written in Python (sqlglot's
    `.sql(dialect=...)` renders a parsed tree and takes no text: not this)."""
    examples = ROOT / "airflow_provider/example_tables.py"  # the example DAGs' sample tables, as a user writes them
    assert not _inline_sql([p for p in CODE if p != examples])


# what a materialization may still run as text of its own: a pause and the test-only fault hang, which
# no other code issues
OWN_STATEMENTS = (
    "SELECT reflect('java.lang.Thread', 'sleep'",
    "'INSERT OVERWRITE DIRECTORY ' ~ spark_merge.spark_merge__literal(env_var(",
)


def _inline_statements(text: str) -> list[str]:
    """`run_query(...)` given a string literal (or one joined with ~) in dbt's own macros."""
    found = re.findall(r"run_query\(\s*(['\"].{0,60})", text)
    return [f for f in found if not any(f.startswith(own[:40]) or own.startswith(f[1:40]) for own in OWN_STATEMENTS)]


def test_materializations_build_statements_with_the_shared_macros():
    """dbt's orchestration runs the statements the shared macros build, as the Python host does: a
    statement spelled inside a materialization would be a second definition of it."""
    found = {
        p.name: _inline_statements(p.read_text())
        for p in sorted((ROOT / "dbt_macros/macros/materializations").glob("*.sql"))
    }
    assert not {k: v for k, v in found.items() if v}
    assert _inline_statements("{%- do run_query('DROP TABLE ' ~ x) -%}") == ["'DROP TABLE ' ~ x) -%}"]


def test_the_checks_catch_a_breach(tmp_path):
    breach = tmp_path / "breach.py"
    breach.write_text(
        'spark.sql(f"DROP TABLE {t}")\nhost.rows("SHOW TABLES")\nmacros.render("quote", "x")\nmacros.nope()\n'
        'self._sql(f"DROP TABLE {t}")\n'
    )
    assert _inline_sql([breach]) == ["breach.py:1", "breach.py:2", "breach.py:5"]
    assert _by_name([breach]) == ["breach.py:3: macros.render", "breach.py:4: macros.nope"]


def test_functions_and_macro_files_stay_small():
    long_functions = []
    for path in CODE:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > 60:
                long_functions.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert not long_functions, long_functions
    macro_files = sorted((ROOT / "dbt_macros/macros").rglob("*.sql"))
    assert macro_files
    assert not [p.name for p in macro_files if len(p.read_text().splitlines()) > 400]
    wide = [
        f"{p.name}:{i}" for p in macro_files for i, line in enumerate(p.read_text().splitlines(), 1) if len(line) > 160
    ]
    assert not wide, wide


def macro_lengths() -> dict[str, int]:
    """Each macro's lines, from its `{% macro` line to its `{% endmacro %}` line."""
    lengths = {}
    for path in sorted((ROOT / "dbt_macros/macros").rglob("*.sql")):
        text = path.read_text()
        for m in re.finditer(
            r"^{%-?\s*(?:macro|materialization)\s+(\w+).*?{%-?\s*end(?:macro|materialization)\s*-?%}", text, re.M | re.S
        ):
            lengths[m.group(1)] = m.group(0).count("\n") + 1
    return lengths


def test_macros_stay_small():
    lengths = macro_lengths()
    assert len(lengths) > 100
    too_long = {name: n for name, n in lengths.items() if n > 60}
    assert not too_long, f"over 60 lines (split them): {too_long}"


def test_every_macro_name_is_defined_once():
    """The macro files are one module for Python and one package for dbt: a second definition of a
    name would silently replace the first for one host (or fail dbt's parse for the other)."""
    names = [
        m
        for p in sorted((ROOT / "dbt_macros/macros").rglob("*.sql"))
        for m in re.findall(r"^{%-?\s*macro\s+(\w+)\s*\(", p.read_text(), re.M)  # a definition opens its line
    ]
    assert len(names) > 100
    assert sorted({n for n in names if names.count(n) > 1}) == []


@pytest.mark.parametrize("module", ["merge_core", "airflow_provider"])
def test_importing_renders_nothing(module):
    """Importing the package loads no macro: the Jinja module is compiled on the first call."""
    code = f"import {module}; from merge_core.common import macros; print(macros._module.cache_info().currsize)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"


def _test_names() -> set[str]:
    """`file::function` and `file::Class::function` of every test of the Spark tier, from the source."""
    names = set()
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                names.add(f"{path.name}::{node.name}")
            elif isinstance(node, ast.ClassDef):
                names |= {f"{path.name}::{node.name}::{f.name}" for f in node.body if isinstance(f, ast.FunctionDef)}
    return names


def test_every_test_ci_leaves_out_exists_and_names_the_ci_test_that_covers_it():
    """CI_LEAVES_OUT moves tests to `make test-all`: a key that matches no test (renamed, removed)
    would leave out nothing while saying it does, and each key says what covers its rule in CI. A key
    names a test file, a test, or the start of one case's id."""
    from tests.conftest import CI_LEAVES_OUT

    names = _test_names()
    files = {name.split("::")[0] for name in names}
    stale = [
        key
        for key in CI_LEAVES_OUT
        if not (key in files or key.split("[")[0] in names or any(n.startswith(key) for n in names))
    ]
    assert len(names) > 300 and not stale, stale
    assert all(covered.strip() for covered in CI_LEAVES_OUT.values())
