"""Cost follows the change (only touched partitions are rewritten) and the commit is journaled."""
from __future__ import annotations

import json

import pytest

from merge_core import merge, to_spec
from merge_core import engine
from merge_core.engine import MergeRun

from .conftest import rows, tree


def files_by_partition(spark, table):
    return {
        r[0]: sorted(r[1])
        for r in spark.sql(f"SELECT dt, collect_set(_metadata.file_path) FROM {table} GROUP BY dt").collect()
    }


def location(spark, table):
    return json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {table} AS JSON").collect()[0][0])["location"]


@pytest.fixture
def fifty(spark, db):
    t = f"{db}.fifty"
    spark.sql(f"CREATE TABLE {t} USING parquet PARTITIONED BY (dt) "
              f"AS SELECT id, concat('c', id) AS name, CAST(id AS DOUBLE) AS amount, CAST(id % 50 AS INT) AS dt FROM range(2000)")
    return t


def test_merge_touching_two_of_fifty_partitions_rewrites_exactly_two(spark, fifty):
    before = files_by_partition(spark, fifty)
    root = location(spark, fifty)
    dirs_before = tree(root)
    assert len(before) == 50
    r = merge(spark, f"""MERGE INTO {fifty} t
        USING (SELECT 3 AS id, 'changed' AS name UNION ALL SELECT 5007, 'new') s
        ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET name = s.name
        WHEN NOT MATCHED THEN INSERT (id, name, amount, dt) VALUES (s.id, s.name, 0, 7)""")
    after = files_by_partition(spark, fifty)
    changed = sorted(dt for dt in before if before[dt] != after[dt])
    assert changed == [3, 7]
    assert r.metrics["numTargetPartitionsRewritten"] == 2
    assert sorted(p["dt"] for p in r.partitions) == ["3", "7"]
    assert r.metrics["numTargetFilesRemoved"] == len(before[3]) + len(before[7])
    assert r.metrics["numTargetRowsCopied"] == 2 * 40 - 1  # 40 rows per partition, one of them updated
    assert r.metrics["numOutputRows"] == 2 * 40 + 1
    # the new files live in the merge's own directory; every old file is still on disk
    assert all(f"/_merge_{r.merge_id}/dt=" in f for dt in (3, 7) for f in after[dt])
    assert dirs_before <= tree(root)
    assert rows(spark, f"(SELECT name FROM {fifty} WHERE id IN (3, 5007))") == [("changed",), ("new",)]


def test_interrupted_commit_rolls_forward_at_next_begin(spark, fifty, monkeypatch):
    """A crash after the journal and the first repoint: the next merge finishes the commit first."""
    statements = []

    def crash_after_first_repoint(spark_, table, merge_id, repoints):
        spark_.sql(engine.macros.render("journal_sql", table, merge_id, repoints))
        first = engine.macros.fill_list("repoint_statements", table, repoints)[0]
        spark_.sql(first)
        statements.append(first)
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(engine, "commit", crash_after_first_repoint)
    run = MergeRun(spark, to_spec(
        f"UPDATE {fifty} SET name = 'x' WHERE dt IN (1, 2)"))
    run.begin()
    run.plan()
    with pytest.raises(KeyboardInterrupt):
        run.execute()
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
    assert not any(k.startswith("spark_merge.journal.") and k[-1].isdigit() for k in props)
