"""User values and names into Spark SQL text (merge_core.request.quoting and the macros' quoting):
Spark reads a backslash in a literal as an escape, so standard SQL's doubled quote is not enough."""

from __future__ import annotations

import pytest

from merge_core.common import macros
from merge_core.common.errors import SpecError
from merge_core.request.quoting import sql_literal, sql_name


@pytest.mark.parametrize(
    "value, literal",
    [
        (None, "NULL"),
        (True, "TRUE"),
        (False, "FALSE"),
        (42, "42"),
        (-7, "-7"),
        (2.5, "2.5"),
        ("plain", "'plain'"),
        ("O'Brien", "'O\\'Brien'"),
        ("C:\\temp", "'C:\\\\temp'"),
        ("\\'; DROP TABLE t; --", "'\\\\\\'; DROP TABLE t; --'"),
        ("", "''"),
    ],
)
def test_a_value_becomes_a_literal_spark_reads_back_as_the_value(value, literal):
    assert sql_literal(value) == literal


@pytest.mark.parametrize("value", [float("nan"), float("inf"), b"bytes", [1], {"a": 1}])
def test_a_value_without_a_literal_is_refused(value):
    with pytest.raises(SpecError, match="literal"):
        sql_literal(value)


@pytest.mark.parametrize(
    "name, quoted",
    [("orders", "`orders`"), ("db.orders", "`db`.`orders`"), ("_x1", "`_x1`"), ("Cat.db.T", "`Cat`.`db`.`T`")],
)
def test_a_name_is_quoted_part_by_part(name, quoted):
    assert sql_name(name) == quoted


@pytest.mark.parametrize("name", ["", "1abc", "a b", "db.", "x`; DROP", "a-b", "db..t"])
def test_a_name_that_is_not_an_identifier_is_refused(name):
    with pytest.raises(SpecError, match="is not a table or column name"):
        sql_name(name)


def test_the_macros_quote_a_backtick_inside_a_name_by_doubling_it():
    assert macros.quote("we`ird") == "`we``ird`"
