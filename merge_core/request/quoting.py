"""Values and names from users into Spark SQL text, through the one quoting the macros use.

Spark SQL reads a backslash inside a string literal as an escape, so doubling a quote (``'O''Brien'``,
standard SQL) does not quote it: Spark reads that as two adjacent literals, ``OBrien``. The macros'
``spark_merge__literal`` escapes both the backslash and the quote; these functions hand it (and the
identifier quoting) to Python code that builds SQL from user input: the example DAGs, the CLI.
"""

from __future__ import annotations

import math
import re
from typing import Any

from merge_core.common import macros
from merge_core.common.errors import SpecError

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def sql_literal(value: Any) -> str:
    """A Spark SQL literal for ``value``: NULL, TRUE/FALSE, a number as a number, anything else a
    quoted string. A float that is not finite has no literal: refused."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SpecError(f"{value!r} has no SQL literal; pass a finite number or a string")
        return repr(value)
    if isinstance(value, str):
        return macros.literal(value)
    raise SpecError(
        f"a value of type {type(value).__name__} has no SQL literal here: pass a number, a string, "
        f"a boolean or None ({value!r})"
    )


def sql_name(name: str) -> str:
    """A column or table name as a quoted identifier; a dotted name (``db.table``) quoted part by part.
    Each part must be a plain identifier (letters, digits, underscores, not starting with a digit):
    a name that is not one is refused rather than guessed at."""
    parts = str(name).split(".")
    bad = [p for p in parts if not _PLAIN.match(p)]
    if bad or not name:
        raise SpecError(
            f"{name!r} is not a table or column name (each dot-separated part must be letters, "
            f"digits and underscores, not starting with a digit)"
        )
    return ".".join(macros.quote(p) for p in parts)
