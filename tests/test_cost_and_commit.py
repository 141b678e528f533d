"""Cost follows the change (only touched partitions are rewritten) and the commit is journaled."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from merge_core import merge
from merge_core.common import macros
from merge_core.spark import files, metastore
from merge_core.spark.host import SparkHost

from .conftest import location, rows, tree


def count(spark, fn) -> dict:
    """fn()'s Spark jobs and statements, counted as bench/counts.py counts them (bench/tally.py)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from tally import count as tally

    return tally(spark, fn)


def files_by_partition(spark, table):
    return {
        r[0]: sorted(r[1])
        for r in spark.sql(f"SELECT dt, collect_set(_metadata.file_path) FROM {table} GROUP BY dt").collect()
    }


@pytest.fixture
def fifty(spark, db):
    t = f"{db}.fifty"
    spark.sql(
        f"CREATE TABLE {t} USING parquet PARTITIONED BY (dt) "
        f"AS SELECT id, concat('c', id) AS name, CAST(id AS DOUBLE) AS amount, CAST(id % 50 AS INT) AS dt FROM range(2000)"
    )
    return t


def test_merge_touching_two_of_fifty_partitions_rewrites_exactly_two(spark, fifty):
    """Two partitions get a new version; inside them only the file holding the updated row is
    rewritten, the others are carried over (hard links), and the insert is a new file."""
    before = files_by_partition(spark, fifty)
    [(file_of_3, rows_in_it)] = spark.sql(
        f"SELECT _metadata.file_path, count(*) FROM {fifty} WHERE _metadata.file_path IN "
        f"(SELECT _metadata.file_path FROM {fifty} WHERE id = 3) GROUP BY 1"
    ).collect()
    root = location(spark, fifty)
    dirs_before = tree(root)
    assert len(before) == 50
    r = merge(
        spark,
        f"""MERGE INTO {fifty} t
        USING (SELECT 3 AS id, 'changed' AS name UNION ALL SELECT 5007, 'new') s
        ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET name = s.name
        WHEN NOT MATCHED THEN INSERT (id, name, amount, dt) VALUES (s.id, s.name, 0, 7)""",
    )
    after = files_by_partition(spark, fifty)
    changed = sorted(dt for dt in before if before[dt] != after[dt])
    assert changed == [3, 7]
    assert r.metrics["numTargetPartitionsRewritten"] == 2
    assert sorted(p["dt"] for p in r.partitions) == ["3", "7"]
    m = r.metrics
    assert m["numTargetFilesRemoved"] == 1 and m["numTargetFilesCarried"] == len(before[3]) + len(before[7]) - 1
    assert m["numTargetRowsCopied"] == rows_in_it - 1  # rewritten with the updated row, unchanged
    assert m["numOutputRows"] == rows_in_it + 1 and m["numTargetRowsCarried"] == 2 * 40 - rows_in_it
    assert file_of_3 not in after[3] and len(after[3]) == len(before[3])
    # the new files live in the merge's own directory; every old file is still on disk
    assert all(f"/_merge_{r.merge_id}/dt=" in f for dt in (3, 7) for f in after[dt])
    assert dirs_before <= tree(root)
    assert rows(spark, f"(SELECT name FROM {fifty} WHERE id IN (3, 5007))") == [("changed",), ("new",)]


def test_interrupted_commit_rolls_forward_at_next_begin(spark, fifty, monkeypatch):
    """A crash after the journal and the first repoint: the next merge finishes the commit first."""

    def crash_after_first_repoint(self, table, merge_id, repoints, *args, **kwargs):
        self.spark.sql(macros.fill_list("repoint_statements", table, repoints)[0])
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(SparkHost, "repoint", crash_after_first_repoint)
    with pytest.raises(KeyboardInterrupt):
        merge(spark, f"UPDATE {fifty} SET name = 'x' WHERE dt IN (1, 2)")
    monkeypatch.undo()
    half = rows(spark, f"(SELECT dt, count_if(name = 'x') FROM {fifty} WHERE dt IN (1, 2) GROUP BY dt)")
    assert sorted(half) == [(1, 40), (2, 0)]  # the crash left partition 2 at its old version
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {fifty}").collect()}
    assert props["spark_merge.journal.parts"] != "0"

    merge(spark, f"UPDATE {fifty} SET amount = -1 WHERE id = 0")  # begin replays the journal
    done = rows(spark, f"(SELECT dt, count_if(name = 'x') FROM {fifty} WHERE dt IN (1, 2) GROUP BY dt)")
    assert sorted(done) == [(1, 40), (2, 40)]
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {fifty}").collect()}
    assert props["spark_merge.journal.parts"] == "0"
    assert not any(v for k, v in props.items() if k.startswith("spark_merge.journal.") and k[-1].isdigit())


def test_the_commit_clears_every_part_of_its_journal_and_the_parts_a_cut_short_clean_up_left(
    spark, fifty, monkeypatch, traced
):
    """The statement that marks the journal done also empties its text, naming the keys without
    describing the table again: those the table held text in when the commit described it (here a
    part left by an older release's clean-up that never ran) and every part of the journal this
    commit wrote (a merge of 50 partitions: several parts). One statement after the history entry."""

    def journal_keys() -> list[str]:
        props = spark.sql(f"SHOW TBLPROPERTIES {fifty}").collect()
        return sorted(k for k, v in props if k.startswith("spark_merge.journal.") and k[-1].isdigit() and v)

    spark.sql(f"ALTER TABLE {fifty} SET TBLPROPERTIES ('spark_merge.journal.7' = 'left over')")
    journaled = []
    original = SparkHost.journal

    def journal(self, sql):
        journaled.append(sql)
        return original(self, sql)

    monkeypatch.setattr(SparkHost, "journal", journal)
    r = merge(spark, f"UPDATE {fifty} SET name = 'x'")
    assert r.metrics["numTargetPartitionsRewritten"] == 50
    parts = int(journaled[0].split("'spark_merge.journal.parts' = '")[1].split("'")[0])
    assert parts >= 3, journaled[0][:300]  # the journal took several parts
    assert journal_keys() == []
    assert rows(spark, f"(SELECT count_if(name = 'x') FROM {fifty})") == [(2000,)]
    kinds = [kind for kind, _ in traced]
    after = [text.split(" (")[0] for kind, text in traced[kinds.index("history_write") :] if kind == "sql"]
    relation = ".".join(f"`{part}`" for part in r.target.split("."))
    assert [a for a in after if not a.startswith("DROP VIEW")] == [
        f"ALTER TABLE {relation} SET TBLPROPERTIES",
        f"REFRESH TABLE {relation}",
    ], after


@pytest.mark.parametrize(
    "source",
    ["SELECT id, 'y' AS name FROM range(5)", "SELECT id, concat('y', CAST(rand() * 0 AS INT)) AS name FROM range(5)"],
    ids=["cached", "written_once"],
)
def test_a_merge_leaves_no_cached_data_and_no_view_behind(spark, fifty, source):
    """The clean-up drops the source's view (its cache goes with it: no UNCACHE is issued); a
    non-deterministic source, whose cache Spark would not serve, is dropped as a view before it is
    written once to a table, and that table is dropped too."""
    spark.catalog.clearCache()
    merge(spark, f"MERGE INTO {fifty} t USING ({source}) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name")
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()
    assert not [v for v in spark.sql("SHOW VIEWS LIKE '__sm_*'").collect() if v.isTemporary]
    assert not spark.sql(f"SHOW TABLES IN {fifty.split('.')[0]} LIKE '__sm_*'").collect()
    assert rows(spark, f"(SELECT count_if(name LIKE 'y%') FROM {fifty})") == [(5,)]


def test_journal_whose_staged_data_is_gone_is_discarded(spark, fifty):
    """Never repoint a partition to a directory that does not exist."""
    before = files_by_partition(spark, fifty)
    journal = {
        "merge_id": "ghost",
        "repoints": [
            {
                "partition": {"dt": "4"},
                "location": location(spark, fifty) + "/_merge_ghost/dt=4",
                "old_location": None,
                "exists": True,
            }
        ],
    }
    spark.sql(
        f"ALTER TABLE {fifty} SET TBLPROPERTIES ('spark_merge.journal.parts' = '1', "
        f"'spark_merge.journal.0' = '{json.dumps(journal)}')"
    )
    merge(spark, f"UPDATE {fifty} SET amount = -1 WHERE id = 0")
    after = files_by_partition(spark, fifty)
    assert after[4] == before[4] and after[0] != before[0]
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {fifty}").collect()}
    assert props["spark_merge.journal.parts"] == "0"


def plant_unreadable_name_column(spark, fifty, tmp_path):
    """Replace partition 11's file by one whose `name` column is an INT: reading `name` there fails,
    reading `id` works."""
    part = next(iter(files_by_partition(spark, fifty)[11])).removeprefix("file:")
    spark.sql("SELECT id, 42 AS name, 1.0D AS amount FROM range(11, 2000, 50)").coalesce(1).write.parquet(
        str(tmp_path / "bad")
    )
    [bad] = (tmp_path / "bad").glob("*.parquet")
    for f in Path(part).parent.glob("*.parquet"):
        f.unlink()
    shutil.copy(bad, Path(part).parent / bad.name)
    spark.sql(f"REFRESH TABLE {fifty}")


def test_untouched_partitions_are_read_only_for_the_key_join(spark, fifty, tmp_path):
    """Cost follows the change: the data columns of partitions without a matched row are never read.
    Partition 11's file is replaced by one whose `name` column is an INT: any read of `name` there
    fails, reading `id` works. The merge touches partitions 3 and 7 only, so it must succeed."""
    plant_unreadable_name_column(spark, fifty, tmp_path)
    with pytest.raises(Exception):  # the trap works: a full-width read of partition 11 fails
        spark.sql(f"SELECT max(name) FROM {fifty} WHERE dt = 11").collect()
    r = merge(
        spark,
        f"""MERGE INTO {fifty} t USING (SELECT 3 AS id, 'changed' AS name UNION ALL SELECT 5007, 'new') s
        ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name
        WHEN NOT MATCHED THEN INSERT (id, name, amount, dt) VALUES (s.id, s.name, 0, 7)""",
    )
    assert sorted(p["dt"] for p in r.partitions) == ["3", "7"]
    assert rows(spark, f"(SELECT name FROM {fifty} WHERE id IN (3, 5007))") == [("changed",), ("new",)]


def test_no_matched_partition_scans_no_target_rows_and_inserts(spark, fifty):
    r = merge(
        spark,
        f"""MERGE INTO {fifty} t USING (SELECT 9001 AS id, 'n' AS name) s ON t.id = s.id
        WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (id, name, amount, dt) VALUES (s.id, s.name, 0, 60)""",
    )
    assert r.metrics["numTargetRowsInserted"] == 1 and r.metrics["numTargetRowsDeleted"] == 0
    assert sorted(p["dt"] for p in r.partitions) == ["60"]
    assert spark.table(fifty).count() == 2001


def test_a_dense_key_range_reads_only_partitions_holding_keys_in_range(spark, fifty, tmp_path, caplog):
    """A bigint source key spanning few values: the partitions holding matched rows come from the
    one-pass write's join of the ON columns, which reads only the key and partition columns of the rows
    in the key range (no step of its own), and partition 11 (its data columns unreadable, as above)
    holds no key in range, so the write never reads it."""
    plant_unreadable_name_column(spark, fifty, tmp_path)
    caplog.set_level("INFO", logger="spark_merge")
    r = merge(
        spark,
        f"""MERGE INTO {fifty} t USING (SELECT id, 'changed' AS name FROM range(1000, 1004)) s
        ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name""",
    )
    assert sorted(p["dt"] for p in r.partitions) == ["0", "1", "2", "3"]
    assert any(
        "partitions holding matched rows come from the files the ON columns' join finds" in m for m in caplog.messages
    )
    assert any("file(s) in 4 partition(s) hold a row ON matches" in m for m in caplog.messages)
    assert rows(
        spark, f"(SELECT id, name FROM {fifty} WHERE dt IN (49, 0, 1, 2, 3, 4) AND id BETWEEN 999 AND 1004)"
    ) == [(999, "c999"), (1000, "changed"), (1001, "changed"), (1002, "changed"), (1003, "changed"), (1004, "c1004")]


def test_row_ids_stay_exact_when_the_key_range_skips_row_groups(spark, db, tmp_path):
    """The key range is pushed into the parquet scan, which then skips row groups by their statistics:
    the row ids (file, row index) of the rows read must still be their positions in the file, or the
    rewrite would keep or drop the wrong rows."""
    import pyarrow.parquet as pq

    t = f"{db}.groups"
    spark.sql("SELECT id, concat('v', id) AS v FROM range(200000)").coalesce(1).write.option(
        "parquet.block.size", 256 * 1024
    ).parquet(str(tmp_path / "g"))
    [f] = (tmp_path / "g").glob("*.parquet")
    assert pq.ParquetFile(f).num_row_groups >= 4
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) USING parquet LOCATION '{tmp_path / 'g'}'")
    r = merge(
        spark,
        f"""MERGE INTO {t} t USING (SELECT id, id % 3 = 0 AS gone FROM range(150000, 150300)) s
        ON t.id = s.id WHEN MATCHED AND s.gone THEN DELETE WHEN MATCHED THEN UPDATE SET v = 'new'""",
    )
    assert r.metrics["numTargetRowsDeleted"] == 100 and r.metrics["numTargetRowsUpdated"] == 200
    got = spark.sql(
        f"SELECT count(*), count_if(v = 'new'), count_if(v = concat('v', id)), "
        f"count_if(id BETWEEN 150000 AND 150299 AND id % 3 = 0) FROM {t}"
    ).collect()[0]
    assert tuple(got) == (200000 - 100, 200, 200000 - 300, 0)


def test_a_source_key_of_another_type_matches_as_on_says(spark, fifty):
    """ON t.id = s.id with a string s.id compares as numbers; ranges of the strings ('0100' < '99')
    would say otherwise, so the narrowing is left out and both rows match."""
    r = merge(
        spark,
        f"""MERGE INTO {fifty} t USING (SELECT '0100' AS id UNION ALL SELECT '99') s
        ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = 'hit'""",
    )
    assert r.metrics["numTargetRowsUpdated"] == 2
    assert rows(spark, f"(SELECT id FROM {fifty} WHERE name = 'hit')") == [(99,), (100,)]


def test_the_local_session_lists_partitions_with_one_task_per_core(spark):
    """conftest's session is local[2]: partition listing jobs get 2 tasks, not one per directory."""
    assert spark.conf.get("spark.sql.sources.parallelPartitionDiscovery.parallelism") == "2"


def test_a_cdc_merge_runs_a_bounded_number_of_spark_jobs_and_statements(spark, fifty):
    """Counted, not timed (bench/tally.py, as bench/counts.py and merge_cost.py count): the plan
    fuses the duplicate check, the counts and the touched partitions into one aggregation, and the
    write checks its rows against the plan instead of a separate stale-file join. Bounds at today's counts, so a step
    that adds Spark work fails here and has to say why."""
    sql = (
        f"MERGE INTO {fifty} t USING (SELECT id, id % 7 = 0 AS gone, CAST(id % 50 AS INT) AS dt FROM range(90, 110) "
        f"UNION ALL SELECT id, false, 49 FROM range(5000, 5010)) s ON t.id = s.id "
        "WHEN MATCHED AND s.gone THEN DELETE WHEN MATCHED THEN UPDATE SET name = 'x' "
        "WHEN NOT MATCHED THEN INSERT (id, name, amount, dt) VALUES (s.id, 'new', 0, s.dt)"
    )
    c = count(spark, lambda: merge(spark, sql))
    m = c["result"].metrics
    assert (m["numTargetRowsDeleted"], m["numTargetRowsUpdated"], m["numTargetRowsInserted"]) == (3, 17, 10)
    # bench/counts.py: the source with its statistics, the fused summary (which names the matched
    # partitions) and the staging write, several jobs each (adaptive execution runs one job per
    # query stage). The file statistics before the write and under the lock
    # are the files' listing and footers (host.file_stats): no job; as queries they were 2-3 jobs
    # each (26 jobs). The data statements are the source's statistics, the summary and the staging
    # write, which the Python host writes as files (no catalog table to create and drop: the
    # metastore statements were 11 with it). The metastore statements include the REFRESH TABLE of
    # begin and of the commit under the lock (the files as they are, for dbt's query). Before the
    # fusion: 32. The history record is a file the host writes itself (a Spark job when written by
    # a query). The staged files are listed by the staging write itself. The statements were 22 before
    # the clean-up stopped describing the table again (the journal keys are known) and stopped
    # uncaching the source view it drops (dropping a temporary view uncaches it). The summary's join
    # first semi-joins the target with the broadcast source (one job, the broadcast: 15 before), so its
    # RIGHT join shuffles only the matched target rows, not every row ON could match.
    assert c["jobs"] <= 16, c
    # The metastore statements: the REFRESH of begin, of the check under the lock and after the commit;
    # the journal, the batched repoint, and the done mark (which also empties the journal's text: an
    # UNSET of its own before); the two describes (begin, and under the lock), two DESCRIBE statements
    # each; and the lock's 7 calls (begin's look finds none; the take and its look, 1 + 2; the
    # release's look and drop, 2 + 1).
    assert c["data statements"] <= 3 and c["metastore statements"] <= 17 and c["statements"] <= 20, c
    assert c["file statistics"] == 2, c


def test_a_merge_without_inserts_broadcasts_its_source_once(spark, fifty, monkeypatch):
    """Without a WHEN NOT MATCHED clause the plan's join is INNER: it broadcasts the small source itself,
    with no semi-join before it broadcasting the same source again. Counted (bench/tally.py): the
    broadcasts in the summary's physical plan (the summary as dbt runs it: the host here cannot observe
    its write), and Spark jobs (bounded at today's count); the rows are the merge's."""
    monkeypatch.setattr(SparkHost, "can_observe", lambda self, table, ctx: False)
    plans: list[str] = []
    rows_of = SparkHost.rows

    def summary_rows(self, statement, kind="rows"):
        if kind == "summary":
            plans.append(self.spark.sql(str(statement).strip())._jdf.queryExecution().executedPlan().toString())
        return rows_of(self, statement, kind)

    monkeypatch.setattr(SparkHost, "rows", summary_rows)
    sql = (
        f"MERGE INTO {fifty} t USING (SELECT id, id % 3 = 0 AS gone FROM range(90, 120)) s ON t.id = s.id "
        "WHEN MATCHED AND s.gone THEN DELETE WHEN MATCHED THEN UPDATE SET name = 'x'"
    )
    c = count(spark, lambda: merge(spark, sql))
    m = c["result"].metrics
    assert (m["numTargetRowsDeleted"], m["numTargetRowsUpdated"], m["numTargetRowsInserted"]) == (10, 20, 0)
    assert rows(spark, f"(SELECT count(*) FROM {fifty} WHERE id BETWEEN 90 AND 119 AND name = 'x')") == [(20,)]
    [plan] = plans
    assert plan.count("BroadcastExchange") == 1 and "LeftSemi" not in plan, plan
    assert c["jobs"] <= 10, c


def test_a_merge_rewriting_many_partitions_lists_them_in_one_catalog_call(spark, db):
    """From 64 partitions and a tenth of the table, the commit finds the partitions it moves in one
    listing of the table, not a call each: Hive client calls stay flat as the partitions grow. Two
    partition columns, one of them NULL in some partitions (the catalog's default partition name),
    and an inserted row in a new partition beside them: every rewritten partition is moved, the new
    one added, and the rows read back are the merge's."""
    t = f"{db}.wide"
    spark.sql(
        f"CREATE TABLE {t} USING parquet PARTITIONED BY (p, q) AS SELECT id, 0 AS v, CAST(id % 40 AS INT) AS p, "
        f"CASE WHEN id DIV 40 % 2 = 0 THEN NULL ELSE 'q1' END AS q FROM range(400)"
    )
    calls = spark._jvm.org.apache.spark.metrics.source.HiveCatalogMetrics.METRIC_HIVE_CLIENT_CALLS()

    def hive_calls(statement: str):
        n0, reads0 = calls.getCount(), metastore.reads
        result = merge(spark, statement)
        return result, calls.getCount() - n0, metastore.reads - reads0

    _, one, one_reads = hive_calls(
        f"MERGE INTO {t} x USING (SELECT 100 AS id) s ON x.id = s.id WHEN MATCHED THEN UPDATE SET v = 0"
    )
    before = {r[0] for r in spark.sql(f"SELECT DISTINCT _metadata.file_path FROM {t}").collect()}
    r, many, many_reads = hive_calls(
        f"""MERGE INTO {t} x USING (SELECT id FROM range(80) UNION ALL SELECT 1000) s ON x.id = s.id
        WHEN MATCHED THEN UPDATE SET v = 1
        WHEN NOT MATCHED THEN INSERT (id, v, p, q) VALUES (s.id, 2, 99, NULL)"""
    )
    # a call or two per partition would add 80 to 160 to the one-partition merge's calls
    assert many - one < 40, f"{many} Hive client calls for 81 partitions, {one} for one"
    # the catalog is read twice per merge: the partitions' files before staging, and again under the
    # commit lock, where the repoint that follows moves the partitions as that read found them (one
    # lookup each time; for 81 partitions a count, the stored column names and one listing); and where
    # ON names no partition column (the second merge), once before planning: every partition, for the
    # key ranges of its files (a count, the stored column names, the listing); and the one-pass write
    # (the second merge) reads the new partition its inserted row went to after writing it (a lookup)
    assert (one_reads, many_reads) == (2, 6 + 3 + 1)
    assert r.metrics["numTargetPartitionsRewritten"] == 81 and r.metrics["numTargetRowsUpdated"] == 80
    assert sorted(rows(spark, f"(SELECT v, count(*) FROM {t} GROUP BY v)")) == [(0, 320), (1, 80), (2, 1)]
    assert rows(spark, f"(SELECT p, q FROM {t} WHERE id IN (0, 41, 1000))") == [(0, None), (1, "q1"), (99, None)]
    after = {r[0] for r in spark.sql(f"SELECT DISTINCT _metadata.file_path FROM {t}").collect()}
    # every partition was repointed into this merge's directory (rewritten files and carried ones)
    assert before - after and all(f"/_merge_{r.merge_id}/" in f for f in after)


def test_a_merge_rewriting_a_few_partitions_of_a_wide_table_finds_them_by_one_filter(spark, db):
    """From 2 to 63 partitions, the commit finds the partitions it moves by one filter on their
    values (the catalog's listPartitionsByFilter), not a lookup each: catalog reads stay flat from
    one rewritten partition to thirty. Three partition columns, an INT, a DATE and a STRING with a
    quote; the partitions with a NULL value are looked up on their own (no metastore filters IS
    NULL), and a new partition is added beside the moved ones. The rows read back are the merge's.
    A merge of one partition fetches that partition from the metastore, not the table's 200 (the
    validation probes plan the target with no partition)."""
    t = f"{db}.wide_few"
    spark.sql(
        f"CREATE TABLE {t} USING parquet PARTITIONED BY (p, d, q) AS SELECT id, 0 AS v, CAST(id % 200 AS INT) AS p, "
        f"date_add(DATE'2026-01-01', CAST(id % 200 AS INT)) AS d, "
        f"CASE WHEN id % 200 = 7 THEN NULL ELSE 'it''s' END AS q FROM range(400)"
    )
    metrics = spark._jvm.org.apache.spark.metrics.source.HiveCatalogMetrics
    calls, fetched = metrics.METRIC_HIVE_CLIENT_CALLS(), metrics.METRIC_PARTITIONS_FETCHED()

    def counted(statement: str):
        n0, reads0, fetched0 = calls.getCount(), metastore.reads, fetched.getCount()
        result = merge(spark, statement)
        return result, calls.getCount() - n0, metastore.reads - reads0, fetched.getCount() - fetched0

    _, one, one_reads, one_fetched = counted(
        f"MERGE INTO {t} x USING (SELECT id, CAST(id AS INT) AS p FROM range(100, 101)) s ON x.id = s.id AND x.p = s.p "
        "WHEN MATCHED THEN UPDATE SET v = x.v * s.p * 0"
    )
    r, many, many_reads, _ = counted(
        f"""MERGE INTO {t} x USING (SELECT id FROM range(30) UNION ALL SELECT 1000) s ON x.id = s.id
        WHEN MATCHED THEN UPDATE SET v = 1
        WHEN NOT MATCHED THEN INSERT (id, v, p, d, q) VALUES (s.id, 2, 1000, DATE'2030-01-01', 'new')"""
    )
    # ON names the partition: the metastore sends the partition the merge reads and moves, not the
    # table's 200, not for the validation probes either (a filter it cannot evaluate sends them all)
    assert one_fetched < 10, f"{one_fetched} partitions fetched for a merge of one"
    # 31 partitions (one with a NULL, one new): the filter, and one lookup of the NULL one, each
    # time the catalog is read (before staging, and under the commit lock); a lookup each would be 62.
    # ON names no partition column in the second merge: + the listing of every partition for the key
    # ranges of its files (a count, the stored column names, the listing); the one-pass write (the second
    # merge) reads the new partition its inserted row went to after writing it (a lookup)
    assert (one_reads, many_reads) == (2, 4 + 3 + 1)
    # (a lookup each would add 62; the one-pass write's read of the new partition adds a few)
    assert many - one < 40, f"{many} Hive client calls for 31 partitions, {one} for one"
    assert r.metrics["numTargetPartitionsRewritten"] == 31 and r.metrics["numTargetRowsUpdated"] == 30
    assert sorted(rows(spark, f"(SELECT v, count(*) FROM {t} GROUP BY v)")) == [(0, 370), (1, 30), (2, 1)]
    assert rows(spark, f"(SELECT CAST(d AS STRING), q FROM {t} WHERE id IN (3, 7, 1000))") == [
        ("2026-01-04", "it's"),
        ("2026-01-08", None),
        ("2030-01-01", "new"),
    ]
    moved = {
        r[0] for r in spark.sql(f"SELECT DISTINCT _metadata.file_path FROM {t} WHERE id < 30 OR id = 1000").collect()
    }
    assert all(f"/_merge_{r.merge_id}/" in f for f in moved), moved


ODD_VALUES = ["it's", "a b", "50%", "k=v", "a/b", "é", "x:y", "#1", None]


def _odd_partitions(spark, t: str) -> None:
    """70 partitions of a STRING column: 61 plain values and 9 that partition directories escape,
    URIs quote, or the catalog stores apart (a quote, a space, %, =, /, non-ASCII, :, #, NULL)."""
    values = ", ".join("NULL" if v is None else "'" + v.replace("'", "''") + "'" for v in ODD_VALUES)
    spark.sql(
        f"CREATE TABLE {t} USING parquet PARTITIONED BY (q) AS SELECT id, 0 AS v, CASE WHEN id < {len(ODD_VALUES)} "
        f"THEN try_element_at(array({values}), CAST(id AS INT) + 1) ELSE concat('v', id) END AS q FROM range(70)"
    )


def test_the_commit_reads_and_moves_partitions_as_json_as_it_does_call_by_call(spark, db, monkeypatch):
    """The classic commit reads the catalog's partitions and moves them to their new locations through
    one JSON document (Spark's Jackson mapper) instead of py4j calls per partition. Two tables of the
    same 70 partitions, whose values partition directories escape and URIs quote, take the same three
    merges, one table through JSON and the other call by call: a merge of every partition (the
    catalog listed), of the 9 odd ones (one filter, the NULL one looked up) and of one (a lookup).
    Both end with the same rows, each partition in the same directory of its merge, and the same
    storage format in the catalog; the JSON table never copies a partition call by call. So do two
    more tables whose JVM refuses the JSON, on reading the partitions or on writing their copies:
    the commit falls back to the calls (a refusal under the lock must not leave the commit unfinished)."""
    merges = [
        "UPDATE {t} SET v = v + 1",
        "UPDATE {t} SET v = v + 10 WHERE q IS NULL OR q NOT LIKE 'v%'",
        "UPDATE {t} SET v = v + 100 WHERE q = 'k=v'",
    ]
    ends, refused = {}, []

    def refuse(*args, **kwargs):
        refused.append(way)
        raise RuntimeError("this JVM's mapper cannot write a partition")

    for way in ("json", "calls", "read", "copy"):
        t = f"{db}.odd_{way}"
        _odd_partitions(spark, t)
        with monkeypatch.context() as m:
            if way == "json":
                m.setattr(metastore, "_Copier", None)  # calling it would fail the merge
            elif way == "calls":
                m.setattr(metastore, "_session_handles", lambda spark: (metastore._Handles(spark), None))
            else:
                m.setattr(metastore._Json, "read" if way == "read" else "partitions", refuse)
            for statement in merges:
                merge(spark, statement.format(t=t))
        catalog, j = metastore._catalog(spark), metastore._Handles(spark)
        listed = metastore._Json(j, spark).read(catalog.listPartitions(db, f"odd_{way}", j.option.empty()))
        assert len(listed) == 70
        ends[way] = (
            rows(spark, t, "id"),
            sorted(
                (
                    str(p["spec"]),
                    p["storage"]["locationUri"].split("/_merge_", 1)[1].split("/", 1)[1],
                    [p["storage"][k] for k in ("inputFormat", "outputFormat", "serde")],
                )
                for p in listed
            ),
        )
    assert ends["json"] == ends["calls"] == ends["read"] == ends["copy"]
    assert "read" in refused and "copy" in refused
    assert {q: v for _, v, q in ends["json"][0] if q in ODD_VALUES} == {
        q: 111 if q == "k=v" else 11 for q in ODD_VALUES
    }
    for q in ODD_VALUES:
        spec = "q IS NULL" if q is None else "q = '" + q.replace("'", "''") + "'"
        assert rows(spark, f"(SELECT count(*) FROM {db}.odd_json WHERE {spec})") == [(1,)]


@pytest.mark.parametrize(
    "location",
    [
        "file:/tmp/w/t/_merge_1/q=v1",
        "hdfs://nn.example:8020/w/t/q=1/d=2026-01-01",
        "s3a://bucket/w/t/p=-1",
        "file:/tmp/w/t/q=a b",
        "file:/tmp/w/t/q=50%25",
        "file:/tmp/w/t/q=é",
        "file:/tmp/w/./t",
        "file:/tmp/w//t",
        "file:/tmp/w/t/",
    ],
)
def test_a_location_turns_into_its_uri_and_back_as_the_catalog_turns_it(spark, location):
    """_Json writes and reads a partition's location as its URI's text; where it does that in Python
    (the two texts are the same), it must agree with the catalog's own conversions (CatalogUtils)."""
    utils = spark._jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils
    js = metastore._Json(metastore._Handles(spark), spark)
    uri = str(utils.stringToURI(location).toString())
    moved = js.with_location({"storage": {"locationUri": "file:/x"}}, location)
    assert moved["storage"]["locationUri"] == uri
    assert js.location(moved) == str(utils.URIToString(utils.stringToURI(location)))


@pytest.mark.parametrize(
    "name", ["plain", "50%25", "a%20b%2Fc", "%C3%A9", "%7e%7E", "100%", "%%41", "%+1", "%-0", "%4g", "%\uff21\uff21"]
)
def test_a_partition_name_is_unescaped_as_spark_unescapes_it(spark, name):
    """The staged write's partition directories are read back by name; Python's decoding
    (files.unescape_path_name, which hands Spark the names it does not decode itself) must give what
    Spark's ExternalCatalogUtils.unescapePathName gives for every name, the odd ones included."""
    utils = spark._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
    spark_says = str(utils.unescapePathName(name))
    assert files.unescape_path_name(name, lambda text: str(utils.unescapePathName(text))) == spark_says
    assert files.unescape_path_name(name, lambda text: "<spark>") in (spark_says, "<spark>")


@pytest.mark.parametrize("slices, rebalanced", [(1, False), (4, False), (9, True)])
def test_an_append_writes_a_narrow_source_as_read_and_rebalances_a_wide_one(spark, db, traced, slices, rebalanced):
    """An insert-only merge into an unpartitioned table from a source read in at most append_slices()
    partitions writes its rows as read (no shuffle; at most that many files); a wider source's rows
    are rebalanced (AQE then writes these few rows as one file)."""
    t = f"{db}.appended"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'old')")
    source = f"(SELECT /*+ REPARTITION({slices}) */ id + 100 AS id, 'new' AS v FROM range(36)) s"
    r = merge(spark, f"MERGE INTO {t} t USING {source} ON t.id = s.id WHEN NOT MATCHED THEN INSERT *")
    [insert] = [text for k, text in traced if k == "sql" and text.startswith("INSERT INTO")]
    [(added,)] = spark.sql(f"SELECT count(DISTINCT _metadata.file_path) FROM {t} WHERE v = 'new'").collect()
    assert ("REBALANCE" in insert) == rebalanced, insert
    assert added == (1 if rebalanced else slices)
    assert r.metrics["numTargetRowsInserted"] == 36 and len(rows(spark, t)) == 37
