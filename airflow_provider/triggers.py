"""SparkMergeTrigger: waits in the triggerer for a merge the merge service runs.

A deferrable SparkMergeOperator submits its merge to the merge service (merge_core/api/merge_service.py)
under its run key and defers to this trigger, which polls the service until the merge finished or
failed and then resumes the task with the service's answer. It holds no Spark and no connection.

When the service does not know the run key (it was restarted, and the merge with it), the trigger
submits the request again: the run key makes that safe, since a merge that had committed is found
in the table's history and returned, not applied twice, and one interrupted mid-commit is finished
first. When the service does not answer for ``unreachable_timeout`` seconds, the task fails; its
retry submits again, under the same run key.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class SparkMergeTrigger(BaseTrigger):
    def __init__(
        self,
        service_url: str,
        run_key: str,
        request: Any,
        options: dict,
        max_retries: int = 3,
        token: str | None = None,
        poll_interval: float = 5.0,
        unreachable_timeout: float = 300.0,
    ):
        super().__init__()
        self.service_url, self.run_key, self.request, self.options = service_url, run_key, request, options
        self.max_retries, self.token = max_retries, token
        self.poll_interval, self.unreachable_timeout = poll_interval, unreachable_timeout

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__name__}",
            {
                "service_url": self.service_url,
                "run_key": self.run_key,
                "request": self.request,
                "options": self.options,
                "max_retries": self.max_retries,
                "token": self.token,
                "poll_interval": self.poll_interval,
                "unreachable_timeout": self.unreachable_timeout,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from merge_core.api import service_client as client

        last_answer = time.monotonic()
        while True:
            try:
                state = await asyncio.to_thread(client.status, self.service_url, self.run_key, self.token)
                if state["state"] == "unknown":
                    self.log.warning("the merge service does not know run %s: submitting it again", self.run_key)
                    state = await asyncio.to_thread(
                        client.submit,
                        self.service_url,
                        self.run_key,
                        self.request,
                        self.options,
                        self.max_retries,
                        self.token,
                    )
                last_answer = time.monotonic()
            except client.ServiceUnreachable as e:
                if time.monotonic() - last_answer > self.unreachable_timeout:
                    error = {"type": "MergeError", "message": str(e)}
                    yield TriggerEvent({"run_key": self.run_key, "state": "failed", "error": error})
                    return
                self.log.warning("%s; asking again in %.0f s", e, self.poll_interval)
                state = {"state": "running"}
            if state["state"] in ("finished", "failed"):
                yield TriggerEvent(state)
                return
            await asyncio.sleep(self.poll_interval)

    async def on_kill(self) -> None:
        """A user marked the deferred task failed or cleared it: abort the merge in the service."""
        from merge_core.api import service_client as client

        await asyncio.to_thread(client.abort, self.service_url, self.run_key, self.token)
