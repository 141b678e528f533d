"""Durable runs: a merge asked for again under the same run key returns the first one's result,
after finishing its commit when the first run died mid-way (merge_core/maintenance/durable.py)."""

from __future__ import annotations

import pytest

from merge_core import SpecError, history, merge
from merge_core.spark.faults import SimulatedCrash

from .conftest import rows


@pytest.fixture
def counter(spark, db):
    t = f"{db}.counter"
    spark.sql(f"CREATE TABLE {t} (id INT, n INT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 0, 'a'), (2, 0, 'b')")
    return t


def test_a_second_run_with_the_key_returns_the_first_commit(spark, counter):
    """Not idempotent on purpose: n + 1 applied twice would show."""
    first = merge(spark, f"UPDATE {counter} SET n = n + 1 WHERE id = 1", run_key="job-1")
    again = merge(spark, f"UPDATE {counter} SET n = n + 1 WHERE id = 1", run_key="job-1")
    assert rows(spark, counter) == [(1, 1, "a"), (2, 0, "b")]
    assert again.replayed and not first.replayed
    assert (again.merge_id, again.version, again.metrics["numTargetRowsUpdated"]) == (
        first.merge_id,
        first.version,
        1,
    )
    [entry] = history(spark, counter)
    assert entry["run_key"] == "job-1" and entry["merge_id"] == first.merge_id
    # another key is another run
    assert not merge(spark, f"UPDATE {counter} SET n = n + 1 WHERE id = 1", run_key="job-2").replayed
    assert rows(spark, counter) == [(1, 2, "a"), (2, 0, "b")]


@pytest.mark.parametrize("point", ["after_journal", "after_last_repoint"])
def test_a_run_that_died_mid_commit_is_finished_then_returned(spark, counter, monkeypatch, point):
    """Past the journal the commit is decided: the next run with the key finishes it (the table shows
    it, its history entry is written, run key included) and returns it."""
    monkeypatch.setenv("SPARK_MERGE_FAULT_RAISE", point)
    statement = f"UPDATE {counter} SET n = n + 10"
    with pytest.raises(SimulatedCrash):
        merge(spark, statement, run_key="job-3")
    monkeypatch.delenv("SPARK_MERGE_FAULT_RAISE")
    again = merge(spark, statement, run_key="job-3")
    assert again.replayed and again.metrics["numTargetRowsUpdated"] == 2
    assert rows(spark, counter) == [(1, 10, "a"), (2, 10, "b")]  # once, not twice
    [entry] = history(spark, counter)
    assert (entry["merge_id"], entry["run_key"]) == (again.merge_id, "job-3")


def test_a_run_that_failed_before_its_commit_point_merges_again(spark, counter, monkeypatch):
    monkeypatch.setenv("SPARK_MERGE_FAULT_RAISE", "after_staging")
    with pytest.raises(SimulatedCrash):
        merge(spark, f"UPDATE {counter} SET n = n + 1", run_key="job-4")
    monkeypatch.delenv("SPARK_MERGE_FAULT_RAISE")
    assert history(spark, counter) == []
    assert not merge(spark, f"UPDATE {counter} SET n = n + 1", run_key="job-4").replayed
    assert rows(spark, counter) == [(1, 1, "a"), (2, 1, "b")]


def test_a_postgres_target_refuses_a_run_key(spark):
    with pytest.raises(SpecError, match="run_key"):
        merge(spark, "UPDATE public.t SET n = 1", jdbc_url="jdbc:postgresql://127.0.0.1:1/x", run_key="k")
