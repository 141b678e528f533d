"""Check a spec against the real target and source before anything is read or written.

The checks themselves are macros (macros/begin/validate.sql) so dbt runs the same
ones; this module only runs the analysis-only DESCRIBE statements they produce
and, when Spark's analyzer refuses a batch, asks part by part so the error can
name the statement part at fault.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import ValidationError
from merge_core.spark.catalog import SPARK_ERRORS, spark_message

log = logging.getLogger("spark_merge")


def validate(spark: SparkSession, spec: dict, table: dict) -> dict:
    """Return the resolved clauses; raise ValidationError listing every problem."""
    resolved = macros.fill("resolve", spec, table)
    errors = list(resolved["errors"])
    sources = source_columns(spark, spec) if spec["source_kind"] != "none" else []
    macros.render("reserved_column_errors", table, sources, errors)

    parts = resolved["parts"]
    types: list[str | None] = [None] * len(parts)
    for scope in ("both", "source", "target"):
        idx = [i for i, p in enumerate(parts) if p["scope"] == scope]
        if not idx:
            continue
        try:
            rows = spark.sql(macros.render("describe_parts_sql", spec, table, [parts[i] for i in idx])).collect()
            for i, row in zip(idx, rows, strict=False):
                types[i] = row[1]
        except SPARK_ERRORS:
            for i in idx:  # find the culprits, one analysis each
                try:
                    types[i] = spark.sql(macros.render("describe_parts_sql", spec, table, [parts[i]])).collect()[0][1]
                except SPARK_ERRORS as e:
                    errors.append(f"{parts[i]['label']}: {spark_message(e)}")
    typed = [i for i, t in enumerate(types) if t is not None]
    warnings: list[str] = []
    macros.render(
        "check_types",
        [parts[i] for i in typed],
        [types[i] for i in typed],
        errors,
        warnings,
        spec.get("lossy_assignments", "warn"),
    )
    if errors:
        raise ValidationError(errors)
    for w in warnings:
        log.warning("lossy assignment: %s", w)
    resolved["warnings"] = warnings
    for scope in ("both", "source", "target"):
        conditions = macros.fill_list("conditions", parts, scope)
        if conditions and _probe(spark, spec, table, conditions):
            for part in conditions:  # name the culprits, one probe each
                error = _probe(spark, spec, table, [part], part)
                if error:
                    errors.append(error)
    if errors:
        raise ValidationError(errors)
    return resolved


def source_columns(spark: SparkSession, spec: dict) -> list[str]:
    """The column names of the user's source (analysis only), or a ValidationError naming the source."""
    return [name for name, _ in source_types(spark, spec)]


def source_types(spark: SparkSession, spec: dict) -> list[list[str]]:
    """[name, type] of each column of the user's source (analysis only)."""
    try:
        return [[r[0], r[1]] for r in spark.sql(macros.render("describe_source_sql", spec)).collect()]
    except SPARK_ERRORS as e:
        raise ValidationError([f"source {spec['source']}: {spark_message(e)}"]) from None


def _probe(spark: SparkSession, spec: dict, table: dict, conditions: list[dict], part: dict | None = None) -> str:
    """Spark's own rules on the conditions (non-deterministic; constants that fail to fold), asked by
    planning them as a join: empty when fine, else the error for `part` (see probe_error)."""
    plan_text = spark.sql(macros.render("determinism_probe_sql", spec, table, conditions)).collect()[0][0]
    return macros.render("probe_error", plan_text, part).strip()
