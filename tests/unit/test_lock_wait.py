"""The commit lock's wait-and-take loop (spark_merge__lock_wait), the one both hosts run, against a
scripted lock table: who holds it at each look, and a clock that moves only when the loop pauses."""

from __future__ import annotations

import re

import pytest

from merge_core.common import macros

TABLE = {"name": "db.t", "database": "db", "table_name": "t", "root": "file:/w/t", "table_id": ""}
MINE, OTHER, DONE = "20260101000000_aaaaaaaa", "20260101000000_bbbbbbbb", "20260101000000_cccccccc"


def holder(merge_id: str, dead: bool = False) -> dict:
    return {"merge_id": merge_id, "since": "2026-01-01T00:00:00+00:00", "expires": "2026-01-01T00:00:30+00:00",
            "owner": "host-b pid 7", "dead": dead}  # fmt: skip


class ScriptedLock:
    """A lock table whose holder at each look comes from ``looks`` (the last one repeats); take()
    makes this merge the holder when the table is free, as CREATE TABLE IF NOT EXISTS does. The
    handle's primitives are the hosts' (host_contract.LockHandle): the holder is read from its
    properties, and whether it is dead from the ages this handle reports for it."""

    wait_s = 2

    def __init__(self, *looks: dict | None):
        self.looks, self.now, self.calls = list(looks), 0.0, []
        self.held: dict | None = None
        self.seen: dict | None = None

    def holder(self, table):
        if self.held is not None:
            return self.held
        return self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]

    def properties(self, table, listing_sql, props_sql):
        assert "__sm_lock_t" in listing_sql and "__sm_lock_t" in props_sql
        self.calls.append("holder")
        self.seen = self.holder(table)
        if self.seen is None:
            return None
        return {f"spark_merge.lock.{k}": self.seen[k] for k in ("merge_id", "since", "expires", "owner")}

    def ages(self, since, expires):
        return {"lapsed": 100.0 if self.seen["dead"] else -5.0, "held": 10.0}

    def lease(self):
        return {"since": "2026-01-01T00:00:00+00:00", "expires": "2026-01-01T00:00:30+00:00", "owner": "me"}

    def take(self, table, sql):
        self.calls.append("take")
        merge_id = re.search(r"'spark_merge\.lock\.merge_id' = '([^']+)'", sql).group(1)
        if (self.looks[0] if self.looks else None) is None:
            self.held = holder(merge_id)

    def release(self, table, sql):
        assert sql.startswith("DROP TABLE IF EXISTS")
        self.calls.append("release")
        self.looks[0] = None  # after the drop, the next look finds it free

    def pause(self):
        self.calls.append("pause")
        self.now += 0.5

    def clock(self):
        return self.now

    def note(self, text):
        self.calls.append(f"note: {text}")


def wait(lock, merge_id=None, finished=None, wait_s=2):
    return macros.lock_wait(lock, TABLE, merge_id, finished, wait_s)


def test_a_free_lock_is_one_look_for_a_waiter_and_a_create_and_a_look_for_a_taker():
    assert wait(ScriptedLock(None)) == {} and ScriptedLock(None).calls == []
    waiter, taker = ScriptedLock(None), ScriptedLock(None)
    wait(waiter)
    assert wait(taker, MINE) == {}
    assert waiter.calls == ["holder"] and taker.calls == ["take", "holder"] and taker.held["merge_id"] == MINE


def test_a_live_holder_is_waited_for_and_then_the_lock_is_taken():
    lock = ScriptedLock(holder(OTHER), holder(OTHER), None)
    assert wait(lock, MINE) == {}
    assert lock.calls == ["take", "holder", "pause", "take", "holder", "pause", "take", "holder"]
    assert lock.held["merge_id"] == MINE


@pytest.mark.parametrize("merge_id", [None, MINE], ids=["waiter", "taker"])
def test_a_dead_holder_is_broken_at_once_and_named(merge_id):
    lock = ScriptedLock(holder(OTHER, dead=True))
    assert wait(lock, merge_id) == {}
    notes = [c for c in lock.calls if c.startswith("note")]
    assert notes == [f"note: breaking the commit lock on db.t of merge {OTHER}: its lease lapsed, the holder is gone"]
    assert "pause" not in lock.calls and lock.calls.count("release") == 1
    assert (lock.held or {}).get("merge_id") == merge_id


def test_the_finished_merges_lock_is_released_and_a_live_one_is_not():
    finished = ScriptedLock(holder(DONE))
    assert wait(finished, finished=DONE) == {} and "release" in finished.calls
    live = ScriptedLock(holder(OTHER))
    assert "error" in wait(live, finished=DONE) and "release" not in live.calls


def test_a_live_holder_past_the_wait_fails_naming_it_and_what_to_do():
    lock = ScriptedLock(holder(OTHER))
    error = wait(lock, MINE, wait_s=2)["error"]
    assert lock.calls.count("pause") == 5 and lock.now == 2.5  # it gave up on the first look past 2 s
    for part in (f"db.t is being committed by merge {OTHER} on host-b pid 7", "since 2026-01-01T00:00:00+00:00",
                 "lease until 2026-01-01T00:00:30+00:00", "which is alive", "gave up after 2 s", "nothing was written",
                 "Run again once it finishes", "broken 5 s after its lease lapses"):  # fmt: skip
        assert part in error, error


def test_a_lock_released_between_the_create_and_the_look_is_taken_again_without_a_pause():
    lock = ScriptedLock(holder(OTHER), None)
    lock.take = lambda table, sql: lock.calls.append("take")  # the first create finds OTHER's lock
    looks = iter([holder(OTHER), None, holder(MINE)])
    lock.holder = lambda table: next(looks)
    assert wait(lock, MINE) == {}
    assert lock.calls == ["take", "holder", "pause", "take", "holder", "take", "holder"]


def test_a_holder_that_wrote_no_owner_or_lease_is_named_by_what_it_wrote():
    """A lock from before leases (no expires) or written by hand (no owner) still names its merge and
    since when; the message leaves out what is not there rather than printing None."""
    bare = {"merge_id": OTHER, "since": "2026-01-01T00:00:00+00:00", "expires": "", "owner": "", "dead": False}
    error = wait(ScriptedLock(bare), wait_s=0)["error"]
    assert error.startswith(
        f"db.t is being committed by merge {OTHER} (since 2026-01-01T00:00:00+00:00), which is alive"
    )
    assert "None" not in error and "lease until" not in error and " on " not in error.split("(since")[0]


def test_a_lock_table_that_is_not_spark_merges_stops_the_wait_as_metadata():
    forged = {"merge_id": "../x", "since": "", "expires": "", "owner": "", "dead": False}
    out = wait(ScriptedLock(forged), MINE)
    assert out["code"] == "metadata" and "--break-lock` removes it" in out["error"]
