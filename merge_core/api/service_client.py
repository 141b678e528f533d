"""A client of the merge service (merge_core/api/merge_service.py): submit, poll, abort.

The standard library only, so an Airflow trigger imports it without Spark.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from typing import Any
from urllib.parse import quote

from merge_core.common.errors import MergeError
from merge_core.common.result import MergeResult

log = logging.getLogger("spark_merge")


class ServiceUnreachable(MergeError):
    """The merge service did not answer (not started, stopped, or a network between)."""


def _call(url: str, method: str, path: str, token: str | None, body: dict | None = None, timeout: float = 30) -> dict:
    data = None if body is None else json.dumps(body, default=str).encode()
    request = urllib.request.Request(f"{url.rstrip('/')}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as e:
        raise MergeError(f"the merge service at {url} refused {method} {path}: {e.code} {e.read()[:500]!r}") from e
    except (urllib.error.URLError, OSError) as e:
        raise ServiceUnreachable(
            f"no merge service answers at {url} ({e}): start one with `spark-merge server start` or "
            f"`spark-merge merge-service --remote sc://...`"
        ) from e


def submit(
    url: str,
    run_key: str,
    request: Any,
    options: dict,
    max_retries: int = 3,
    token: str | None = None,
    durable: bool = True,
) -> dict:
    """Start the merge under ``run_key`` (or get the one already running or finished under it).
    ``durable``: the commit records the run key, and a key the table's history holds returns that
    commit instead of merging again (what a retried task needs; a one-off command does not)."""
    body = {"run_key": run_key, "request": request, "options": options, "max_retries": max_retries}
    return _call(url, "POST", "/merges", token, {**body, "durable": durable})


def status(url: str, run_key: str, token: str | None = None) -> dict:
    return _call(url, "GET", f"/merges/{quote(run_key, safe='')}", token)


def abort(url: str, run_key: str, token: str | None = None) -> dict:
    return _call(url, "DELETE", f"/merges/{quote(run_key, safe='')}", token)


def raise_failure(error: dict) -> None:
    """Raise a failed merge's error again, as the class it had where it ran (a MergeError subclass)."""
    from merge_core.common import errors

    cls = getattr(errors, str(error.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, MergeError)):
        cls = MergeError
    failure = cls.__new__(cls)  # its message as it was, whatever the class's own arguments
    Exception.__init__(failure, error.get("message") or "the merge failed")
    failure.detail = error.get("detail") or error.get("message") or ""
    raise failure


def run_merge(
    url: str, request: Any, options: dict, max_retries: int = 3, token: str | None = None, poll: float = 0.1
) -> MergeResult:
    """Submit a one-off merge (the CLI's, to its warm server) and wait for it, logging its progress
    lines here as the service logs them; its error is raised again as its own class. Ctrl-C aborts it."""
    key = f"cli:{uuid.uuid4().hex}"
    submit(url, key, request, options, max_retries, token, durable=False)
    shown = 0
    try:
        while True:
            answer = status(url, key, token)
            lines = answer.get("progress") or []
            for line in lines[shown:]:
                log.info("%s", line)
            shown = len(lines)
            if answer["state"] == "finished":
                return MergeResult(**answer["result"])
            if answer["state"] == "failed":
                raise_failure(answer["error"])
            if answer["state"] == "unknown":
                raise MergeError(
                    f"the merge service at {url} restarted while it ran merge {key}: `spark-merge history` "
                    "tells whether it committed"
                )
            time.sleep(poll)
    except KeyboardInterrupt:
        abort(url, key, token)
        raise
