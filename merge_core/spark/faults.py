"""Failpoints for crash tests: with SPARK_MERGE_FAULT=<name>, the process stops dead at <name>.

It writes the name to $SPARK_MERGE_FAULT_FLAG and sleeps, so a test can SIGKILL it at
exactly that step boundary. With SPARK_MERGE_FAULT_MARK=<name> it only writes the flag and goes
on, so a test can kill it at a random moment after that boundary (the kill soak,
tests/test_soak.py). With SPARK_MERGE_FAULT_RAISE=<name> it raises SimulatedCrash there, in the
process (the durable-retry tests: a task that fails mid-commit and is retried). Unset (always,
outside tests) it costs one dict lookup.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# the copy-on-write commit's step boundaries (tests/test_crash.py); PostgreSQL targets also stop at
# after_staging and inside_transaction (tests/test_postgres.py)
POINTS = (
    "after_validation",
    "after_staging",
    "after_journal",
    "between_repoints",
    "after_last_repoint",
    "before_refresh",
)


# where the kill soak starts its random delay: the commit's boundaries, and the start and end of an
# insert-only merge's append (Spark's own INSERT INTO, between its journal and the journal's apply)
SOAK_POINTS = (
    "after_validation",
    "after_staging",
    "after_journal",
    "after_last_repoint",
    "before_append",
    "after_append",
)


class SimulatedCrash(RuntimeError):
    """Raised at a failpoint named by SPARK_MERGE_FAULT_RAISE."""


def reached(name: str) -> None:
    if os.environ.get("SPARK_MERGE_FAULT") == name:
        Path(os.environ["SPARK_MERGE_FAULT_FLAG"]).write_text(name)
        time.sleep(3600)
    if os.environ.get("SPARK_MERGE_FAULT_MARK") == name:
        Path(os.environ["SPARK_MERGE_FAULT_FLAG"]).write_text(name)
    if os.environ.get("SPARK_MERGE_FAULT_RAISE") == name:
        raise SimulatedCrash(f"simulated crash at {name}")
