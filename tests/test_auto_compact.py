"""The table's auto compaction (table property spark_merge.auto_compact.min_files): a merge that
rewrites a partition holding that many small files folds them into the partition's new files, in the
same journaled commit as the merge's own changes. So the merge's crash safety, rollback, vacuum and
readers hold for the folded files too; these tests check each of them on a fold."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from merge_core import MergeError, explain, history, merge, rollback, vacuum
from merge_core.common import macros
from merge_core.spark import metastore
from merge_core.spark.catalog import describe_table
from merge_core.spark.host import SparkHost

from .conftest import location, rows, snapshot
from .test_readers import read_during_merges, versions

SMALL_FILES = 6  # INSERT statements: each adds one file to every partition


def _table(spark, name: str, partitioned: bool = True, policy: str | None = "4") -> str:
    """Three partitions (p = 0, 1, 2) of SMALL_FILES small files each (unpartitioned: SMALL_FILES files)."""
    spark.sql(f"CREATE TABLE {name} (id INT, v INT, p INT) USING parquet {'PARTITIONED BY (p)' if partitioned else ''}")
    for i in range(SMALL_FILES):
        values = ", ".join(f"({10 * i + p}, {i}, {p})" for p in range(3))
        spark.sql(f"INSERT INTO {name} SELECT /*+ COALESCE(1) */ * FROM VALUES {values} AS v(id, v, p)")
    if policy is not None:
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('spark_merge.auto_compact.min_files' = '{policy}')")
    return name


def files_by_partition(spark, table: str) -> dict[int | None, int]:
    """How many data files each partition's rows are read from now."""
    found = spark.sql(f"SELECT DISTINCT p, _metadata.file_path FROM {table}").collect()
    return dict(Counter(r[0] for r in found))


UPSERT = (
    "MERGE INTO {t} t USING (SELECT 1 AS id, 100 AS v, 1 AS p UNION ALL SELECT 99, 99, 2) s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
)


def test_a_merge_folds_the_small_files_of_the_partitions_it_rewrites_and_no_others(spark, db):
    folding, plain = _table(spark, f"{db}.folding"), _table(spark, f"{db}.plain", policy=None)
    root = location(spark, folding).removeprefix("file:")
    before = rows(spark, folding, "id")
    # explain names the policy (which files it folds is known once the write measures the partitions)
    assert "auto compaction (spark_merge.auto_compact.min_files = 4)" in explain(
        spark, UPSERT.format(t=folding), verbose=True
    )
    assert "auto compaction" not in explain(spark, UPSERT.format(t=plain), verbose=True)

    folded = merge(spark, UPSERT.format(t=folding))
    carried = merge(spark, UPSERT.format(t=plain))

    # the same rows either way; only the files differ
    assert rows(spark, folding, "id") == rows(spark, plain, "id")
    assert files_by_partition(spark, plain) == {0: SMALL_FILES, 1: SMALL_FILES, 2: SMALL_FILES + 1}
    assert files_by_partition(spark, folding) == {0: SMALL_FILES, 1: 1, 2: 1}  # p = 0 was not rewritten
    assert folded.metrics["numTargetFilesCompacted"] == 2 * SMALL_FILES
    assert carried.metrics["numTargetFilesCompacted"] == 0
    assert (
        folded.metrics["numTargetFilesCarried"] == 0 and carried.metrics["numTargetFilesCarried"] == 2 * SMALL_FILES - 1
    )
    # the folded rows are copied: what a merge of whole partitions would have counted
    assert folded.metrics["numTargetRowsCopied"] == 2 * SMALL_FILES - 1
    assert folded.metrics["numTargetFilesRemoved"] == 2 * SMALL_FILES
    # a reader of the directory still reads the version before (the new files are under _merge_<id>)
    by_path = spark.read.parquet(root).select("id", "v", "p").orderBy("id").collect()
    assert [tuple(r) for r in by_path] == before

    # one file now: below the policy, so the next merge carries as usual
    again = merge(spark, f"UPDATE {folding} SET v = -1 WHERE id = 1")
    assert again.metrics["numTargetFilesCompacted"] == 0
    assert files_by_partition(spark, folding)[1] == 1


def test_an_unpartitioned_table_folds_its_small_files_and_carries_its_large_one(spark, db):
    t = _table(spark, f"{db}.flat", partitioned=False, policy="3")
    spark.sql(f"INSERT INTO {t} SELECT /*+ COALESCE(1) */ CAST(id + 1000 AS INT), 0, 0 FROM range(5000)")
    large = max(Path(f.removeprefix("file:")).stat().st_size for f in spark.table(t).inputFiles())
    # a file is small below the size: the large one is not, and is carried as it is
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.auto_compact.small_file_bytes' = '{large}')")

    result = merge(spark, f"UPDATE {t} SET v = v + 1 WHERE id = 0")
    assert result.metrics["numTargetFilesCompacted"] == SMALL_FILES
    assert result.metrics["numTargetFilesCarried"] == 1
    assert len(spark.table(t).inputFiles()) == 2  # the large file, and one new file of the others' rows
    assert rows(spark, t, "id")[0] == (0, 1, 0) and spark.table(t).count() == 3 * SMALL_FILES + 5000


def scanned_files(spark, sql: str) -> tuple[int, int]:
    """(files, bytes) the scan of ``sql`` read, from its scan node's metrics (adaptive execution off,
    so the executed plan is the one that ran)."""
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        df = spark.sql(sql)
        df.collect()
        nodes, scans = [df._jdf.queryExecution().executedPlan()], []
        while nodes:
            node = nodes.pop()
            scans += [node] if node.nodeName().startswith("Scan") else []
            children = node.children().iterator()
            while children.hasNext():
                nodes.append(children.next())
        [scan] = scans
        return scan.metrics().apply("numFiles").value(), scan.metrics().apply("filesSize").value()
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")


def test_the_rewrite_reads_the_changed_files_and_the_small_files_it_folds_not_the_large_ones(spark, db):
    """Spark's file index skips files only by a filter that names nothing but file metadata: the
    rewrite's filter (rewrite_filter) is shaped so, and the large file of a folded partition is not read."""
    t = _table(spark, f"{db}.pruned")
    spark.sql(f"INSERT INTO {t} SELECT /*+ COALESCE(1) */ id, 0, 1 FROM range(100, 200100)")  # one large file in p = 1
    table = describe_table(spark, [db, "pruned"])
    sizes = {
        r[0]: r[1] for r in spark.sql(f"SELECT DISTINCT _metadata.file_path, _metadata.file_size FROM {t}").collect()
    }
    large = max(sizes.values())
    changed = next(f for f in sizes if "p=2" in f)
    fold = {"below": 100_000, "partitions": [{"p": "1"}]}
    assert large > fold["below"] > max(s for s in sizes.values() if s != large)
    where = macros.render("rewrite_filter", table, [{"p": "1"}, {"p": "2"}], [changed], fold)
    files, read = scanned_files(spark, f"SELECT count(*) FROM {t} WHERE {where}")
    assert files == 2 * SMALL_FILES and read < large, (files, read)  # the small files of p = 1 and 2, not the large
    # and the rows are the changed file's and those of p = 1's small files
    [[got]] = spark.sql(f"SELECT count(*) FROM {t} WHERE {where}").collect()
    expected = f"_metadata.file_path = '{changed}' OR (p = 1 AND _metadata.file_size < 100000)"
    assert got == spark.sql(f"SELECT count(*) FROM {t} WHERE {expected}").collect()[0][0] == SMALL_FILES + 1


@pytest.mark.parametrize("value", ["many", "1"])
def test_a_bad_policy_fails_the_merge_before_anything_is_touched(spark, db, value):
    t = _table(spark, f"{db}.bad", policy=value)
    before = snapshot(spark, t)
    plan = explain(spark, f"UPDATE {t} SET v = 0 WHERE id = 1", verbose=True)
    assert "auto compaction: the run stops here, before it writes: table property" in plan
    with pytest.raises(MergeError, match="spark_merge.auto_compact.min_files must be a whole number of at least 2"):
        merge(spark, f"UPDATE {t} SET v = 0 WHERE id = 1")
    assert snapshot(spark, t) == before
    assert not [p for p in Path(location(spark, t).removeprefix("file:")).iterdir() if p.name.startswith("_merge_")]


def test_a_fold_cut_short_between_repoints_is_finished_and_can_be_rolled_back_and_vacuumed(spark, db, monkeypatch):
    t = _table(spark, f"{db}.cut")
    before = rows(spark, t, "id")

    def crash_after_first_repoint(self, table, merge_id, repoints, *args, **kwargs):
        metastore.repoint(self.spark, table, repoints[:1])
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(SparkHost, "repoint", crash_after_first_repoint)
    with pytest.raises(KeyboardInterrupt):
        merge(spark, UPSERT.format(t=t))
    monkeypatch.undo()
    # one partition at its new, folded version, the other at its old one
    assert sorted(files_by_partition(spark, t).values()) == [1, SMALL_FILES, SMALL_FILES]

    # the next merge finishes the commit first (the journal), then runs
    merge(spark, f"UPDATE {t} SET v = -1 WHERE id = 0")
    assert files_by_partition(spark, t) == {0: 1, 1: 1, 2: 1}
    after = rows(spark, t, "id")
    assert (1, 100, 1) in after and (99, 99, 2) in after and (0, -1, 0) in after and len(after) == len(before) + 1

    # back to before the fold: every small file is read again, rows as they were
    fold_id = history(spark, t)[1]["merge_id"]
    rollback(spark, t, fold_id)
    assert rows(spark, t, "id") == before
    assert files_by_partition(spark, t) == {0: SMALL_FILES, 1: SMALL_FILES, 2: SMALL_FILES}

    # the rollback is itself undone: the folded version again, and vacuum keeps what it reads
    rollback(spark, t, history(spark, t)[0]["merge_id"])
    assert rows(spark, t, "id") == after
    vacuum(spark, t, retain_hours=0)
    spark.catalog.refreshTable(t)
    assert rows(spark, t, "id") == after
    assert files_by_partition(spark, t) == {0: 1, 1: 1, 2: 1}


def test_a_reader_during_folding_merges_sees_one_whole_version(spark, db):
    """test_readers.py's reader, on a table whose every partition holds five one-row files: the first
    merge folds all twenty partitions, yet no read mixes versions or misses a row."""
    t = f"{db}.read"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p INT) USING parquet PARTITIONED BY (p)")
    for i in range(5):  # each INSERT adds one file to every partition
        spark.sql(
            f"INSERT INTO {t} SELECT /*+ COALESCE(1) */ CAST(id AS INT), 0, CAST(id % 20 AS INT) "
            f"FROM range({20 * i}, {20 * (i + 1)})"
        )
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.auto_compact.min_files' = '2')")
    assert set(files_by_partition(spark, t).values()) == {5}

    reads = read_during_merges(spark, t)

    assert set(files_by_partition(spark, t).values()) == {1}  # folded
    assert len(reads) > 1  # the reader really ran during the commits
    torn = [r for r in reads if len(versions(r)) != 1 or sum(s for _, s, _ in r) != 0]
    assert torn == [], f"{len(torn)} of {len(reads)} reads mixed versions: {torn[:2]}"
    assert all(len(r) == 20 and all(n == 5 for _, _, n in r) for r in reads)
