"""The same guarantees with the warehouse on S3: moto's S3 server on loopback (tests/s3_server.py),
Spark through Hadoop's S3A connector, spark-merge's own file work through pyarrow's S3FileSystem
configured from the same Spark settings.

The tests marked `object_store` (a partition and a table emptied by DELETE, merge-on-read and its
compaction, rollback across a rewrite and an append, vacuum, the canonical layout read by path, a
SIGKILL between two repoints then recovery, and the request counts below) run again in a pytest of their own whose applications (the session and the crash
tests' subprocess drivers) get the S3 settings through $SPARK_MERGE_TEST_CONF. The shared-metastore
soak (two writer applications and more, a reader) and the kill soak run on S3 in make test-all. Four
of them (object_store_ci: the SIGKILL, rollback, emptied partitions, the request counts) run on a
standalone cluster; make test-all runs those, and all of them with a local master, with the
`cluster_ci` tests (a merge, a partition move, UPDATE and DELETE, an append, an upsert), and
test_cluster.py runs every `cluster` test on the cluster with a local warehouse.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from merge_core import merge

from .cluster import Cluster, run_marked, run_pytest
from .conftest import location
from .s3_server import BUCKET, CONF_ENV, S3Server

ENDPOINT_ENV = "SPARK_MERGE_TEST_S3"  # the server's endpoint, for the tests that count its requests
REQUESTS_ENV = "SPARK_MERGE_TEST_S3_REQUESTS"  # where they write the counts, for the summary
REPORT: dict = {}  # printed in the terminal summary (conftest.py)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.extended  # CI's slowest test (about 200 s): make test-all, to keep CI within 30 minutes
@pytest.mark.skipif(bool(os.environ.get(ENDPOINT_ENV)), reason="already on S3")
def test_core_tests_pass_on_a_cluster_with_the_warehouse_on_s3(s3, tmp_path):
    """The run of the `object_store_ci` tests (a SIGKILL between repoints then recovery, rollback,
    emptied partitions, the request counts): on a standalone cluster (tests/cluster.py, executors in
    JVMs other than the driver's, as in production) with the warehouse on S3."""
    cluster = Cluster(tmp_path / "cluster").start()
    try:
        counts = _run_marked(s3, tmp_path, "object_store_ci", {"SPARK_MASTER": cluster.url}, at_least=4)
        apps = cluster.state().get("completedapps", []) + cluster.state().get("activeapps", [])
    finally:
        cluster.stop()
    assert len(apps) >= 3  # the tests' session and the crash test's two drivers, each an application of the cluster
    REPORT.update(counts, applications=len(apps))


@pytest.mark.slow
@pytest.mark.extended
@pytest.mark.skipif(bool(os.environ.get(ENDPOINT_ENV)), reason="already on S3")
def test_core_tests_pass_with_the_warehouse_on_s3(s3, tmp_path):
    REPORT.update(_run_marked(s3, tmp_path, "cluster_ci or object_store", {}, at_least=12))


def _run_marked(s3, tmp_path: Path, marks: str, env: dict[str, str], at_least: int) -> dict:
    """Run the tests ``marks`` selects in a pytest of their own, every application's warehouse on ``s3``."""
    env = {
        **os.environ,
        **env,
        CONF_ENV: json.dumps(s3.spark_conf()),
        ENDPOINT_ENV: s3.endpoint,
        REQUESTS_ENV: str(tmp_path / "requests.json"),
    }
    wanted = run_marked(marks, env, tmp_path / "t", at_least=at_least)
    # the request-count test saw its tables on s3a:// (the session's warehouse, as every test's)
    return {"tests": wanted, "requests": json.loads((tmp_path / "requests.json").read_text())}


def _merge_requests(spark, statement: str) -> dict[str, int]:
    """{"<client> <operation>": requests, "total": ...} of one merge (S3Server.stop_counting)."""
    server = S3Server.at(os.environ[ENDPOINT_ENV])
    server.start_counting()
    merge(spark, statement)
    counts = server.stop_counting()
    return {**{f"{client} {op}": n for (client, op), n in sorted(counts.items())}, "total": sum(counts.values())}


@pytest.mark.object_store
@pytest.mark.object_store_ci
@pytest.mark.skipif(not os.environ.get(ENDPOINT_ENV), reason="runs with the warehouse on S3 (test above)")
def test_requests_follow_the_partitions_a_merge_touches_not_the_table(spark, db):
    """A merge that touches 5 partitions makes about as many requests on a table of 10 partitions as
    on one of 50: what grows with the table is listed nowhere (make bench-s3: 100 and 1,000)."""
    totals = {}
    for n in (10, 50):
        t = f"{db}.p{n}"
        spark.sql(f"CREATE TABLE {t} (id INT, v INT, p INT) USING parquet PARTITIONED BY (p)")
        spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), 0, CAST(id % {n} AS INT) FROM range({20 * n})")
        assert location(spark, t).startswith("s3a://")
        statement = (
            f"MERGE INTO {t} t USING (SELECT CAST(id AS INT) AS id, 1 AS v, CAST(id % {n} AS INT) AS p "
            f"FROM range({20 * n}) WHERE id % {n} < 5 AND id < {2 * n}) s ON t.id = s.id AND t.p = s.p "
            "WHEN MATCHED THEN UPDATE SET v = s.v"
        )
        totals[n] = _merge_requests(spark, statement)
        assert spark.sql(f"SELECT count(*) FROM {t} WHERE v = 1").collect()[0][0] == 10
    Path(os.environ[REQUESTS_ENV]).write_text(json.dumps({str(k): v for k, v in totals.items()}))
    assert totals[50]["total"] <= totals[10]["total"] * 1.1, totals


@pytest.mark.object_store
@pytest.mark.skipif(not os.environ.get(ENDPOINT_ENV), reason="runs with the warehouse on S3 (test above)")
def test_the_file_index_spares_a_repeated_merge_a_request_per_footer(spark, db):
    """On S3 each footer is a request of its own. A table of 20 partitions: the first merge reads all
    20 footers and its commit indexes them, so the same merge again reads only the one file the first
    wrote, and makes fewer requests by about the footers it no longer reads."""
    from merge_core.spark import file_index

    t = f"{db}.indexed"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), 0, CAST(id % 20 AS INT) FROM range(400)")
    [(data_files,)] = spark.sql(f"SELECT count(DISTINCT _metadata.file_path) FROM {t}").collect()
    statement = (
        f"MERGE INTO {t} t USING (SELECT 7 AS id, 1 AS v, 7 AS p) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v"
    )
    footers, requests = [], []
    for _ in range(2):
        before = file_index.footers_read
        requests.append(_merge_requests(spark, statement)["total"])
        footers.append(file_index.footers_read - before)
    assert footers[0] >= data_files and footers[1] < footers[0] - data_files // 2, footers
    assert requests[1] < requests[0] - data_files // 2, requests
    assert spark.sql(f"SELECT v FROM {t} WHERE id = 7").collect()[0][0] == 1


@pytest.mark.slow
@pytest.mark.extended  # the shared-metastore soak itself runs in CI (test_shared_metastore.py), on a local warehouse
def test_applications_merge_into_one_s3_table_while_another_reads(s3, postgres, tmp_path):
    from .hive_metastore import HiveMetastore
    from .s3_server import jars
    from .test_shared_metastore import soak

    service = HiveMetastore(tmp_path / "hms", postgres, "hive_metastore_s3", jars(), s3.hadoop_conf()).start()
    try:
        counts = soak(service.uri, tmp_path / "soak", {CONF_ENV: json.dumps(s3.spark_conf(f"s3a://{BUCKET}/soak"))})
    finally:
        service.stop()
    REPORT.update(soak=counts)


@pytest.mark.slow
@pytest.mark.extended  # the kill soak itself runs in CI (test_soak.py), on a local warehouse
@pytest.mark.skipif(bool(os.environ.get(ENDPOINT_ENV)), reason="already on S3")
def test_random_kills_on_s3_leave_the_old_or_the_new_table(s3, tmp_path):
    """test_soak.py's kill soak (every operation SIGKILLed at a random moment, then recovered) with every
    application's warehouse on S3; its counts from the run's summary line."""
    env = {**os.environ, CONF_ENV: json.dumps(s3.spark_conf(f"s3a://{BUCKET}/kills")), ENDPOINT_ENV: s3.endpoint}
    run = run_pytest(
        ["-m", "", "tests/test_soak.py::test_random_kills_leave_the_old_or_the_new_table"], env, tmp_path / "t"
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    found = re.search(
        r"kill soak: (\d+) operations .*: old (\d+), new (\d+), corrupt (\d+), recovery-failed (\d+)", run.stdout
    )
    assert found and found.group(4) == "0" and found.group(5) == "0", run.stdout[-3000:]
    REPORT.update(kills=dict(zip(("operations", "old", "new", "corrupt", "recovery_failed"), map(int, found.groups()))))
