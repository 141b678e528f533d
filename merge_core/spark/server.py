"""`spark-merge server start|stop|status`: a warm Spark for the command line.

Every CLI call otherwise starts a JVM and a Derby metastore (10-20 s before any work). The server is
one long-lived process, the merge service (merge_core/api/merge_service.py, ``serve_driver``), that
owns a Spark driver over the same warehouse and metastore as the embedded session
(session.embedded_conf) and serves Spark Connect from that driver. While it is up, every entry point
on that warehouse uses it instead of starting its own Spark (Derby admits one process, so they
must): the CLI's `run` and `upsert` submit their merge to the service, which runs the lifecycle's
statements inside the driver's own process; the CLI's other commands, ``get_session()``, the Airflow
hook and a dbt session profile connect over Spark Connect. Deferrable Airflow tasks submit to the
same service. Its state (its ports and process) is `<warehouse>/connect-server.json`.

The command line starts one by itself (``ensure``), like Gradle's daemon: its first command on an
embedded warehouse starts the server in the background on free ports, and the server stops after
``SPARK_MERGE_SERVER_IDLE_MINUTES`` (60) minutes without a merge, a Spark job or a Spark Connect
call. ``SPARK_MERGE_AUTO_SERVER=0`` turns that off; `server start` starts one that stays up.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

from merge_core.common.errors import MergeError
from merge_core.spark.session import home_dir

STATE = "connect-server.json"
DEFAULT_PORT = 15002
DEFAULT_MERGES_PORT = 15003  # the merge service's (merge_core/api/merge_service.py)
# the small merges a new server's merge service warms it up with, at most (merge_service.warm_up): a
# small merge keeps getting faster over its first 20-30 runs in a new driver
WARM_UP_MERGES = 24
AUTO_ENV = "SPARK_MERGE_AUTO_SERVER"  # "0", "false", "off" or "no": commands start no server
IDLE_ENV = "SPARK_MERGE_SERVER_IDLE_MINUTES"
WARM_UP_ENV = "SPARK_MERGE_SERVER_WARM_UP"  # the warm-up merges of a server a command starts (default 24)
AUTO_IDLE_MINUTES = 60.0
LOCK = "connect-server.lock"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _serving(pid: Any, home: Path) -> TypeGuard[int]:
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


def keep_up(warehouse: str | None = None) -> None:
    """Tell this warehouse's server a client is about to use it: a request to its merge service counts
    as work, so the server does not stop for idleness between a session finding it and that session's
    first Spark Connect call (a dbt run parses its project in between). A server that does not answer
    is left to the session to find out."""
    url = merges_url(warehouse)
    if url:
        import urllib.request

        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"{url}/merges/_session", timeout=5).close()


def auto_start() -> bool:
    """Whether commands start a server by themselves (``SPARK_MERGE_AUTO_SERVER``, default on)."""
    return os.environ.get(AUTO_ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def idle_minutes() -> float:
    """How long a server the command line started stays up without work (``SPARK_MERGE_SERVER_IDLE_MINUTES``)."""
    text = os.environ.get(IDLE_ENV, "")
    try:
        return float(text) if text.strip() else AUTO_IDLE_MINUTES
    except ValueError:
        raise MergeError(f"{IDLE_ENV} must be a number of minutes, got {text!r}") from None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure(warehouse: str | None = None) -> str:
    """The running server of this warehouse, or one started now in the background on free ports,
    which stops after ``idle_minutes()`` without work."""
    running = status(warehouse)
    if running:
        return running
    minutes = idle_minutes()
    logging.getLogger("spark_merge").warning(
        "starting a warm spark-merge server for %s (later commands reuse it; it stops after %g idle minutes, "
        "or now with `spark-merge server stop`)",
        home_dir(warehouse),
        minutes,
    )
    warm_up = int(os.environ.get(WARM_UP_ENV) or WARM_UP_MERGES)
    return start(warehouse, port=None, merges_port=None, warm_up=warm_up, idle=minutes)


@contextlib.contextmanager
def _starting(home: Path) -> Iterator[None]:
    """One start at a time per warehouse: two commands that start at once start one server (the
    second waits on the first's lock, then finds it up)."""
    import fcntl

    with open(home / LOCK, "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield


def start(
    warehouse: str | None = None,
    port: int | None = DEFAULT_PORT,
    master: str = "local[*]",
    timeout: float = 180,
    merges_port: int | None = DEFAULT_MERGES_PORT,
    warm_up: int = WARM_UP_MERGES,
    idle: float | None = None,
) -> str:
    """Start the server (or return the running one's URL) and wait until it accepts connections on
    both ports (None: a free one); it then warms itself up with up to ``warm_up`` merges of its own
    while idle, and stops after ``idle`` minutes without work (None: it stays up)."""
    home = home_dir(warehouse)
    with _starting(home):
        running = status(str(home))
        if running:
            return running
        port, merges_port = port or free_port(), merges_port or free_port()
        for p, flag in ((port, "--port"), (merges_port, "--merges-port")):
            if _listening(p):
                raise MergeError(f"port {p} is in use by another process; choose another with {flag}")
        return _launch(home, port, master, timeout, merges_port, warm_up, idle)


def _launch(
    home: Path, port: int, master: str, timeout: float, merges_port: int, warm_up: int, idle: float | None
) -> str:
    logs = home / "connect-logs"
    logs.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "merge_core", "merge-service", "--warehouse", str(home), "--master", master]
    command += ["--connect-port", str(port), "--port", str(merges_port), "--warm-up", str(warm_up)]
    if idle is not None:
        command += ["--idle-minutes", str(idle)]
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
            stop(str(home))
            raise MergeError(
                f"the server (Spark Connect on port {port}, the merge service on port {merges_port}) did not "
                f"listen within {timeout:.0f} s; see {logs / 'server.log'}"
            )
        time.sleep(0.5)
    return connect_url(port)


def forget(warehouse: str | None, pid: int) -> None:
    """Remove the state file of a server that is stopping (``pid``: its process), if it is that one's."""
    state = _state(warehouse)
    if state is not None and state.get("pid") == pid:
        (home_dir(warehouse) / STATE).unlink(missing_ok=True)


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
    (home / STATE).unlink(missing_ok=True)  # a server that stops removes it itself
    return True
