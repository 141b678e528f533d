"""Kill soak: every kind of operation SIGKILLed at a random moment, then recovered in a new process.

Each iteration picks an operation (MERGE, UPDATE, a partition-moving UPDATE, DELETE, an insert-only
MERGE, an upsert, a rollback, a compaction) and a phase (after validation, after staging, after the
journal, after the last repoint, or inside an insert-only append), starts the operation in a child
process whose failpoint only marks the phase, waits for the mark, sleeps a random delay (up to
about what the rest of that phase takes) and
SIGKILLs the child's process group (Python and JVM). A new process recovers and reads the table,
which must equal the state before or after the operation, both computed here from the set-up's rows.
Outcomes are counted (old / new / corrupt / recovery-failed) and printed in the test summary;
corrupt and recovery-failed must be 0. SPARK_MERGE_SOAK_ITERATIONS sets the count (default 1, a random one of the
operations; `make test-all` runs 8, each operation once), SPARK_MERGE_SOAK_SEED replays one.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from merge_core.spark.faults import SOAK_POINTS

DRIVER = Path(__file__).resolve().parent / "soak_driver.py"
ITERATIONS = int(os.environ.get("SPARK_MERGE_SOAK_ITERATIONS", "1"))
SEED = int(os.environ.get("SPARK_MERGE_SOAK_SEED", random.randrange(1 << 30)))
REPORT: dict = {}  # printed in the terminal summary (conftest.py)

INITIAL = [[i, "o", 1, i % 3] for i in range(30)]


def _apply(rows, change):
    by_id = {r[0]: list(r) for r in rows}
    for r in change(by_id):
        by_id[r[0]] = r
    return sorted(r for r in by_id.values() if r is not None and r[1] is not None)


def expected(kind: str) -> tuple[list, list]:
    """(old, new) rows of the operation's table, computed from the set-up alone."""
    if kind == "compact":
        log = [[i, "a", 1, i % 3] for i in range(10)] + [[i, "b", 2, i % 3] for i in range(5)]
        return sorted(log), sorted([[i, "b", 2, i % 3] for i in range(5)] + [[i, "a", 1, i % 3] for i in range(5, 10)])
    if kind == "rollback":
        after_a = [[i, "a" if p == 0 else v, w, p] for i, v, w, p in INITIAL]
        return sorted(after_a), sorted(INITIAL)
    old = sorted(INITIAL)
    new = {
        "merge": [[0, "m", 2, 0], [4, "m", 2, 1]] + [r for r in old if r[0] not in (0, 4)] + [[40, "n", 1, 1]],
        "update": [[i, "u" if p == 1 else v, w, p] for i, v, w, p in old],
        "move": [[i, v, w, 2 if i < 6 else p] for i, v, w, p in old],
        "delete": [r for r in old if not (r[3] == 2 and r[0] > 10)],
        "insert": old + [[i, "i", 1, i % 3] for i in range(50, 56)],
        "upsert": [[1, "x", 5, 1]] + [r for r in old if r[0] != 1] + [[60, "y", 1, 0]],
    }[kind]
    return old, sorted(new)


# the random delay after each mark, about as long as what follows it takes here, so kills land inside
DELAY_S = {
    "after_validation": 2.0,
    "after_staging": 0.8,
    "after_journal": 0.3,
    "after_last_repoint": 0.2,
    "before_append": 1.0,
    "after_append": 0.3,
}
KINDS = ["merge", "update", "move", "delete", "insert", "upsert", "rollback", "compact"]


def _phases(kind: str) -> list[str]:
    return (
        ["after_validation", "before_append", "after_append"]
        if kind == "insert"
        else [p for p in SOAK_POINTS if p not in ("before_append", "after_append")]
    )


@pytest.mark.slow
def test_random_kills_leave_the_old_or_the_new_table(tmp_path):
    rng = random.Random(SEED)
    counts = {"old": 0, "new": 0, "corrupt": 0, "recovery-failed": 0}
    REPORT.update(seed=SEED, iterations=ITERATIONS, counts=counts, details=[])
    # every operation equally often; what does not divide evenly, a random few of them
    kinds = KINDS * (ITERATIONS // len(KINDS)) + rng.sample(KINDS, ITERATIONS % len(KINDS))
    rng.shuffle(kinds)
    failures = []
    for n, kind in enumerate(kinds):
        phase = rng.choice(_phases(kind))
        delay = rng.uniform(0, DELAY_S[phase])
        home = tmp_path / f"i{n}"
        home.mkdir()
        flag = home / "fault.flag"
        proc = subprocess.Popen(
            [sys.executable, str(DRIVER), str(home), "run", kind],
            cwd=home,
            env={**os.environ, "SOAK_PHASE": phase, "SPARK_MERGE_FAULT_FLAG": str(flag)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 300
        while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if flag.exists():
            time.sleep(delay)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        stderr = proc.stderr.read()
        if not (home / "ready").exists():
            pytest.fail(f"iteration {n} ({kind}): the set-up did not finish: {stderr[-3000:]}")
        finished = (home / "done").exists()
        verify = subprocess.run(
            [sys.executable, str(DRIVER), str(home), "verify", kind],
            cwd=home,
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = [line for line in verify.stdout.splitlines() if line.startswith("RESULT ")]
        result = json.loads(lines[-1].removeprefix("RESULT ")) if lines else {"recovery_failed": verify.stderr[-2000:]}
        old, new = expected(kind)
        if "recovery_failed" in result:
            outcome = "recovery-failed"
        elif result["rows"] == new:
            outcome = "new"
        elif result["rows"] == old and not finished:
            outcome = "old"
        else:
            outcome = "corrupt"
        counts[outcome] += 1
        detail = (
            f"iteration {n}: {kind}, killed {delay:.2f} s after {phase}"
            f"{' (it had finished)' if finished else ''} -> {outcome}"
        )
        REPORT["details"].append(detail)
        if outcome in ("corrupt", "recovery-failed"):
            failures.append(f"{detail}\n{result}\nold={old}\nnew={new}\n{stderr[-1500:]}")
    assert not failures, f"seed {SEED}:\n" + "\n\n".join(failures)
