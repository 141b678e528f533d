"""SparkMergeOperator: a MERGE, UPDATE, DELETE or upsert as an Airflow task.

XCom: `merge_begin` (merge id, target, paradigm, plan hash, partitions to rewrite) is pushed once
the plan is checked and before anything is written; `merge_finish` (the metrics) after the commit.
The return value is the metrics too.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

from airflow.sdk import BaseOperator

from .hooks import SparkMergeHook

log = logging.getLogger(__name__)


class SparkMergeOperator(BaseOperator):
    """Run SQL (``sql``: text or a ``.sql`` file, templated) or a spec dict (``spec``) with spark-merge.

    ``options``: duplicate_rule, partition_filter, key_columns, and for watermark upserts
    primary_key, watermark_key, tombstone_key, tombstone_string_key_value, upsert_mode.
    """

    template_fields: Sequence[str] = ("sql", "spec", "options")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers = {"sql": "sql", "spec": "json", "options": "json"}
    ui_color = "#f4a261"

    def __init__(self, *, sql: str | None = None, spec: dict | None = None, options: dict | None = None,
                 spark_merge_conn_id: str | None = None, max_retries: int = 3, **kwargs: Any):
        super().__init__(**kwargs)
        if (sql is None) == (spec is None):
            raise ValueError("give SparkMergeOperator either sql or spec")
        self.sql, self.spec, self.options = sql, spec, options or {}
        self.spark_merge_conn_id, self.max_retries = spark_merge_conn_id, max_retries
        self._run = None
        self._spark = None

    def execute(self, context: Any) -> dict:
        from merge_core import to_spec
        from merge_core.engine import run

        ti = context["ti"]
        self._spark = SparkMergeHook(self.spark_merge_conn_id).get_conn()
        spec = to_spec(self.sql if self.sql is not None else self.spec, **self.options)

        def planned(merge_run, info):
            self._run = merge_run
            begin = {"merge_id": merge_run.merge_id, "target": merge_run.table["name"],
                     "paradigm": merge_run.paradigm.name, "plan_hash": merge_run.plan_hash,
                     "partitions_to_rewrite": merge_run.partitions, "changed_rows": info["changed_rows"]}
            ti.xcom_push(key="merge_begin", value=begin)

        result = run(self._spark, spec, max_retries=self.max_retries, on_planned=planned)
        ti.xcom_push(key="merge_finish", value={"merge_id": result.merge_id, **result.metrics})
        log.info(result.summary())
        return dict(result.metrics)

    def on_kill(self) -> None:
        """Stop Spark's jobs, then leave the table as it was (or let the journal finish it)."""
        if self._spark is not None:
            interrupt = getattr(self._spark, "interruptAll", None)
            try:
                interrupt() if interrupt else self._spark.sparkContext.cancelAllJobs()
            except Exception as e:  # the session may be gone already
                log.warning("could not cancel Spark jobs: %s", e)
        if self._run is not None:
            self._run.abort()
