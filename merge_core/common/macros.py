"""Render the dbt package's macros with plain jinja2: one SQL compiler, two hosts.

All macro files are loaded as one template module. Under dbt a package's macros
reach each other only through the package's name (`spark_merge.spark_merge__quote`),
so here the name `spark_merge` stands for that module. The macros are pure (plain
data in, SQL text out, or an `out` container filled with `do`), so the other dbt
features needed are the `do` extension and dbt's `fromjson`. The files sit in folders by phase (core,
table, begin, plan, lifecycle, commit); materializations/ holds the dbt-only orchestration and is not
loaded here.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jinja2

from dbt_macros import MACRO_DIR


@functools.lru_cache(maxsize=1)
def _module() -> Any:
    paths = sorted(p for p in MACRO_DIR.rglob("*.sql") if "materializations" not in p.relative_to(MACRO_DIR).parts)
    source = "\n".join(p.read_text() for p in paths)
    env = jinja2.Environment(extensions=["jinja2.ext.do"], undefined=jinja2.StrictUndefined)
    env.globals["fromjson"] = _fromjson
    env.globals["spark_merge"] = _Package()
    return env.from_string(source).module


def _fromjson(text: str, default: Any = None) -> Any:
    """dbt's fromjson: the parsed value, or ``default`` when the text is not JSON."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


class _Package:
    """The package namespace: `spark_merge.<macro>` looks the macro up in the loaded module."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_module(), name)


def render(name: str, *args: Any, **kwargs: Any) -> str:
    """Call macro ``spark_merge__<name>`` and return its text, stripped."""
    macro = getattr(_module(), f"spark_merge__{name}")
    return str(macro(*args, **kwargs)).strip()


def fill(name: str, *args: Any) -> dict:
    """Call a macro that fills an ``out`` dict (its last argument) and return it."""
    out: dict = {}
    render(name, *args, out)
    return out


def fill_list(name: str, *args: Any) -> list:
    out: list = []
    render(name, *args, out)
    return out
