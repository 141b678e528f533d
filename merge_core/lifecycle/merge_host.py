"""The Python host's primitives for a merge's begin (spark_merge__lifecycle_begin, lifecycle/begin.sql).

Begin is written once, in Jinja, for both hosts; these are the steps only Python can take or
takes its own way: the target (a Spark catalog table or a PostgreSQL table), its files (another
format's metadata refused, dead merges' staging tables dropped), the request shaped for the table
(one-sided names qualified with sqlglot, schema evolution's part of the spec), each part's type
asked part by part when Spark refuses a batch (so the error names the part), ON's equalities read
with sqlglot, and the row-change paradigm. Each runs the statements the macros hand it and renders
none of its own (tests/test_crossings.py), and is traced like every other primitive
(tests/test_conformance.py compares the traces of both hosts).
"""

from __future__ import annotations

from typing import Any, Protocol

from merge_core.common.errors import TargetError, ValidationError
from merge_core.common.host_contract import BeginHost
from merge_core.common.run_state import RunState
from merge_core.lifecycle.housekeeping import dead_stage_tables, refuse_foreign_format
from merge_core.request.evolution import evolve_spec
from merge_core.request.parse import on_equalities, qualify_one_sided
from merge_core.spark.catalog import SPARK_ERRORS, spark_message
from merge_core.spark.host import SparkHost, _trace
from merge_core.targets import paradigms


class BeginState(Protocol):
    """What begin's primitives read and set on the run they serve (MergeRun), named here so that
    this module does not import the run that imports it."""

    spark: Any
    merge_id: str
    target: Any
    table: dict
    spec: Any
    spec_data: dict
    paradigm: Any

    def check_not_stopped(self) -> None: ...


class MergeHost(SparkHost, BeginHost):
    """SparkHost with the begin primitives of one MergeRun."""

    def __init__(self, run: BeginState):
        super().__init__(run.spark, run.merge_id, stop_check=run.check_not_stopped)
        self.merge = run  # not self.run: that is SparkHost.run, the statement primitive

    def own_target(self, parts: list[str]) -> dict | None:
        """A PostgreSQL target, as MergeRun.begin described it before the lifecycle (its catalog is
        PostgreSQL's); None for a Spark catalog table, which the lifecycle describes."""
        _trace("own_target")
        return self.merge.table if self.merge.target is not None else None

    def check_files(self, table: dict, listing_sql: str) -> list[str]:
        """Refuse another format's metadata in the table's directories; the dead merges' staging
        tables ``listing_sql`` finds in its database (housekeeping.dead_stage_tables), to drop."""
        _trace("check_files")
        refuse_foreign_format(table)
        return dead_stage_tables(self.spark, listing_sql)

    def source_types(self, spec: dict, sql: str) -> list[list[str]]:
        """[name, type] of each source column (``sql``: analysis only), or a ValidationError naming the source."""
        _trace("sql", sql)
        self.stop_check()
        try:
            return [[r[0], r[1]] for r in self.spark.sql(sql).collect()]
        except SPARK_ERRORS as e:
            raise ValidationError([f"source {spec['source']}: {spark_message(e)}"]) from None

    def prepare(self, s: RunState, table: dict, source_types: list[list[str]]) -> dict:
        """The parsed spec for ``table``: the names a one-sided clause leaves unqualified qualified
        (sqlglot)."""
        _trace("prepare")
        run = self.merge
        run.table = table
        spec = run.spec_data
        if not run.spec.upsert and spec["source_kind"] != "none":
            qualify_one_sided(spec, lambda: [n for n, _ in source_types], [c["name"] for c in table["columns"]])
        return {"spec": spec, "table": table}

    def evolve_spec(self, spec: dict, table: dict, source_types: list[list[str]]) -> dict:
        """Schema evolution's part of the spec, in place: the source's columns (``star_columns``, what
        UPDATE SET * and INSERT * assign) and, for a struct the source gives with fewer fields than
        the column, the value an INSERT and an UPDATE store (``evolved_values``, and in the direct
        assignments). ``{'direct', 'errors'}``: the target columns assigned directly
        (request/evolution.py), and the source struct fields the column lacks."""
        _trace("evolve_spec")
        run = self.merge
        if run.target is not None or run.spec.upsert:
            raise ValidationError(
                [
                    "schema_evolution applies to a MERGE into a Spark catalog table; for an upsert "
                    "or a PostgreSQL target, add the columns (ALTER TABLE ... ADD COLUMNS) first"
                ]
            )
        return evolve_spec(spec, table, source_types)

    def part_types(self, sql: str, singles: list[list[str]]) -> dict:
        """{'types', 'errors'}: each part's type (``sql``: describe_parts_sql of all, analysis only);
        when Spark's analyzer refuses the batch, part by part (``singles``: [label, sql]), so that
        each error names its part."""
        _trace("sql", sql)
        self.stop_check()
        try:
            return {"types": [r[1] for r in self.spark.sql(sql).collect()], "errors": []}
        except SPARK_ERRORS:
            pass
        types: list[Any] = []
        errors: list[str] = []
        for label, single in singles:  # find the culprits, one analysis each
            try:
                types.append(self.spark.sql(single).collect()[0][1])
            except SPARK_ERRORS as e:
                types.append(None)
                errors.append(f"{label}: {spark_message(e)}")
        return {"types": types, "errors": errors}

    def on_keys(self, s: RunState, spec: dict) -> list[dict]:
        """ON's equalities of a target column and a source column (sqlglot), which narrow the plan."""
        _trace("on_keys")
        return on_equalities(spec["on"], spec["target_alias"], spec["source_alias"])

    def target_begin(self, table: dict) -> str:
        """The target's row-change paradigm, begun (a PostgreSQL target's own); its name."""
        _trace("target_begin")
        run = self.merge
        run.paradigm = choose_paradigm(table, run.target)
        run.paradigm.begin(table, run.merge_id)
        return run.paradigm.name


def choose_paradigm(table: dict, target=None) -> paradigms.RowChangeParadigm:
    """How rows change in this target (Trino's row-change paradigms)."""
    if table["provider"] == "jdbc" and target is not None:
        from merge_core.targets.postgres import ChangeOnlyUpdatedColumns

        return ChangeOnlyUpdatedColumns(target)
    if table["provider"] in ("parquet", "orc"):
        return paradigms.DeleteRowAndInsertRow()
    raise TargetError(f"no row-change paradigm for {table['name']} ({table['provider']})")
