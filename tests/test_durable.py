"""Durable runs: a merge asked for again under the same run key returns the first one's result,
after finishing its commit when the first run died mid-way (merge_core/maintenance/durable.py)."""

from __future__ import annotations

import pytest

from merge_core import MergeError, SpecError, history, merge, recover, table_changes
from merge_core.spark.faults import SimulatedCrash

from .conftest import props, rows


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


INSERT_ONLY = (
    "MERGE INTO {t} t USING (SELECT * FROM VALUES (10, 1, 'a'), (11, 1, 'c'), (12, 1, NULL) AS s(id, n, p)) s "
    "ON 1 = 0 WHEN NOT MATCHED THEN INSERT *"
)


@pytest.fixture
def fed(spark, counter):
    spark.sql(f"ALTER TABLE {counter} SET TBLPROPERTIES ('spark_merge.change_feed' = 'true')")
    return counter


def test_an_append_that_died_after_its_insert_is_recorded_not_applied_twice(spark, fed, monkeypatch):
    """An insert-only merge appends with Spark's own INSERT INTO, which cannot be replayed: its journal,
    written before the INSERT, lets the retry see that the rows landed, record the commit (history, run
    key, change feed) and return it, into an existing, a new and a NULL partition."""
    monkeypatch.setenv("SPARK_MERGE_FAULT_RAISE", "after_append")
    with pytest.raises(SimulatedCrash):
        merge(spark, INSERT_ONLY.format(t=fed), run_key="job-5")
    monkeypatch.delenv("SPARK_MERGE_FAULT_RAISE")
    again = merge(spark, INSERT_ONLY.format(t=fed), run_key="job-5")
    assert again.replayed and again.metrics["numTargetRowsInserted"] == 3
    assert rows(spark, fed) == [(1, 0, "a"), (2, 0, "b"), (10, 1, "a"), (11, 1, "c"), (12, 1, None)]
    [entry] = history(spark, fed)
    assert (entry["merge_id"], entry["run_key"], entry.get("recovered")) == (again.merge_id, "job-5", True)
    changes = table_changes(spark, fed).select("id", "p", "_change_type").collect()
    assert sorted(map(tuple, changes), key=str) == [(10, "a", "insert"), (11, "c", "insert"), (12, None, "insert")]


def test_an_append_that_died_before_its_insert_merges_again(spark, fed, monkeypatch):
    monkeypatch.setenv("SPARK_MERGE_FAULT_RAISE", "before_append")
    with pytest.raises(SimulatedCrash):
        merge(spark, INSERT_ONLY.format(t=fed), run_key="job-6")
    monkeypatch.delenv("SPARK_MERGE_FAULT_RAISE")
    assert recover(spark, fed)  # the journal is there, and discarded: nothing became visible
    assert history(spark, fed) == [] and props(spark, fed)["spark_merge.journal.parts"] == "0"
    again = merge(spark, INSERT_ONLY.format(t=fed), run_key="job-6")
    assert not again.replayed
    assert rows(spark, fed) == [(1, 0, "a"), (2, 0, "b"), (10, 1, "a"), (11, 1, "c"), (12, 1, None)]
    assert len(table_changes(spark, fed).collect()) == 3


def test_an_append_neither_there_nor_absent_is_refused(spark, counter, monkeypatch):
    """A partition holding neither the rows before the append nor those after it (a plain INSERT since
    the crash, or Spark's move of the files cut short) is no guess: an error naming it, nothing changed."""
    monkeypatch.setenv("SPARK_MERGE_FAULT_RAISE", "after_append")
    with pytest.raises(SimulatedCrash):
        merge(spark, INSERT_ONLY.format(t=counter), run_key="job-7")
    monkeypatch.delenv("SPARK_MERGE_FAULT_RAISE")
    spark.sql(f"INSERT INTO {counter} VALUES (99, 9, 'c')")
    with pytest.raises(
        MergeError, match=r"MERGE_CORRUPT_JOURNAL.*partition \{\"p\": \"c\"\} holds 2 row\(s\).*repair-journal"
    ):
        recover(spark, counter)
    assert props(spark, counter)["spark_merge.journal.parts"] != "0"


def test_a_merge_on_read_upsert_that_died_after_its_append_is_recorded_once(spark, db, monkeypatch):
    t = f"{db}.mor_durable"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, ts INT, p STRING) USING parquet PARTITIONED BY (p)")
    source = "SELECT * FROM VALUES (1, 'x', 1, 'a'), (2, 'y', 1, 'b'), (1, 'z', 2, 'a') AS s(id, v, ts, p)"
    options = {"primary_key": ["id"], "watermark_key": "ts", "upsert_mode": "merge-on-read"}
    monkeypatch.setenv("SPARK_MERGE_FAULT_RAISE", "after_append")
    with pytest.raises(SimulatedCrash):
        merge(spark, {"target": t, "source": source}, run_key="mor-1", **options)
    monkeypatch.delenv("SPARK_MERGE_FAULT_RAISE")
    again = merge(spark, {"target": t, "source": source}, run_key="mor-1", **options)
    assert again.replayed
    assert spark.table(f"{t}__sm_log").count() == 3  # appended once
    assert rows(spark, t) == [(1, "z", 2, "a"), (2, "y", 1, "b")]
