"""The merge service: merges submitted over HTTP and run next to a long-lived Spark.

A deferrable Airflow task must leave its worker while its merge goes on; but spark-merge's lifecycle
is Python that sends Spark one statement at a time, so it has to live in a process that outlasts
the task. This is that process: it holds no data and no state that matters (the table's journal and
history do), and runs each submitted merge through ``merge_core.merge`` in a thread of its own, in
a Spark Connect session of its own on the server at ``remote``.

    spark-merge merge-service --remote sc://127.0.0.1:15002 --port 15003

(``spark-merge server start`` starts one beside the Spark Connect server it starts.)

HTTP, JSON in and out (service_client.py is the client):
- ``POST /merges`` ``{"run_key", "request", "options", "max_retries"}``: start the merge under
  ``run_key``, or answer the one already running or finished under it (a submission is idempotent:
  a task that submits again after a crash gets the same merge, not a second one). A merge that
  failed is started again.
- ``GET /merges/<run_key>``: ``{"state": "running" | "finished" | "failed", "planned", "result",
  "error"}``; ``{"state": "unknown"}`` for a key this process has not run (it was restarted: submit
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
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from merge_core.spark import server

log = logging.getLogger("spark_merge")

TOKEN_ENV = "SPARK_MERGE_SERVICE_TOKEN"


@dataclass
class Run:
    """One submitted merge, as the service tells it: running, finished (with its result), failed."""

    run_key: str
    state: str = "running"
    planned: dict | None = None
    result: dict | None = None
    error: dict | None = None
    abort: Callable[[], None] | None = field(default=None, repr=False)

    def view(self) -> dict:
        return {k: getattr(self, k) for k in ("run_key", "state", "planned", "result", "error")}


class MergeService:
    """The merges this process runs, by run key."""

    def __init__(self, remote: str):
        self.remote = remote
        self.runs: dict[str, Run] = {}
        self.lock = threading.Lock()

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
        from pyspark.sql import SparkSession

        from merge_core.api.functions import merge
        from merge_core.common.errors import MergeError

        spark = None
        try:
            spark = SparkSession.builder.remote(self.remote).create()  # a session per merge: its own job tags
            result = merge(
                spark,
                body["request"],
                max_retries=int(body.get("max_retries", 3)),
                on_start=lambda abort: setattr(run, "abort", abort),
                on_planned=lambda info: setattr(run, "planned", _plain(info)),
                run_key=run.run_key,
                **(body.get("options") or {}),
            )
            log.info("[%s] %s", run.run_key, result.summary())
            run.result, run.state = _plain(dataclasses.asdict(result)), "finished"
        except Exception as e:  # reported to whoever polls; the table is at its old or new version
            detail = e.detail if isinstance(e, MergeError) else str(e)
            run.error, run.state = {"type": type(e).__name__, "message": str(e), "detail": detail}, "failed"
            log.warning("[%s] failed: %s", run.run_key, e)
        finally:
            run.abort = None
            if spark is not None:
                spark.stop()


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
    """Serve merges until the process is stopped."""
    httpd = ThreadingHTTPServer((host, port), handler(MergeService(remote), os.environ.get(TOKEN_ENV)))
    log.warning("merge service on http://%s:%d, running merges on %s", host, port, remote)
    httpd.serve_forever()
