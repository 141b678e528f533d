"""A Spark standalone cluster on loopback for the tests: a master and two workers, started from
pyspark's own jars (`bin/spark-class`), each its own JVM. Not a test module itself (test_cluster.py).

Every worker offers 2 cores, and the tests' applications take one 1-core executor on each worker
(spark.cores.max=2), so the tests' session and a subprocess driver (a crash test's) fit at once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
ROOT = Path(__file__).resolve().parents[1]
APP_CONF = {"spark.executor.cores": "1", "spark.cores.max": "2", "spark.executor.memory": "1g"}


# A subprocess driver (a crash, soak or rollback test's) lives for one or two small merges, so its time
# is the JVM's start and the first run of each query, not the data: compiling each query to Java
# (whole-stage and expression codegen) and the JIT's optimizing tier cost more than they save there
# (measured once: a driver's session, table and first two merges 55 s -> 38 s). The results are the same
# (Spark's interpreted evaluation is the one codegen falls back to). The tests' long-lived session keeps
# Spark's defaults.
FAST_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.driver.defaultJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


# the extra Spark conf of every test application, as JSON (test_object_store.py: a warehouse on S3)
CONF_ENV = "SPARK_MERGE_TEST_CONF"


def app_conf(master: str, short_lived: bool = True) -> dict[str, str]:
    """What an application of the tests adds to its conf on ``master``, and $SPARK_MERGE_TEST_CONF's."""
    fast = dict(FAST_CONF) if short_lived else {}
    return {**fast, **(APP_CONF if master.startswith("spark://") else {}), **store_conf()}


def store_conf() -> dict[str, str]:
    """$SPARK_MERGE_TEST_CONF, with a warehouse folder of the application's own when it is on an
    object store (two applications with Derby metastores of their own would otherwise both create
    s3a://.../crash.db/t)."""
    conf = json.loads(os.environ.get(CONF_ENV) or "{}")
    warehouse = conf.get("spark.sql.warehouse.dir", "")
    if warehouse.startswith("s3a://"):
        conf["spark.sql.warehouse.dir"] = f"{warehouse.rstrip('/')}/{uuid.uuid4().hex[:12]}"
    return conf


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(proc: subprocess.Popen, port: int, timeout: float) -> bool:
    """Whether the service ``proc`` started listens on loopback ``port`` within ``timeout`` seconds
    (False at once if it exits): the start of the tests' Thrift Server and Hive metastore."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.5)
    return False


def stop_group(proc: subprocess.Popen, timeout: float) -> None:
    """Stop a service started in a session of its own (its JVM with it): SIGTERM, SIGKILL after ``timeout``."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


class Cluster:
    def __init__(self, root: Path, workers: int = 2):
        self.root, self.workers = root, workers
        self.port, self.ui = _port(), _port()
        self.procs: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_WORKER_DIR": str(self.root / "work"),
            "SPARK_LOG_DIR": str(self.root / "logs"),
        }
        log = open(self.root / f"{name}.log", "w")
        self.procs.append(
            subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=5) as r:
            return json.load(r)

    def start(self, timeout: float = 120) -> Cluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui),
        )
        for n in range(self.workers):
            self._start(
                f"worker{n}",
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "3g",
                "--webui-port",
                str(_port()),
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.state().get("aliveworkers") == self.workers:
                    return self
            except OSError:
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"the standalone cluster did not come up in {timeout:.0f} s; logs in {self.root}")

    def stop(self) -> None:
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        self.procs.clear()


def run_pytest(args: list[str], env: dict[str, str], basetemp: Path) -> subprocess.CompletedProcess:
    """A pytest of its own over the project's tests (the reruns on a cluster or an object store)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(basetemp), *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)


def run_marked(marks: str, env: dict[str, str], basetemp: Path, at_least: int) -> int:
    """Run the tests ``marks`` selects (at least ``at_least`` of them) in a pytest of their own with
    ``env``; fails unless every one passed. Returns how many ran."""
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", marks, "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wanted = int(re.search(r"(\d+)/\d+ tests collected", listed.stdout).group(1))
    assert wanted >= at_least, listed.stdout[-2000:]
    run = run_pytest(["-m", marks], env, basetemp)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert re.search(rf"\b{wanted} passed", run.stdout), run.stdout[-3000:]
    return wanted
