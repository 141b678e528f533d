"""The metadata a commit leaves in the catalog (history entries, the journal, the table's identity and
format version) is read strictly: each way a copy, an edit or a newer release can bend it is named."""

from __future__ import annotations

import copy

import pytest

from merge_core.common import macros
from tests.unit.test_macros import DESC, TYPES

MERGE_ID = "20261129105638_0db3aba2"
ENTRY = {
    "merge_id": MERGE_ID,
    "target": "db.acc",
    "kind": "merge",
    "paradigm": "copy-on-write",
    "status": "committed",
    "metrics": {"numTargetRowsUpdated": 1, "numTargetRowsInserted": 0},
    "partitions": [{"dt": "2026-01-02"}],
    "repoints": [
        {"partition": {"dt": "2026-01-02"}, "location": "file:/w/acc/_merge_x/dt=2026-01-02", "exists": True},
    ],
    "version_before": 3,
    "version_after": 4,
    "finished_at": "2026-11-29 10:56:38",
    "table_id": MERGE_ID,
}


@pytest.fixture
def table():
    return dict(macros.fill("table_info", DESC, TYPES), table_id=MERGE_ID)


def test_an_entry_a_commit_wrote_is_read_as_it_is(table):
    assert macros.entry_errors(table, ENTRY, "history[0]") == []


def test_fields_a_newer_writer_adds_and_optional_fields_left_out_are_accepted(table):
    entry = {k: v for k, v in ENTRY.items() if k not in ("status", "version_after", "finished_at", "table_id")}
    assert macros.entry_errors(table, dict(entry, written_by="a later release"), "history[0]") == []


@pytest.mark.parametrize(
    "path, value, error",
    [
        (["merge_id"], None, "history[0].merge_id is missing"),
        (["merge_id"], "../x", "history[0].merge_id is not an id"),
        (["version_before"], "3", "history[0].version_before is not an integer"),
        (["version_before"], True, "history[0].version_before is not an integer"),
        (["version_after"], 4.5, "history[0].version_after is not an integer"),
        (["target"], 7, "history[0].target is not a string"),
        (["metrics", "numTargetRowsUpdated"], "1", "history[0].metrics.numTargetRowsUpdated is not a number"),
        (["partitions"], {"dt": "x"}, "history[0].partitions is not a list"),
        (["repoints"], "file:/w/acc", "history[0].repoints is not a list"),
        (["repoints", 0, "exists"], "yes", "history[0].repoints[0].exists is not true or false"),
        (["repoints", 0, "location"], "", "history[0].repoints[0].location is not a path"),
        (["repoints", 0], "file:/w/acc", "history[0].repoints[0] is not an object"),
    ],
)
def test_each_bent_field_is_named_with_its_path(table, path, value, error):
    entry = copy.deepcopy(ENTRY)
    holder = entry
    for key in path[:-1]:
        holder = holder[key]
    if value is None:
        del holder[path[-1]]
    else:
        holder[path[-1]] = value
    assert macros.entry_errors(table, entry, "history[0]") == [error]


def test_an_entry_of_another_table_is_named_by_its_id_or_its_name(table):
    other = dict(ENTRY, table_id="20260101000000_aaaaaaaa", target="db.other")
    [error] = macros.entry_errors(table, other, "history[0]")
    assert "belongs to another table (table_id 20260101000000_aaaaaaaa, db.other)" in error
    legacy = {k: v for k, v in ENTRY.items() if k != "table_id"}
    assert macros.entry_errors(dict(table, table_id=None), dict(legacy, target="db.other"), "h") == [
        "h is an entry of table db.other, not of db.acc"
    ]
    assert macros.entry_errors(dict(table, table_id=None), dict(legacy, target="DB.ACC"), "h") == []


def props(**extra):
    """The identity properties a commit of db.acc at file:/w/acc writes, with ``extra`` changed."""
    base = {
        "spark_merge.root": "file:/w/acc",
        "spark_merge.table_id": MERGE_ID,
        "spark_merge.identity": macros.identity_sign(MERGE_ID, "2026-11-01"),
        "spark_merge.table": "db.acc",
        "spark_merge.version": "4",
    }
    return {k: v for k, v in dict(base, **extra).items() if v is not None}


def identity(p, location="file:/w/acc"):
    return macros.identity(p, "db.acc", location, created="2026-11-01")


def test_a_committed_table_s_identity_is_trusted():
    found = identity(props())
    assert (found["table_id"], found["root"], found["version"], found["trust_errors"]) == (
        MERGE_ID,
        "file:/w/acc",
        4,
        [],
    )
    assert identity(props(), "file:/w/acc/_merge_20261129105638_0db3aba2")["trust_errors"] == []  # a merge's root


def test_a_table_never_merged_has_an_identity_of_nothing():
    found = identity({})
    assert (found["table_id"], found["version"], found["trust_errors"]) == (None, 0, [])


@pytest.mark.parametrize(
    "change, location, fragment",
    [
        ({"spark_merge.table_id": "not an id!"}, "file:/w/acc", "not an id spark-merge wrote"),
        ({"spark_merge.table": "db.other"}, "file:/w/acc", 'belong to table "db.other"'),
        ({}, "file:/w/copy", 'does not hold its location "file:/w/copy"'),
        ({"spark_merge.table_id": "20260101000000_aaaaaaaa"}, "file:/w/acc", "not the id its commits recorded"),
        ({"spark_merge.version": "four"}, "file:/w/acc", 'spark_merge.version of db.acc is "four"'),
    ],
)
def test_a_copied_or_edited_identity_is_refused_with_adopt_as_its_fix(change, location, fragment):
    [error] = identity(props(**change), location)["trust_errors"]
    assert fragment in error and "spark-merge adopt db.acc" in error


@pytest.mark.parametrize("version", [None, "1", "2"])
def test_this_release_reads_every_format_up_to_its_own(version):
    table_props = {} if version is None else {"spark_merge.format_version": version}
    assert macros.render("format_error", table_props, "db.acc") == ""


@pytest.mark.parametrize("version", ["3", "10", "2.1", "two"])
def test_a_newer_or_unreadable_format_is_refused_naming_the_release_to_install(version):
    error = macros.render("format_error", {"spark_merge.format_version": version}, "db.acc")
    assert error == (
        f"table db.acc was written by a newer spark-merge (table format {version}; this release reads formats 1 to 2): "
        "install the release that wrote it, or a later one (pip install -U spark-merge); nothing was changed"
    )


def test_a_commit_writes_the_format_it_reads(table):
    written = macros.render("identity_properties", dict(table, version=4), MERGE_ID)
    assert "'spark_merge.format_version' = '2'" in written and "'spark_merge.version' = '5'" in written
