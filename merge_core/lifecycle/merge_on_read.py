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
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import TargetError, ValidationError
from merge_core.common.result import MergeResult
from merge_core.lifecycle.run import Lifecycle, drive
from merge_core.request.spec import MergeSpec
from merge_core.spark import files
from merge_core.spark.catalog import describe_table

log = logging.getLogger("spark_merge")
LOG_SUFFIX = "__sm_log"
OPTIONS_PROPERTY = "spark_merge.upsert"


def _plan(table: dict, upsert: dict) -> dict:
    plan = macros.upsert_plan(upsert, table)
    if plan["errors"]:
        raise ValidationError(plan["errors"])
    return plan


class UpsertRun(Lifecycle):
    """A merge-on-read upsert: append the source to the log (no join, no rewrite) and keep the view
    current (spark_merge__lifecycle_plan_log, then the lifecycle's append)."""

    def __init__(self, spark: SparkSession, spec: MergeSpec, run_key: str | None = None):
        super().__init__(spark, run_key)
        self.spec = spec

    def begin(self) -> dict:
        """spark_merge__lifecycle_begin_log, the begin dbt runs: convert a plain table on the first
        upsert, settle the log, check the upsert against it."""
        self._tag(True)
        data = self.spec.to_dict()
        self._start(
            spec=data,
            target=list(self.spec.target),
            kind="upsert",
            statement=f"MERGE-ON-READ UPSERT INTO {'.'.join(self.spec.target)}",
            upsert=data["upsert"],
        )
        macros.lifecycle_begin_log(self.host, self.s)
        return self._begun()

    def plan(self) -> dict:
        macros.lifecycle_plan_log(self.host, self.s)
        return self._planned_info(self.metrics["numTargetRowsInserted"])

    def discard_staged(self) -> None:
        """An upsert stages only its change rows (a table with the change feed on), in its own
        directory of the log: ``<root>/_merge_<id>``."""
        files.remove(macros.changes_location(self.s["table"], self.merge_id).rsplit("/", 1)[0])


def explain(spec: MergeSpec, verbose: bool) -> str:
    """What a merge-on-read upsert does, said without its begin (which converts a plain table): it
    appends, so there is no plan of statements to show."""
    name = spec.target_name
    plan = (
        f"spark-merge plan for a merge-on-read UPSERT into {name}: append the source's rows to the log "
        f"{name}{LOG_SUFFIX} (the first such upsert renames a plain table to the log and creates the view "
        f"{name} over it), then re-create the view; no join and no rewrite (compact() folds the log)"
    )
    return f"-- {plan};\n" if verbose else plan + "\n"


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
        if macros.relation_kind(self.host, parts[-2], parts[-1])[parts[-1]] != "VIEW":
            raise TargetError(f"{self.name} is not a merge-on-read table (no view over {self.name}{LOG_SUFFIX})")
        table = describe_table(self.spark, [parts[-2], parts[-1] + LOG_SUFFIX])
        if macros.lifecycle_settle(self.host, table)["recovered"]:
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
        ctx = macros.context({}, table, self.merge_id)
        self._start(
            table=table,
            ctx=ctx,
            kind="compact",
            paradigm="MERGE_ON_READ",
            statement=f"COMPACT {self.name}",
            stage_select=macros.mor_compact_select(table, plan, cutoff),
        )
        return self._begun()

    def plan(self) -> dict:
        table = self.s["table"]
        self.s["rows_before"] = self.host.rows(macros.count_rows_sql(table["relation"]))[0]["n"]
        partitions = (
            [
                r["partition"]
                for r in macros.decode_partitions(
                    table,
                    self.host.rows(macros.file_stats_sql(table, table["relation"], None)),
                )
            ]
            if table["partition_columns"]
            else [{}]
        )
        self.s["changes"] = macros.planned_changes(partitions, None, None)
        if not partitions:  # an empty log: nothing to rewrite
            self.s.pop("stage_select")
        return self._planned_info(0)


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
