"""A Hive metastore service for the tests, over Thrift, backed by a PostgreSQL database: the topology
several Spark applications share (README: "A shared metastore"). Not a test module itself
(test_shared_metastore.py).

Everything comes from pyspark's own jars: the metastore server (`org.apache.hadoop.hive.metastore.
HiveMetaStore`, Hive 2.3.10, the version of Spark's built-in Hive client, so client and server
speak the same Thrift API) and DataNucleus, plus Debian's PostgreSQL JDBC driver. The schema is
created before the service starts, by DataNucleus's SchemaTool from the metastore's own JDO mapping
(`package.jdo` in hive-metastore-2.3.10.jar): letting the service create tables lazily
(`datanucleus.schema.autoCreateAll`) deadlocks on PostgreSQL, because a table created on a second
connection waits for the lock the first connection's open transaction holds (seen here on the first
CREATE TABLE).
"""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path

from merge_core.spark.session import POSTGRES_JDBC_JAR
from tests.cluster import SPARK_HOME, _port, stop_group, wait_listening
from tests.pg_server import binaries

JARS = SPARK_HOME / "jars"
CLASSPATH = f"{JARS}/*:{POSTGRES_JDBC_JAR}"


class HiveMetastore:
    def __init__(
        self,
        root: Path,
        postgres_url: str,
        database: str = "hive_metastore",
        jars: list[Path] = (),
        conf: dict[str, str] | None = None,
    ):
        """``postgres_url``: the JDBC URL of a PostgreSQL server (the `postgres` fixture's). ``jars`` and
        ``conf``: added to the service's class path and Hadoop settings (test_object_store.py: S3A's,
        since the service creates the databases' and tables' directories)."""
        self.root, self.database = root, database
        self.jars, self.extra_conf = list(jars), dict(conf or {})
        found = re.match(r"jdbc:postgresql://([^:/]+):(\d+)/", postgres_url)
        self.pg_host, self.pg_port = found.group(1), found.group(2)
        self.jdbc_url = f"jdbc:postgresql://{self.pg_host}:{self.pg_port}/{database}?user=postgres"
        self.port = _port()
        self.proc: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def _create_schema(self) -> None:
        psql = binaries() / "psql"
        for sql in (f"DROP DATABASE IF EXISTS {self.database}", f"CREATE DATABASE {self.database}"):
            subprocess.run(
                [str(psql), "-h", self.pg_host, "-p", self.pg_port, "-U", "postgres", "-qc", sql],
                check=True,
                capture_output=True,
            )
        with zipfile.ZipFile(JARS / "hive-metastore-2.3.10.jar") as jar:
            (self.root / "package.jdo").write_bytes(jar.read("package.jdo"))
        props = self.root / "datanucleus.properties"
        props.write_text(
            f"javax.jdo.option.ConnectionURL={self.jdbc_url}\n"
            "javax.jdo.option.ConnectionDriverName=org.postgresql.Driver\n"
            "javax.jdo.option.ConnectionUserName=postgres\n"
            "datanucleus.identifierFactory=datanucleus1\n"
        )  # the metastore's naming (HiveConf)
        done = subprocess.run(
            [
                "java",
                "-cp",
                CLASSPATH,
                "org.datanucleus.store.schema.SchemaTool",
                "-create",
                "-api",
                "JDO",
                "-props",
                str(props),
                str(self.root / "package.jdo"),
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or "completed successfully" not in done.stdout:
            raise RuntimeError(f"creating the metastore schema failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")

    def start(self, timeout: float = 90) -> HiveMetastore:
        self.root.mkdir(parents=True, exist_ok=True)
        self._create_schema()
        conf = {
            "javax.jdo.option.ConnectionURL": self.jdbc_url,
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": "postgres",
            "datanucleus.schema.autoCreateAll": "false",
            "hive.metastore.schema.verification": "false",
            "hive.metastore.warehouse.dir": str(self.root / "warehouse"),
            **self.extra_conf,
        }
        # hive.async.log.enabled: Hive's asynchronous logging needs the LMAX disruptor, which Spark
        # does not ship; hive.log.dir keeps the service's log beside the test's files
        cmd = [
            "java",
            "-Xmx768m",
            "-Dhive.async.log.enabled=false",
            f"-Dhive.log.dir={self.root}",
            "-cp",
            ":".join([CLASSPATH, *map(str, self.jars)]),
            "org.apache.hadoop.hive.metastore.HiveMetaStore",
            "-p",
            str(self.port),
        ]
        for k, v in conf.items():
            cmd += ["--hiveconf", f"{k}={v}"]
        log = open(self.root / "metastore.out", "w")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if wait_listening(self.proc, self.port, timeout):
            return self
        exited = self.proc.poll()
        self.stop()
        raise RuntimeError(
            f"the Hive metastore exited ({exited})"
            if exited is not None
            else f"the Hive metastore did not listen on {self.port} in {timeout:.0f} s; see {self.root}/metastore.out"
        )

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc, timeout=20)
        self.proc = None
