"""SIGKILL at every step boundary of a merge, then recover: the table is the old or the new version.

Each scenario runs in subprocesses with a metastore of their own (embedded Derby admits one JVM
at a time): one sets the table up and runs the merge until a failpoint, and is killed with its JVM;
the other recovers, reads the table and runs a following merge.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from merge_core.spark.faults import POINTS

from .crash_driver import RUN_KEY

DRIVER = Path(__file__).resolve().parent / "crash_driver.py"
DBT_DRIVER = Path(__file__).resolve().parent / "dbt_crash_driver.py"
OLD = [[1, "a", 1], [2, "b", 1], [3, "c", 2], [4, "d", 2]]
NEW = [[1, "u1", 1], [2, "b", 1], [3, "u3", 2], [4, "d", 2], [5, "n5", 3]]
# where a crash at each point must leave the table once recovered
EXPECTED = {
    "after_validation": OLD,
    "after_staging": OLD,  # before the journal: as if it never ran
    "after_journal": NEW,
    "between_repoints": NEW,
    "after_last_repoint": NEW,
    "before_refresh": NEW,
}


def run_driver(home, mode, env=None, timeout=240):
    """Run crash_driver.py in ``mode`` in a process of its own."""
    return subprocess.run(
        [sys.executable, str(DRIVER), str(home), mode],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=home,
    )


# on the standalone cluster (test_cluster.py): a kill inside the commit (the before-journal side is covered locally)
CLUSTER_POINTS = ("between_repoints",)
# in CI (each case is two JVMs, about a minute): none here; the Python host's kills in CI are the kill
# soak's (test_soak.py), at random moments, and the change feed's below. In the extended tier (make
# test-all): every point through both hosts, and the Python one on the standalone cluster with the
# warehouse on S3 (test_object_store.py runs the object_store_ci tests there)
CI_POINTS: dict[str, tuple[str, ...]] = {"python": (), "dbt": ()}


def _marks(point: str, host: str) -> list:
    on_cluster = host == "python" and point in CLUSTER_POINTS  # and on S3 (test_object_store.py)
    marks = (
        [pytest.mark.cluster, pytest.mark.cluster_ci, pytest.mark.object_store, pytest.mark.object_store_ci]
        if on_cluster
        else []
    )
    return marks + ([] if point in CI_POINTS[host] else [pytest.mark.extended])


def _kill_at_then_verify(tmp_path, command: list[str], point: str, dbt: bool, verify_mode: str = "verify") -> dict:
    """Run the driver `command` until it reaches failpoint `point`, SIGKILL it (the Python process and
    its JVM, with no chance to clean up), then recover and read the table in a new process."""
    flag = tmp_path / "fault.flag"
    proc = subprocess.Popen(
        [sys.executable, *command],
        cwd=tmp_path,
        env={**os.environ, "SPARK_MERGE_FAULT": point, "SPARK_MERGE_FAULT_FLAG": str(flag)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    reached = Path(f"{flag}.d") if dbt else flag  # dbt's failpoint writes <flag>.d with SQL and sleeps in Spark
    while not reached.exists():
        assert proc.poll() is None, f"{command} ended before reaching {point}: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, f"{point} not reached in time"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    verify = run_driver(tmp_path, verify_mode)
    assert verify.returncode == 0, verify.stderr[-3000:]
    return json.loads(verify.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "point,host",
    [pytest.param(point, host, marks=_marks(point, host)) for point in POINTS for host in ("python", "dbt")],
)
def test_sigkill_then_recover(tmp_path, point, host):
    """The same merge, run by merge_core or by dbt's materialization (the same lifecycle macros,
    dbt's host primitives: its failpoint writes <flag>.d with SQL and sleeps in Spark)."""
    command = [str(DRIVER), str(tmp_path), "merge"] if host == "python" else [str(DBT_DRIVER), str(tmp_path)]
    result = _kill_at_then_verify(tmp_path, command, point, dbt=host == "dbt")
    assert result["rows"] == EXPECTED[point]
    following = [[i, v + "+" if i == 2 else v, p] for i, v, p in EXPECTED[point]]
    assert result["after_next_merge"] == following
    assert result["recovered"] == (EXPECTED[point] is NEW and point != "before_refresh")


REFRESHED = [[1, "u1", 1], [3, "u3", 2], [5, "n5", 3]]


@pytest.mark.extended  # two JVMs per point; the commit's tail is the merges' (covered above)
@pytest.mark.parametrize("point,expected", [("after_staging", OLD), ("between_repoints", REFRESHED)])
def test_sigkill_in_a_full_refresh_then_recover(tmp_path, point, expected):
    """dbt's --full-refresh of a table the model keeps the shape of, killed before its journal (the
    old rows stay) or between its repoints (recovery finishes it: the model's rows, and no others)."""
    result = _kill_at_then_verify(tmp_path, [str(DBT_DRIVER), str(tmp_path), "refresh"], point, dbt=True)
    assert result["rows"] == expected
    assert result["recovered"] == (expected is REFRESHED)
    following = [[i, v + "+" if i == 2 else v, p] for i, v, p in expected]
    assert result["after_next_merge"] == following


ROLLBACK_DRIVER = Path(__file__).resolve().parent / "rollback_driver.py"


@pytest.mark.extended  # a rollback through recovery: the retention tests cover rollback in CI
@pytest.mark.parametrize("gap", [False, True])
def test_rollback_across_a_merge_that_recovery_rolled_forward(tmp_path, gap):
    """A updates partition 1; X updates partition 2 and is SIGKILLed after its journal; a new
    process recovers X. X's history entry came with its journal, so rolling back to before A undoes
    both; with X's entry gone the history has a gap, and rollback refuses, changing nothing."""
    prep = subprocess.run(
        [sys.executable, str(ROLLBACK_DRIVER), str(tmp_path), "prep"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert prep.returncode == 0, prep.stderr[-3000:]
    flag = tmp_path / "fault.flag"
    proc = subprocess.Popen(
        [sys.executable, str(ROLLBACK_DRIVER), str(tmp_path), "x"],
        cwd=tmp_path,
        env={**os.environ, "SPARK_MERGE_FAULT": "after_journal", "SPARK_MERGE_FAULT_FLAG": str(flag)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    while not flag.exists():
        assert proc.poll() is None, f"merge X ended before its journal: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    verify = subprocess.run(
        [sys.executable, str(ROLLBACK_DRIVER), str(tmp_path), "verify_gap" if gap else "verify"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert verify.returncode == 0, verify.stderr[-3000:]
    result = json.loads(verify.stdout.strip().splitlines()[-1])
    assert result["recovered"] is True and result["at_x"] == [[1, "A", 1], [2, "X", 2], [3, "orig", 3]]
    assert [s[-5:] for s in result["statements"]] == ["p = 2", "p = 1"]  # X is in the history, newest first
    assert len(result["recovered_entries"]) == 1
    if gap:
        assert "has no entry for the commit" in result["outcome"] and "Nothing was rolled back" in result["outcome"]
        assert result["rows"] == result["at_x"]
    else:
        assert result["outcome"] == "rolled back"
        assert result["rows"] == [[1, "orig", 1], [2, "orig", 2], [3, "orig", 3]]


# the change rows of crash_driver's MERGE: two updates and an insert
FEED = sorted(
    [
        [1, "a", 1, "update_preimage"],
        [1, "u1", 1, "update_postimage"],
        [3, "c", 2, "update_preimage"],
        [3, "u3", 2, "update_postimage"],
        [5, "n5", 3, "insert"],
    ],  # fmt: skip
    key=str,
)


@pytest.mark.parametrize(
    "point",
    [
        pytest.param(p, marks=[] if p == "after_journal" else [pytest.mark.extended])
        for p in ("after_staging", "after_feed", "after_journal", "between_repoints")
    ],  # fmt: skip
)
def test_sigkill_with_the_change_feed_leaves_feed_and_table_agreeing(tmp_path, monkeypatch, point):
    """The change rows are written into the merge's own directory before its journal, and read only
    for commits the history holds: killed anywhere, then recovered, the table and its feed agree
    (the old table and no change rows, or the new one and exactly its change rows)."""
    monkeypatch.setenv("SPARK_MERGE_TEST_FEED", "1")
    result = _kill_at_then_verify(tmp_path, [str(DRIVER), str(tmp_path), "merge"], point, dbt=False)
    committed = point in ("after_journal", "between_repoints")
    assert result["rows"] == (NEW if committed else OLD)
    assert result["changes"] == (FEED if committed else [])


APPENDED = sorted(OLD + [[5, "n5", 3], [6, "n6", 1], [7, "n7", None]], key=str)


@pytest.mark.parametrize(
    "point,host",
    [
        pytest.param(point, host, marks=[] if (point, host) == ("after_append", "python") else [pytest.mark.extended])
        for point in ("before_append", "after_append")
        for host in ("python", "dbt")
    ],
)
def test_sigkill_in_an_append_then_recover(tmp_path, point, host):
    """An insert-only merge (Spark's own INSERT INTO, under its journal) killed before its INSERT or
    after it, before its history entry: recovered, the table holds the rows once or not at all, the
    history and the change feed say the same, and a retry under the same run key is replayed when the
    rows landed, merged when they did not; either way each row is there once."""
    command = [str(DRIVER), str(tmp_path), "append"] if host == "python" else [str(DBT_DRIVER), str(tmp_path), "append"]
    result = _kill_at_then_verify(tmp_path, command, point, dbt=host == "dbt", verify_mode="verify_append")
    landed = point == "after_append"
    assert result["recovered"] is True
    assert sorted(result["rows"], key=str) == (APPENDED if landed else sorted(OLD, key=str))
    assert [e[1:] for e in result["history"]] == ([[RUN_KEY if host == "python" else None, True]] if landed else [])
    inserted = [[5, "n5", 3, "insert"], [6, "n6", 1, "insert"], [7, "n7", None, "insert"]]
    assert result["changes"] == (sorted(inserted, key=str) if landed else [])
    assert result["replayed"] is (landed and host == "python")
    # a dbt run has no run key: its retry is another append, as dbt's own re-run of an append model
    assert sorted(result["after_retry"], key=str) == (
        APPENDED
        if landed and host == "python" or not landed
        else sorted(APPENDED + [[5, "n5", 3], [6, "n6", 1], [7, "n7", None]], key=str)
    )
