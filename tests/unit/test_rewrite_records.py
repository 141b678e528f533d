"""The records a rewrite's commit is made of, built by the shared macros without a run: where each
rewritten partition is pointed (and where it was, for rollback), the metrics of the files written and
carried, the filters naming partitions, and whether the write may count its own changes."""

from __future__ import annotations

import pytest

from merge_core.common import macros
from tests.unit.test_macros import DESC, TYPES

CTX = {"stage_location": "file:/w/acc/_merge_m"}


@pytest.fixture
def table():
    return macros.fill("table_info", DESC, TYPES)


def listing(dt, directory, files=1, size=100, rows=10):
    return {"partition": {"dt": dt}, "dir": directory, "files": files, "bytes": size, "rows": rows}


def test_each_rewritten_partition_points_at_its_staged_directory_and_remembers_the_old_one(table):
    old = [
        listing("2026-01-01", "file:/w/acc/dt=2026-01-01"),
        listing("2026-01-02", "file:/w/acc/dt=2026-01-02", 2, 300, 20),
    ]
    new = [listing("2026-01-01", "file:/w/acc/_merge_m/dt=2026-01-01", 1, 120, 11),
           listing("2026-01-03", "file:/w/acc/_merge_m/dt=2026-01-03", 1, 50, 1)]  # fmt: skip
    parts = [{"dt": "2026-01-01"}, {"dt": "2026-01-02"}, {"dt": "2026-01-03"}]
    out = macros.fill("repoints", table, CTX, parts, old, new)
    assert out["repoints"] == [
        {"partition": {"dt": "2026-01-01"}, "location": "file:/w/acc/_merge_m/dt=2026-01-01",
         "old_location": "file:/w/acc/dt=2026-01-01", "exists": True},
        # every row of it deleted: an empty directory of its own, so the partition reads as empty
        {"partition": {"dt": "2026-01-02"}, "location": "file:/w/acc/_merge_m/empty-1",
         "old_location": "file:/w/acc/dt=2026-01-02", "exists": True},
        # a partition the merge creates: no old location, added rather than moved
        {"partition": {"dt": "2026-01-03"}, "location": "file:/w/acc/_merge_m/dt=2026-01-03",
         "old_location": None, "exists": False},
    ]  # fmt: skip
    assert out["empty"] == ["file:/w/acc/_merge_m/empty-1"]
    assert out["metrics"] == {"numOutputRows": 12, "numTargetFilesAdded": 2, "numTargetBytesAdded": 170,
                              "numTargetFilesRemoved": 3, "numTargetBytesRemoved": 400,
                              "numTargetPartitionsRewritten": 3}  # fmt: skip


def test_an_unpartitioned_table_is_repointed_as_a_whole(table):
    flat = {**table, "partition_columns": [], "location": "file:/w/acc"}
    out = macros.fill("repoints", flat, CTX, [{}], [], [])  # every row deleted, nothing staged
    assert out["repoints"] == [{"partition": None, "location": CTX["stage_location"], "old_location": "file:/w/acc",
                                "exists": False}]  # fmt: skip
    assert out["empty"] == []


def test_files_carried_over_are_not_counted_as_removed():
    m = {"numTargetFilesRemoved": 5, "numTargetBytesRemoved": 500}
    macros.render("carried_metrics", m, [{"files": 2, "bytes": 150, "rows": 7}, {"files": 1, "bytes": 50, "rows": 3}])
    assert m == {"numTargetFilesRemoved": 2, "numTargetBytesRemoved": 300, "numTargetFilesCarried": 3,
                 "numTargetBytesCarried": 200, "numTargetRowsCarried": 10}  # fmt: skip


def test_the_changed_rows_are_broadcast_up_to_the_limit_and_joined_beyond_it():
    limit = int(macros.render("broadcast_rows"))

    def broadcast(updated, deleted):
        return macros.broadcast_changed({"numTargetRowsUpdated": updated, "numTargetRowsDeleted": deleted})["broadcast"]

    assert broadcast(limit - 1, 1) and not broadcast(limit, 1) and broadcast(0, 0)


def test_a_partition_filter_names_each_partition_null_and_quotes_included(table):
    parts = [{"dt": "2026-01-01"}, {"dt": None}]
    assert macros.render("partition_filter", table, parts) == "(`dt` = CAST('2026-01-01' AS date) OR `dt` IS NULL)"
    # one partition column: an IN list (a hash set in Spark), whatever the number of partitions
    many = [{"dt": "2026-01-01"}, {"dt": None}, {"dt": "2026-01-03"}]
    assert macros.render("partition_filter", table, many, "t.") == (
        "(t.`dt` IN (CAST('2026-01-01' AS date), CAST('2026-01-03' AS date)) OR t.`dt` IS NULL)"
    )
    assert macros.render("partition_filter", table, [{"dt": None}]) == "`dt` IS NULL"
    assert macros.render("partition_filter", table, []) == "false"  # no partition: no row
    two = {**table, "partition_columns": ["v", "dt"]}
    assert (
        macros.render("partition_filter", two, [{"v": "it's", "dt": None}], "t.")
        == "(t.`v` = CAST('it\\'s' AS string) AND t.`dt` IS NULL)"
    )


def test_auto_compaction_folds_a_partition_once_it_holds_enough_small_files(table):
    def sized(dt, sizes):
        return {**listing(dt, f"file:/w/acc/dt={dt}", len(sizes), sum(sizes)), "sizes": sizes}

    old = [sized("2026-01-01", [10, 20, 30, 500]), sized("2026-01-02", [10, 20, 500, 600])]
    assert macros.fill("fold_plan", table, old) == {}  # no policy: nothing folded
    policy = {
        **table,
        "properties": {"spark_merge.auto_compact.min_files": "3", "spark_merge.auto_compact.small_file_bytes": "100"},
    }
    # three files under 100 bytes in the first partition only; its large file stays
    assert macros.fill("fold_plan", policy, old) == {
        "below": 100, "min_files": 3, "partitions": [{"dt": "2026-01-01"}],
        "dirs": ["file:/w/acc/dt=2026-01-01"], "files": 3, "bytes": 60,
    }  # fmt: skip
    # the rewrite reads the touched partitions' changed files and, in the folded partitions, every small
    # file: with conjuncts that name only file metadata, by which Spark's file index skips the large
    # files (test_auto_compact.py checks that it does)
    files = ["file:/w/acc/dt=2026-01-02/a.parquet"]
    touched = [{"dt": "2026-01-01"}, {"dt": "2026-01-02"}]
    where = macros.render("rewrite_filter", policy, touched, files, macros.fill("fold_plan", policy, old))
    assert where == (
        "(`dt` IN (CAST('2026-01-01' AS date), CAST('2026-01-02' AS date))) AND "
        "(_metadata.file_path IN ('file:/w/acc/dt=2026-01-02/a.parquet') OR _metadata.file_size < 100) AND "
        "(_metadata.file_path IN ('file:/w/acc/dt=2026-01-02/a.parquet') OR (`dt` = CAST('2026-01-01' AS date)))"
    )
    # a listing without sizes (a host that measured by query) folds nothing
    assert macros.fill("fold_plan", policy, [listing("2026-01-01", "file:/w/acc/dt=2026-01-01", 9)]) == {}
    for bad in ("three", "1"):
        wrong = {**table, "properties": {"spark_merge.auto_compact.min_files": bad}}
        assert "must be a whole number of at least 2" in macros.fill("fold_plan", wrong, old)["error"]


class _Observer:
    """A host whose write can count its own changes, or not (host_contract: can_observe)."""

    def __init__(self, can: bool) -> None:
        self.can = can

    def can_observe(self, table: dict, ctx: dict) -> bool:
        return self.can


UPDATE = {"matched": True, "by_source": False, "condition": "", "action": "update"}
INSERT = {"matched": False, "by_source": False, "condition": "", "action": "insert"}


@pytest.mark.parametrize(
    "change, ok",
    [
        ({}, True),  # an upsert: every row ON matches is updated
        ({"clauses": [dict(UPDATE, condition="s.v > 0"), UPDATE, INSERT]}, True),  # the last MATCHED decides
        ({"clauses": [dict(UPDATE, condition="s.v > 0"), INSERT]}, False),  # a matched row may stay as it is
        ({"clauses": [INSERT]}, False),  # nothing matched changes: no file to find
        ({"clauses": [UPDATE, dict(UPDATE, matched=False, by_source=True)]}, False),  # reads every target row
        ({"fusable": False}, False),  # the write joins again: it must read what the plan read
        ({"feed": True}, False),  # the change rows come from the summary's changes
        ({"source_rows": 100_001}, True),  # past the write's broadcast: one FULL join, which counts alike
        ({"source_rows": 1_000_001}, False),  # more ON keys than the search for the files broadcasts
        ({"properties": {"spark_merge.auto_compact.min_files": "4"}}, False),  # small files join the rewrite
        ({"can": False}, False),  # dbt: SQL has no observed metrics
    ],
)
def test_the_write_counts_its_own_changes_only_where_every_rule_of_it_holds(table, change, ok):
    """observable (lifecycle/phases.sql): each case breaks one of the one-pass write's rules."""
    s = {
        "fusable": change.get("fusable", True),
        "table": dict(table, properties=change.get("properties", {})),
        "resolved": {"clauses": change.get("clauses", [UPDATE, INSERT])},
        "ctx": {"feed": change.get("feed", False)},
        "metrics": {"numSourceRows": change.get("source_rows", 1_000)},
    }
    assert macros.fill("observable", _Observer(change.get("can", True)), s) == {"ok": ok}
