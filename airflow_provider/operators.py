"""SparkMergeOperator: a MERGE, UPDATE, DELETE or upsert as an Airflow task.

XCom: `merge_begin` (merge id, target, paradigm, plan hash, partitions to rewrite) is pushed once
the plan is checked and before anything is written; `merge_finish` (the metrics) after the commit.
The return value is the metrics too. With the OpenLineage provider installed, the task reports the
source tables as inputs and the target, with its row counts, as output.
"""
from __future__ import annotations

import contextvars
import logging
import threading
from typing import Any, Sequence

from airflow.sdk import BaseOperator

from . import lineage
from .hooks import SparkMergeHook

log = logging.getLogger(__name__)


class SparkMergeOperator(BaseOperator):
    """Run SQL (``sql``: text or a ``.sql`` file, templated) or a spec dict (``spec``) with spark-merge.

    ``postgres_conn_id``: the target is a table of that PostgreSQL database (an Airflow Postgres
    connection: host, port, schema = database, login, password), changed in place by primary key.
    ``options``: every option of ``merge_core.merge``: duplicate_rule, partition_filter, key_columns;
    for watermark upserts primary_key, watermark_key, tombstone_key, tombstone_string_key_value,
    upsert_mode; for merge engines primary_key, merge_engine, sequence_field, row_kind_field,
    ignore_delete, aggregate_function, default_aggregate_function, sequence_group, ignore_retract,
    distinct, nested_key, listagg_delimiter.
    """

    template_fields: Sequence[str] = ("sql", "spec", "options")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers = {"sql": "sql", "spec": "json", "options": "json"}
    ui_color = "#f4a261"

    def __init__(self, *, sql: str | None = None, spec: dict | None = None, options: dict | None = None,
                 spark_merge_conn_id: str | None = None, postgres_conn_id: str | None = None, max_retries: int = 3,
                 **kwargs: Any):
        super().__init__(**kwargs)
        if (sql is None) == (spec is None):
            raise ValueError("give SparkMergeOperator either sql or spec")
        self.sql, self.spec, self.options = sql, spec, options or {}
        self.spark_merge_conn_id, self.max_retries = spark_merge_conn_id, max_retries
        self.postgres_conn_id = postgres_conn_id
        self._run = None
        self._spark = None
        self._lineage: dict | None = None

    def execute(self, context: Any) -> dict:
        from merge_core import to_spec
        from merge_core.engine import run
        from merge_core.parse import source_tables

        ti = context["ti"]
        self._spark = SparkMergeHook(self.spark_merge_conn_id).get_conn()
        spec = to_spec(self.sql if self.sql is not None else self.spec, **self.options)

        def started(merge_run):
            self._run = merge_run

        def planned(merge_run, info):
            begin = {"merge_id": merge_run.merge_id, "target": merge_run.table["name"],
                     "paradigm": merge_run.paradigm.name, "plan_hash": merge_run.plan_hash,
                     "partitions_to_rewrite": merge_run.partitions, "changed_rows": info["changed_rows"]}
            ti.xcom_push(key="merge_begin", value=begin)

        target = postgres_target(self.postgres_conn_id) if self.postgres_conn_id else None
        result = self._in_worker_thread(
            lambda: run(self._spark, spec, max_retries=self.max_retries, on_planned=planned, on_start=started,
                        target=target))
        ti.xcom_push(key="merge_finish", value={"merge_id": result.merge_id, **result.metrics})
        log.info(result.summary())
        output = lineage.postgres_table(target, spec.target) if target else lineage.describe(self._spark, spec.target_name)
        self._lineage = {"inputs": [lineage.describe(self._spark, t) for t in source_tables(spec)],
                         "output": output, "metrics": result.metrics}
        return dict(result.metrics)

    def _in_worker_thread(self, work):
        """Run the merge in a thread of its own and wait for it here.

        An execution timeout (SIGALRM) or a kill signal raises in the main thread; were that thread
        inside a py4j call, its connection to the JVM would be left mid-answer and every later call on
        it would misread. Here they only interrupt the wait: on_kill stops the merge's Spark jobs
        through a connection of this thread, and the worker, its call failed, aborts cleanly.
        """
        outcome: dict = {}

        def work_and_record():
            try:
                outcome["result"] = work()
            except BaseException as e:  # handed to the main thread
                outcome["error"] = e

        worker = threading.Thread(target=contextvars.copy_context().run, args=(work_and_record,), daemon=True,
                                  name=f"spark-merge-{self.task_id}")
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.2)
        except BaseException:
            self.on_kill()
            worker.join(60)
            raise
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"]

    def get_openlineage_facets_on_complete(self, task_instance: Any):
        """Called by the OpenLineage provider after a successful run."""
        if self._lineage is None:
            return None
        return lineage.operator_lineage(self._lineage["inputs"], self._lineage["output"], self._lineage["metrics"])

    def on_kill(self) -> None:
        """Airflow calls this on a kill and after an execution timeout: stop this merge's Spark jobs
        and leave the table as it was (a commit whose journal is written is finished by the next run)."""
        if self._run is not None:
            self._run.abort()


def postgres_target(conn_id: str):
    """A PostgreSQL target from an Airflow Postgres connection (the schema field is the database)."""
    from airflow.sdk import BaseHook

    from merge_core.postgres import PostgresTarget

    conn = BaseHook.get_connection(conn_id)
    return PostgresTarget(f"jdbc:postgresql://{conn.host}:{conn.port or 5432}/{conn.schema or 'postgres'}",
                          conn.login or None, conn.password or None)
