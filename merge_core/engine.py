"""Run a merge: begin -> plan -> execute -> finish, or abort.

The SQL comes from the dbt package's macros (merge_core.macros); this module is
the orchestration Python hosts need: which statement runs when, what is fetched,
metrics, history, and clean-up. Nothing is written before ``plan()`` has
validated the spec, built the changes and passed the duplicate check.
"""
from __future__ import annotations

import json
import logging
import re
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from pyspark.sql import SparkSession

from . import files, macros, paradigms
from .catalog import SPARK_ERRORS, describe_table
from .history_store import write_history
from .host import SparkHost
from .result import MergeResult, new_merge_id
from .errors import ConflictError, MergeError, RetryableConflict, TargetError, ValidationError
from .parse import on_equalities
from .spec import MergeSpec
from .validate import validate

log = logging.getLogger("spark_merge")



def broadcasts_changed(metrics: dict) -> bool:
    """Whether the rewrite broadcasts the row ids of updated and deleted rows to its anti-join
    (spark_merge__broadcast_changed, as the plan decides it; bench/ uses it)."""
    return macros.fill("broadcast_changed", metrics)["broadcast"]


# Merges alive in this process: begin() removes the session's leftovers of every other merge.
_LIVE: set[str] = set()
_LIVE_LOCK = threading.Lock()
_LEFTOVER = re.compile(r"^__sm_(?:source|changes)_(\d{14}_[0-9a-f]{8})$")


def _live_ids() -> set[str]:
    with _LIVE_LOCK:
        return set(_LIVE)


def drop_dead_leftovers(spark: SparkSession) -> list[str]:
    """Uncache and drop this session's temporary views of merges no longer alive in this process.

    A merge killed without its clean-up (a thread stopped hard, a task killed in a long-lived
    worker) leaves its cached views in the session. Their plans carry their merge id, so no
    other merge can read them; this returns their memory. A session shared by several
    processes (one Spark Connect session id used by two clients) is not supported.
    """
    dropped = []
    try:
        views = spark.sql("SHOW VIEWS LIKE '__sm_*'").collect()
    except SPARK_ERRORS as e:  # a catalog without views: nothing to drop
        log.debug("listing views: %s", e)
        return dropped
    live = _live_ids()
    for v in views:
        found = _LEFTOVER.match(v["viewName"])
        if not v["isTemporary"] or not found or found.group(1) in live:
            continue
        name = macros.render("quote", v["viewName"])
        for stmt in (f"UNCACHE TABLE IF EXISTS {name}", f"DROP VIEW IF EXISTS {name}"):
            spark.sql(stmt)
        dropped.append(v["viewName"])
    if dropped:
        log.warning("dropped %d cached view(s) of merges that are no longer running: %s", len(dropped), ", ".join(dropped))
    return dropped


ORPHAN_MIN_AGE_HOURS = 1.0  # a merge's tables and staging older than this belong to a dead merge (retention.py too)
_MERGE_TABLE = re.compile(r"^__sm_(?:stage|src|chg)_((\d{14})_[0-9a-f]{8})$")


def refuse_foreign_format(table: dict) -> None:
    """A directory of another table format registered as parquet/ORC is not spark-merge's to rewrite."""
    for location in dict.fromkeys([table["root"], table["location"]]):
        found = files.foreign_format(location)
        if found:
            raise TargetError(f"{table['name']} is registered as a {table['provider']} table, but its location "
                              f"{location} holds {found} metadata: rewriting it as plain {table['provider']} would leave "
                              f"that metadata describing files that are gone. Merge through that format's own MERGE, "
                              f"or register the table with its real format")


def drop_dead_stage_tables(spark: SparkSession, table: dict, min_age_hours: float = ORPHAN_MIN_AGE_HOURS) -> list[str]:
    """Drop the catalog tables (__sm_stage_/__sm_src_/__sm_chg_<id>) of merges killed before their
    clean-up, in the target's database: those not alive in this process and older than
    ``min_age_hours`` (a merge of another process may still be writing a younger one). Staging
    tables are external: dropping them leaves their files to vacuum."""
    try:
        found = spark.sql(f"SHOW TABLES IN {macros.render('quote', table['database'])} LIKE '__sm_*'").collect()
    except SPARK_ERRORS as e:
        log.debug("listing tables: %s", e)
        return []
    cutoff = datetime.now(timezone.utc) - timedelta(hours=min_age_hours)
    live = _live_ids()
    dropped = []
    for r in found:
        name = r["tableName"]
        matched = _MERGE_TABLE.match(name)
        if not matched or r["isTemporary"] or matched.group(1) in live:
            continue
        started = datetime.strptime(matched.group(2), "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
        if started > cutoff:
            continue
        spark.sql(f"DROP TABLE IF EXISTS {macros.render('quote', table['database'])}.{macros.render('quote', name)}")
        dropped.append(name)
    if dropped:
        log.warning("dropped %d table(s) left by merges that died: %s", len(dropped), ", ".join(dropped))
    return dropped


def choose_paradigm(table: dict, target=None) -> paradigms.RowChangeParadigm:
    """How rows change in this target (Trino's row-change paradigms)."""
    if table["provider"] == "jdbc" and target is not None:
        from .postgres import ChangeOnlyUpdatedColumns

        return ChangeOnlyUpdatedColumns(target)
    if table["provider"] in ("parquet", "orc"):
        return paradigms.DeleteRowAndInsertRow()
    raise TargetError(f"no row-change paradigm for {table['name']} ({table['provider']})")


class _Step:
    """Logs a step with its duration, so long runs show progress."""

    def __init__(self, run: "MergeRun", name: str):
        self.run, self.name = run, name

    def __enter__(self) -> None:
        self.t0 = time.monotonic()
        log.info("[%s] %s ...", self.run.merge_id, self.name)

    def __exit__(self, *exc: Any) -> None:
        log.info("[%s] %s done in %.2f s", self.run.merge_id, self.name, time.monotonic() - self.t0)


class MergeRun:
    """One merge through its lifecycle. Use ``merge()`` unless you need the steps."""

    def __init__(self, spark: SparkSession, spec: MergeSpec, target=None):
        self.spark = spark
        self.spec = spec
        self.target = target  # a postgres.PostgresTarget, or None for a Spark catalog table
        self.spec_data = spec.to_dict()
        self.merge_id = new_merge_id()
        with _LIVE_LOCK:
            _LIVE.add(self.merge_id)
        self.state = "new"
        self.metrics: dict[str, Any] = {}
        self.partitions: list[dict] = []
        self._t0 = time.monotonic()
        self.repoints: list[dict] = []  # set by the paradigm: where each rewritten partition went
        self.staged = False     # set by the paradigm once it wrote staging data
        self.journaled = False  # set by the paradigm before its commit journal is written
        # Spark work of this merge carries this tag, so an abort from another thread or a signal
        # handler (Airflow's on_kill, an execution timeout) can stop the statement in flight.
        self.tag = f"spark_merge_{self.merge_id}"
        self._stopped = False
        # the lifecycle macros' primitives (host.py); its guard keeps an abort from another thread
        # away from a journal being written
        self.host = SparkHost(spark, self.merge_id, stop_check=self.check_not_stopped)
        self.commit_guard = self.host.guard
        self.s: dict = {}  # the planned changes the lifecycle macros read and fill

    # -- helpers -----------------------------------------------------------------
    def _sql(self, text: str):
        return self.host._sql(text)

    def _tag(self, add: bool) -> None:
        try:
            (self.spark.addTag if add else self.spark.removeTag)(self.tag)
        except Exception as e:  # a session without tags can still merge; only on_kill is coarser
            log.debug("[%s] job tag: %s", self.merge_id, e)

    def _rows(self, text: str) -> list[dict]:
        return [r.asDict() for r in self.host._sql(text, collect=True)]

    def _step(self, name: str) -> _Step:
        return _Step(self, name)

    # -- lifecycle ---------------------------------------------------------------
    def begin(self) -> dict:
        """Read the target, finish any interrupted commit, validate. Touches no data."""
        self._tag(True)
        drop_dead_leftovers(self.spark)
        with self._step("begin: describe and validate"):
            if self.target is not None:
                from . import postgres

                self.table = postgres.describe(self.spark, self.target, self.spec.target, self.merge_id)
            else:
                self.table = describe_table(self.spark, self.spec.target)
                refuse_foreign_format(self.table)
                drop_dead_stage_tables(self.spark, self.table)
                # a commit in progress changes what we would plan against: let it finish first
                # (a dead holder's lock is broken here, before any planning work), then finish
                # an interrupted one
                if macros.fill("lifecycle_settle", self.host, self.table)["recovered"]:
                    self.table = describe_table(self.spark, self.spec.target)
            if self.spec.upsert:  # generate the guarded MERGE now that the column types are known
                compiled = macros.fill("upsert_spec", self.spec_data, self.table)
                if compiled["errors"]:
                    raise ValidationError(compiled["errors"])
                self.spec_data = {k: v for k, v in compiled.items() if k != "errors"}
            self.resolved = validate(self.spark, self.spec_data, self.table)
            self.ctx = macros.fill("context", self.spec_data, self.table, self.merge_id)
            if self.spec_data["source_kind"] != "none":
                self.ctx["on_keys"] = on_equalities(self.spec_data["on"], self.spec_data["target_alias"],
                                                    self.spec_data["source_alias"])
            self.paradigm = choose_paradigm(self.table, self.target)
            self.paradigm.begin(self)
            self.s = {
                "spec": self.spec_data, "table": self.table, "resolved": self.resolved, "ctx": self.ctx,
                "merge_id": self.merge_id, "metrics": self.metrics, "kind": self.spec.kind,
                "paradigm": self.paradigm.name, "statement": self.spec.sql, "insert_only": bool(self.spec.insert_only),
            }
            macros.render("lifecycle_plan_hash", self.host, self.s)
            self.plan_hash = self.s["plan_hash"]
        self.state = "begun"
        info = {
            "merge_id": self.merge_id,
            "target": self.table["name"],
            "paradigm": self.paradigm.name,
            "plan_hash": self.plan_hash,
            "kind": self.spec.kind,
        }
        log.info("BEGIN %s", json.dumps(info))
        return info

    def explain(self, placeholder_id: bool = False) -> str:
        """The plan's SQL, in order, before anything runs."""
        spec, table = self.spec_data, self.table
        ctx = macros.fill("context", spec, table, "<id>") if placeholder_id else self.ctx
        parts = [
            f"-- spark-merge plan for {spec['kind'].upper()} into {table['name']} "
            f"({table['provider']}, partitioned by {table['partition_columns'] or 'nothing'}); "
            f"duplicate_rule={spec['duplicate_rule']}",
        ]
        if spec["source_kind"] != "none":
            keys = ", ".join(f"{k['target']} = {k['source']}" for k in ctx["on_keys"]) or "none"
            parts += [f"-- 0. the source, read once (cached with this merge's id in its plan; written once to "
                      f"{ctx['source_table']} instead when Spark will not serve the cache, as for rand()); its count is "
                      f"numSourceRows; for the ON equalities "
                      f"({keys}) its values' range (a partition column's list), which every target scan below "
                      f"is narrowed to",
                      macros.render("cache_source_sql", spec, ctx), macros.render("source_stats_sql", table, ctx)]
        if self._prunes_by_matches():
            parts += ["-- 1. partitions holding matched target rows (a join reading only the ON and partition "
                      "columns; the source is broadcast when small); step 2 scans only these. Skipped when step 0 "
                      "listed every partition column; no join, only the range, for a dense integer key",
                      macros.render("matched_partitions_sql", spec, table, ctx)]
        parts += [
            "-- 2. changes: join, first matching WHEN clause, new values (cached; the first step reading it fills "
            f"it, every later step reads it; written once to {ctx['changes_table']} when Spark will not serve the cache)",
            macros.render("cache_changes_sql", spec, table, self.resolved, ctx),
        ]
        dup = macros.render("duplicates_sql", spec, table, self.resolved, ctx)
        parts += ["-- 3. duplicate check (fails the merge if it returns rows): no target row may receive two "
                  "modifying actions, under every rule", dup or "-- (not needed)"]
        parts += ["-- 4. counts per operation and the partitions touched", macros.render("change_summary_sql", spec, table, self.resolved, ctx)]
        parts += self.paradigm.explain(self, ctx)
        return ";\n\n".join(parts) + ";\n"

    def _prunes_by_matches(self) -> bool:
        """A partitioned target merged with a source: find the matched partitions first (step 1)."""
        return bool(self.table["partition_columns"]) and self.spec_data["source_kind"] != "none"

    def plan(self) -> dict:
        """Build the changes, run the duplicate check, count, find partitions. No writes.
        (spark_merge__lifecycle_plan, the same statements dbt runs.)"""
        macros.render("lifecycle_plan", self.host, self.s)
        # for an append these are the partitions it adds files to (rollback needs to know)
        self.partitions = self.s["partitions"]
        self.deltas = self.s["deltas"]  # rows each partition gains or loses: the write must match
        self.state = "planned"
        changed = sum(self.metrics[k] for k in ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted"))
        log.info("PLAN %s", json.dumps({"merge_id": self.merge_id, "partitions": len(self.partitions),
                                        "changed_rows": changed}))
        return {"merge_id": self.merge_id, "target": self.table["name"], "paradigm": self.paradigm.name,
                "plan_hash": self.plan_hash, "partitions_to_rewrite": self.partitions, "changed_rows": changed}

    def execute(self) -> None:
        """Write the changes the paradigm's way and commit them atomically."""
        if self.target is None:  # a file table: spark_merge__lifecycle_write, as under dbt
            macros.render("lifecycle_write", self.host, self.s)
            self.repoints = self.s.get("repoints", [])
        elif any(self.metrics[k] for k in ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")):
            self.paradigm.write(self)
        self.state = "committed"

    def history_entry(self, version_after: int) -> dict:
        """This merge's history entry as of now (spark_merge__history_entry, the one builder)."""
        self.metrics["executionTimeMs"] = int((time.monotonic() - self._t0) * 1000)
        return macros.fill("history_entry", self.s, version_after)

    def finish(self) -> MergeResult:
        """Record FINISH with metrics (history entry, unless the commit wrote it) and clean up."""
        if self.target is None:
            macros.render("lifecycle_finish", self.host, self.s)
        else:  # a database target: its transaction has its own row; the Spark side gets one too
            write_history(self.spark, self.table, self.history_entry(self.table["version"]))
        self.metrics["executionTimeMs"] = int((time.monotonic() - self._t0) * 1000)
        result = MergeResult(self.merge_id, self.table["name"], self.paradigm.name, self.plan_hash,
                             dict(self.metrics), list(self.partitions))
        self._cleanup()
        self._tag(False)
        self.state = "finished"
        log.info("FINISH %s", json.dumps({"merge_id": self.merge_id, **result.metrics}))
        log.info(result.summary())
        return result

    def abort(self) -> None:
        """Leave the table as it was: stop this merge's Spark jobs, drop the cache, the staging
        table and its files. Safe to call from another thread or a signal handler."""
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
        with self.commit_guard:
            self._abort_staged()
        self.state = "aborted"

    def _abort_staged(self) -> None:
        if self.journaled or self.host.journaled:
            # Past the commit point: a file table's journal may point at the staged data, so it
            # stays and the next begin (or `recover`) rolls the commit forward; a database
            # transaction commits or rolls back on its own.
            log.error("[%s] abort after the commit began: the commit is left to complete (an interrupted "
                      "file-table commit is finished by the next merge on %s)", self.merge_id, self.table["name"])
        elif self.staged or self.s.get("staged"):
            log.warning("[%s] ABORT in state %s: removing staged data", self.merge_id, self.state)
            self.paradigm.discard_staged(self)
        else:
            log.warning("[%s] ABORT in state %s: nothing was written", self.merge_id, self.state)

    def check_not_stopped(self) -> None:
        """Raise if an abort began (call under commit_guard before writing a journal)."""
        if self._stopped:
            raise MergeError(f"merge {self.merge_id} was aborted")

    def close(self) -> None:
        """Release what begin() took, for a run that stops before planning (explain)."""
        self._cleanup()
        self._tag(False)

    def _cleanup(self) -> None:
        if self.s:
            macros.render("lifecycle_cleanup", self.host, self.s)
        elif hasattr(self, "ctx"):
            macros.render("lifecycle_cleanup", self.host, {"ctx": self.ctx})
        if hasattr(self, "paradigm"):  # after the caches that read what it releases
            self.paradigm.release(self)
        with _LIVE_LOCK:
            _LIVE.discard(self.merge_id)


def run(spark: SparkSession, spec: MergeSpec, max_retries: int = 3, on_planned=None, on_start=None,
        target=None) -> MergeResult:
    """Run a merge; when another merge committed elsewhere in the table meanwhile, plan it again.

    ``target``: a ``postgres.PostgresTarget`` when the target is a PostgreSQL table, else the
    target is a Spark catalog table. ``on_start(abort)`` is called as each attempt starts with a
    function that aborts it (from another thread or a signal handler: the Airflow hook's on_kill);
    ``on_planned(info)`` after the checks, before anything is written, with the merge id, target,
    paradigm, plan hash, partitions to rewrite and changed rows (the operator's XCom begin record).
    """
    if target is None and spec.upsert and spec.upsert.get("upsert_mode") == "merge-on-read" and not spec.upsert.get("merge_engine"):
        from . import merge_on_read

        return merge_on_read.upsert(spark, spec)
    for attempt in range(max_retries + 1):
        merge_run = MergeRun(spark, spec, target)
        if on_start is not None:
            on_start(merge_run.abort)
        try:
            merge_run.begin()
            info = merge_run.plan()
            if on_planned is not None:
                on_planned(info)
            merge_run.execute()
            return merge_run.finish()
        except RetryableConflict as e:
            merge_run.abort()
            if attempt == max_retries:
                raise ConflictError(f"{e.detail}; gave up after {max_retries + 1} attempts") from None
            log.warning("[%s] %s: planning again (attempt %d)", merge_run.merge_id, e.detail, attempt + 2)
        except BaseException:
            merge_run.abort()
            raise
    raise AssertionError("unreachable")
