"""`spark-merge server start|stop|status`: a warm Spark for the command line.

Every CLI call otherwise starts a JVM and a Derby metastore (10-20 s before any work). The server is
one long-lived process, the merge service (merge_core/api/merge_service.py, ``serve_driver``), that
owns a Spark driver over the same warehouse and metastore as the embedded session
(session.embedded_conf) and serves Spark Connect from that driver. While it is up, CLI commands on
that warehouse use it instead of starting their own Spark (Derby admits one process, so they must):
`run` and `upsert` submit their merge to the service, which runs the lifecycle's statements inside
the driver's own process; the other commands connect over Spark Connect. Deferrable Airflow tasks
submit to the same service. Its state (its ports and process) is `<warehouse>/connect-server.json`.
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
from typing import Any

from merge_core.common.errors import MergeError
from merge_core.spark.session import home_dir

STATE = "connect-server.json"
DEFAULT_PORT = 15002
DEFAULT_MERGES_PORT = 15003  # the merge service's (merge_core/api/merge_service.py)
# the small merges a new server's merge service warms it up with, at most (merge_service.warm_up): a
# small merge keeps getting faster over its first 20-30 runs in a new driver
WARM_UP_MERGES = 24


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _serving(pid: Any, home: Path) -> bool:
    """Whether process ``pid`` is this warehouse's server: a merge service started for ``home``. The
    state file is only a hint (a stale one, after a reboot, may name a pid another process has since
    taken), so nothing is signalled on its word alone. An exited process not yet reaped is not."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    proc = Path(f"/proc/{pid}/cmdline")
    if Path("/proc/self/cmdline").exists():
        try:
            args = proc.read_bytes().decode(errors="replace").split("\0")
        except OSError:
            return False
    else:  # no /proc (macOS): ps tells the same
        done = subprocess.run(["ps", "-p", str(pid), "-o", "args="], capture_output=True, text=True)
        args = done.stdout.split()
    return "merge-service" in args and str(home) in args


def _state(warehouse: str | None) -> dict | None:
    path = home_dir(warehouse) / STATE
    return json.loads(path.read_text()) if path.exists() else None


def connect_url(port: int) -> str:
    """The Spark Connect URL of a server on this machine's ``port`` (it listens on loopback only)."""
    return f"sc://127.0.0.1:{port}"


def status(warehouse: str | None = None) -> str | None:
    """The Spark Connect URL of the running server for this warehouse, or None."""
    state = _state(warehouse)
    return connect_url(state["port"]) if state and _listening(state["port"]) else None


def merges_url(warehouse: str | None = None) -> str | None:
    """The URL of this warehouse's running merge service, or None."""
    state = _state(warehouse)
    port = state.get("merges_port") if state else None
    return f"http://127.0.0.1:{port}" if port and _listening(port) else None


def start(
    warehouse: str | None = None,
    port: int = DEFAULT_PORT,
    master: str = "local[*]",
    timeout: float = 180,
    merges_port: int = DEFAULT_MERGES_PORT,
    warm_up: int = WARM_UP_MERGES,
) -> str:
    """Start the server (or return the running one's URL) and wait until it accepts connections on
    both ports; it then warms itself up with up to ``warm_up`` merges of its own while idle."""
    running = status(warehouse)
    if running:
        return running
    for p, flag in ((port, "--port"), (merges_port, "--merges-port")):
        if _listening(p):
            raise MergeError(f"port {p} is in use by another process; choose another with {flag}")
    home = home_dir(warehouse)
    logs = home / "connect-logs"
    logs.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "merge_core", "merge-service", "--warehouse", str(home), "--master", master]
    command += ["--connect-port", str(port), "--port", str(merges_port), "--warm-up", str(warm_up)]
    with open(logs / "server.log", "ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives this command
        )
    (home / STATE).write_text(json.dumps({"port": port, "merges_port": merges_port, "pid": process.pid}))
    deadline = time.monotonic() + timeout
    while not (_listening(port) and _listening(merges_port)):
        if time.monotonic() > deadline or process.poll() is not None:
            stop(warehouse)
            raise MergeError(
                f"the server (Spark Connect on port {port}, the merge service on port {merges_port}) did not "
                f"listen within {timeout:.0f} s; see {logs / 'server.log'}"
            )
        time.sleep(0.5)
    return connect_url(port)


def stop(warehouse: str | None = None, timeout: float = 60) -> bool:
    """Stop this warehouse's server (SIGTERM: it stops its Spark, then exits; SIGKILL after
    ``timeout``); False if none was running."""
    home, state = home_dir(warehouse), _state(warehouse)
    if state is None:
        return False
    pid = state.get("pid")
    if _serving(pid, home):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _serving(pid, home) and time.monotonic() < deadline:
            time.sleep(0.25)
        if _serving(pid, home):
            os.killpg(pid, signal.SIGKILL)  # its session: the service and the JVM it started
    (home / STATE).unlink()
    return True
