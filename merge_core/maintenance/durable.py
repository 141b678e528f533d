"""Durable runs: a merge asked for again under the same run key returns the first one's result.

A scheduler retries a task whose worker died, and a user clears a task to run it again. When the
merge of the first try had committed, running it again would apply the statement twice (an
``UPDATE ... SET n = n + 1`` adds 2), or, for an idempotent upsert, rewrite partitions for nothing.
So a caller that can name its run (the Airflow operator: DAG, run, task and map index) passes that
name as ``run_key``: each commit records it in its history entry, and before merging, the run
finishes an interrupted commit of the table (its journal carries the entry, run key included) and
looks for a committed entry with the key. Found, its result is returned, marked ``replayed``, and
nothing is merged. A run that committed nothing (a no-op, a failure before the commit point) left
no entry, so it is merged again.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from merge_core.common.errors import MergeError, SpecError
from merge_core.common.result import MergeResult
from merge_core.request.spec import MergeSpec

log = logging.getLogger("spark_merge")


def committed_run(spark: SparkSession, spec: MergeSpec, target, run_key: str) -> MergeResult | None:
    """The result of the commit recorded with ``run_key`` in the target's history, or None."""
    from merge_core.lifecycle.merge_on_read import LOG_SUFFIX
    from merge_core.lifecycle.merge_run import merges_on_read
    from merge_core.maintenance.history_store import find_run
    from merge_core.spark import host
    from merge_core.spark.catalog import describe_table

    if target is not None:
        raise SpecError(
            "run_key: a PostgreSQL target keeps no spark-merge history to find an earlier commit in; "
            "leave run_key out (the operator does for a postgres_conn_id)"
        )
    parts = list(spec.target)
    if merges_on_read(spec):
        parts[-1] += LOG_SUFFIX
    try:
        table = describe_table(spark, parts)
    except MergeError:  # no such table yet, or one the merge refuses: it reports what is wrong
        return None
    if host.recover(spark, table):
        table = describe_table(spark, parts)
    entry = find_run(table, run_key)
    if entry is None:
        return None
    log.warning(
        "[%s] run key %s: merge %s already committed version %s of %s; returning its result, merging nothing",
        entry["merge_id"],
        run_key,
        entry["merge_id"],
        entry.get("version_after"),
        table["name"],
    )
    return MergeResult(
        entry["merge_id"],
        entry["target"],
        entry["paradigm"],
        entry.get("plan_hash") or "",
        dict(entry["metrics"]),
        list(entry.get("partitions") or []),
        version=entry.get("version_after"),
        replayed=True,
    )
