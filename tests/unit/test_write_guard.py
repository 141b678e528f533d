"""The write guard both hosts run after staging, checked on file statistics as they would arrive."""

from __future__ import annotations

from merge_core.common import macros


def test_the_write_guard_names_rows_outside_the_plan_and_wrong_counts():
    """The pure check both hosts run after staging (output_errors), on file stats as they arrive."""
    table = {"partition_columns": ["p"]}

    def stats(part_rows):
        return [{"partition": {"p": p}, "rows": n} for p, n in part_rows]

    planned = [{"p": "1"}, {"p": None}]
    deltas = {'"1"/': 2, "null/": -1}
    ok = macros.fill_list(
        "output_errors", table, planned, deltas, stats([("1", 10), (None, 5)]), stats([("1", 12), (None, 4)])
    )
    assert ok == []
    bad = macros.fill_list(
        "output_errors", table, planned, deltas, stats([("1", 10), (None, 5)]), stats([("1", 13), (None, 4), ("7", 3)])
    )
    assert bad == [
        {
            "excess": None,
            "short": None,
            "message": 'the rewrite wrote 3 row(s) into partition "7", which the plan did not list',
        },
        {
            "excess": 1,
            "short": None,
            "message": 'the rewrite wrote 13 row(s) into partition "1" where the plan gives 12 (10 before, +2)',
        },
    ]
    # fewer rows than planned is no excess
    short = macros.fill_list(
        "output_errors", table, planned, deltas, stats([("1", 10), (None, 5)]), stats([("1", 11), (None, 4)])
    )
    assert [(v["excess"], v["short"]) for v in short] == [(None, 1)]
    # the string 'None' is another partition than NULL
    assert (
        macros.fill_list(
            "output_errors", table, [{"p": "None"}], {'"None"/': 0}, stats([(None, 5)]), stats([(None, 5)])
        )
        != []
    )
