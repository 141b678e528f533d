"""A Spark Thrift Server for the tests: `HiveThriftServer2`, started from pyspark's own jars
(`bin/spark-submit --class org.apache.spark.sql.hive.thriftserver.HiveThriftServer2`), its own
application and JVM with its own warehouse and Derby metastore under ``root``. Not a test module
itself (test_dbt.py runs the materialization through it with a `method: thrift` profile).

``ThriftSql`` reads the server's tables over the same protocol (PyHive, the driver dbt-spark's
thrift method uses) with the few calls the tests make of a SparkSession (``sql(q).collect()``,
``.count()``), so one test body checks either host's tables.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from decimal import Decimal
from pathlib import Path

from pyspark.sql import Row

from merge_core.spark.session import embedded_conf

from .cluster import SPARK_HOME, _port, stop_group, wait_listening

SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"


class ThriftServer:
    def __init__(self, root: Path):
        self.root, self.port = root, _port()
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 180) -> ThriftServer:
        self.root.mkdir(parents=True, exist_ok=True)
        conf = {**embedded_conf(self.root, "local[2]"), "spark.sql.shuffle.partitions": "4"}
        args = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--class",
            SERVER_CLASS,
            "--master",
            "local[2]",
            "--driver-memory",
            "2g",
        ]
        for k, v in conf.items():
            args += ["--conf", f"{k}={v}"]
        args += [
            "--hiveconf",
            f"hive.server2.thrift.port={self.port}",
            "--hiveconf",
            "hive.server2.thrift.bind.host=127.0.0.1",
            "spark-internal",
        ]
        env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
        log = open(self.root / "server.log", "w")
        self.proc = subprocess.Popen(
            args, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True
        )
        if wait_listening(self.proc, self.port, timeout):
            return self
        self.stop()
        raise RuntimeError(
            f"the Spark Thrift Server did not come up in {timeout:.0f} s; log: {self.root / 'server.log'}"
        )

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_group(self.proc, timeout=30)
        self.proc = None

    def profile(self, schema: str) -> str:
        """A dbt profile target for this server: dbt-spark's `method: thrift` (its PyHive extra)."""
        return (
            f"      type: spark\n      method: thrift\n      host: 127.0.0.1\n      port: {self.port}\n"
            f'      schema: "{schema}"\n      connect_retries: 3\n      connect_timeout: 10\n'
        )


def _value(kind: str, v):
    """A value as a SparkSession returns it: the server sends complex values as JSON and dates as text."""
    if v is None:
        return None
    if kind in ("ARRAY_TYPE", "MAP_TYPE", "STRUCT_TYPE"):
        return json.loads(v)
    if kind == "DATE_TYPE":
        return datetime.date.fromisoformat(v)
    if kind == "DECIMAL_TYPE" and not isinstance(v, Decimal):
        return Decimal(v)
    return v


class _Result:
    def __init__(self, rows: list[Row]):
        self.rows = rows

    def collect(self) -> list[Row]:
        return self.rows

    def count(self) -> int:
        return len(self.rows)


class ThriftSql:
    """SQL against the server, answered as a SparkSession's ``sql(q).collect()`` would be.

    By default each query opens its own connection, so its own Spark session on the server: it reads
    the tables as they are now, as a new dbt run or BI query does. ``keep_session=True`` keeps one
    connection, as a long-lived client does, with the file listings its session caches."""

    def __init__(self, server: ThriftServer, keep_session: bool = False):
        self.server = server
        self.kept = self._connect() if keep_session else None

    def _connect(self):
        from pyhive import hive  # dbt-spark[PyHive], installed by `make test`

        return hive.connect(host="127.0.0.1", port=self.server.port)

    def sql(self, query: str) -> _Result:
        connection = self.kept or self._connect()
        cursor = connection.cursor()
        try:
            cursor.execute(query)
            if cursor.description is None:
                return _Result([])
            names = [d[0] for d in cursor.description]
            kinds = [d[1] for d in cursor.description]
            return _Result([Row(**{n: _value(k, v) for n, k, v in zip(names, kinds, r)}) for r in cursor.fetchall()])
        finally:
            cursor.close()
            if connection is not self.kept:
                connection.close()

    def table(self, name: str) -> _Result:
        return self.sql(f"SELECT * FROM {name}")

    def close(self) -> None:
        if self.kept:
            self.kept.close()
