"""What the entry points make of their arguments before any Spark: the CLI's field options, a
streaming writer's target, a run key's tag in the merge id, the cores of a local master."""

from __future__ import annotations

import os

import pytest

from merge_core.common.result import new_merge_id, run_key_tag
from merge_core.spark.session import local_cores


def test_field_options_parse_paimon_names():
    from merge_core.api.cli import field_options

    assert field_options(
        [
            "a.aggregate-function=sum",
            "fields.g_1,g_2.sequence-group=a,b",
            "c.ignore-retract=true",
            "c.distinct=true",
            "n.nested-key=k1,k2",
            "l.list-agg-delimiter=;",
        ]
    ) == {
        "aggregate_function": {"a": "sum"},
        "sequence_group": {"g_1,g_2": "a,b"},
        "ignore_retract": {"c": "true"},
        "distinct": {"c": "true"},
        "nested_key": {"n": "k1,k2"},
        "listagg_delimiter": {"l": ";"},
    }


@pytest.mark.parametrize("sql", ["MERGE INTO other.t t USING source s ON t.id = s.id WHEN MATCHED THEN DELETE"])
def test_foreach_batch_refuses_a_statement_for_another_target(sql):
    from merge_core import SpecError, foreach_batch

    with pytest.raises(SpecError, match="its statement merges into other.t"):
        foreach_batch("stream.acc", sql)
    with pytest.raises(SpecError, match="primary_key"):
        foreach_batch("stream.acc")


def test_a_run_key_tags_the_merge_id():
    tagged = new_merge_id("airflow:d/r/t/-1")
    assert tagged[15:19] == run_key_tag("airflow:d/r/t/-1") and len(tagged) == len(new_merge_id())
    assert new_merge_id("airflow:d/r/t/-1") != tagged  # still unique


@pytest.mark.parametrize(
    "master, cores",
    [
        ("local", 1),
        ("local[3]", 3),
        ("local[3,2]", 3),
        ("local[*]", os.cpu_count()),
        ("local-cluster[2,1,1024]", None),
        ("spark://h:7077", None),
        ("yarn", None),
    ],
)
def test_local_cores_of_a_master(master, cores):
    assert local_cores(master) == cores
