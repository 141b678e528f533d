"""The hook does the work: a SparkSession for a spark-merge connection (or the embedded local one),
a PostgreSQL target from a Postgres connection, and the merge itself in a worker thread that
``abort()`` can stop.

Connection (type `spark_merge`): host is the Spark master URL (`local[4]`, `yarn`, `spark://h:7077`)
or a Spark Connect URL (`sc://h:15002`; a port in the port field is appended). Extra (JSON):
`{"conf": {"spark.executor.memory": "4g"}, "warehouse": "/data/spark-merge"}`, and
`"metastore": "thrift://hms:9083"` for a Hive metastore that several applications share (every
Airflow task is its own Spark application; the embedded Derby metastore admits one at a time).
`"merge_service": "http://h:15003"` is where deferrable tasks submit their merges (the password, if
set, is its bearer token). Without a connection, the embedded warehouse is used (the one the command
line and the Python API use: $SPARK_MERGE_HOME, else the project's var/), through its warm
`spark-merge server` (and that server's merge service) when one is up.
"""

from __future__ import annotations

import contextvars
import json
import threading
from collections.abc import Callable
from typing import Any

from airflow.sdk import BaseHook


def _home() -> str:
    """The embedded warehouse of tasks without a connection: the one every other entry point uses
    ($SPARK_MERGE_HOME, else the project's var/ as seen from the working directory: home_dir)."""
    from merge_core.spark.session import home_dir

    return str(home_dir())


class SparkMergeHook(BaseHook):
    conn_name_attr = "spark_merge_conn_id"
    default_conn_name = "spark_merge_default"
    conn_type = "spark_merge"
    hook_name = "spark-merge"

    def __init__(self, spark_merge_conn_id: str | None = None, postgres_conn_id: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.spark_merge_conn_id, self.postgres_conn_id = spark_merge_conn_id, postgres_conn_id
        self._abort: Callable[[], None] | None = None

    def session_args(self) -> dict[str, Any]:
        """Arguments for merge_core.get_session from the connection (or the embedded default)."""
        if not self.spark_merge_conn_id:
            from merge_core.spark import server

            home = _home()
            warm = server.status(home)  # the server holds the embedded metastore: go through it
            return {"remote": warm} if warm else {"warehouse": home}
        conn = self.get_connection(self.spark_merge_conn_id)
        extra = conn.extra_dejson or {}

        def field(name: str) -> Any:
            """A form field of the connection type (get_provider_info's conn-fields), stored in the
            extra under its name or, as some UIs write it, prefixed with the connection type."""
            value = extra.get(name, extra.get(f"extra__{self.conn_type}__{name}"))
            return json.loads(value) if name == "conf" and isinstance(value, str) and value.strip() else value

        url = (conn.host or "").strip()
        if url.startswith("sc://") and conn.port and ":" not in url.removeprefix("sc://"):
            url = f"{url}:{conn.port}"
        args: dict[str, Any] = {"conf": field("conf") or {}}
        if url.startswith("sc://"):
            args["remote"] = url
        else:
            args["master"] = url or None
            args["warehouse"] = field("warehouse")
            metastore = field("metastore")
            if metastore:
                args["metastore"] = metastore
        return args

    def merge_service(self) -> tuple[str, str | None]:
        """The merge service deferrable tasks submit to, and its token: the connection's
        ``merge_service``, or the one beside the embedded warehouse's `spark-merge server`."""
        from merge_core.common.errors import MergeError

        if self.spark_merge_conn_id:
            conn = self.get_connection(self.spark_merge_conn_id)
            extra = conn.extra_dejson or {}
            url = extra.get("merge_service", extra.get(f"extra__{self.conn_type}__merge_service"))
            token = conn.password or None
        else:
            from merge_core.spark import server

            url, token = server.merges_url(_home()), None
        if not url:
            raise MergeError(
                "deferrable=True submits the merge to a merge service, and none is configured: start one with "
                "`spark-merge server start` (embedded warehouse) or `spark-merge merge-service --remote sc://...` "
                "and name it in the connection's extra as merge_service; or set deferrable=False"
            )
        return url, token

    def get_conn(self):
        from merge_core.spark.session import get_session

        return get_session(**self.session_args())

    def postgres_args(self) -> dict[str, Any]:
        """merge()'s jdbc_url/user/password from the Postgres connection (its schema field is the
        database), or nothing: the target is a Spark catalog table."""
        if not self.postgres_conn_id:
            return {}
        conn = self.get_connection(self.postgres_conn_id)
        return {
            "jdbc_url": f"jdbc:postgresql://{conn.host}:{conn.port or 5432}/{conn.schema or 'postgres'}",
            "jdbc_user": conn.login or None,
            "jdbc_password": conn.password or None,
        }

    def run_merge(
        self,
        sql_or_spec: str | dict,
        options: dict | None = None,
        max_retries: int = 3,
        on_planned: Callable[[dict], None] | None = None,
        run_key: str | None = None,
    ):
        """Run the merge to completion (merge_core.merge) and return its MergeResult; with ``run_key``,
        the result of the commit an earlier try made under it, if there is one (merge_core/maintenance/durable.py).

        It runs in a thread of its own while this one waits. An execution timeout (SIGALRM) or a
        kill signal raises in the waiting thread; were that thread inside a py4j call, its
        connection to the JVM would be left mid-answer and every later call on it would misread.
        Here they only interrupt the wait: ``abort()`` stops the merge's Spark jobs through a
        connection of this thread, and the worker, its call failed, cleans up.
        """
        from merge_core import merge

        spark = self.get_conn()
        outcome: dict = {}

        def started(abort: Callable[[], None]) -> None:
            self._abort = abort

        def work() -> None:
            try:
                outcome["result"] = merge(
                    spark,
                    sql_or_spec,
                    max_retries=max_retries,
                    on_start=started,
                    on_planned=on_planned,
                    run_key=run_key,
                    **self.postgres_args(),
                    **(options or {}),
                )
            except BaseException as e:  # handed to the waiting thread
                outcome["error"] = e

        worker = threading.Thread(
            target=contextvars.copy_context().run, args=(work,), daemon=True, name="spark-merge-worker"
        )
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.2)
        except BaseException:
            self.abort()
            worker.join(60)
            raise
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"]

    def abort(self) -> None:
        """Stop the running merge and leave the table as it was (a commit whose journal is
        written is finished by the next run)."""
        if self._abort is not None:
            self._abort()
