"""The core tests on a Spark standalone cluster: a master and two workers on loopback (tests/cluster.py),
so tasks run in executor JVMs other than the driver's, as in production.

The tests marked `cluster` (core MERGE / UPDATE / DELETE semantics, upserts, SIGKILL-then-recover)
run again in a pytest of their own whose session (and the crash tests' subprocess drivers) use the
cluster's master; the warehouse is a local path every JVM of this machine shares. Their conftest
waits until two executors registered, so a run that silently fell back to local mode fails. This is
make test-all's run; CI runs the `object_store` tests on the cluster with the warehouse on S3
(test_object_store.py).
"""

from __future__ import annotations

import os

import pytest

from .cluster import Cluster, run_marked

REPORT: dict = {}  # printed in the terminal summary (conftest.py)


@pytest.mark.slow
@pytest.mark.extended  # CI runs the object_store tests on the cluster with the warehouse on S3 (test_object_store.py)
@pytest.mark.skipif(os.environ.get("SPARK_MASTER", "").startswith("spark://"), reason="already on a cluster")
def test_core_tests_pass_on_a_standalone_cluster(tmp_path):
    cluster = Cluster(tmp_path / "cluster").start()
    try:
        wanted = run_marked("cluster", {**os.environ, "SPARK_MASTER": cluster.url}, tmp_path / "tests", at_least=20)
        apps = cluster.state().get("completedapps", []) + cluster.state().get("activeapps", [])
    finally:
        cluster.stop()
    # the tests' session and the crash tests' drivers, each an application of the cluster
    assert len(apps) >= 3
    REPORT.update(tests=wanted, applications=len(apps))
