"""Metadata a user can copy or edit, against real Spark: a table's identity, its history entries,
its journal, version, lock and not_null properties, and files another writer adds past the lock.

Each test is a case outside testing found losing or wrongly deleting rows (or stopping every command
with a raw exception): a table created from another's SHOW CREATE TABLE, a corrupt or foreign history
entry, a journal of the wrong shape, garbage properties, an INSERT landing after the check under the
commit lock. Every one must now either work or stop with a one-line MergeError naming the repair,
and no live row may be lost.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa
import pytest

from merge_core import (
    CorruptJournal,
    MetadataError,
    adopt,
    history,
    merge,
    recover,
    repair_history,
    repair_journal,
    rollback,
    vacuum,
)
from merge_core.spark.catalog import describe_table

from .conftest import location, props, rows
from .test_corruption import _append_as_another_application

UPDATE_A = (
    "MERGE INTO {t} t USING (SELECT 1 AS id, {v} AS v, 'a' AS p) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v"
)


@pytest.fixture
def merged(spark, db):
    """A partitioned table with two spark-merge commits (so an identity, a history and old versions)."""
    t = f"{db}.t"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 10, 'a'), (2, 20, 'b')")
    merge(spark, UPDATE_A.format(t=t, v=11))
    merge(spark, UPDATE_A.format(t=t, v=12))
    return t


def root_of(spark, table: str) -> Path:
    return Path(describe_table(spark, table.split("."), trusted=False)["root"].removeprefix("file:"))


def test_a_table_created_from_another_tables_ddl_is_refused_until_adopted(spark, merged, db):
    """The copy carries the original's spark_merge.root: it staged into the original's directory and
    its vacuum deleted the original's live rows. Now every command on the copy is refused, naming
    the property and `spark-merge adopt`; adopted, it has a root and a history of its own."""
    ddl = spark.sql(f"SHOW CREATE TABLE {merged}").collect()[0][0]
    copy = f"{db}.t_copy"
    spark.sql(ddl.replace(f"spark_catalog.{merged} (", f"spark_catalog.{copy} (", 1))
    spark.sql(f"INSERT INTO {copy} VALUES (5, 50, 'a')")
    original = rows(spark, merged)
    for command in (
        lambda: merge(spark, UPDATE_A.format(t=copy, v=51)),
        lambda: vacuum(spark, copy, retain_hours=0),
        lambda: history(spark, copy),
        lambda: recover(spark, copy),
    ):
        with pytest.raises(MetadataError, match=rf"belong to table \"{merged}\".*spark-merge adopt {copy}"):
            command()
    assert rows(spark, merged) == original and rows(spark, copy) == [(5, 50, "a")]

    done = adopt(spark, copy)
    assert done["set"]["spark_merge.root"] == location(spark, copy) and "spark_merge.last_merge_id" in done["unset"]
    merge(
        spark,
        f"MERGE INTO {copy} t USING (SELECT 5 AS id, 51 AS v, 'a' AS p) s ON t.id = s.id "
        f"WHEN MATCHED THEN UPDATE SET v = s.v",
    )
    vacuum(spark, copy, retain_hours=0)
    vacuum(spark, merged, retain_hours=0)
    assert rows(spark, merged) == original and rows(spark, copy) == [(5, 51, "a")]
    assert {e["table_id"] for e in history(spark, copy)} == {props(spark, copy)["spark_merge.table_id"]}
    assert (
        len(history(spark, merged)) >= 2
        and history(spark, merged)[-1]["table_id"] != props(spark, copy)["spark_merge.table_id"]
    )
    assert adopt(spark, copy)["reasons"] == []  # its own now


def test_a_renamed_table_keeps_its_identity_and_history_once_adopted(spark, merged, db):
    entries = history(spark, merged)
    renamed = f"{db}.renamed"
    spark.sql(f"ALTER TABLE {merged} RENAME TO {renamed}")
    if location(spark, renamed).rstrip("/").endswith("/t"):  # the catalog kept the directory: same root
        with pytest.raises(MetadataError, match="copied from its DDL, or the table was renamed"):
            merge(spark, UPDATE_A.format(t=renamed, v=13))
        done = adopt(spark, renamed)
        assert "spark_merge.table_id" not in done["set"]
        assert [e["merge_id"] for e in history(spark, renamed)] == [e["merge_id"] for e in entries]
    else:  # a managed table's directory moved with its name: the same identity and history, a new root
        done = adopt(spark, renamed)
        assert "spark_merge.table_id" not in done["set"] and done["set"]["spark_merge.root"] == location(spark, renamed)
        assert [e["merge_id"] for e in history(spark, renamed)] == [e["merge_id"] for e in entries]
    merge(spark, UPDATE_A.format(t=renamed, v=13))
    assert rows(spark, renamed) == [(1, 13, "a"), (2, 20, "b")]


def _entry_file(root: Path, merge_id: str) -> Path:
    [part] = [p for p in (root / "_spark_merge" / "history" / merge_id).iterdir() if p.name.startswith("part-")]
    return part


@pytest.mark.parametrize(
    "damage",
    [
        "not json",
        pytest.param("wrong shape", marks=pytest.mark.extended),
        pytest.param("emptied", marks=pytest.mark.extended),
        "another table's",
    ],
)
def test_a_history_entry_that_cannot_be_used_stops_vacuum_and_rollback_until_repaired(
    spark, merged, db, damage, caplog
):
    root = root_of(spark, merged)
    second, first = (e["merge_id"] for e in history(spark, merged))  # newest first; two ids can share a second
    part = _entry_file(root, second)
    if damage == "not json":
        part.write_text("{garbage")  # its .crc stays: Spark's own reader would fail on the checksum
    elif damage == "wrong shape":
        part.write_text(
            json.dumps({"merge_id": second, "finished_at": "2026-01-01T00:00:00", "entry": json.dumps({"a": 1})}) + "\n"
        )
    elif damage == "emptied":
        part.write_text("")
    else:
        other = f"{db}.other"
        spark.sql(f"CREATE TABLE {other} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p)")
        spark.sql(f"INSERT INTO {other} VALUES (1, 1, 'a')")
        theirs = merge(spark, UPDATE_A.format(t=other, v=2)).merge_id
        record = json.loads(_entry_file(root_of(spark, other), theirs).read_text())
        entry = json.loads(record["entry"])  # their table_id is their first merge's id: keep it
        assert entry["table_id"] == theirs and theirs not in (first, second)
        entry["merge_id"] = record["merge_id"] = second
        part.write_text(json.dumps({**record, "entry": json.dumps(entry)}) + "\n")
    live = rows(spark, merged)
    with caplog.at_level(logging.WARNING, logger="spark_merge"):
        assert [e["merge_id"] for e in history(spark, merged)] == [first]
    assert f"history entry {root}" in caplog.text.replace("file:", "") or second in caplog.text
    for command, what in (
        (lambda: vacuum(spark, merged, retain_hours=0), "vacuum"),
        (lambda: rollback(spark, merged, first), "rollback"),
    ):
        with pytest.raises(
            MetadataError, match=rf"{what} of {merged} needs every history entry.*{second}.*repair-history"
        ):
            command()
    assert rows(spark, merged) == live
    merge(spark, UPDATE_A.format(t=merged, v=14))  # merging does not read the history
    moved = repair_history(spark, merged)
    assert [path.rsplit("/", 1)[1] for path, _ in moved] == [second]
    vacuum(spark, merged, retain_hours=0)
    assert rows(spark, merged) == [(1, 14, "a"), (2, 20, "b")]


def _set_journal(spark, table: str, text: str) -> None:
    spark.sql(
        f"ALTER TABLE {table} SET TBLPROPERTIES ('spark_merge.journal.parts' = '1', 'spark_merge.journal.0' = '{text}')"
    )


@pytest.mark.parametrize(
    "journal, why",
    [
        ('{"merge_id": "x", "repoints": [{"a": 1}]}', "the journal.repoints\\[0\\].location is missing"),
        ('{"merge_id": "x", "table_id": "someone_else", "repoints": []}', "belongs to another table"),
        (
            '{"merge_id": "x", "repoints": [{"partition": null, "location": "file:/elsewhere", "exists": true}]}',
            "outside the root of the table",
        ),
        ("[1, 2]", "the journal is not an object"),
    ],
)
def test_a_journal_that_cannot_be_used_is_refused_and_repair_journal_clears_it(spark, merged, journal, why):
    _set_journal(spark, merged, journal)
    live = rows(spark, merged)
    for command in (
        lambda: merge(spark, UPDATE_A.format(t=merged, v=15)),
        lambda: recover(spark, merged),
        lambda: vacuum(spark, merged, retain_hours=0),
    ):
        with pytest.raises(CorruptJournal, match=why + ".*repair-journal"):
            command()
    assert repair_journal(spark, merged, dry_run=True)["text"] == journal
    assert props(spark, merged)["spark_merge.journal.parts"] == "1"  # a dry run changes nothing
    repair_journal(spark, merged)
    merge(spark, UPDATE_A.format(t=merged, v=15))
    assert rows(spark, merged) == [(1, 15, "a"), (2, 20, "b")] and live[1] == (2, 20, "b")


def test_garbage_in_the_version_lock_and_not_null_properties_is_named_with_its_repair(spark, merged, db):
    from merge_core.spark import lock

    spark.sql(f"ALTER TABLE {merged} SET TBLPROPERTIES ('spark_merge.version' = 'seven')")
    with pytest.raises(MetadataError, match='spark_merge.version .* is "seven", not a version number.*adopt'):
        merge(spark, UPDATE_A.format(t=merged, v=16))
    assert adopt(spark, merged)["set"] == {"spark_merge.version": "2"}  # the newest history entry's
    merge(spark, UPDATE_A.format(t=merged, v=16))

    table = describe_table(spark, merged.split("."))
    spark.sql(
        f"CREATE TABLE {db}.__sm_lock_t (merge_id STRING) USING parquet "
        f"TBLPROPERTIES ('spark_merge.lock.merge_id' = 'x y', 'spark_merge.lock.expires' = 'soon')"
    )
    with pytest.raises(MetadataError, match="commit lock of .* is not one spark-merge wrote.*--break-lock"):
        merge(spark, UPDATE_A.format(t=merged, v=17))
    recover(spark, merged, break_lock=True)
    assert not lock.exists(spark, table)
    merge(spark, UPDATE_A.format(t=merged, v=17))

    spark.sql(f"ALTER TABLE {merged} SET TBLPROPERTIES ('spark_merge.not_null' = 'id,{{\"nope\"')")
    with pytest.raises(MetadataError, match="spark_merge.not_null .* names .*nope.*which is not a column"):
        merge(spark, UPDATE_A.format(t=merged, v=18))
    assert rows(spark, merged) == [(1, 17, "a"), (2, 20, "b")]


@pytest.fixture
def paused_insert(monkeypatch):
    """Run ``action`` once a merge's commit reaches ``point`` (its journal written, before repointing)."""
    from merge_core.spark import faults

    def arm(point, action):
        done = []
        real = faults.reached

        def reached(name):
            if name == point and not done:
                done.append(action())
            real(name)

        monkeypatch.setattr(faults, "reached", reached)
        return done

    return arm


def test_an_insert_that_lands_after_the_check_under_the_lock_is_carried_into_the_new_version(
    spark, merged, paused_insert, caplog
):
    """Another application's INSERT into a partition this merge rewrites, after the merge checked the
    partition under the lock: its file lands in the replaced directory. It was lost without a word;
    now the commit carries it into the new version and says so (MERGE_LATE_APPEND)."""
    done = paused_insert(
        "after_journal",
        lambda: _append_as_another_application(
            spark, merged, "p = 'a'", {"id": pa.array([7], pa.int32()), "v": pa.array([70], pa.int32())}
        ),
    )
    with caplog.at_level(logging.WARNING, logger="spark_merge"):
        merge(spark, UPDATE_A.format(t=merged, v=19))
    assert done and "MERGE_LATE_APPEND" in caplog.text
    spark.sql(f"REFRESH TABLE {merged}")
    assert rows(spark, merged) == [(1, 19, "a"), (2, 20, "b"), (7, 70, "a")]
    vacuum(spark, merged, retain_hours=0)
    assert rows(spark, merged) == [(1, 19, "a"), (2, 20, "b"), (7, 70, "a")]


def test_vacuum_keeps_and_reports_a_late_append_no_version_reads(spark, merged, paused_insert, monkeypatch):
    """A host that cannot carry the file over (dbt has no file system): the row is not in the new
    version, and vacuum must never delete it unseen: it keeps the file and reports it."""
    from merge_core.spark.host import SparkHost

    monkeypatch.setattr(SparkHost, "carry_late", lambda self, table, repoints: None)
    old = location(spark, merged, "p = 'a'")
    paused_insert(
        "after_journal",
        lambda: _append_as_another_application(
            spark, merged, "p = 'a'", {"id": pa.array([7], pa.int32()), "v": pa.array([70], pa.int32())}
        ),
    )
    merge(spark, UPDATE_A.format(t=merged, v=19))
    [late] = [p for p in Path(old.removeprefix("file:")).iterdir() if p.name.startswith("part-elsewhere")]
    result = vacuum(spark, merged, retain_hours=0)
    assert [Path(p.removeprefix("file:")) for p in result.late_appends] == [late] and late.exists()
    assert "MERGE_LATE_APPEND" in result.summary()


@pytest.mark.extended  # a fresh Spark application of its own
def test_a_fresh_session_runs_python_udfs_and_prints_no_stack_for_an_existing_database(tmp_path):
    """The worker processes of a Python UDF get this interpreter (PATH's python3 may lack pyarrow),
    and a second CREATE DATABASE IF NOT EXISTS succeeds without a metastore stack trace on stderr."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("fresh_session_driver.py")), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ROWS [(1, 'B!')]" in done.stdout
    assert "AlreadyExistsException" not in done.stderr and "No module named" not in done.stderr


def test_another_formats_log_inside_a_partition_is_refused_before_any_write(spark, db, merged):
    """Delta Lake's log inside one partition directory (only the table's own directory was checked)."""
    from merge_core import TargetError

    before = rows(spark, merged)
    (Path(location(spark, merged, "p = 'b'").removeprefix("file:")) / "_delta_log").mkdir()
    (Path(location(spark, merged, "p = 'b'").removeprefix("file:")) / "_delta_log" / "00000.json").write_text("{}")
    with pytest.raises(TargetError, match=r"p=b .* holds Delta Lake \(_delta_log/\) metadata"):
        merge(spark, f"UPDATE {merged} SET v = 21 WHERE id = 2")
    assert rows(spark, merged) == before


def test_pyspark_does_not_log_the_errors_spark_merge_reports(spark, merged):
    """A Python API validation error printed two PySpark JSON ERROR lines (with a Java stack) before
    spark-merge's own one-line error; a Spark error outside spark-merge is still logged."""
    from pyspark.logger import PySparkLogger

    from merge_core import ValidationError

    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    handler = Keep()
    loggers = [PySparkLogger.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.ERROR)  # as PySpark leaves them (the CLI quiets them for its own process)
    try:
        with pytest.raises(ValidationError):
            merge(spark, f"UPDATE {merged} SET nope = 1")
        assert seen == []
        with pytest.raises(Exception):
            spark.sql(f"SELECT nope FROM {merged}").collect()
        assert seen
    finally:
        for lg, level in zip(loggers, levels):
            lg.removeHandler(handler)
            lg.setLevel(level)
