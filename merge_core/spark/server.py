"""`spark-merge server start|stop|status`: a warm Spark for the command line.

Every CLI call otherwise starts a JVM and a Derby metastore (10-20 s before any work). The server is
pyspark's own Spark Connect server (`sbin/start-connect-server.sh`) over the same warehouse and
metastore as the embedded session (session.embedded_conf), started once; while it is up, CLI
commands on that warehouse connect to it instead of starting their own Spark (Derby admits one
process, so they must). Its state (URL, port, the scripts' identity) is `<warehouse>/connect-server.json`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from merge_core.common.errors import MergeError
from merge_core.spark.session import embedded_conf, home_dir

STATE = "connect-server.json"
DEFAULT_PORT = 15002


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


def status(warehouse: str | None = None) -> str | None:
    """The URL of the running server for this warehouse, or None."""
    path = home_dir(warehouse) / STATE
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    return state["url"] if _listening(state["port"]) else None


def start(
    warehouse: str | None = None, port: int = DEFAULT_PORT, master: str = "local[*]", timeout: float = 180
) -> str:
    """Start the server (or return the running one's URL) and wait until it accepts connections."""
    running = status(warehouse)
    if running:
        return running
    if _listening(port):
        raise MergeError(f"port {port} is in use by another process; choose another with --port")
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
    (home / STATE).write_text(json.dumps({"url": url, "port": port, "ident": ident}))
    deadline = time.monotonic() + timeout
    while not _listening(port):
        if time.monotonic() > deadline:
            stop(warehouse)
            raise MergeError(
                f"the Spark Connect server did not listen on port {port} within {timeout:.0f} s; "
                f"see {home / 'connect-logs'}"
            )
        time.sleep(1)
    return url


def stop(warehouse: str | None = None) -> bool:
    """Stop this warehouse's server; False if none was running."""
    home = home_dir(warehouse)
    path = home / STATE
    if not path.exists():
        return False
    state = json.loads(path.read_text())
    subprocess.run(
        [str(_spark_home() / "sbin" / "stop-connect-server.sh")],
        env=_env(home, state["ident"]),
        capture_output=True,
        text=True,
    )
    deadline = time.monotonic() + 60
    while _listening(state["port"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    path.unlink()
    return True
