"""One SparkSession for the whole run (a cold start costs 15-25 s), a fresh database per test."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster import app_conf

_counter = itertools.count()
# a command of the suite (in this process or a subprocess) starts no warm server by itself: the tests
# that exercise that start and stop their own (test_server.py)
os.environ["SPARK_MERGE_AUTO_SERVER"] = "0"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from merge_core.spark.session import get_session

    home = tmp_path_factory.mktemp("spark_home")
    master = os.environ.get("SPARK_MASTER", "local[2]")  # test_cluster.py runs a subset on spark://
    conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        **app_conf(master, short_lived=False),
    }
    session = get_session(master=master, warehouse=str(home), conf=conf)
    if master.startswith("spark://"):
        _wait_for_executors(session, 2)
    yield session
    session.stop()


def _wait_for_executors(session, n: int, timeout: float = 90) -> None:
    """A cluster run must really run tasks in other JVMs: wait until ``n`` executors registered."""
    deadline = time.monotonic() + timeout
    while session.sparkContext._jsc.sc().getExecutorIds().size() < n:
        if time.monotonic() > deadline:
            pytest.fail(f"{n} executors did not register with {session.sparkContext.master} in {timeout:.0f} s")
        time.sleep(0.5)


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """A throwaway PostgreSQL server (tests/pg_server.py); its JDBC URL. CI installs PostgreSQL
    (.ci/run); elsewhere, without it, the PostgreSQL tests are skipped."""
    from tests.pg_server import Server, binaries

    if binaries() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed: .ci/run installs the postgresql package")
        pytest.skip("PostgreSQL server binaries not installed (Debian package postgresql)")
    root = Path("/tmp") / f"sm_pg_{os.getpid()}"  # the postgres user must reach it: not under /root
    server = Server(root).start()
    yield server.url
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def hive_metastore(postgres, tmp_path_factory):
    from tests.hive_metastore import HiveMetastore

    service = HiveMetastore(tmp_path_factory.mktemp("hms"), postgres).start()
    yield service
    service.stop()


@pytest.fixture
def db(spark):
    """A database of its own for each test, so tests never see each other's tables."""
    name = f"t{os.getpid()}_{next(_counter)}"
    spark.sql(f"CREATE DATABASE {name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


@pytest.fixture
def sales(spark, db):
    """Four partitions p=0..3 of five rows each, in the default partition directories."""
    t = f"{db}.sales"
    spark.sql(
        f"CREATE TABLE {t} USING parquet PARTITIONED BY (p) "
        f"AS SELECT CAST(id AS INT) AS id, CAST(id * 10 AS INT) AS v, CAST(id % 4 AS INT) AS p FROM range(20)"
    )
    return t


def location(spark, table: str, partition: str | None = None) -> str:
    """Where the catalog points the table, or one partition of it ("p=1")."""
    spec = f" PARTITION ({partition})" if partition else ""
    return json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {table}{spec} AS JSON").collect()[0][0])["location"]


def props(spark, table: str) -> dict[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A real Spark Connect server from pyspark's own sbin scripts, on a free loopback port."""
    import pyspark

    home = tmp_path_factory.mktemp("connect")
    spark_home = Path(pyspark.__file__).parent
    port = free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_LOG_DIR": str(home / "logs"),
        "SPARK_PID_DIR": str(home),
        "SPARK_IDENT_STRING": f"sm{port}",
    }
    confs = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(home / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={home / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={home}",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
    }
    args = [str(spark_home / "sbin" / "start-connect-server.sh"), "--master", "local[2]"]
    for k, v in confs.items():
        args += ["--conf", f"{k}={v}"]
    started = subprocess.run(args, env=env, capture_output=True, text=True)
    assert started.returncode == 0, started.stdout + started.stderr
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(1)
    else:
        logs = "\n".join(p.read_text()[-3000:] for p in (home / "logs").glob("*"))
        pytest.fail(f"Spark Connect server did not listen on {port}: {logs}")
    yield f"sc://127.0.0.1:{port}"
    subprocess.run([str(spark_home / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True)


def rows(spark, table: str, order: str = "1") -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT * FROM {table} ORDER BY {order}").collect()]


def table_files(spark, table: str) -> dict[str, int]:
    """Every data file the table reads now, with its size: what 'unchanged' means."""
    return {
        r[0]: r[1]
        for r in spark.sql(f"SELECT DISTINCT _metadata.file_path, _metadata.file_size FROM {table}").collect()
    }


def snapshot(spark, table: str):
    """Rows, files and table properties: a rejected merge must leave all three as they were."""
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    return rows(spark, table), table_files(spark, table), props


def tree(path: str) -> set[str]:
    root = Path(path.removeprefix("file:"))
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """A dbt test runs over Thrift in CI only when marked thrift_ci (test_dbt.py), and then only over
    Thrift (the session is every other test's); every dbt test runs both ways in the extended tier
    (make test-all)."""
    for item in items:
        params = getattr(item, "callspec", None)
        project = params.params.get("project") if params else None
        if project and (project == "thrift") != bool(item.get_closest_marker("thrift_ci")):
            item.add_marker(pytest.mark.extended)


def pytest_terminal_summary(terminalreporter):
    """Say how many random MERGE statements were compared with DuckDB, and the seed to replay them."""
    from tests.test_cluster import REPORT as CLUSTER
    from tests.test_differential import REPORT
    from tests.test_metadata_fuzz import REPORT as FUZZ
    from tests.test_object_store import REPORT as S3
    from tests.test_shared_metastore import REPORT as APPS
    from tests.test_soak import REPORT as SOAK

    if FUZZ["cases"]:
        terminalreporter.write_line(
            f"metadata corruption: {FUZZ['cases']} (object, garbage) cases, {FUZZ['worked'] + FUZZ['refused']} commands: "
            f"{FUZZ['worked']} worked, {FUZZ['refused']} refused in one line, no live row lost; replay with "
            f"SPARK_MERGE_CORRUPTION_SEED={FUZZ['seed']}"
        )
    if CLUSTER:
        terminalreporter.write_line(
            f"standalone cluster (master + 2 workers): {CLUSTER['tests']} tests marked `cluster` passed, "
            f"{CLUSTER['applications']} Spark applications ran on it"
        )
    if S3.get("tests"):
        counts = ", ".join(f"{n} partitions {c['total']}" for n, c in S3["requests"].items())
        terminalreporter.write_line(
            f"S3 warehouse (moto): {S3['tests']} tests passed with the warehouse on s3a://"
            + (f" on a standalone cluster ({S3['applications']} applications)" if S3.get("applications") else "")
            + f"; requests of a merge touching 5 partitions of a table of {counts}"
        )
    if S3.get("kills"):
        k = S3["kills"]
        terminalreporter.write_line(
            f"kill soak on S3: {k['operations']} operations SIGKILLed at random moments, recovered: old {k['old']}, "
            f"new {k['new']}, corrupt {k['corrupt']}, recovery-failed {k['recovery_failed']}"
        )
    if S3.get("soak"):
        c = S3["soak"]
        terminalreporter.write_line(
            f"shared metastore soak on S3: {c['writers']} writer applications, {c['merges']} merges: {c['succeeded']} "
            f"committed, {c['conflicts']} MERGE_CONFLICT, no lost update or duplicated row; {c['reads']} reads saw "
            f"{c['versions']} versions, each one the table had"
        )
    if APPS:
        terminalreporter.write_line(
            f"shared metastore soak: {APPS['writers']} writer applications, {APPS['merges']} merges at once on one "
            f"table: {APPS['succeeded']} committed, {APPS['conflicts']} failed with MERGE_CONFLICT, 0 other failures, "
            f"no lost update or duplicated row; a reader application read it {APPS['reads']} times, seeing "
            f"{APPS['versions']} versions, each one the table had ({APPS['seconds']} s)"
        )
    if SOAK:
        c = SOAK["counts"]
        terminalreporter.write_line(
            f"kill soak: {SOAK['iterations']} operations SIGKILLed at random moments, recovered: old {c['old']}, "
            f"new {c['new']}, corrupt {c['corrupt']}, recovery-failed {c['recovery-failed']}; "
            f"replay with SPARK_MERGE_SOAK_SEED={SOAK['seed']}"
        )
        for line in SOAK["details"]:
            terminalreporter.write_line(f"  {line}")

    if REPORT:
        o = REPORT["outcomes"]
        total = sum(sum(v.values()) for v in o.values())
        terminalreporter.write_line(
            f"differential test: {total} of {REPORT['cases']} random MERGE statements checked against each duplicate "
            f"rule's definition (DuckDB computes the clause choices and the rows); replay with "
            f"SPARK_MERGE_DIFF_SEED={REPORT['seed']}"
        )
        for (rule, shape), n in sorted(o.items()):
            terminalreporter.write_line(
                f"  {rule:8} {shape:13}: same rows {n['rows']}, both refused a duplicate match {n['duplicate']}, "
                f"both rejected the statement {n['invalid']}"
            )
        bys = REPORT.get("not_matched_by_source") or {}
        terminalreporter.write_line(
            "  with WHEN NOT MATCHED BY SOURCE: "
            + ", ".join(f"{shape} {outcome} {n}" for (shape, outcome), n in sorted(bys.items()))
        )
