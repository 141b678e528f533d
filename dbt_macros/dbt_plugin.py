"""spark-merge's dbt plugin: a dbt-spark `method: session` profile on spark-merge's embedded warehouse.

dbt imports every top-level module whose name starts with ``dbt_`` and starts the plugins its
``plugins`` list names, after it has read the profile and before it opens a connection (dbt-spark's
session method makes its SparkSession at the first query, from the profile's
``server_side_parameters``). A profile that sets the parameter ``spark_merge.warehouse`` gets, in its
place, the Spark conf of that warehouse (``project``: $SPARK_MERGE_HOME, else the var/ folder of the
project dbt runs in, the one the command line, the Python API and the example DAGs use; else a
folder): the conf ``get_session`` would use, or, while `spark-merge server` is up for the warehouse
(it holds the embedded metastore, which admits one application), a Spark Connect session to that
server. Profiles without the parameter are left as they are.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from dbt.plugins.manager import dbtPlugin

WAREHOUSE_PARAMETER = "spark_merge.warehouse"


class SparkMergeWarehouse(dbtPlugin):
    def initialize(self) -> None:
        params = _session_parameters()
        if params is None or WAREHOUSE_PARAMETER not in params:
            return
        from dbt.flags import get_flags
        from dbt_common.events.functions import fire_event
        from dbt_common.events.types import Note

        from merge_core.spark.session import session_conf

        chosen = params.pop(WAREHOUSE_PARAMETER).strip()
        project_dir = Path(getattr(get_flags(), "PROJECT_DIR", None) or ".")
        conf, said = session_conf(None if chosen in ("", "project") else chosen, start=project_dir.resolve())
        if "spark.remote" in conf:
            # a session of the server: only its SQL conf is the session's own; the rest (and the Hive
            # catalog dbt-spark asks for on every query) is the server's, which has it already
            for key in [k for k in params if not k.startswith("spark.sql.")]:
                del params[key]
            warnings.filterwarnings("ignore", message=r"Failed to set spark\.", category=UserWarning)
        params.update(conf)
        fire_event(Note(msg=f"spark-merge: {said}"))


def _session_parameters() -> dict[str, Any] | None:
    """The server_side_parameters of the profile dbt runs with, when it is a dbt-spark session profile."""
    import click

    ctx = click.get_current_context(silent=True)
    profile = (ctx.obj or {}).get("profile") if ctx is not None else None
    credentials = getattr(profile, "credentials", None)
    params = getattr(credentials, "server_side_parameters", None)
    if getattr(credentials, "method", None) != "session" or not isinstance(params, dict):
        return None
    return params


plugins = [SparkMergeWarehouse]
