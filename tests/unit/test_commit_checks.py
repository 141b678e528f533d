"""The rules the plan and the commit decide by, without a run: the summary's reading of the changes
(metrics, the partitions they touch, each partition's row delta, the files to rewrite), the check
that another writer changed a partition since the plan, and the check that the staged rows are
exactly the plan's. The same macros decide for both hosts."""

from __future__ import annotations

import json

import pytest

from merge_core.common import macros

OP = macros.codes()["op"]
TABLE = {"partition_columns": ["p"], "name": "db.t"}
UNPARTITIONED = {"partition_columns": [], "name": "db.u"}


def key(*values):
    return macros.render("partition_key", ["p", "q"][: len(values)], dict(zip("pq", values)))


def test_a_partition_key_tells_null_from_every_string():
    keys = {key(None), key("None"), key(""), key("null"), key(1), key("1")}
    assert len(keys) == 5  # 1 and "1" name one directory, p=1; the rest differ
    assert key(None, "a") != key("a", None) and key(None, "a").count("/") == 2


def summary_row(op, old=None, new=None, n=1, bys=0, files=(), dups=0, multi=0):
    return {"op": op, "n": n, "bys": bys, "__sm_old": json.dumps([old]), "__sm_new": json.dumps([new]),
            "files": json.dumps(list(files)), "dups": dups, "multi": multi}  # fmt: skip


def test_the_summary_counts_each_action_and_each_partitions_delta():
    rows = [
        summary_row(OP["insert"], new="b", n=3),
        summary_row(OP["update"], old="a", new="b", n=2, files=["f1"]),  # moved from a to b
        summary_row(OP["update"], old="a", new="a", n=1, files=["f1", "f2"]),
        summary_row(OP["delete"], old="c", n=4, bys=1, files=["f3"]),  # NOT MATCHED BY SOURCE
    ]
    out = macros.fill("summarize_changes", TABLE, rows)
    m = out["metrics"]
    assert (m["numTargetRowsInserted"], m["numTargetRowsUpdated"], m["numTargetRowsDeleted"]) == (3, 3, 4)
    assert m["numTargetRowsNotMatchedBySourceDeleted"] == 4 and m["numTargetRowsNotMatchedBySourceUpdated"] == 0
    assert out["deltas"] == {key("a"): -2, key("b"): 5, key("c"): -4}
    assert out["partitions"] == [{"p": "a"}, {"p": "b"}, {"p": "c"}]
    assert out["matched"] == [{"partition": {"p": "a"}}]  # c's rows matched no source row
    assert list(out["files"]) == ["f1", "f2", "f3"]


def test_the_summary_adds_up_duplicate_and_multiple_matches_over_its_rows():
    rows = [summary_row(OP["update"], "a", "a", dups=2, multi=1), summary_row(OP["none"], dups=1, multi=3)]
    out = macros.fill("summarize_changes", TABLE, rows)
    assert (out["dups"], out["multi"]) == (3, 4)
    assert out["metrics"]["numTargetRowsUpdated"] == 1 and out["partitions"] == [{"p": "a"}]


def test_a_summary_of_no_rows_changes_nothing():
    out = macros.fill("summarize_changes", UNPARTITIONED, [])
    assert set(out["metrics"].values()) == {0} and out["partitions"] == [] and out["deltas"] == {}


def listing(p, files=1, rows=10, directory=None, size=100):
    return {"partition": {"p": p}, "dir": directory or f"/t/p={p}", "files": files, "bytes": size, "rows": rows}


def test_a_partition_another_writer_changed_is_named_and_an_unchanged_table_is_not():
    before = [listing("a"), listing("b"), listing("c")]
    assert macros.fill_list("changed_partitions", TABLE, before, [dict(r) for r in before]) == []
    now = [listing("a", files=2, rows=11), listing("b", directory="/t/_merge_x/p=b"), listing("d")]
    assert sorted(macros.fill_list("changed_partitions", TABLE, before, now)) == sorted(key(p) for p in "abcd")


@pytest.mark.parametrize(
    "written, violation",
    [
        (12, None),  # 10 before, +2 planned
        (13, ("excess", 1)),  # a row the plan did not count: it read a file the partition no longer holds
        (9, ("short", 3)),  # rows the plan did not read: a file added behind its back
    ],
)
def test_the_staged_rows_must_be_exactly_the_plans(written, violation):
    errors = macros.fill_list(
        "output_errors", TABLE, [{"p": "a"}], {key("a"): 2}, [listing("a")], [listing("a", rows=written)]
    )
    if violation is None:
        assert errors == []
    else:
        [error] = errors
        kind, n = violation
        assert error[kind] == n and error["excess" if kind == "short" else "short"] is None
        assert (
            error["message"]
            == f'the rewrite wrote {written} row(s) into partition "a" where the plan gives 12 (10 before, +2)'
        )


def test_rows_written_into_a_partition_the_plan_did_not_list_stop_the_commit_even_unchecked():
    new = [listing("a", rows=12), listing("z", rows=1)]
    errors = macros.fill_list(
        "output_errors", TABLE, [{"p": "a"}], None, [listing("a")], new
    )  # deltas None: counts unchecked
    assert [e["message"] for e in errors] == [
        'the rewrite wrote 1 row(s) into partition "z", which the plan did not list'
    ]
