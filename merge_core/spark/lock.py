"""The commit lock (see macros/commit/lock.sql): one committer per table at a time, held by a lease.

The holder writes when its lease expires and renews it while it lives (every lease_s / 3 from a
daemon thread), so a holder that died (SIGKILL, a lost machine) is told from a live one within
lease_s + grace_s seconds, and its lock is broken by whoever needs it next: a merge's begin, its
commit, vacuum, recover. A live holder makes a waiter wait up to wait_s, then fail with a
message that names it. The timing, the rule that a holder is dead and the wait-and-take loop
itself are the lock macros' (spark_merge__lock_settings, spark_merge__lock_dead,
spark_merge__lock_wait), which the dbt host runs too; this module is the Python host's handle on
the lock table (_Handle) and the lease's renewal.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import ConflictError, MetadataError
from merge_core.spark import files, metastore
from merge_core.spark.catalog import SPARK_ERRORS, spark_message

log = logging.getLogger("spark_merge")

calls = 0  # the lock's metastore calls (statements and catalog calls) in this process (bench/tally.py counts them)


def _called(n: int = 1) -> None:
    global calls
    calls += n


@functools.cache
def settings() -> dict:
    """The lock's timing in seconds (spark_merge__lock_settings): wait_s, lease_s, dbt_lease_s,
    grace_s, stale_s. Read when first asked for; tests change entries of this dict."""
    return macros.lock_settings()


def _now() -> datetime:
    return datetime.now(UTC)


def exists(spark: SparkSession, table: dict) -> bool:
    """Whether the lock table of ``table`` exists (held, or left by a dead process)."""
    _called()
    return bool(spark.sql(macros.show_tables_sql(table["database"], _name(table))).collect())


def holder(spark: SparkSession, table: dict, look: bool = True) -> dict | None:
    """{'merge_id', 'since', 'expires', 'owner', 'dead'} of the lock on ``table``, or None when it is
    free (spark_merge__lock_holder, as dbt reads it). MetadataError when its properties are not a
    lock spark-merge wrote for this table. ``look``: list it first (a missing table would make Spark
    log an error stack for every merge); False where it almost surely exists (just created, or held
    by the caller), one statement fewer."""
    found = macros.lock_holder(_Handle(spark, took=not look), table)
    if found.get("error"):
        raise MetadataError(found["error"])
    return found or None


def _parse(moment: str) -> datetime | None:
    try:
        return datetime.fromisoformat(moment)
    except (TypeError, ValueError):
        return None


def describe(owner: dict) -> str:
    """The holder, for messages: merge id, where it runs, since when, lease."""
    where = f" on {owner['owner']}" if owner.get("owner") else ""
    lease = f", lease until {owner['expires']}" if owner.get("expires") else ""
    return f"merge {owner['merge_id']}{where} (since {owner['since']}{lease})"


def break_lock(spark: SparkSession, table: dict) -> None:
    _Handle(spark).release(table, macros.unlock_sql(table))


def _name(table: dict) -> str:
    """The lock table's name in the target's database (spark_merge__lock_relation)."""
    return f"__sm_lock_{table['table_name']}"


def break_if_dead(spark: SparkSession, table: dict, owner: dict | None = None, finished: str | None = None) -> bool:
    """Break a lock that guards no work any more: its holder's lease lapsed (the process is gone),
    or its holder is ``finished``, the merge whose commit is complete (the table's last finished
    merge, or one recovery just completed: its holder died between the done mark and the
    release). True if it was broken."""
    owner = owner if owner is not None else holder(spark, table)
    if owner is None:
        return False
    if finished is not None and owner["merge_id"] == finished:
        log.warning("releasing the commit lock of merge %s on %s: its commit is complete", finished, table["name"])
    elif owner["dead"]:
        log.warning(
            "breaking the commit lock on %s of %s: its lease lapsed, the holder is gone", table["name"], describe(owner)
        )
    else:
        return False
    break_lock(spark, table)
    return True


class _Handle:
    """The Python host's handle on lock tables (host_contract.LockHandle) for the shared holder and
    wait (spark_merge__lock_holder, spark_merge__lock_wait): each primitive runs the statement the
    macros hand it, or measures time."""

    def __init__(self, spark: SparkSession, took: bool = False):
        self.spark = spark
        self.took = took  # just created (or held by the caller): the look needs no listing first

    @property
    def wait_s(self) -> float:
        return settings()["wait_s"]

    @functools.cached_property
    def owner_text(self) -> str:
        """Where this process runs, written into a lock it takes (a waiter that only looks never asks)."""
        return _identity(self.spark)

    def lease(self) -> dict:
        now = _now()
        expires = now + timedelta(seconds=settings()["lease_s"])
        return {"since": now.isoformat(), "expires": expires.isoformat(), "owner": self.owner_text}

    def take(self, table: dict, sql: str) -> None:
        _called()
        try:
            self.spark.sql(sql)
        except SPARK_ERRORS as e:
            raise ConflictError(f"cannot take the commit lock on {table['name']}: {spark_message(e)}") from None
        self.took = True

    def properties(self, table: dict, listing_sql: str, props_sql: str) -> dict | None:
        if metastore.batch_available(self.spark):  # two catalog calls, not two statements
            found = metastore.properties(self.spark, table["database"], _name(table))
            _called(1 if found is None else 2)
            return found
        if not self.took:
            _called()
            if not self.spark.sql(listing_sql).collect():
                return None
        _called()
        try:
            return {r[0]: r[1] for r in self.spark.sql(props_sql).collect()}
        except SPARK_ERRORS:  # released in between
            return None

    def ages(self, since: str, expires: str) -> dict:
        now = _now()
        lapsed, held = _parse(expires), _parse(since)
        return {
            "lapsed": (now - lapsed).total_seconds() if lapsed is not None else None,
            "held": (now - held).total_seconds() if held is not None else None,
        }

    def release(self, table: dict, sql: str) -> None:
        _called()
        if metastore.batch_available(self.spark):  # one catalog call: nothing reads the lock table
            metastore.drop_table(self.spark, table["database"], _name(table))
        else:
            self.spark.sql(sql)
        self.took = False

    def pause(self) -> None:
        time.sleep(0.2 + random.random() * 0.3)

    def clock(self) -> float:
        return time.monotonic()

    def note(self, text: str) -> None:
        log.warning(text)


def handle(spark: SparkSession) -> _Handle:
    """A handle on lock tables for the lock macros (the lifecycle's settle waits through it)."""
    return _Handle(spark)


def _wait(spark: SparkSession, table: dict, merge_id: str | None, finished: str | None, wait_s: float | None) -> None:
    """The shared wait (spark_merge__lock_wait); its ConflictError when a live holder stays in the way."""
    wait_s = settings()["wait_s"] if wait_s is None else wait_s
    out = macros.lock_wait(_Handle(spark), table, merge_id, finished, wait_s)
    if out.get("error"):
        raise (MetadataError if out.get("code") == "metadata" else ConflictError)(out["error"])


def _identity(spark: SparkSession) -> str:
    try:
        app = spark.conf.get("spark.app.id", None) or ""
    except Exception:  # a Connect session may refuse to show it
        app = ""
    return f"{socket.gethostname()} pid {os.getpid()}" + (f" app {app}" if app else "")


class _Renewer(threading.Thread):
    """Renews the lease every lease_s / 3 until stopped."""

    def __init__(self, spark: SparkSession, table: dict, merge_id: str):
        super().__init__(daemon=True, name=f"spark-merge-lease-{merge_id}")
        self.spark, self.table, self.merge_id = spark, table, merge_id
        self.stopped = threading.Event()

    def run(self) -> None:
        lease_s = settings()["lease_s"]
        while not self.stopped.wait(lease_s / 3):
            expires = (_now() + timedelta(seconds=lease_s)).isoformat()
            try:
                owner = holder(self.spark, self.table)
                if owner is None or owner["merge_id"] != self.merge_id:  # broken meanwhile: not ours to renew
                    log.warning(
                        "the commit lock on %s is no longer held by merge %s", self.table["name"], self.merge_id
                    )
                    return
                _called()
                self.spark.sql(macros.renew_lock_sql(self.table, expires))
            except Exception as e:  # the next renewal may work; a lapsed lease only lets others break in
                log.warning("could not renew the commit lock on %s: %s", self.table["name"], e)


@contextmanager
def table_lock(spark: SparkSession, table: dict, merge_id: str, wait_s: float | None = None) -> Iterator[None]:
    _wait(spark, table, merge_id, None, wait_s)
    renewer = _Renewer(spark, table, merge_id)
    renewer.start()
    try:
        yield
    finally:
        renewer.stopped.set()
        renewer.join()
        owner = holder(spark, table, look=False)
        if owner is not None and owner["merge_id"] == merge_id:
            break_lock(spark, table)
        files.remove(f"{table['root'].rstrip('/')}/_spark_merge/locks/{merge_id}")
