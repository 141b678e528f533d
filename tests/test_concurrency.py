"""Two writers on one table: no lost update, ever. Conflicts fail cleanly or are planned again."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from merge_core import ConflictError, merge, recover, to_spec, vacuum
from merge_core.api.cli import main
from merge_core.common import macros
from merge_core.lifecycle.merge_run import MergeRun
from merge_core.spark import lock
from merge_core.spark.catalog import describe_table
from merge_core.spark.host import SparkHost

from .conftest import snapshot, tree


@pytest.fixture
def acct(spark, db):
    t = f"{db}.acct"
    spark.sql(f"CREATE TABLE {t} (id INT, amount INT, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 100, 1), (2, 200, 2), (3, 300, 3)")
    return t


def amount(spark, t, id_):
    return spark.sql(f"SELECT amount FROM {t} WHERE id = {id_}").collect()[0][0]


def test_conflict_in_a_rewritten_partition_fails_and_writes_nothing(spark, acct, monkeypatch):
    """B commits to the partition A is rewriting, after A read it: A must fail, not overwrite B."""
    real_lock = lock.table_lock
    state = {"interleaved": False}

    @contextmanager
    def interleave(spark_, table, merge_id, **kw):
        if not state["interleaved"]:
            state["interleaved"] = True
            merge(spark_, f"UPDATE {acct} SET amount = amount + 10 WHERE id = 1")  # B
        with real_lock(spark_, table, merge_id, **kw):
            yield

    monkeypatch.setattr(lock, "table_lock", interleave)
    root = describe_table(spark, acct.split("."))["root"]
    with pytest.raises(ConflictError, match="partition\\(s\\) 1 of .* changed since this merge read them"):
        merge(spark, f"UPDATE {acct} SET amount = amount + 1 WHERE id = 1")  # A
    assert amount(spark, acct, 1) == 110  # B's update survives, A wrote nothing
    assert len([d for d in tree(root) if d.startswith("_merge_") and "/" not in d]) == 1  # B's; A's staging is gone


def test_commit_elsewhere_is_planned_again(spark, acct, monkeypatch):
    """B commits to another partition while A plans: A plans again and both updates stand."""
    real_plan = MergeRun.plan
    state = {"interleaved": False}

    def plan_then_interleave(self):
        info = real_plan(self)
        if not state["interleaved"]:
            state["interleaved"] = True
            merge(self.spark, f"UPDATE {acct} SET amount = amount + 20 WHERE id = 2")  # B, partition 2
        return info

    monkeypatch.setattr(MergeRun, "plan", plan_then_interleave)
    result = merge(spark, f"UPDATE {acct} SET amount = amount + 1 WHERE id = 1")  # A, partition 1
    assert (amount(spark, acct, 1), amount(spark, acct, 2)) == (101, 220)
    assert result.metrics["numTargetRowsUpdated"] == 1


def test_concurrent_threads_never_lose_an_update(spark, acct):
    outcomes = []

    def bump(times):
        for _ in range(times):
            try:
                merge(spark, f"UPDATE {acct} SET amount = amount + 1 WHERE id IN (1, 3)")
                outcomes.append("ok")
            except ConflictError:
                outcomes.append("conflict")

    threads = [threading.Thread(target=bump, args=(2,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    committed = outcomes.count("ok")
    assert len(outcomes) == 4 and committed >= 1
    assert (amount(spark, acct, 1), amount(spark, acct, 3)) == (100 + committed, 300 + committed)


def _lock(spark, table, merge_id, expires_in_s: float):
    now = datetime.now(UTC)
    spark.sql(
        macros.render(
            "lock_sql",
            table,
            merge_id,
            now.isoformat(),
            (now + timedelta(seconds=expires_in_s)).isoformat(),
            "host-a pid 1",
        )
    )


def test_live_lock_makes_a_merge_wait_then_give_up_before_planning(spark, acct, monkeypatch):
    """A live holder (its lease runs): the waiting merge fails in begin, before any planning work,
    naming the holder, since when, its lease and what to do."""
    table = describe_table(spark, acct.split("."))
    _lock(spark, table, "other", 60)
    monkeypatch.setitem(lock.settings(), "wait_s", 1)
    before = snapshot(spark, acct)
    run = MergeRun(spark, to_spec(f"UPDATE {acct} SET amount = 0 WHERE id = 1"))
    with pytest.raises(ConflictError) as e:
        run.begin()
    run.abort()
    assert run.state == "aborted" and not hasattr(run, "resolved")  # failed before validation and planning
    message = str(e.value)
    for part in (
        "being committed by merge other on host-a pid 1",
        "since ",
        "lease until",
        "which is alive",
        "Run again once it finishes",
    ):
        assert part in message, message
    assert snapshot(spark, acct) == before
    lock.break_lock(spark, table)


def test_a_dead_holders_lock_is_broken_in_seconds(spark, acct):
    """A holder killed inside its commit stops renewing: once its lease lapses (plus the grace for
    clock skew) the next merge breaks the lock at once, with no wait."""
    table = describe_table(spark, acct.split("."))
    _lock(spark, table, "dead", -(lock.settings()["grace_s"] + 1))
    t0 = time.monotonic()
    merge(spark, f"UPDATE {acct} SET amount = 7 WHERE id = 1")
    assert time.monotonic() - t0 < lock.settings()["wait_s"]  # never waited for a live holder's commit
    assert amount(spark, acct, 1) == 7 and lock.holder(spark, table) is None


def test_the_lock_of_a_finished_commit_is_released_at_begin_without_waiting(spark, acct, monkeypatch):
    """A holder that died between marking its commit done and releasing the lock, its lease still
    running: the table names it as its last finished merge, so begin releases it at once."""
    table = describe_table(spark, acct.split("."))
    spark.sql(f"ALTER TABLE {acct} SET TBLPROPERTIES ('spark_merge.last_merge_id' = 'done')")
    _lock(spark, table, "done", 60)
    monkeypatch.setitem(lock.settings(), "wait_s", 1)  # waiting for it would fail the merge
    merge(spark, f"UPDATE {acct} SET amount = 9 WHERE id = 1")
    assert amount(spark, acct, 1) == 9 and lock.holder(spark, table) is None


def test_recover_and_vacuum_break_a_dead_holders_lock(spark, acct):
    table = describe_table(spark, acct.split("."))
    _lock(spark, table, "dead", -(lock.settings()["grace_s"] + 1))
    assert recover(spark, acct) is False and lock.holder(spark, table) is None
    _lock(spark, table, "dead2", -(lock.settings()["grace_s"] + 1))
    vacuum(spark, acct)
    assert lock.holder(spark, table) is None


def test_a_lock_within_its_lease_is_not_broken_and_a_held_lease_is_renewed(spark, acct, monkeypatch):
    table = describe_table(spark, acct.split("."))
    _lock(spark, table, "alive", 2)
    assert lock.break_if_dead(spark, table) is False and lock.holder(spark, table)["merge_id"] == "alive"
    lock.break_lock(spark, table)
    monkeypatch.setitem(lock.settings(), "lease_s", 0.6)  # renewed every 0.2 s
    with lock.table_lock(spark, table, "holder"):
        first = lock.holder(spark, table)["expires"]
        time.sleep(1.5)
        assert lock.holder(spark, table)["expires"] > first
    assert lock.holder(spark, table) is None


def test_lock_without_a_lease_from_an_older_version_is_dead_after_15_minutes(spark, acct):
    table = describe_table(spark, acct.split("."))
    old = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    spark.sql(
        f"CREATE TABLE {macros.render('lock_relation', table)} (merge_id STRING) USING parquet "
        f"TBLPROPERTIES ('spark_merge.lock.merge_id' = 'old', 'spark_merge.lock.since' = '{old}')"
    )
    merge(spark, f"UPDATE {acct} SET amount = 8 WHERE id = 1")
    assert amount(spark, acct, 1) == 8 and lock.holder(spark, table) is None


def test_recover_command_finishes_an_interrupted_commit(spark, acct, monkeypatch, capsys):
    def crash(*args, **kwargs):
        raise KeyboardInterrupt("crash after the journal")

    monkeypatch.setattr(SparkHost, "repoint", crash)
    with pytest.raises(KeyboardInterrupt):
        merge(spark, f"UPDATE {acct} SET amount = 5 WHERE id = 2")
    monkeypatch.undo()
    assert amount(spark, acct, 2) == 200
    assert main(["recover", acct, "-q"]) == 0
    assert "interrupted commit finished" in capsys.readouterr().out
    assert amount(spark, acct, 2) == 5
    assert recover(spark, acct) is False


def test_a_taker_that_finds_the_lock_taken_waits_for_its_holder_then_holds_it(spark, acct):
    """The lock is created IF NOT EXISTS and then read back: a taker whose create found another
    merge's lock (in the shared-metastore soak, another application's create won the race) must
    neither fail nor think it holds it; it waits, and takes the lock once the holder releases it."""
    table = describe_table(spark, acct.split("."))
    _lock(spark, table, "other", expires_in_s=60)
    seen = []

    def release():  # "other" finishes its commit 2 s later: it still holds its lock, then drops it
        seen.append(lock.holder(spark, table)["merge_id"])
        lock.break_lock(spark, table)

    timer = threading.Timer(2.0, release)
    timer.start()
    with lock.table_lock(spark, table, "mine", wait_s=60):
        assert lock.holder(spark, table)["merge_id"] == "mine"
    timer.join()
    assert seen == ["other"] and lock.holder(spark, table) is None
