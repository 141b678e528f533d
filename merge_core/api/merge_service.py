"""The merge service: merges submitted over HTTP and run next to a long-lived Spark.

A deferrable Airflow task must leave its worker while its merge goes on; but spark-merge's lifecycle
is Python that sends Spark one statement at a time, so it has to live in a process that outlasts
the task. This is that process: it holds no data and no state that matters (the table's journal and
history do), and runs each submitted merge through ``merge_core.merge`` in a thread of its own, in
a session of its own. Two ways to run it:

    spark-merge merge-service --warehouse ./var --connect-port 15002 --port 15003
    spark-merge merge-service --remote sc://spark:15002 --port 15003

The first owns the Spark driver (what ``spark-merge server start`` runs): a classic session over the
embedded warehouse, serving Spark Connect from the same driver (Spark's SparkConnectPlugin) to every
other client. Each merge is a new session of that driver, so the dozens of statements a merge issues
are calls inside one process, not round trips over a network (a 20-row merge into 1M rows, end to
end from the command line: 4.7 s over Connect, 2.4 s here; docs/performance.md). The second runs
each merge in a Spark Connect session on the server at ``remote``.

HTTP, JSON in and out (service_client.py is the client):
- ``POST /merges`` ``{"run_key", "request", "options", "max_retries", "durable"}``: start the merge under
  ``run_key``, or answer the one already running or finished under it (a submission is idempotent:
  a task that submits again after a crash gets the same merge, not a second one). A merge that
  failed is started again. ``durable`` (default true): the commit records the run key and a
  submission whose key the table's history holds returns that commit (merge()'s ``run_key``); the
  CLI's one-off keys say false.
- ``GET /merges/<run_key>``: ``{"state": "running" | "finished" | "failed", "planned", "result",
  "error", "progress"}`` (``progress``: the merge's log lines so far, which the CLI prints as they
  come); ``{"state": "unknown"}`` for a key this process has not run (it was restarted: submit
  again, and the run key returns the commit if one happened).
- ``DELETE /merges/<run_key>``: abort the running merge (its Spark jobs are cancelled; the table stays
  at its old version, or a commit past its commit point is finished by the next run).

With ``SPARK_MERGE_SERVICE_TOKEN`` set, every request must carry ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from merge_core.spark import server

log = logging.getLogger("spark_merge")

TOKEN_ENV = "SPARK_MERGE_SERVICE_TOKEN"
# the longest a warm-up runs (server.WARM_UP_MERGES merges at most; docs/python-and-cli.md: "A warm Spark
# for the command line")
WARM_UP_SECONDS = 90
WARM_UP_PREFIX = "__sm_warmup_"
CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
PROGRESS_LINES = 500  # a merge's log lines kept for whoever polls it

# a merge's session and what ends it, made for each merge
Sessions = Callable[[], tuple[Any, Callable[[], None]]]


def connect_sessions(remote: str) -> Sessions:
    """A Spark Connect session per merge on the server at ``remote``: its own job tags, stopped after."""

    def open_session() -> tuple[Any, Callable[[], None]]:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(remote).create()
        return spark, spark.stop

    return open_session


def driver_sessions(spark: Any) -> Sessions:
    """A session of the driver ``spark`` per running merge (its own temporary views, tags and SQL conf;
    one SparkContext and catalog). A finished merge's session serves the next one: a merge leaves no
    view or tag behind, begins by refreshing its target's cached listing, and a session that has
    planned before plans again in a fraction of a new one's time (its catalog's caches are warm)."""
    idle: list = []
    lock = threading.Lock()

    def open_session() -> tuple[Any, Callable[[], None]]:
        with lock:
            session = idle.pop() if idle else spark.newSession()

        def close() -> None:
            with lock:
                idle.append(session)

        return session, close

    return open_session


@dataclass
class Run:
    """One submitted merge, as the service tells it: running, finished (with its result), failed."""

    run_key: str
    state: str = "running"
    planned: dict | None = None
    result: dict | None = None
    error: dict | None = None
    progress: list[str] = field(default_factory=list)
    abort: Callable[[], None] | None = field(default=None, repr=False)

    def view(self) -> dict:
        return {k: getattr(self, k) for k in ("run_key", "state", "planned", "result", "error", "progress")}


class _Progress(logging.Handler):
    """The spark_merge log lines of each merge, told apart by the thread that runs it."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.runs: dict[int, Run] = {}

    def emit(self, record: logging.LogRecord) -> None:
        run = self.runs.get(record.thread or 0)
        if run is not None and len(run.progress) < PROGRESS_LINES:
            run.progress.append(record.getMessage())


class MergeService:
    """The merges this process runs, by run key, each in a session ``sessions`` makes."""

    def __init__(self, sessions: Sessions):
        self.sessions = sessions
        self.runs: dict[str, Run] = {}
        self.lock = threading.Lock()
        self.progress = _Progress()
        self.last_call = time.time()  # the newest request (stop_when_idle)
        logging.getLogger("spark_merge").addHandler(self.progress)

    def submit(self, body: Any) -> dict:
        key = body.get("run_key") if isinstance(body, dict) else None
        if not isinstance(key, str) or not key or "request" not in body:
            raise ValueError("a submission names its run_key and its request (SQL text or a spec)")
        with self.lock:
            run = self.runs.get(key)
            if run is not None and run.state != "failed":
                return run.view()
            run = self.runs[key] = Run(key)
        threading.Thread(target=self._work, args=(run, body), daemon=True, name=f"merge {key}").start()
        return run.view()

    def busy(self) -> bool:
        """Whether a submitted merge is running (the warm-up waits for it)."""
        return any(run.state == "running" for run in list(self.runs.values()))

    def status(self, key: str) -> dict:
        run = self.runs.get(key)
        return run.view() if run else {"run_key": key, "state": "unknown"}

    def abort(self, key: str) -> dict:
        run = self.runs.get(key)
        if run is not None and run.state == "running" and run.abort is not None:
            log.warning("[%s] abort asked for", key)
            run.abort()
        return self.status(key)

    def _work(self, run: Run, body: dict) -> None:
        from merge_core.api.functions import merge
        from merge_core.common.errors import MergeError

        close = None
        try:
            spark, close = self.sessions()
            self.progress.runs[threading.get_ident()] = run  # the merge's own lines, not the service's below
            try:
                result = merge(
                    spark,
                    body["request"],
                    max_retries=int(body.get("max_retries", 3)),
                    on_start=lambda abort: setattr(run, "abort", abort),
                    on_planned=lambda info: setattr(run, "planned", _plain(info)),
                    run_key=run.run_key if body.get("durable", True) else None,
                    **(body.get("options") or {}),
                )
            finally:
                self.progress.runs.pop(threading.get_ident(), None)
            log.info("[%s] %s", run.run_key, result.summary())
            run.result, run.state = _plain(dataclasses.asdict(result)), "finished"
        except Exception as e:  # reported to whoever polls; the table is at its old or new version
            detail = e.detail if isinstance(e, MergeError) else str(e)
            run.error, run.state = {"type": type(e).__name__, "message": str(e), "detail": detail}, "failed"
            log.warning("[%s] failed: %s", run.run_key, e)
        finally:
            run.abort = None
            if close is not None:
                close()


def _plain(value: Any) -> Any:
    """JSON's types only (dates, decimals and the like as text)."""
    return json.loads(json.dumps(value, default=str))


def handler(service: MergeService, token: str | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self, method: str) -> None:
            service.last_call = time.time()
            given = self.headers.get("Authorization") or ""
            if token and not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return self._answer(HTTPStatus.UNAUTHORIZED, {"error": "a bearer token is required"})
            parts = self.path.strip("/").split("/", 1)
            try:
                if parts[0] != "merges":
                    return self._answer(HTTPStatus.NOT_FOUND, {"error": f"no such resource: {self.path}"})
                if method == "POST" and len(parts) == 1:
                    length = int(self.headers.get("Content-Length") or 0)
                    return self._answer(HTTPStatus.ACCEPTED, service.submit(json.loads(self.rfile.read(length))))
                if len(parts) == 2 and method in ("GET", "DELETE"):
                    key = unquote(parts[1])
                    return self._answer(HTTPStatus.OK, service.status(key) if method == "GET" else service.abort(key))
                return self._answer(HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"{method} {self.path}"})
            except (ValueError, TypeError) as e:
                return self._answer(HTTPStatus.BAD_REQUEST, {"error": str(e)})

        def do_GET(self) -> None:  # noqa: N802 (the standard library's names)
            self._route("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._route("POST")

        def do_DELETE(self) -> None:  # noqa: N802
            self._route("DELETE")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            log.debug("merge service: " + format, *args)

    return Handler


def serve(remote: str, host: str = "127.0.0.1", port: int = server.DEFAULT_MERGES_PORT) -> None:
    """Serve merges, each in a Spark Connect session on ``remote``, until the process is stopped."""
    _serve(MergeService(connect_sessions(remote)), host, port, f"running merges on {remote}")


def serve_driver(
    warehouse: str | None,
    master: str,
    connect_port: int = server.DEFAULT_PORT,
    host: str = "127.0.0.1",
    port: int = server.DEFAULT_MERGES_PORT,
    warm_up_merges: int = server.WARM_UP_MERGES,
    idle_minutes: float | None = None,
) -> None:
    """Own the Spark driver of the embedded ``warehouse`` (``spark-merge server start``): merges run in
    its sessions, and Spark Connect clients reach it on ``connect_port``; ``warm_up_merges`` (0: none)
    warm it up meanwhile. SIGTERM stops both, and so does ``idle_minutes`` without work
    (stop_when_idle; None: never)."""
    from merge_core.spark.session import get_session

    spark = get_session(
        master=master,
        warehouse=warehouse,
        app_name="spark-merge server",
        conf={
            "spark.plugins": CONNECT_PLUGIN,
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(connect_port),
        },
    )
    service = MergeService(driver_sessions(spark))
    if warm_up_merges > 0:
        threading.Thread(target=warm_up, args=(service, warm_up_merges), name="warm-up", daemon=True).start()
    if idle_minutes is not None:
        threading.Thread(
            target=stop_when_idle, args=(service, spark, idle_minutes * 60), name="idle", daemon=True
        ).start()
    try:
        _serve(service, host, port, f"Spark Connect on {server.connect_url(connect_port)}")
    finally:
        spark.stop()
        server.forget(warehouse, os.getpid())


def stop_when_idle(service: MergeService, spark: Any, seconds: float, every: float = 10) -> None:
    """Stop the server (as SIGTERM does) once ``seconds`` passed since its last work: a request to the
    merge service, a merge running, a Spark job running, or a Spark Connect session's last call."""
    last = time.time()
    while True:
        time.sleep(min(every, seconds))
        active = service.busy() or bool(spark.sparkContext.statusTracker().getActiveJobsIds())
        last = max(last, service.last_call, connect_last_call(spark), time.time() if active else 0)
        if time.time() - last >= seconds:
            log.warning("idle for %g minutes: stopping the server", seconds / 60)
            os.kill(os.getpid(), signal.SIGTERM)
            return


def connect_last_call(spark: Any) -> float:
    """When a Spark Connect client last called this driver (its sessions' last access), in seconds
    since the epoch; 0 when none has or the Connect service cannot tell."""
    try:
        sessions = spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService.sessionManager()
        active = sessions.listActiveSessions()
        return max((active.apply(i).lastAccessTimeMs() / 1000 for i in range(active.size())), default=0)
    except Exception as e:  # the service stops on merges and jobs alone
        log.debug("Spark Connect sessions: %s", e)
        return 0


def warm_up(service: MergeService, merges: int = server.WARM_UP_MERGES, seconds: float = WARM_UP_SECONDS) -> None:
    """Merges into a ten-row table of a database of its own, dropped after, while the service already
    serves. A fresh driver's first merges are slow for reasons a small merge pays as well as a large
    one: classes loaded, the JVM compiling Spark's planner, the macros compiled (a 20-row merge into
    1M rows took 8.1 s as a fresh server's first, 2.2 s after 30 of these). Only while no submitted
    merge runs: one waits for the other's end, so a warm-up never shares the cores with a merge
    for longer than one of its own merges. It stops after ``merges`` merges or ``seconds``. The
    session it used serves the next merge. Databases a stopped warm-up left are dropped first; a
    failure only logs."""
    from merge_core.api.functions import merge
    from merge_core.common import macros

    started, where = time.monotonic(), tempfile.mkdtemp(prefix="spark-merge-warm-up-")
    db = WARM_UP_PREFIX + uuid.uuid4().hex[:8]
    statements = macros.warm_up_statements(db, where)
    spark, close = service.sessions()
    done = 0
    try:
        for left in spark.sql(macros.show_databases_sql(WARM_UP_PREFIX + "*")).collect():
            spark.sql(macros.drop_database_sql(left[0]))
        for sql in statements["create"]:
            spark.sql(sql)
        waiting = False
        while done < merges and time.monotonic() - started < seconds:
            if service.busy():
                if not waiting:
                    log.info("warm-up: waiting while a submitted merge runs")
                waiting = True
                time.sleep(0.2)
                continue
            waiting = False
            merge(spark, statements["merge"])
            done += 1
            service.last_call = time.time()  # work: the server is not idle meanwhile
        spark.sql(macros.drop_database_sql(db))
        log.warning("warm-up: %d merges in %.1f s", done, time.monotonic() - started)
    except Exception as e:  # the service serves without it; a stop during it ends here too
        log.warning("warm-up did not finish (merges run all the same): %s", str(e).splitlines()[0][:300])
    finally:
        shutil.rmtree(where, ignore_errors=True)
        close()


def _serve(service: MergeService, host: str, port: int, where: str) -> None:
    httpd = ThreadingHTTPServer((host, port), handler(service, os.environ.get(TOKEN_ENV)))
    # SIGTERM (server stop) ends serve_forever from another thread; the caller then stops its Spark
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown, daemon=True).start())
    log.warning("merge service on http://%s:%d, %s", host, port, where)
    httpd.serve_forever()
    httpd.server_close()
