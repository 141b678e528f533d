"""One lifecycle for every commit: begin -> plan -> execute -> finish, or abort.

A MERGE (engine.MergeRun), a merge-on-read upsert and a compaction
(merge_on_read.UpsertRun, CompactionRun) and a rollback (retention.RollbackRun)
differ only in how they begin and plan. They all fill one "planned changes"
value ``s`` (the dict macros/lifecycle/phases.sql reads) and then share what this
class does: execute it through spark_merge__lifecycle_write (the write mode is a
branch inside it: append, stage and commit, or commit given repoints), finish
with the one history-entry builder, and abort the same way from any thread.
``drive()`` runs a lifecycle with the callbacks and the re-plan on a moved
version, as Delta's MergeIntoCommand runs its strategies in one ``runMerge``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import ConflictError, MergeError, RetryableConflict
from merge_core.common.result import MergeResult, new_merge_id
from merge_core.common.run_state import RunState
from merge_core.spark import files
from merge_core.spark.host import SparkHost

log = logging.getLogger("spark_merge")
# the end-of-run summary, on its own logger: a host that shows the summary itself (the CLI prints it
# to stdout) quiets this one and keeps the progress lines
summary_log = logging.getLogger("spark_merge.summary")

# Lifecycles alive in this process: a begin removes the session's leftovers of every other one.
_LIVE: set[str] = set()
_LIVE_LOCK = threading.Lock()


def live_ids() -> set[str]:
    with _LIVE_LOCK:
        return set(_LIVE)


def zero_metrics() -> dict[str, int]:
    """Every metric a commit reports, at zero (spark_merge__zero_metrics: the names are defined there)."""
    return macros.zero_metrics()


class Lifecycle:
    """One commit. Subclasses implement ``begin`` (fill ``self.s``, touch no data) and ``plan``."""

    def __init__(self, spark: SparkSession, run_key: str | None = None):
        self.spark = spark
        # the caller's id of the run asking for this commit (an Airflow task instance): recorded in
        # the history entry, so a retry finds the commit (maintenance/durable.py)
        self.run_key = run_key
        self.merge_id = new_merge_id(run_key)
        with _LIVE_LOCK:
            _LIVE.add(self.merge_id)
        self.state = "new"
        # Spark work of this commit carries this tag, so an abort from another thread or a signal
        # handler (Airflow's on_kill, an execution timeout) can stop the statement in flight.
        self.tag = f"spark_merge_{self.merge_id}"
        self._stopped = False
        # the lifecycle macros' primitives (host.py); its guard keeps an abort from another thread
        # away from a journal being written
        self.host = SparkHost(spark, self.merge_id, stop_check=self.check_not_stopped)
        self.s: RunState = {}  # the run state the lifecycle macros read and fill (common/run_state.py)
        self.metrics: dict[str, Any] = zero_metrics()

    # -- what differs ------------------------------------------------------------
    def begin(self) -> dict:
        raise NotImplementedError

    def plan(self) -> dict:
        raise NotImplementedError

    def discard_staged(self) -> None:
        """Remove what the write staged before its commit point (on abort)."""
        files.remove(self.s["ctx"]["stage_location"])

    def release(self) -> None:
        """Called when the lifecycle ends, committed or not."""

    # -- what is shared ----------------------------------------------------------
    def _tag(self, add: bool) -> None:
        try:
            (self.spark.addTag if add else self.spark.removeTag)(self.tag)
        except Exception as e:  # a session without tags can still merge; only on_kill is coarser
            log.debug("[%s] job tag: %s", self.merge_id, e)

    def _start(self, **fields: Any) -> RunState:
        """This run's state (spark_merge__run_state, as dbt starts it) with its metrics dict."""
        extra = {"entry_extra": {"run_key": self.run_key}} if self.run_key else {}
        self.s = macros.run_state(self.merge_id, {"metrics": self.metrics, **extra, **fields})
        return self.s

    def _begun(self) -> dict:
        """What begin reports (the hooks' on_planned sees it first): one builder for every run."""
        self.state = "begun"
        return {**self._info(), "kind": self.s["kind"]}

    def _planned_info(self, changed_rows: int | None) -> dict:
        """What plan reports: the partitions the planned changes rewrite, and the rows they change (None
        for a one-pass write: the partitions holding matched rows, and no count before its write)."""
        self.state = "planned"
        return {**self._info(), "partitions_to_rewrite": self.partitions, "changed_rows": changed_rows}

    def _info(self) -> dict:
        s = self.s
        return {
            "merge_id": self.merge_id,
            "target": s["table"]["name"],
            "paradigm": s["paradigm"],
            "plan_hash": s["plan_hash"],
        }

    def execute(self) -> None:
        """Write the planned changes and commit them (spark_merge__lifecycle_write, as under dbt)."""
        macros.lifecycle_write(self.host, self.s)
        self.state = "committed"

    @property
    def partitions(self) -> list[dict]:
        return self.s["changes"]["partitions"] if self.s else []

    def finish(self) -> MergeResult:
        """The history entry (unless the commit's journal carried it), clean-up, the result."""
        macros.lifecycle_finish(self.host, self.s)
        return self._finished()

    def _result(self, **flags: bool) -> MergeResult:
        """The run's result as it stands (its metrics timed now): the one builder of a finished run's
        and a dry run's result; ``flags`` are MergeResult's noop and dry_run. A committed run's time is
        the one its history entry records (lifecycle_finish)."""
        if not self.metrics["executionTimeMs"]:
            self.metrics["executionTimeMs"] = self.host.elapsed_ms()
        return MergeResult(
            self.merge_id,
            self.s["table"]["name"],
            self.s["paradigm"],
            self.s.get("plan_hash", ""),
            dict(self.metrics),
            list(self.partitions),
            **flags,
            version=self.s.get("version_after", self.s["table"].get("version")),
        )

    def _finished(self) -> MergeResult:
        version_after = self.s.get("version_after", self.s["table"].get("version"))
        result = self._result(noop=not macros.changed_target(self.s, version_after))
        self._cleanup()
        self._tag(False)
        self.state = "finished"
        log.debug("FINISH %s", json.dumps({"merge_id": self.merge_id, **result.metrics}))
        summary_log.info(result.summary())
        return result

    def planned_result(self) -> MergeResult:
        """A dry run's result: what execute would change, from the plan (its jobs ran); nothing is
        written and no history entry is made."""
        if not self.s.get("insert_only"):
            self.metrics["numTargetPartitionsRewritten"] = len(self.partitions)
        result = self._result(noop=True, dry_run=True)
        self.close()
        self.state = "finished"
        summary_log.info(result.summary())
        return result

    def history_entry(self) -> dict:
        """This commit's history entry as of now (spark_merge__history_entry, the one builder)."""
        self.metrics["executionTimeMs"] = self.host.elapsed_ms()
        return macros.history_entry(self.s, self.s.get("version_after", self.s["table"]["version"]))

    def abort(self) -> None:
        """Leave the table as it was: stop this commit's Spark jobs, drop its caches, the staging
        table and its files, release the lock. Safe from another thread or a signal handler."""
        if self.state in ("committed", "finished", "aborted") or self._stopped:
            return
        self._stopped = self.host.stopped = True
        try:
            stopped = self.spark.interruptTag(self.tag)
            if stopped:
                log.warning("[%s] ABORT: interrupted %d Spark operation(s)", self.merge_id, len(stopped))
        except Exception as e:
            log.debug("[%s] interrupt: %s", self.merge_id, e)
        self._cleanup()
        self._tag(False)
        self.host.unlock()
        with self.host.guard:
            if self.host.journaled:
                # Past the commit point: a file table's journal may point at the staged data, so it
                # stays and the next begin (or `recover`) rolls the commit forward; a database
                # transaction commits or rolls back on its own.
                log.error(
                    "[%s] abort after the commit began: the commit is left to complete (an interrupted "
                    "file-table commit is finished by the next merge on that table)",
                    self.merge_id,
                )
            elif self.s.get("staged"):
                log.warning("[%s] ABORT in state %s: removing staged data", self.merge_id, self.state)
                self.discard_staged()
            else:
                log.debug("[%s] ABORT in state %s: nothing was written", self.merge_id, self.state)
        self.state = "aborted"

    def check_not_stopped(self) -> None:
        """Raise if an abort began (the host calls it before every statement and the journal)."""
        if self._stopped:
            raise MergeError(f"merge {self.merge_id} was aborted")

    def close(self) -> None:
        """Release what begin() took, for a run that stops before planning (explain)."""
        self._cleanup()
        self._tag(False)

    def _cleanup(self) -> None:
        if self.s.get("ctx"):
            macros.lifecycle_cleanup(self.host, self.s)
        self.release()  # after the caches that read what it releases
        with _LIVE_LOCK:
            _LIVE.discard(self.merge_id)


def drive(
    make: Callable[[], Lifecycle], max_retries: int = 3, on_planned=None, on_start=None, dry_run: bool = False
) -> MergeResult:
    """Run a lifecycle; when another commit moved the table meanwhile, plan it again.

    ``dry_run``: stop after the plan (its jobs run: source, duplicate check, counts, partitions) and
    return what the run would change, writing nothing.

    ``on_start(abort)`` is called as each attempt starts with a function that aborts it (from
    another thread or a signal handler: the Airflow hook's on_kill); ``on_planned(info)`` after
    the checks, before anything is written.
    """
    for attempt in range(max_retries + 1):
        run = make()
        if on_start is not None:
            on_start(run.abort)
        try:
            run.begin()
            info = run.plan()
            if on_planned is not None:
                on_planned(info)
            if dry_run:
                return run.planned_result()
            run.execute()
            return run.finish()
        except RetryableConflict as e:
            run.abort()
            if attempt == max_retries:
                raise ConflictError(f"{e.detail}; gave up after {max_retries + 1} attempts") from None
            log.warning("[%s] %s: planning again (attempt %d)", run.merge_id, e.detail, attempt + 2)
        except BaseException:
            run.abort()
            raise
    raise AssertionError("unreachable")
