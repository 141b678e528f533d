"""vacuum's canonical-layout step: after it, a reader of the table's directory reads the table's rows.

Path readers here: Spark (`spark.read.parquet(root)`) and DuckDB (`read_parquet` with one `*`
per partition level; pyarrow's dataset on an object store), which skip names starting with `_`, as
Hive-style readers do.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from merge_core import UnsupportedError, history, merge, recover, rollback, vacuum
from merge_core.api.cli import main
from merge_core.maintenance import layout
from merge_core.spark import faults, files

from .conftest import location, props, rows, snapshot


def by_path_spark(spark, root):
    """(id, v, p) as Spark reads the directory (it infers p from the p=... directories)."""
    df = spark.read.parquet(root)
    return sorted(tuple(r) for r in df.select("id", "v", "p").collect())


def by_path_duckdb(root, levels=1):
    if "://" in root and not root.startswith("file:"):
        return by_path_arrow(root, levels)
    glob = root.removeprefix("file:") + "/*" * levels + "/*.parquet"
    cols = "id, v, p" if levels else "id, v"
    return sorted(duckdb.sql(f"SELECT {cols} FROM read_parquet('{glob}', hive_partitioning = true)").fetchall())


def by_path_arrow(root, levels=1):
    """(id, v, p) as pyarrow's dataset reads a directory on an object store (DuckDB would need an
    extension from the network): Hive partitioning, names starting with `_` or `.` skipped."""
    import pyarrow.dataset as ds

    filesystem, path = files.resolve(root)
    table = ds.dataset(path, filesystem=filesystem, format="parquet", partitioning="hive" if levels else None)
    cols = ["id", "v", "p"] if levels else ["id", "v"]
    return sorted(zip(*(table.to_table(columns=cols).column(c).to_pylist() for c in cols), strict=True))


def by_name(spark, table):
    return sorted(rows(spark, table))


@pytest.mark.object_store
def test_after_vacuum_a_path_reader_reads_the_table(spark, sales):
    root = location(spark, sales)
    merge(spark, f"UPDATE {sales} SET v = -v WHERE p IN (1, 2)")
    merge(spark, f"DELETE FROM {sales} WHERE p = 1")  # p=1 now points at an empty directory
    merge(
        spark,
        f"""MERGE INTO {sales} t USING (SELECT 0 AS id, 5 AS v, 0 AS p UNION ALL SELECT 90, 9, 9) s
        ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *""",
    )  # creates p=9
    table = by_name(spark, sales)
    stale = by_path_duckdb(root)
    assert stale != table and (1, 10, 1) in stale and (90, 9, 9) not in stale  # the problem this step solves
    version = int(props(spark, sales)["spark_merge.version"])

    result = vacuum(spark, sales, retain_hours=0)

    assert sorted(result.layout.moved) == [f"{root}/p={p}" for p in (0, 1, 2, 9)]
    assert result.layout.waiting == [] and result.layout.files >= 3 and result.layout.bytes > 0
    assert by_name(spark, sales) == table
    assert by_path_duckdb(root) == table
    assert by_path_spark(spark, root) == table
    assert {location(spark, sales, f"p={p}") for p in (0, 1, 2, 3, 9)} == {f"{root}/p={p}" for p in (0, 1, 2, 3, 9)}
    # one journaled commit with its history entry; then vacuum removed every _merge_ directory
    assert int(props(spark, sales)["spark_merge.version"]) == version + 1
    entry = history(spark, sales)[0]
    assert entry["kind"] == "canonicalize" and entry["merge_id"] == result.layout.merge_id
    assert len(entry["repoints"]) == 4 and entry["metrics"]["numTargetPartitionsRewritten"] == 4
    assert sorted(d.rsplit("/", 1)[1] for d, is_dir in files.listing(root) if is_dir) == ["_spark_merge"] + [
        f"p={p}" for p in (0, 1, 2, 3, 9)
    ]

    # an append goes to the canonical directory, where the path reader sees it
    merge(
        spark,
        f"MERGE INTO {sales} t USING (SELECT 100 AS id, 1 AS v, 2 AS p) s ON t.id = s.id "
        f"WHEN NOT MATCHED THEN INSERT *",
    )
    assert by_path_duckdb(root) == by_name(spark, sales)
    # nothing left to move: no commit, no history entry
    again = vacuum(spark, sales, retain_hours=0)
    assert again.layout.moved == [] and again.layout.merge_id is None and again.removed == []
    assert history(spark, sales)[0]["kind"] != "canonicalize"


def test_inside_retention_the_canonical_directory_waits(spark, sales):
    """The canonical directory holds the version a reader or a rollback may still need."""
    root = location(spark, sales)
    before = by_name(spark, sales)
    a = merge(spark, f"UPDATE {sales} SET v = 0 WHERE p = 1")
    dry = vacuum(spark, sales, dry_run=True)  # default retention: 7 days
    result = vacuum(spark, sales)
    for r in (dry, result):
        assert r.layout.moved == [] and r.layout.waiting == [f"{root}/p=1"]
    assert "wait until no version inside retention" in result.summary()
    assert by_path_duckdb(root) == before  # still the version before the merge, as the README says
    rollback(spark, sales, a.merge_id)
    assert by_name(spark, sales) == before


def test_dry_run_lists_the_real_runs_work_and_changes_nothing(spark, sales, capsys):
    root = location(spark, sales)
    a = merge(spark, f"UPDATE {sales} SET v = 5 WHERE p = 0")
    before = snapshot(spark, sales)
    dry = vacuum(spark, sales, retain_hours=0, dry_run=True)
    assert dry.layout.moved == [f"{root}/p=0"] and dry.layout.files >= 1
    assert dry.removed == [f"{root}/_merge_{a.merge_id}"]  # not p=0: the real run refills it
    assert snapshot(spark, sales) == before and len(history(spark, sales)) == 1
    real = vacuum(spark, sales, retain_hours=0)
    assert real.layout.moved == dry.layout.moved and real.removed == dry.removed
    assert main(["vacuum", sales, "--retain", "0", "--dry-run", "-q"]) == 0
    assert "refill" not in capsys.readouterr().out  # nothing left to put back


def test_rollback_never_trusts_a_refilled_directory(spark, sales):
    root = location(spark, sales)
    before = by_name(spark, sales)
    a = merge(spark, f"UPDATE {sales} SET v = 0 WHERE p = 1")
    after_a = by_name(spark, sales)
    moved = layout.canonicalize(spark, sales, retain_hours=0)  # the step alone: A's directory stays on disk
    assert moved.moved == [f"{root}/p=1"] and by_path_duckdb(root) == after_a
    state = snapshot(spark, sales)
    # p=1's directory held the version before A, and now holds A's rows: that version is gone
    with pytest.raises(UnsupportedError, match=r"p=1 had then, was refilled with later data by " + moved.merge_id):
        rollback(spark, sales, a.merge_id)
    assert snapshot(spark, sales) == state and by_name(spark, sales) != before
    # undoing the canonical-layout commit itself is a plain rollback (A's directory is still there)
    rollback(spark, sales, moved.merge_id)
    assert by_name(spark, sales) == after_a and location(spark, sales, "p=1") == f"{root}/_merge_{a.merge_id}/p=1"


def test_an_unpartitioned_table_comes_back_to_its_root(spark, db):
    t = f"{db}.flat"
    spark.sql(f"CREATE TABLE {t} USING parquet AS SELECT CAST(id AS INT) AS id, CAST(id AS INT) AS v FROM range(10)")
    root = location(spark, t)
    merge(spark, f"DELETE FROM {t} WHERE id < 3")
    merge(spark, f"UPDATE {t} SET v = 0 WHERE id = 5")
    table = by_name(spark, t)
    assert by_path_duckdb(root, levels=0) != table
    result = vacuum(spark, t, retain_hours=0)
    assert result.layout.moved == [root] and location(spark, t) == root
    assert by_name(spark, t) == table == by_path_duckdb(root, levels=0)
    assert sorted(tuple(r) for r in spark.read.parquet(root).collect()) == table
    assert [p.name for p in Path(root.removeprefix("file:")).iterdir() if p.name.startswith("_merge_")] == []


def test_a_failure_before_the_commit_point_leaves_the_table_and_after_it_completes(spark, sales, monkeypatch):
    root = location(spark, sales)
    merge(spark, f"UPDATE {sales} SET v = 1 WHERE p IN (1, 3)")
    state, table = snapshot(spark, sales), by_name(spark, sales)
    real_refill = files.refill
    copied = []

    def crash_on_second(source, dest):
        if copied:
            raise OSError("disk went away")
        copied.append(dest)
        return real_refill(source, dest)

    monkeypatch.setattr(files, "refill", crash_on_second)
    with pytest.raises(OSError, match="disk went away"):
        layout.canonicalize(spark, sales, retain_hours=0)
    assert snapshot(spark, sales) == state and len(history(spark, sales)) == 1  # nothing committed
    monkeypatch.setattr(files, "refill", real_refill)

    def die_after_journal(point):
        if point == "after_journal":
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(faults, "reached", die_after_journal)
    with pytest.raises(KeyboardInterrupt):
        layout.canonicalize(spark, sales, retain_hours=0)
    monkeypatch.undo()
    assert recover(spark, sales)  # the journal rolls the commit forward
    assert by_name(spark, sales) == table == by_path_duckdb(root)
    assert {location(spark, sales, f"p={p}") for p in (1, 3)} == {f"{root}/p=1", f"{root}/p=3"}
    entry = history(spark, sales)[0]
    assert entry["kind"] == "canonicalize" and entry.get("recovered")


def test_a_merge_committed_meanwhile_is_planned_again(spark, sales, monkeypatch):
    root = location(spark, sales)
    merge(spark, f"UPDATE {sales} SET v = 1 WHERE p = 1")
    real_plan, calls = layout.plan_moves, []

    def plan_then_merge_elsewhere(spark_, table, hours):
        planned = real_plan(spark_, table, hours)
        calls.append(planned)
        if len(calls) == 1:  # another merge commits between this plan and its lock
            merge(spark, f"UPDATE {sales} SET v = 2 WHERE p = 2")
        return planned

    monkeypatch.setattr(layout, "plan_moves", plan_then_merge_elsewhere)
    result = layout.canonicalize(spark, sales, retain_hours=0)
    assert len(calls) == 2 and sorted(result.moved) == [f"{root}/p=1", f"{root}/p=2"]
    assert by_path_duckdb(root) == by_name(spark, sales)
    assert (2, 2, 2) in by_name(spark, sales)


def test_a_location_the_user_chose_is_left_alone(spark, sales):
    root = location(spark, sales)
    elsewhere = f"{root}/_archive/p=3"
    spark.sql(f"INSERT OVERWRITE DIRECTORY '{elsewhere}' USING parquet SELECT id, v FROM {sales} WHERE p = 3")
    spark.sql(f"ALTER TABLE {sales} PARTITION (p = 3) SET LOCATION '{elsewhere}'")
    spark.sql(f"REFRESH TABLE {sales}")
    result = vacuum(spark, sales, retain_hours=0)
    assert result.layout.moved == [] and location(spark, sales, "p=3") == elsewhere


@pytest.mark.slow
@pytest.mark.extended  # a second application waits out a listing TTL
def test_another_session_reads_a_refilled_directory_once_its_listing_expired(tmp_path):
    """README "Readers in other sessions": the canonical-layout step refills a directory another session
    listed; with the metadata cache TTL no longer than the retention, that session lists it again."""
    import json
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "tests.session_cache_driver", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["before"] == [[1, 1, 1], [2, 2, 1], [3, 3, 2]]
    assert seen["after_merge"] == seen["writer"] == [[1, 11, 1], [2, 12, 1], [3, 3, 2]]
    assert seen["moved"] == ["p=1"]  # the step did refill the directory the second session had listed
    assert seen["after_vacuum"] == seen["writer"]
