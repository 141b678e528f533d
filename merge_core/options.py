"""Every option, as declared once in dbt_macros/macros/spark_merge_options.sql.

The spec's keys, merge()'s keywords, the CLI's flags and the dbt config check all come from that
one table; this module hands it to Python.
"""

from __future__ import annotations

import functools

from . import macros


@functools.lru_cache(maxsize=1)
def table() -> tuple[dict, ...]:
    return tuple(macros.fill_list("option_table"))


def option(name: str) -> dict:
    return next(o for o in table() if o["name"] == name)


def names(*groups: str, kind: str | None = None) -> tuple[str, ...]:
    """Names of the options in ``groups`` (of one ``kind`` if given), in declaration order."""
    return tuple(o["name"] for o in table() if o["group"] in groups and (kind is None or o["kind"] == kind))


def choices(name: str) -> tuple[str, ...]:
    return tuple(option(name)["choices"])


def merge_keywords() -> tuple[str, ...]:
    """The options merge() and the Airflow operator take (the rest belong to tables and dbt)."""
    return names("merge", "upsert", "engine")
