"""`spark-merge server start|stop|status`: a warm Spark for the command line.

Every CLI call otherwise starts a JVM and a Derby metastore (10-20 s before any work). The server is
pyspark's own Spark Connect server (`sbin/start-connect-server.sh`) over the same warehouse and
metastore as the embedded session (session.embedded_conf), started once; while it is up, CLI
commands on that warehouse connect to it instead of starting their own Spark (Derby admits one
process, so they must). Beside it runs the merge service (merge_core/api/merge_service.py) that
deferrable Airflow tasks submit their merges to. Its state (URLs, ports, the scripts' identity, the
service's process) is `<warehouse>/connect-server.json`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from merge_core.common.errors import MergeError
from merge_core.spark.session import embedded_conf, home_dir

STATE = "connect-server.json"
DEFAULT_PORT = 15002
DEFAULT_MERGES_PORT = 15003  # the merge service's (merge_core/api/merge_service.py)


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _env(home: Path, ident: str) -> dict:
    return {
        **os.environ,
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOG_DIR": str(home / "connect-logs"),
        "SPARK_PID_DIR": str(home),
        "SPARK_IDENT_STRING": ident,
    }


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _state(warehouse: str | None) -> dict | None:
    path = home_dir(warehouse) / STATE
    return json.loads(path.read_text()) if path.exists() else None


def status(warehouse: str | None = None) -> str | None:
    """The URL of the running server for this warehouse, or None."""
    state = _state(warehouse)
    return state["url"] if state and _listening(state["port"]) else None


def merges_url(warehouse: str | None = None) -> str | None:
    """The URL of the merge service beside this warehouse's running server, or None."""
    state = _state(warehouse)
    port = state.get("merges_port") if state else None
    return f"http://127.0.0.1:{port}" if port and _listening(port) else None


def start(
    warehouse: str | None = None,
    port: int = DEFAULT_PORT,
    master: str = "local[*]",
    timeout: float = 180,
    merges_port: int = DEFAULT_MERGES_PORT,
) -> str:
    """Start the server and its merge service (or return the running one's URL) and wait until both
    accept connections."""
    running = status(warehouse)
    if running:
        return running
    for p, flag in ((port, "--port"), (merges_port, "--merges-port")):
        if _listening(p):
            raise MergeError(f"port {p} is in use by another process; choose another with {flag}")
    home = home_dir(warehouse)
    ident = f"spark-merge-{port}"
    conf = {
        **embedded_conf(home, master),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
    }
    args = [str(_spark_home() / "sbin" / "start-connect-server.sh"), "--master", master]
    for k, v in conf.items():
        args += ["--conf", f"{k}={v}"]
    done = subprocess.run(args, env=_env(home, ident), capture_output=True, text=True)
    if done.returncode != 0:
        raise MergeError(f"the Spark Connect server did not start: {(done.stdout + done.stderr)[-2000:]}")
    url = f"sc://127.0.0.1:{port}"
    (home / "connect-logs").mkdir(exist_ok=True)
    with open(home / "connect-logs" / "merge-service.log", "ab") as out:
        service = subprocess.Popen(
            [sys.executable, "-m", "merge_core", "merge-service", "--remote", url, "--port", str(merges_port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this command, like the Spark server
        )
    state = {"url": url, "port": port, "ident": ident, "merges_port": merges_port, "merges_pid": service.pid}
    (home / STATE).write_text(json.dumps(state))
    deadline = time.monotonic() + timeout
    while not (_listening(port) and _listening(merges_port)):
        if time.monotonic() > deadline or service.poll() is not None:
            stop(warehouse)
            raise MergeError(
                f"the Spark Connect server (port {port}) or the merge service (port {merges_port}) did not "
                f"listen within {timeout:.0f} s; see {home / 'connect-logs'}"
            )
        time.sleep(1)
    return url


def stop(warehouse: str | None = None) -> bool:
    """Stop this warehouse's server; False if none was running."""
    home, state = home_dir(warehouse), _state(warehouse)
    if state is None:
        return False
    if state.get("merges_pid"):
        try:
            os.kill(state["merges_pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
    subprocess.run(
        [str(_spark_home() / "sbin" / "stop-connect-server.sh")],
        env=_env(home, state["ident"]),
        capture_output=True,
        text=True,
    )
    deadline = time.monotonic() + 60
    while _listening(state["port"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    (home / STATE).unlink()
    return True
