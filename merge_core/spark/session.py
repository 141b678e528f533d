"""SparkSessions: the embedded default, a cluster master, or Spark Connect."""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_HOME = "var"
QUIET_LOG4J = Path(__file__).resolve().with_name("log4j2-quiet.properties")
# Debian's libpostgresql-jdbc-java: the JDBC driver PostgreSQL targets need (merge_core/targets/postgres.py)
POSTGRES_JDBC_JAR = "/usr/share/java/postgresql.jar"
# How long a session trusts a cached directory listing (spark.sql.metadataCacheTTLSeconds, a static
# conf): not longer than any retention period in use, see embedded_conf
METADATA_CACHE_TTL_SECONDS = 300
# A shared Hive metastore's Thrift URI(s) when the caller names none (README: "A shared metastore")
METASTORE_ENV = "SPARK_MERGE_METASTORE"


def jdbc_driver_jars() -> str | None:
    """spark.jars for JDBC targets: $SPARK_MERGE_JDBC_JARS, else Debian's PostgreSQL driver if installed."""
    jars = os.environ.get("SPARK_MERGE_JDBC_JARS")
    if jars:
        return jars
    return POSTGRES_JDBC_JAR if Path(POSTGRES_JDBC_JAR).exists() else None


def local_cores(master: str) -> int | None:
    """The task threads of a local master (`local`, `local[4]`, `local[*]`, `local[4,2]`), else None."""
    found = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master.strip())
    if not found:
        return None
    threads = found.group(1) or "1"
    return (os.cpu_count() or 1) if threads == "*" else int(threads)


HOME_ENV = "SPARK_MERGE_HOME"
# what makes a folder a project's top, where its warehouse goes when it has none yet
PROJECT_MARKERS = (".git", "pyproject.toml")


def home_dir(warehouse: str | None = None, start: Path | None = None) -> Path:
    """The embedded warehouse's folder (created): ``warehouse``, else $SPARK_MERGE_HOME, else the
    project's ``var/`` as seen from ``start`` (the working directory; project_home)."""
    chosen = warehouse or os.environ.get(HOME_ENV)
    home = Path(chosen).resolve() if chosen else project_home((start or Path.cwd()).resolve())
    home.mkdir(parents=True, exist_ok=True)
    return home


def project_home(start: Path) -> Path:
    """The warehouse of the project ``start`` lies in, so that the command line, the Python API, the
    example DAGs and a dbt project inside the project share one, whichever of its folders a command
    runs from: the nearest ``var/`` at or above ``start`` that holds a warehouse already; else
    ``var/`` in the nearest folder that is a project's top (it holds ``.git`` or ``pyproject.toml``);
    else ``start/var``."""
    folders = [start, *start.parents]
    for folder in folders:
        if is_warehouse(folder / DEFAULT_HOME):
            return folder / DEFAULT_HOME
    for folder in folders:
        if any((folder / marker).exists() for marker in PROJECT_MARKERS):
            return folder / DEFAULT_HOME
    return start / DEFAULT_HOME


def is_warehouse(folder: Path) -> bool:
    """Whether ``folder`` holds an embedded warehouse (its metastore or its tables' folder)."""
    return (folder / "metastore_db").is_dir() or (folder / "warehouse").is_dir()


def metastore_conf(home: Path, metastore: str | None) -> dict[str, str]:
    """Where the catalog lives. Embedded: a Derby database under ``home``, which one JVM at a time
    can open. Shared: a Hive metastore service (``thrift://host:9083``, several URIs comma-separated),
    which any number of applications use at once; the tables' directories are then wherever the
    metastore says, so every application must reach them (a shared file system or object store).
    ``metastore`` None: $SPARK_MERGE_METASTORE, read here so that every session spark-merge starts
    (get_session, `spark-merge server start`) makes the same choice."""
    quiet_log = f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J}"
    metastore = metastore or os.environ.get(METASTORE_ENV) or None
    if metastore:
        return {"spark.hadoop.hive.metastore.uris": metastore, "spark.driver.extraJavaOptions": quiet_log}
    return {
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={home / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={home} {quiet_log}",
    }


def embedded_conf(home: Path, master_url: str, metastore: str | None = None) -> dict[str, str]:
    """The session's Spark conf: the warehouse under ``home`` and the metastore (metastore_conf).
    The one list of them: ``get_session`` builds with it, ``spark-merge server start`` (server.py)
    passes it to the Connect server it starts over the same warehouse."""
    quiet = os.environ.get("SPARK_LOG_LEVEL", "ERROR") == "ERROR"
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(home / "warehouse"),
        **metastore_conf(home, metastore),
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.enabled": "true",
        # quiet by default: Spark's WARN lines (a loopback hostname, a missing native library, a
        # directory that does not exist yet) and its progress bars read like failures between
        # spark-merge's own progress lines; SPARK_LOG_LEVEL=WARN (or --verbose) brings them back
        "spark.ui.showConsoleProgress": "false" if quiet else "true",
        # Derby cannot filter partitions by a column whose name needs quoting (`part col`);
        # fall back to listing them rather than failing the query
        "spark.sql.hive.metastorePartitionPruningFallbackOnException": "true",
        # A session caches each directory's file listing (and its table relations) until it is told
        # to refresh, and only the committing session is told. Another session of the application
        # (a Thrift or Connect server's other clients) that listed a directory vacuum's canonical
        # layout later refills would read files that are gone. Refills come at least the retention
        # period after the version that used the directory, so a TTL no longer than the retention
        # rules that out (README: "What a concurrent reader sees").
        "spark.sql.metadataCacheTTLSeconds": str(METADATA_CACHE_TTL_SECONDS),
        # A merge runs 10-30 SQL executions with large plans, and a driver keeps the last 1000 of them
        # (and 1000 jobs and stages) in its status store even without a UI: in a long-lived driver
        # (the warm server, a notebook) that fills a 1 GiB heap after a few hundred merges, and the
        # garbage collector then takes both cores. The last hundred are plenty for status and metrics.
        "spark.sql.ui.retainedExecutions": "100",
        "spark.ui.retainedJobs": "200",
        "spark.ui.retainedStages": "200",
    }
    cores = local_cores(master_url)
    if cores:
        # Listing more than 32 partition directories runs a Spark job with one task per directory
        # (up to 10000): on one machine those tasks share its few cores, and their scheduling, not
        # the listing, dominates (0.5-1 s for 100 partitions on 2 cores). One task per core lists
        # the same directories on the same threads.
        conf["spark.sql.sources.parallelPartitionDiscovery.parallelism"] = str(cores)
    jars = jdbc_driver_jars()
    if jars:
        conf["spark.jars"] = jars
    return conf


def session_conf(warehouse: str | None = None, start: Path | None = None) -> tuple[dict[str, str], str]:
    """The conf of a session on the embedded warehouse (home_dir(warehouse, start)), and what it is in
    words: Spark Connect to the warehouse's `spark-merge server` while one is up, else the embedded
    conf (for a session some other code starts: dbt-spark's session profile)."""
    from merge_core.spark import server

    home = home_dir(warehouse, start)
    url = server.status(str(home))
    if url:
        server.keep_up(str(home))
        return {"spark.remote": url}, f"the warehouse {home}, through its spark-merge server at {url}"
    return embedded_conf(home, "local[*]"), f"the warehouse {home}"


def warm_server(warehouse: str | None = None) -> str | None:
    """The Spark Connect URL of the `spark-merge server` up for this embedded warehouse, or None; says
    in one log line that the session goes through it."""
    from merge_core.spark import server

    url = server.status(warehouse)
    if url:
        server.keep_up(warehouse)
        logging.getLogger("spark_merge").info(
            "spark-merge server is up for %s: this session is a Spark Connect session to it (%s)",
            home_dir(warehouse),
            url,
        )
    return url


def get_session(
    master: str | None = None,
    remote: str | None = None,
    warehouse: str | None = None,
    conf: dict[str, str] | None = None,
    app_name: str = "spark-merge",
    metastore: str | None = None,
) -> SparkSession:
    """A SparkSession with a persistent catalog.

    Embedded default: ``local[*]`` with the warehouse and a Derby metastore under
    ``$SPARK_MERGE_HOME``, else the project's ``var/`` (home_dir), so tables survive between runs and
    every entry point of a project sees the same ones. While `spark-merge server` is up for that
    warehouse (it holds the embedded metastore, which admits one application), the session is a
    Spark Connect session to it, and one log line says so.
    ``metastore='thrift://host:9083'`` (or $SPARK_MERGE_METASTORE) uses a shared Hive metastore
    instead, so several applications can merge into the same tables at once.
    ``remote='sc://host:port'`` uses Spark Connect; the server owns the catalog.
    The PostgreSQL JDBC driver is put on the class path when found (``jdbc_driver_jars``).
    """
    from pyspark.sql import SparkSession  # here, not above: the command line imports this module without Spark

    if not (remote or master or metastore or os.environ.get(METASTORE_ENV)):
        remote = warm_server(warehouse)
    if remote:
        builder = SparkSession.builder.remote(remote)
        for k, v in (conf or {}).items():
            builder = builder.config(k, v)
        return builder.getOrCreate()
    home = home_dir(warehouse)
    master_url = master or os.environ.get("SPARK_MASTER") or "local[*]"
    # Python UDFs in a source run in worker processes: this interpreter (with pyarrow and the rest
    # of the environment), not whatever `python3` is first on the PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master_url).appName(app_name).enableHiveSupport()
    for k, v in {**embedded_conf(home, master_url, metastore), **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "ERROR"))
    return spark
