"""A merge engine's options (Apache Paimon's merge engines) checked against the table before anything
runs: each refusal names the option, the column and what would be allowed, from the one macro both
hosts call (engine_options). test_engines.py runs a few of the same cases through a merge on Spark."""

from __future__ import annotations

import pytest

from merge_core.api.functions import to_spec
from merge_core.common import macros

DESC = {"namespace": ["db"], "table_name": "cfg", "type": "MANAGED", "provider": "parquet", "location": "file:/w/cfg",
        "partition_columns": [], "columns": [{"name": c, "nullable": True} for c in ("k", "v", "n", "ts")],
        "table_properties": {}}  # fmt: skip
TYPES = [["k", "int"], ["v", "string"], ["n", "int"], ["ts", "int"]]

# (options beside primary_key='k', the refusal's text; None: allowed)
ENGINE_CONFIGURATIONS = [
    (dict(merge_engine="replace"), "unknown engine replace"),
    (dict(merge_engine="aggregation", aggregate_function={"v": "median"}), "unknown function median for v"),
    (
        dict(merge_engine="aggregation", aggregate_function={"v": "sum"}),
        "sum does not take column v of type string",
    ),
    (
        dict(merge_engine="aggregation", aggregate_function={"n": "bool_or"}),
        "bool_or does not take column n of type int",
    ),
    (dict(merge_engine="aggregation", aggregate_function={"k": "sum"}), "k is a primary key column"),
    (dict(merge_engine="deduplicate", sequence_field="missing"), "unknown column missing"),
    (dict(merge_engine="first-row", sequence_field="n"), "first-row keeps the first row"),
    (
        dict(merge_engine="deduplicate", aggregate_function={"n": "sum"}),
        "applies to the partial-update and aggregation",
    ),
    (dict(merge_engine="aggregation", sequence_group={"n": "v"}), "sequence_group applies to the partial-update"),
    (dict(merge_engine="partial-update", sequence_group={"n": "v", "ts": "v"}), "v is already in sequence group n"),
    (dict(merge_engine="partial-update", sequence_group={"v": "n"}), "must be numeric, a date or a timestamp"),
    (
        dict(merge_engine="aggregation", aggregate_function={"n": "sum"}, distinct=["n"]),
        "not aggregated with collect",
    ),
    (dict(merge_engine="aggregation", nested_key={"n": "id"}), "not aggregated with nested_update"),
    (dict(merge_engine="aggregation", ignore_retract=["v"]), None),
    (dict(merge_engine="partial-update", aggregate_function={"n": "sum"}), "sum on n: a partial-update field"),
    (dict(merge_engine="partial-update", aggregate_function={"n": "last_non_null_value"}), None),
    (
        dict(merge_engine="aggregation", default_aggregate_function="avg"),
        "default_aggregate_function: unknown function avg",
    ),
    (
        dict(merge_engine="aggregation", default_aggregate_function="sum"),
        "sum does not take column v of type string",
    ),
    (dict(merge_engine="deduplicate", watermark_key="ts"), "choose one"),
]


@pytest.mark.parametrize("options, message", ENGINE_CONFIGURATIONS)
def test_engine_configuration_errors_name_the_problem(options, message):
    table = macros.fill("table_info", DESC, TYPES)
    upsert = to_spec({"target": "db.cfg", "source": "SELECT 1"}, primary_key="k", **options).upsert
    errors = macros.fill("engine_options", upsert, table).get("errors") or []
    if message is None:
        assert errors == []
    else:
        assert len(errors) == 1 and message in errors[0], errors
