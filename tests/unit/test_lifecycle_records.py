"""The records the lifecycle builds for both hosts, without a run: the commit lock's rule for a dead
holder and its record, a run's starting state, the one rule of a no-op and the history entry, merge ids,
partition specs and decoded partitions."""

from __future__ import annotations

import pytest

from merge_core.common import macros
from tests.unit.test_macros import DESC, TYPES

OTHER_ID = "20260101000000_bbbbbbbb"


@pytest.fixture
def table():
    return macros.fill("table_info", DESC, TYPES)


@pytest.mark.parametrize(
    "lapsed_s, held_s, dead",
    [
        (-5, 10, False),  # inside its lease
        (4.9, 100, False),  # lease lapsed, inside the grace (grace_s = 5)
        (5.1, 100, True),  # past lease and grace: the holder stopped renewing
        (None, 10, False),  # no lease written yet: young, give it time
        (None, 1000, True),  # no lease, older than stale_s (900)
    ],
)
def test_a_lock_holder_is_dead_only_once_its_lease_and_grace_lapsed(lapsed_s, held_s, dead):
    assert (macros.render("lock_dead", lapsed_s, held_s) == "True") is dead


def test_the_lock_s_timing_is_one_set_of_numbers_both_hosts_read():
    k = macros.lock_settings()
    assert k["lease_s"] + k["grace_s"] < k["wait_s"]  # a waiter outlives a dead holder's lease, then breaks it
    assert k["dbt_lease_s"] > k["lease_s"]  # dbt cannot renew from a thread: one long lease


def test_a_lock_written_for_another_table_or_by_hand_is_refused_with_the_command_that_removes_it(table):
    theirs = macros.fill("lock_record", dict(table, table_id="20260101000000_aaaaaaaa"), {
        "spark_merge.lock.merge_id": "m", "spark_merge.lock.table_id": OTHER_ID})  # fmt: skip
    assert f"it is the lock of another table (table_id {OTHER_ID})" in theirs["error"]
    forged = macros.fill("lock_record", table, {"spark_merge.lock.merge_id": "../x"})
    assert 'spark_merge.lock.merge_id is "../x"' in forged["error"]
    for record in (theirs, forged):
        assert record["error"].endswith("`spark-merge recover db.acc --break-lock` removes it")


def test_the_lock_is_a_table_whose_properties_name_its_holder_and_lease(table):
    sql = macros.lock_sql(table, "m1", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:30+00:00", "host pid 1")
    assert sql.startswith("CREATE TABLE IF NOT EXISTS `db`.`__sm_lock_acc`")  # IF NOT EXISTS: one taker wins
    assert "LOCATION 'file:/w/acc/_spark_merge/locks/m1'" in sql
    assert "'spark_merge.lock.expires' = '2026-01-01T00:00:30+00:00'" in sql


def test_a_run_starts_with_every_metric_at_zero_and_no_changes():
    s = macros.run_state("m1", {"kind": "merge"})
    assert sorted(s) == ["changes", "kind", "merge_id", "metrics", "plan_hash"]
    assert set(s["metrics"].values()) == {0} and s["metrics"] == macros.zero_metrics()
    assert s["changes"] == {"partitions": [], "deltas": None, "files": None}


def _run(table, version: int, **counts):
    s = macros.run_state("m1", {"kind": "merge", "statement": "UPDATE db.acc SET v = 1", "table": dict(table, version=version),
                               "paradigm": "DELETE_ROW_AND_INSERT_ROW", "spec": {}})  # fmt: skip
    s["metrics"].update(counts)
    return s


def test_a_commit_that_moved_no_version_and_changed_no_row_is_a_no_op_everywhere(table):
    unchanged = _run(table, 3)
    assert macros.history_entry(unchanged, 3)["status"] == "no-op" and not macros.changed_target(unchanged, 3)
    updated = _run(table, 3, numTargetRowsUpdated=2)
    assert macros.history_entry(updated, 4)["status"] == "committed"


def test_a_target_without_versions_changed_when_a_row_did(table):
    """PostgreSQL keeps no version: the metrics decide (a merge that wrote said 'nothing written' before)."""
    assert macros.changed_target(_run(table, 0, numTargetRowsDeleted=1), 0)
    assert not macros.changed_target(_run(table, 0), 0)


def test_merge_ids_sort_by_the_second_they_began_and_carry_entropy():
    early = macros.new_merge_id("2026-11-29T10:00:00", "abcdef0123")
    late = macros.new_merge_id("2026-11-29T10:00:01", "00000000")
    assert early == "20261129100000_abcdef01" and early < late and macros.is_id(early) == "True"


def test_a_partition_spec_quotes_names_and_values_and_spells_null(table):
    assert macros.partition_spec(table, {"dt": "2026-01-01"}) == "PARTITION (`dt` = '2026-01-01')"
    assert macros.partition_spec(table, {"dt": None}) == "PARTITION (`dt` = NULL)"
    assert macros.partition_spec(table, {"dt": "it's"}) == "PARTITION (`dt` = 'it\\'s')"


def test_the_plan_s_partition_keys_decode_to_values_null_included(table):
    rows = macros.decode_partitions(table, [{"__sm_part": '["2026-01-01"]'}, {"__sm_part": "[null]"}])
    assert [r["partition"] for r in rows] == [{"dt": "2026-01-01"}, {"dt": None}]


def test_a_change_feed_s_rows_live_in_the_merge_s_own_directory(table):
    assert macros.changes_location(table, "m1") == "file:/w/acc/_merge_m1/_changes"
