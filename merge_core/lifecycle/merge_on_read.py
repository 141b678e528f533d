"""Watermark upserts in merge-on-read mode: writers append, a view reads, compaction rewrites.

The table's name becomes a view over a log table `<name>__sm_log`: the view
keeps the freshest row of each key by the same total order the copy-on-write
MERGE uses (macros/begin/upsert.sql), and hides tombstones, so both modes read
the same rows for the same input. The first merge-on-read upsert into a plain
table converts it (renames the table to the log and creates the view); the
upsert options are kept in the log's properties for the view and compaction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import TargetError, ValidationError
from merge_core.common.result import MergeResult
from merge_core.lifecycle.run import Lifecycle, drive
from merge_core.request.spec import MergeSpec
from merge_core.spark.catalog import SPARK_ERRORS, describe_table, relation, spark_message

log = logging.getLogger("spark_merge")
LOG_SUFFIX = "__sm_log"
OPTIONS_PROPERTY = "spark_merge.upsert"


def _is_view(spark: SparkSession, parts: list[str]) -> bool | None:
    """True for a view, False for a table, None when nothing has that name."""
    try:
        desc = json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {relation(parts)} AS JSON").collect()[0][0])
    except SPARK_ERRORS as e:
        if "TABLE_OR_VIEW_NOT_FOUND" in str(e):
            return None
        raise
    return (desc.get("type") or "").upper() == "VIEW"


def log_table(spark: SparkSession, parts: list[str], check: Callable[[dict], Any] | None = None) -> dict:
    """The log behind the view ``parts``, converting a plain table on first use; ``check`` sees the
    plain table before that conversion renames it, so a refused upsert leaves it as it was."""
    db, name = parts[-2], parts[-1]
    log_parts = [db, name + LOG_SUFFIX]
    kind = _is_view(spark, parts)
    if kind is None:
        raise TargetError(f"target table {'.'.join(parts)} not found")
    if kind is False:
        if _is_view(spark, log_parts) is not None:
            raise TargetError(f"{'.'.join(parts)} is a table but {'.'.join(log_parts)} exists too; drop one")
        if check is not None:
            check(describe_table(spark, parts))
        log.warning(
            "converting %s to merge-on-read: the table becomes %s, read through the view %s",
            ".".join(parts),
            ".".join(log_parts),
            ".".join(parts),
        )
        spark.sql(f"ALTER TABLE {relation(parts)} RENAME TO {relation(log_parts)}")
    return describe_table(spark, log_parts)


def _plan(table: dict, upsert: dict) -> dict:
    plan = macros.fill("upsert_plan", upsert, table)
    if plan["errors"]:
        raise ValidationError(plan["errors"])
    return plan


class UpsertRun(Lifecycle):
    """A merge-on-read upsert: append the source to the log (no join, no rewrite) and keep the view
    current (spark_merge__lifecycle_plan_log, then the lifecycle's append)."""

    def __init__(self, spark: SparkSession, spec: MergeSpec):
        super().__init__(spark)
        self.spec = spec

    def begin(self) -> dict:
        self._tag(True)
        data = self.spec.to_dict()

        def check(table: dict) -> dict:
            plan = _plan(table, data["upsert"])
            try:  # the source must give every column, with types the table can store
                self.spark.sql(f"DESCRIBE QUERY {macros.render('mor_rows_sql', table, data)}").collect()
            except SPARK_ERRORS as e:
                raise ValidationError([f"source for {table['name']}: {spark_message(e)}"]) from None
            return plan

        table = log_table(self.spark, self.spec.target, check)
        if macros.fill("lifecycle_settle", self.host, table)["recovered"]:
            table = describe_table(self.spark, [table["database"], table["table_name"]])
        plan = check(table)
        self._planned(
            spec=data,
            table=table,
            kind="upsert",
            paradigm="MERGE_ON_READ",
            statement=f"MERGE-ON-READ UPSERT INTO {'.'.join(self.spec.target)}",
            view=relation(self.spec.target),
            log_plan=plan,
            upsert=data["upsert"],
        )
        self.state = "begun"
        return {
            "merge_id": self.merge_id,
            "target": table["name"],
            "paradigm": "MERGE_ON_READ",
            "plan_hash": "",
            "kind": "upsert",
        }

    def plan(self) -> dict:
        macros.render("lifecycle_plan_log", self.host, self.s)
        self.state = "planned"
        return {
            "merge_id": self.merge_id,
            "target": self.s["table"]["name"],
            "paradigm": "MERGE_ON_READ",
            "plan_hash": "",
            "partitions_to_rewrite": [],
            "changed_rows": self.metrics["numTargetRowsInserted"],
        }

    def explain(self, placeholder_id: bool = False) -> str:
        macros.render("lifecycle_plan_log", _Explaining(), self.s)
        return (
            ";\n\n".join(
                [
                    f"-- spark-merge plan for a merge-on-read UPSERT into {self.s['view']} (log "
                    f"{self.s['table']['name']}): append the source's rows, re-create the view",
                    *self.s["append_statements"],
                ]
            )
            + ";\n"
        )


class _Explaining:
    """A host for explain: no failpoint, no statement runs, the source count reads as 0."""

    def failpoint(self, name: str) -> None:
        pass

    def step(self, text: str) -> None:
        pass

    def rows(self, sql: str) -> list[dict]:
        return [{"n": 0}]


def upsert(spark: SparkSession, spec: MergeSpec) -> MergeResult:
    """Append the source to the log (no join, no rewrite) and keep the view current."""
    return drive(lambda: UpsertRun(spark, spec))


class CompactionRun(Lifecycle):
    """Rewrite the log of a merge-on-read table to one row per key: the copy-on-write commit of a
    merge (spark_merge__lifecycle_rewrite) with the compacting query as its stage statement."""

    def __init__(self, spark: SparkSession, name: str, tombstone_retention_hours: float | None = None):
        super().__init__(spark)
        self.name, self.retention = name, tombstone_retention_hours

    def begin(self) -> dict:
        self._tag(True)
        parts = [p.strip("`") for p in self.name.split(".")]
        if _is_view(self.spark, parts) is not True:
            raise TargetError(f"{self.name} is not a merge-on-read table (no view over {self.name}{LOG_SUFFIX})")
        table = describe_table(self.spark, [parts[-2], parts[-1] + LOG_SUFFIX])
        if macros.fill("lifecycle_settle", self.host, table)["recovered"]:
            table = describe_table(self.spark, [table["database"], table["table_name"]])
        plan = _plan(table, json.loads(table["properties"].get(OPTIONS_PROPERTY) or "{}"))
        cutoff = None
        if self.retention is not None:
            first = table["columns_by_name"][plan["watermark_key"][0].lower()]
            if first["type"] not in ("date", "timestamp", "timestamp_ntz"):
                raise ValidationError(
                    [f"tombstone retention needs a date or timestamp watermark; {first['name']} is {first['type']}"]
                )
            moment = datetime.now(UTC) - timedelta(hours=self.retention)
            cutoff = f"CAST(TIMESTAMP'{moment:%Y-%m-%d %H:%M:%S}+00:00' AS {first['type']})"
        ctx = macros.fill("context", {}, table, self.merge_id)
        self._planned(
            table=table,
            ctx=ctx,
            kind="compact",
            paradigm="MERGE_ON_READ",
            statement=f"COMPACT {self.name}",
            stage_statement=macros.render(
                "stage_select_sql", table, ctx, macros.render("mor_compact_select", table, plan, cutoff)
            ),
        )
        self.state = "begun"
        return {
            "merge_id": self.merge_id,
            "target": table["name"],
            "paradigm": "MERGE_ON_READ",
            "plan_hash": "",
            "kind": "compact",
        }

    def plan(self) -> dict:
        table = self.s["table"]
        self.s["rows_before"] = self.host.rows(f"SELECT count(*) AS n FROM {table['relation']}")[0]["n"]
        partitions = (
            [
                r["partition"]
                for r in macros.fill_list(
                    "decode_partitions",
                    table,
                    self.host.rows(macros.render("file_stats_sql", table, table["relation"], None)),
                )
            ]
            if table["partition_columns"]
            else [{}]
        )
        self.s["partitions"] = partitions
        if not partitions:  # an empty log: nothing to rewrite
            self.s.pop("stage_statement")
        self.state = "planned"
        return {
            "merge_id": self.merge_id,
            "target": table["name"],
            "paradigm": "MERGE_ON_READ",
            "plan_hash": "",
            "partitions_to_rewrite": partitions,
            "changed_rows": 0,
        }


def compact(spark: SparkSession, name: str, tombstone_retention_hours: float | None = None) -> dict:
    """Rewrite the log of a merge-on-read table to one row per key (a journaled commit).

    Tombstones are kept, so a late older row of a deleted key stays deleted;
    with ``tombstone_retention_hours`` those whose first watermark column (a
    date or timestamp) is older than that are dropped.
    """
    runs: list[CompactionRun] = []

    def make() -> CompactionRun:
        runs.append(CompactionRun(spark, name, tombstone_retention_hours))
        return runs[-1]

    result = drive(make)
    before = runs[-1].s["rows_before"]
    log.info("compacted %s: %d log rows -> %d", name, before, result.metrics["numOutputRows"])
    return {
        "merge_id": result.merge_id,
        "rows_before": before,
        "rows_after": result.metrics["numOutputRows"],
        "metrics": result.metrics,
    }
