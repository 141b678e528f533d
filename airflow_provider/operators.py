"""SparkMergeOperator: a MERGE, UPDATE, DELETE or upsert as an Airflow task.

XCom: `merge_begin` (merge id, target, paradigm, plan hash, partitions to rewrite) is pushed once
the plan is checked and before anything is written; `merge_finish` (the metrics) after the commit.
The return value is the metrics too. With the OpenLineage provider installed, the task reports the
source tables as inputs and the target, with its row counts, as output.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from . import lineage
from .hooks import SparkMergeHook

log = logging.getLogger(__name__)


class SparkMergeOperator(BaseOperator):
    """Run SQL (``sql``: text or a ``.sql`` file, templated) or a spec dict (``spec``) with spark-merge.

    ``postgres_conn_id``: the target is a table of that PostgreSQL database (an Airflow Postgres
    connection: host, port, schema = database, login, password), changed in place by primary key.
    ``options``: any option of ``merge_core.merge`` (duplicate_rule, primary_key, merge_engine, ...);
    ``spark-merge options`` lists them all, as declared once for every host.
    """

    template_fields: Sequence[str] = ("sql", "spec", "options")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers = {"sql": "sql", "spec": "json", "options": "json"}
    ui_color = "#f4a261"

    def __init__(
        self,
        *,
        sql: str | None = None,
        spec: dict | None = None,
        options: dict | None = None,
        spark_merge_conn_id: str | None = None,
        postgres_conn_id: str | None = None,
        max_retries: int = 3,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if (sql is None) == (spec is None):
            raise ValueError("give SparkMergeOperator either sql or spec")
        self.sql, self.spec, self.options = sql, spec, options or {}
        self.spark_merge_conn_id, self.max_retries = spark_merge_conn_id, max_retries
        self.postgres_conn_id = postgres_conn_id
        self._hook: SparkMergeHook | None = None
        self._lineage: dict | None = None

    def execute(self, context: Any) -> dict:
        from merge_core import to_spec
        from merge_core.request.parse import source_tables

        ti = context["ti"]
        self._hook = SparkMergeHook(self.spark_merge_conn_id, postgres_conn_id=self.postgres_conn_id)
        spec = to_spec(self.sql if self.sql is not None else self.spec, **self.options)
        result = self._hook.run_merge(
            spec, max_retries=self.max_retries, on_planned=lambda info: ti.xcom_push(key="merge_begin", value=info)
        )
        ti.xcom_push(key="merge_finish", value={"merge_id": result.merge_id, **result.metrics})
        log.info(result.summary())
        spark = self._hook.get_conn()
        output = (
            lineage.postgres_table(self._hook.postgres_args()["jdbc_url"], spec.target)
            if self.postgres_conn_id
            else lineage.describe(spark, spec.target_name)
        )
        self._lineage = {
            "inputs": [lineage.describe(spark, t) for t in source_tables(spec)],
            "output": output,
            "metrics": result.metrics,
        }
        return dict(result.metrics)

    def get_openlineage_facets_on_complete(self, task_instance: Any):
        """Called by the OpenLineage provider after a successful run."""
        if self._lineage is None:
            return None
        return lineage.operator_lineage(self._lineage["inputs"], self._lineage["output"], self._lineage["metrics"])

    def on_kill(self) -> None:
        """Airflow calls this on a kill and after an execution timeout: the hook stops the merge's
        Spark jobs and leaves the table as it was."""
        if self._hook is not None:
            self._hook.abort()
