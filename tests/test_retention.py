"""Vacuum keeps what versions inside retention use and removes the rest; rollback repoints to an older version.

The removal rule is tested with vacuum's canonical-layout step off (test_layout.py tests that step)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from merge_core import ConflictError, SpecError, UnsupportedError, merge, rollback, vacuum
from merge_core.api.cli import main
from merge_core.spark import faults, files

from .conftest import location, props, rows, snapshot


def on_disk(loc: str) -> bool:
    return bool(files.exists(loc))


def hours_since(moment: datetime) -> float:
    return (datetime.now(UTC) - moment).total_seconds() / 3600


@pytest.mark.object_store
def test_vacuum_keeps_versions_inside_retention_and_removes_older_ones(spark, sales):
    root = location(spark, sales)
    original = {p: location(spark, sales, f"p={p}") for p in range(4)}
    assert original[1] == f"{root}/p=1"
    a = merge(spark, f"UPDATE {sales} SET v = v + 1 WHERE p = 1")
    a_p1 = location(spark, sales, "p=1")
    after_a = rows(spark, sales)
    time.sleep(1.0)
    between = datetime.now(UTC)
    time.sleep(1.0)
    merge(spark, f"UPDATE {sales} SET v = v + 1 WHERE p IN (1, 2)")
    after_b = rows(spark, sales)

    # default retention (7 days): every replaced directory is still a version inside it
    dry = vacuum(spark, sales, dry_run=True, canonicalize=False)
    assert dry.removed == [] and dry.kept_for_retention == 3

    # retention reaching back to between the merges: A's version is inside it, the version before A is not
    result = vacuum(spark, sales, retain_hours=hours_since(between), canonicalize=False)
    assert result.removed == [original[1]]
    assert result.files >= 1 and result.bytes > 0
    assert not on_disk(original[1])
    assert on_disk(a_p1) and on_disk(original[2]) and on_disk(original[0]) and on_disk(original[3])
    assert rows(spark, sales) == after_b

    # the version before B is intact, so rolling back B works; the version before A is gone
    with pytest.raises(UnsupportedError, match="is gone: removed by vacuum"):
        rollback(spark, sales, a.merge_id)
    assert rows(spark, sales) == after_b
    rollback(spark, sales, merge_id_of(spark, sales, 1))
    assert rows(spark, sales) == after_a


def append(spark, table, values):
    """An insert-only merge: it appends files in place instead of rewriting."""
    r = merge(
        spark,
        f"MERGE INTO {table} t USING (SELECT {values}) s (id, v, p) ON t.id = s.id WHEN NOT MATCHED THEN INSERT *",
    )
    assert r.metrics["numTargetRowsInserted"] == 1 and r.metrics["numTargetPartitionsRewritten"] == 0
    return r


def merge_id_of(spark, table, newest_index):
    from merge_core import history

    return history(spark, table)[newest_index - 1]["merge_id"]


def test_vacuum_with_no_retention_removes_every_unused_directory(spark, sales):
    root = location(spark, sales)
    a = merge(spark, f"UPDATE {sales} SET v = -v WHERE p IN (1, 2)")
    b = merge(spark, f"DELETE FROM {sales} WHERE p = 1")
    expected = rows(spark, sales)
    result = vacuum(spark, sales, retain_hours=0, canonicalize=False)
    # the original p=1 and p=2 directories, and A's p=1 (B replaced it); A's p=2 is live
    assert sorted(result.removed) == [f"{root}/_merge_{a.merge_id}/p=1", f"{root}/p=1", f"{root}/p=2"]
    assert on_disk(f"{root}/_merge_{a.merge_id}/p=2") and not on_disk(f"{root}/_merge_{a.merge_id}/p=1")
    assert on_disk(f"{root}/_merge_{b.merge_id}")
    assert rows(spark, sales) == expected
    # the superseded default directory does not come back when the partition is dropped and re-added
    spark.sql(f"ALTER TABLE {sales} DROP PARTITION (p = 2)")
    spark.sql(f"ALTER TABLE {sales} ADD PARTITION (p = 2)")
    assert rows(spark, f"(SELECT * FROM {sales} WHERE p = 2)") == []
    # dropping the partition deleted A's p=2, so A's directory is now empty and goes too; p=2 stays
    assert vacuum(spark, sales, retain_hours=0, canonicalize=False).removed == [f"{root}/_merge_{a.merge_id}"]
    assert on_disk(f"{root}/p=2")
    assert vacuum(spark, sales, retain_hours=0, canonicalize=False).removed == []  # nothing left to do


def test_vacuum_of_an_unpartitioned_table_keeps_its_live_directory(spark, db):
    t = f"{db}.flat"
    spark.sql(f"CREATE TABLE {t} USING parquet AS SELECT CAST(id AS INT) AS id FROM range(10)")
    root = location(spark, t)
    originals = [p for p in Path(root.removeprefix("file:")).iterdir() if not p.name.startswith(("_", "."))]
    assert originals
    a = merge(spark, f"DELETE FROM {t} WHERE id < 3")
    b = merge(spark, f"DELETE FROM {t} WHERE id < 5")
    result = vacuum(spark, t, retain_hours=0, canonicalize=False)
    assert sorted(result.removed) == sorted([f"{root}/{p.name}" for p in originals] + [f"{root}/_merge_{a.merge_id}"])
    assert location(spark, t) == f"{root}/_merge_{b.merge_id}"
    assert rows(spark, t) == [(i,) for i in range(5, 10)]
    with pytest.raises(UnsupportedError, match="is gone: removed by vacuum"):
        rollback(spark, t, b.merge_id)


def test_reader_that_started_before_the_merge_finishes_after_vacuum(spark, sales):
    """Each file is its own task and tasks run one at a time, so the reader reads after the commit."""
    old = sorted(rows(spark, sales))
    spark.conf.set("spark.sql.files.openCostInBytes", str(1 << 30))
    try:
        reader = spark.table(sales).toLocalIterator(prefetchPartitions=False)
        seen = [tuple(next(reader))]
        merge(spark, f"UPDATE {sales} SET v = -1")
        vacuum(spark, sales)  # default retention
        seen += [tuple(r) for r in reader]
        assert sorted(seen) == old  # the whole old version, though every partition was replaced

        # the same with no retention: the reader's remaining files are gone and it fails
        reader = spark.table(sales).toLocalIterator(prefetchPartitions=False)
        next(reader)
        merge(spark, f"UPDATE {sales} SET v = -2")
        assert vacuum(spark, sales, retain_hours=0).removed
        with pytest.raises(Exception, match="FileNotFound|does not exist|FAILED_READ_FILE"):
            list(reader)
    finally:
        spark.conf.unset("spark.sql.files.openCostInBytes")
    assert sorted(rows(spark, sales)) == sorted((i, -2, i % 4) for i in range(20))


def test_orphan_staging_is_removed_only_when_old(spark, sales):
    root = location(spark, sales)
    stale_id = (datetime.now(UTC) - timedelta(hours=3)).strftime("%Y%m%d%H%M%S") + "_deadbeef"
    fresh_id = datetime.now(UTC).strftime("%Y%m%d%H%M%S") + "_0badcafe"
    for merge_id in (stale_id, fresh_id):
        d = Path(root.removeprefix("file:")) / f"_merge_{merge_id}" / "p=1"
        d.mkdir(parents=True)
        (d / "part-0.parquet").write_bytes(b"x" * 100)
    before = snapshot(spark, sales)
    result = vacuum(spark, sales, retain_hours=0)
    # a merge that started minutes ago may still be writing its staging: kept for an hour
    assert result.removed == [f"{root}/_merge_{stale_id}"] and result.files == 1 and result.bytes == 100
    assert on_disk(f"{root}/_merge_{fresh_id}")
    assert snapshot(spark, sales) == before


def test_merge_whose_staging_was_vacuumed_fails_with_nothing_written(spark, sales, monkeypatch):
    before = snapshot(spark, sales)
    real = faults.reached

    def vacuum_meanwhile(point):
        if point == "after_staging":
            stage = next(p for p in Path(location(spark, sales).removeprefix("file:")).glob("_merge_*"))
            files.remove(str(stage))
        real(point)

    monkeypatch.setattr(faults, "reached", vacuum_meanwhile)
    with pytest.raises(ConflictError, match="staged data of this merge .* was removed"):
        merge(spark, f"UPDATE {sales} SET v = 0 WHERE p = 3")
    assert snapshot(spark, sales) == before


@pytest.mark.object_store
@pytest.mark.object_store_ci
def test_rollback_undoes_a_merge_and_the_later_ones_and_can_itself_be_undone(spark, sales):
    before = rows(spark, sales)
    a = merge(
        spark,
        f"""MERGE INTO {sales} t USING (SELECT 1 AS id, 0 AS v, 1 AS p UNION ALL SELECT 99, 99, 9) s
        ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *""",
    )
    merge(spark, f"DELETE FROM {sales} WHERE p = 2")
    # an append into p=1, which A rewrote: rolling back to before A removes its row too
    append(spark, sales, "100, 100, 1")
    after = rows(spark, sales)
    version = props(spark, sales)["spark_merge.version"]
    entry = rollback(spark, sales, a.merge_id)
    assert rows(spark, sales) == before
    assert rows(spark, f"(SELECT * FROM {sales} WHERE p = 9)") == []  # created by A: emptied
    assert int(props(spark, sales)["spark_merge.version"]) == int(version) + 1
    assert len(entry["rolled_back"]) == 3 and entry["kind"] == "rollback"
    assert [e["kind"] for e in history_of(spark, sales)][0] == "rollback"
    rollback(spark, sales, entry["merge_id"])
    assert rows(spark, sales) == after
    merge(spark, f"UPDATE {sales} SET v = 7 WHERE id = 0")  # the table still takes merges
    assert rows(spark, f"(SELECT v FROM {sales} WHERE id = 0)") == [(7,)]


def test_rollback_refusals_change_nothing(spark, sales):
    a = merge(spark, f"UPDATE {sales} SET v = 1 WHERE p = 1")
    append(spark, sales, "100, 100, 0")  # appended in place to p=0, which A did not rewrite
    before = snapshot(spark, sales)
    with pytest.raises(UnsupportedError, match=r"appended rows to p=0 in place"):
        rollback(spark, sales, a.merge_id)
    with pytest.raises(SpecError, match="no merge nope"):
        rollback(spark, sales, "nope")
    assert snapshot(spark, sales) == before
    # a partition moved by something other than spark-merge after the merge to undo
    c = merge(spark, f"UPDATE {sales} SET v = 2 WHERE p = 3")
    elsewhere = f"{location(spark, sales)}/_moved"
    spark.sql(f"INSERT OVERWRITE DIRECTORY '{elsewhere}' USING parquet SELECT id, v FROM {sales} WHERE p = 3")
    spark.sql(f"ALTER TABLE {sales} PARTITION (p = 3) SET LOCATION '{elsewhere}'")
    moved = snapshot(spark, sales)
    with pytest.raises(ConflictError, match="changed outside spark-merge"):
        rollback(spark, sales, c.merge_id)
    assert snapshot(spark, sales) == moved


def history_of(spark, table):
    from merge_core import history

    return history(spark, table)


def test_cli_vacuum_and_rollback(spark, sales, capsys):
    before = rows(spark, sales)
    a = merge(spark, f"UPDATE {sales} SET v = 5 WHERE p = 0")
    assert main(["vacuum", sales, "--retain", "0", "--dry-run", "-q"]) == 0
    out = capsys.readouterr().out
    assert "would remove" in out and "/p=0" in out
    assert on_disk(f"{location(spark, sales)}/p=0")
    assert main(["rollback", sales, "--to", a.merge_id, "-q"]) == 0
    assert "rolled back" in capsys.readouterr().out and rows(spark, sales) == before
    assert main(["rollback", sales, "--to", "nope", "-q"]) == 2
    assert "no merge nope" in capsys.readouterr().err


def test_vacuum_keeps_the_root_files_of_an_unpartitioned_table_rolled_back_to_them(spark, db):
    """The root was replaced long ago (by the merge) and is read again (after the rollback): in use."""
    t = f"{db}.flat_back"
    spark.sql(f"CREATE TABLE {t} USING parquet AS SELECT CAST(id AS INT) AS id FROM range(10)")
    root = location(spark, t)
    before = rows(spark, t)
    a = merge(spark, f"DELETE FROM {t} WHERE id < 3")
    rollback(spark, t, a.merge_id)
    assert location(spark, t) == root
    result = vacuum(spark, t, retain_hours=0, canonicalize=False)
    assert result.removed == [f"{root}/_merge_{a.merge_id}"]
    spark.sql(f"REFRESH TABLE {t}")
    assert rows(spark, t) == before
