"""Exactly-once merges of a Structured Streaming query's micro-batches (``foreachBatch``).

A query restarted from its checkpoint after a crash runs the batch it was in again, with the same
batch id. Each batch's merge runs under the run key ``stream:<query id>:<batch id>``, which the
commit records in its history entry (maintenance/durable.py): a batch whose merge committed (its
interrupted commit finished first) is not merged again, so an additive update is applied once. The
query id is the one the checkpoint keeps across restarts, so another query on the same target, with
its own checkpoint, is never taken for a replay.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from merge_core.common.errors import SpecError
from merge_core.common.result import MergeResult

log = logging.getLogger("spark_merge")

SOURCE = "source"  # the name a batch has in the statement
QUERY_ID = "sql.streaming.queryId"  # the local property Spark sets while a batch of a query runs


def foreach_batch(target: str, sql: str | None = None, **options: Any) -> Callable[[Any, int], MergeResult]:
    """The function for ``writeStream.foreachBatch(...)``: merges each micro-batch into ``target`` once.

    ``sql``: the MERGE, with the batch as its source named ``source`` (``MERGE INTO t USING source s
    ON ...``); without it, an upsert of the batch into ``target`` by the options (``primary_key``,
    ``watermark_key``, ``merge_engine``, ...). ``options``: any of ``merge()``'s."""
    if sql is None and not options.get("primary_key"):
        raise SpecError(
            "foreach_batch needs a MERGE statement (sql=...) or primary_key=... for an upsert of each batch"
        )
    if sql is not None:
        from merge_core.request.parse import parse

        named = parse(sql).target_name
        if named.lower().replace("`", "") != target.lower().replace("`", ""):
            raise SpecError(f"foreach_batch's target is {target}, but its statement merges into {named}")

    def merge_batch(batch: Any, batch_id: int) -> MergeResult:
        from merge_core.api.functions import merge

        spark = batch.sparkSession
        query_id = spark.sparkContext.getLocalProperty(QUERY_ID)
        if not query_id:
            raise SpecError("foreach_batch's function runs inside writeStream.foreachBatch(...) of a streaming query")
        batch.createOrReplaceTempView(SOURCE)
        try:
            result = merge(
                spark,
                sql if sql is not None else {"target": target, "source": SOURCE},
                run_key=f"stream:{query_id}:{batch_id}",
                **options,
            )
        finally:
            spark.catalog.dropTempView(SOURCE)
        log.info("batch %s of query %s: %s", batch_id, query_id, result.summary())
        return result

    return merge_batch
