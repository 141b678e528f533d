"""A SparkSession for a spark-merge connection, or the embedded local one without a connection.

Connection (type `spark_merge`): host is the Spark master URL (`local[4]`, `yarn`, `spark://h:7077`)
or a Spark Connect URL (`sc://h:15002`; a port in the port field is appended). Extra (JSON):
`{"conf": {"spark.executor.memory": "4g"}, "warehouse": "/data/spark-merge"}`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook


class SparkMergeHook(BaseHook):
    conn_name_attr = "spark_merge_conn_id"
    default_conn_name = "spark_merge_default"
    conn_type = "spark_merge"
    hook_name = "spark-merge"

    def __init__(self, spark_merge_conn_id: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.spark_merge_conn_id = spark_merge_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "login", "password"],
            "relabeling": {"host": "Spark master or Connect URL (local[*], yarn, sc://host)"},
            "placeholders": {"extra": '{"conf": {"spark.executor.memory": "4g"}, "warehouse": "/data/spark-merge"}'},
        }

    def session_args(self) -> dict[str, Any]:
        """Arguments for merge_core.session.get_session from the connection (or the embedded default)."""
        if not self.spark_merge_conn_id:
            home = os.environ.get("SPARK_MERGE_HOME") or str(Path(os.environ.get("AIRFLOW_HOME", "~/airflow")).expanduser() / "spark-merge")
            return {"warehouse": home}
        conn = self.get_connection(self.spark_merge_conn_id)
        extra = conn.extra_dejson or {}
        url = (conn.host or "").strip()
        if url.startswith("sc://") and conn.port and ":" not in url.removeprefix("sc://"):
            url = f"{url}:{conn.port}"
        args: dict[str, Any] = {"conf": extra.get("conf") or {}}
        if url.startswith("sc://"):
            args["remote"] = url
        else:
            args["master"] = url or None
            args["warehouse"] = extra.get("warehouse")
        return args

    def get_conn(self):
        from merge_core.session import get_session

        return get_session(**self.session_args())
