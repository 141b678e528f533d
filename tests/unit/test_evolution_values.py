"""Schema evolution's values for a source struct with fewer fields than its column (request/evolution.py),
as Spark stores them: INSERT fills the missing fields with NULL; UPDATE keeps the target's value of a
missing field of a struct, but an array's or map's elements have no old value, so they are filled as an
INSERT fills them. A source struct with more fields than the column is refused."""

from __future__ import annotations

import pytest

from merge_core.common import macros
from merge_core.request.evolution import extra_field_errors, missing_field_values
from tests.unit.test_macros import DESC

ROWS = [["id", "int"], ["st", "struct<a:int,b:string,c:date>"], ["arr", "array<struct<x:int,y:int>>"],
        ["m", "map<string,struct<p:int,q:int>>"]]  # fmt: skip


@pytest.fixture
def table():
    columns = [{"name": r[0], "nullable": True} for r in ROWS]
    return macros.fill("table_info", dict(DESC, columns=columns, partition_columns=[]), ROWS)


def values(table, name: str, source_type: str) -> dict[str, str]:
    found = missing_field_values(table, [[name, source_type]], "s", "t")
    return {action: found[action].get(name) for action in ("insert", "update")}


def test_a_struct_missing_a_field_inserts_it_null_and_updates_it_to_the_target_s_value(table):
    assert values(table, "st", "struct<a:int,b:string>") == {
        "insert": "IF(`s`.`st` IS NULL, NULL, NAMED_STRUCT('a', `s`.`st`.`a`, 'b', `s`.`st`.`b`, 'c', CAST(NULL AS DATE)))",
        "update": "NAMED_STRUCT('a', `s`.`st`.`a`, 'b', `s`.`st`.`b`, 'c', `t`.`st`.`c`)",
    }


def test_elements_of_arrays_and_maps_are_filled_as_an_insert_fills_them(table):
    arr = values(table, "arr", "array<struct<x:int>>")
    assert (
        arr["insert"]
        == arr["update"]
        == (
            "TRANSFORM(`s`.`arr`, __sm_x0 -> IF(__sm_x0 IS NULL, NULL, NAMED_STRUCT('x', __sm_x0.`x`, 'y', CAST(NULL AS INT))))"
        )
    )
    m = values(table, "m", "map<string,struct<q:int>>")
    assert m["insert"] == m["update"] and m["insert"].startswith("TRANSFORM_VALUES(`s`.`m`, (__sm_k0, __sm_v0) ->")


def test_a_source_type_with_every_field_needs_no_value(table):
    assert values(table, "st", "struct<a:int,b:string,c:date>") == {"insert": None, "update": None}
    assert values(table, "id", "int") == {"insert": None, "update": None}


def test_a_source_struct_with_a_field_the_column_lacks_is_refused_with_what_to_do(table):
    [error] = extra_field_errors(table, [["st", "struct<a:int,b:string,c:date,d:int>"], ["id", "bigint"]])
    assert error.startswith("schema evolution: source column st has field(s) st.d that column st")
    assert (
        "assign the fields the column has (SET st.<field> = ...), or recreate the table with the wider struct" in error
    )
