"""A client of the merge service (merge_core/api/merge_service.py): submit, poll, abort.

The standard library only, so an Airflow trigger imports it without Spark.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

from merge_core.common.errors import MergeError


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


def submit(url: str, run_key: str, request: Any, options: dict, max_retries: int = 3, token: str | None = None) -> dict:
    """Start the merge under ``run_key`` (or get the one already running or finished under it)."""
    body = {"run_key": run_key, "request": request, "options": options, "max_retries": max_retries}
    return _call(url, "POST", "/merges", token, body)


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
