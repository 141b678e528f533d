"""What a run reports, without a run: the summary of each kind of result, and dbt's one-line message read
back into the same metrics."""

from __future__ import annotations

from merge_core.common import macros
from merge_core.common.result import MergeResult, parse_message


def metrics(**counts) -> dict:
    return dict(macros.zero_metrics(), **counts)


def result(**fields) -> MergeResult:
    base = {"merge_id": "m1", "target": "db.acc", "paradigm": "DELETE_ROW_AND_INSERT_ROW", "plan_hash": "h"}
    return MergeResult(**dict(base, **fields))


def test_a_commit_s_summary_says_what_it_changed_and_wrote():
    m = metrics(numSourceRows=3, numTargetRowsInserted=1, numTargetRowsUpdated=1, numTargetRowsDeleted=1,
                numTargetPartitionsRewritten=2, numTargetFilesAdded=2, numTargetFilesRemoved=1, executionTimeMs=2500)  # fmt: skip
    text = result(metrics=m).summary()
    assert text.startswith(
        "merge m1 into db.acc (DELETE_ROW_AND_INSERT_ROW): source rows 3, inserted 1, updated 1, deleted 1"
    )
    assert "partitions rewritten 2, files +2/-1" in text and text.endswith("2.5 s")


def test_a_no_op_a_dry_run_and_a_replay_each_say_that_nothing_was_written_now():
    m = metrics(numSourceRows=4, numTargetRowsUpdated=2)
    assert (
        "no changes, nothing written (source rows 4)" in result(metrics=metrics(numSourceRows=4), noop=True).summary()
    )
    assert "would insert 0, update 2, delete 0" in result(metrics=m, dry_run=True).summary()
    replay = result(metrics=m, replayed=True, version=7).summary()
    assert "had already committed (version 7) under this run key: nothing merged again; inserted 0, updated 2" in replay


def test_dbt_s_message_reads_back_into_the_metrics_a_python_merge_returns():
    m = metrics(numTargetRowsInserted=1, numTargetRowsUpdated=20, numTargetRowsDeleted=3, numTargetRowsCopied=7,
                numTargetPartitionsRewritten=2, numTargetFilesAdded=4, numTargetFilesRemoved=2)  # fmt: skip
    message = macros.render("message", "20261129100000_abcdef01", m)
    assert message.startswith("MERGE 20261129100000_abcdef01: inserted 1, updated 20, deleted 3")
    parsed = parse_message(message)
    assert parsed["merge_id"] == "20261129100000_abcdef01"
    assert parsed["metrics"] == {k: m[k] for _, k in macros.codes()["message"]}


def test_a_message_that_is_not_a_merge_s_reads_as_nothing():
    assert parse_message("OK") == {} and parse_message("") == {}
