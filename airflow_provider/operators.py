"""SparkMergeOperator: a MERGE, UPDATE, DELETE or upsert as an Airflow task.

XCom: `merge_begin` (merge id, target, paradigm, plan hash, partitions to rewrite) is pushed once
the plan is made and before anything is written (a one-pass write's checks and counts come with its
write, after it); `merge_finish` (the metrics) after the commit.
The return value is the metrics too. With the OpenLineage provider installed, the task reports the
source tables as inputs and the target, with its row counts and version, as output.

Deferrable (``deferrable=True``, default ``[operators] default_deferrable``): the merge is submitted to
the merge service beside a long-lived Spark (`spark-merge server start`, or `spark-merge merge-service`
next to a Spark Connect server) and the task defers to SparkMergeTrigger, releasing its worker slot
until the merge finished; it then resumes with the same XCom, asset event and lineage.

Assets: a catalog table target is the asset ``spark-merge://spark_catalog/<db>/<table>`` (assets.py).
When the target is known when the DAG is parsed (no template in it), it is an outlet of the task
without being declared; a templated target reaches its asset through an ``AssetAlias`` outlet. Each
run's event carries ``assets.event_extra``: merge id, table version, row counts, partitions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.configuration import conf
from airflow.sdk import BaseOperator

from . import assets, lineage
from .hooks import SparkMergeHook
from .triggers import SparkMergeTrigger

log = logging.getLogger(__name__)


class SparkMergeOperator(BaseOperator):
    """Run SQL (``sql``: text or a ``.sql`` file, templated) or a spec dict (``spec``) with spark-merge.

    ``postgres_conn_id``: the target is a table of that PostgreSQL database (an Airflow Postgres
    connection: host, port, schema = database, login, password), changed in place by primary key.
    ``options``: any option of ``merge_core.merge`` (duplicate_rule, primary_key, merge_engine, ...);
    ``spark-merge options`` lists them all, as declared once for every host.
    ``durable`` (default True, catalog tables): the merge is recorded under this task instance's run key
    (DAG, run, task, map index), so a retry or a cleared task whose merge had committed returns that
    merge's result instead of merging again, finishing a commit interrupted mid-way first.
    ``deferrable``: run the merge in the merge service and wait in the triggerer (catalog tables; a
    PostgreSQL target runs in the worker); ``poll_interval``: seconds between the trigger's questions.
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
        durable: bool = True,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 5.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if (sql is None) == (spec is None):
            raise ValueError("give SparkMergeOperator either sql or spec")
        self.sql, self.spec, self.options = sql, spec, options or {}
        self.spark_merge_conn_id, self.max_retries = spark_merge_conn_id, max_retries
        self.postgres_conn_id, self.durable = postgres_conn_id, durable
        self.deferrable, self.poll_interval = deferrable and not postgres_conn_id, poll_interval
        self._hook: SparkMergeHook | None = None
        self._lineage: dict | None = None
        target = None if postgres_conn_id else _static_target(sql, spec, self.options)
        if target:
            asset = assets.table_asset(target)
            if all(getattr(o, "uri", None) != asset.uri for o in self.outlets):
                self.outlets = [*self.outlets, asset]

    def execute(self, context: Any) -> dict:
        ti = context["ti"]
        spec, spark, uri = self._prepare()
        # what this run merges, as rendered (a source filtered on the data interval names its slice)
        source = f" from {spec.source}" if spec.source else ""
        log.info("%s into %s%s", spec.kind.upper(), spec.target_name, source)
        run_key = self.run_key(ti) if self.durable else f"{self.run_key(ti)}/try-{ti.try_number}"
        if self.deferrable:
            self._defer(run_key)
        result = self._hook.run_merge(
            spec,
            max_retries=self.max_retries,
            on_planned=lambda info: ti.xcom_push(key="merge_begin", value=info),
            run_key=None if self.postgres_conn_id or not self.durable else run_key,
        )
        return self._finish(context, spec, spark, uri, result)

    def execute_complete(self, context: Any, event: dict) -> dict:
        """The task resumed from SparkMergeTrigger: the merge service's answer, as ``execute`` ends."""
        from merge_core.api import service_client
        from merge_core.common.result import MergeResult

        if event["state"] != "finished":
            service_client.raise_failure(event.get("error") or {})
        if event.get("planned"):
            context["ti"].xcom_push(key="merge_begin", value=event["planned"])
        spec, spark, uri = self._prepare()
        return self._finish(context, spec, spark, uri, MergeResult(**event["result"]))

    def _prepare(self) -> tuple[Any, Any, str | None]:
        """The spec, a session and the target's asset URI; the outlets checked before anything is written."""
        from merge_core import to_spec

        self._hook = SparkMergeHook(self.spark_merge_conn_id, postgres_conn_id=self.postgres_conn_id)
        spec = to_spec(self.sql if self.sql is not None else self.spec, **self.options)
        spark = self._hook.get_conn()
        uri = None if self.postgres_conn_id else assets.table_uri(_qualified(spark, spec.target))
        self._check_outlets(uri)
        return spec, spark, uri

    def _defer(self, run_key: str) -> None:
        """Submit the merge to the merge service and wait in the triggerer, not in this worker."""
        from merge_core.api import service_client

        url, token = self._hook.merge_service()
        request = self.sql if self.sql is not None else self.spec
        submitted = service_client.submit(url, run_key, request, self.options, self.max_retries, token)
        log.info("merge submitted to %s under run key %s (%s); deferring", url, run_key, submitted["state"])
        self.defer(
            trigger=SparkMergeTrigger(url, run_key, request, self.options, self.max_retries, token, self.poll_interval),
            method_name="execute_complete",
        )

    def _finish(self, context: Any, spec: Any, spark: Any, uri: str | None, result: Any) -> dict:
        """XCom, log, asset event and lineage of a merge that ran (here or in the merge service)."""
        from merge_core.request.parse import source_tables

        context["ti"].xcom_push(key="merge_finish", value={"merge_id": result.merge_id, **result.metrics})
        log.info(result.summary())
        self._emit(context, uri, assets.event_extra(result))
        output = (
            lineage.postgres_table(self._hook.postgres_args()["jdbc_url"], spec.target)
            if self.postgres_conn_id
            else lineage.describe(spark, spec.target_name)
        )
        self._lineage = {
            "inputs": [lineage.describe(spark, t) for t in source_tables(spec)],
            "output": output,
            "metrics": result.metrics,
            "version": result.version,
        }
        return dict(result.metrics)

    @staticmethod
    def run_key(ti: Any) -> str:
        """This task instance's name, the same in every try and after a clear."""
        return f"airflow:{ti.dag_id}/{ti.run_id}/{ti.task_id}/{ti.map_index}"

    def _check_outlets(self, uri: str | None) -> None:
        """Before anything is written: a spark-merge asset among the outlets names this target, or the
        run would emit an event for a table it does not change."""
        declared = sorted(o.uri for o in self.outlets if getattr(o, "uri", "").startswith(f"{assets.SCHEME}://"))
        if declared and uri not in declared:
            from merge_core import SpecError

            raise SpecError(
                f"this task merges into {uri or 'a PostgreSQL table'}, but its outlets declare {', '.join(declared)}: "
                f"declare the target's asset (airflow_provider.assets.table_asset), or an AssetAlias for a templated "
                f"target; nothing was written"
            )

    def _emit(self, context: Any, uri: str | None, extra: dict) -> None:
        """The run's asset event: its extra on the target's declared asset, or the target's asset added
        to each AssetAlias outlet with it."""
        from airflow.sdk import Asset, AssetAlias

        if uri is None:
            return
        events = context["outlet_events"]
        for outlet in self.outlets:
            if isinstance(outlet, Asset) and outlet.uri == uri:
                events[outlet].extra.update(extra)
            elif isinstance(outlet, AssetAlias):
                events[outlet].add(Asset(uri=uri), extra=extra)

    def get_openlineage_facets_on_complete(self, task_instance: Any):
        """Called by the OpenLineage provider after a successful run."""
        if self._lineage is None:
            return None
        return lineage.operator_lineage(
            self._lineage["inputs"], self._lineage["output"], self._lineage["metrics"], self._lineage["version"]
        )

    def on_kill(self) -> None:
        """Airflow calls this on a kill and after an execution timeout: the hook stops the merge's
        Spark jobs and leaves the table as it was."""
        if self._hook is not None:
            self._hook.abort()


def _static_target(sql: str | None, spec: dict | None, options: dict) -> str | None:
    """The target's name when the DAG file already says it: no template in it, the SQL not a file."""
    from merge_core import to_spec

    text = sql if sql is not None else str(spec)
    if "{{" in text or "{%" in text or (sql is not None and sql.strip().endswith(".sql")):
        return None
    try:
        target = to_spec(sql if sql is not None else spec, **options).target
    except Exception:  # the task reports a bad statement when it runs; parsing the DAG must not fail
        return None
    return ".".join(target) if len(target) >= 2 else None


def _qualified(spark: Any, target: list[str]) -> str:
    """``database.table`` of a target, an unqualified name in the session's current database."""
    return ".".join(target[-2:]) if len(target) >= 2 else f"{spark.catalog.currentDatabase()}.{target[-1]}"
