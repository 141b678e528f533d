"""One SparkSession for the whole run (a cold start costs 15-25 s), a fresh database per test."""
from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pytest

_counter = itertools.count()


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from merge_core.session import get_session

    home = tmp_path_factory.mktemp("spark_home")
    session = get_session(
        master="local[2]",
        warehouse=str(home),
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


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


@pytest.fixture
def db(spark):
    """A database of its own for each test, so tests never see each other's tables."""
    name = f"t{os.getpid()}_{next(_counter)}"
    spark.sql(f"CREATE DATABASE {name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


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


def pytest_terminal_summary(terminalreporter):
    """Say how many random MERGE statements were compared with DuckDB, and the seed to replay them."""
    from tests.test_differential import REPORT

    if REPORT:
        o = REPORT["outcomes"]
        terminalreporter.write_line(
            f"differential test vs DuckDB: {sum(o.values())} of {REPORT['cases']} cases compared "
            f"(same rows: {o['rows']}, both refused a duplicate match: {o['duplicate']}, "
            f"both rejected the statement: {o['invalid']}); replay with SPARK_MERGE_DIFF_SEED={REPORT['seed']}"
        )
