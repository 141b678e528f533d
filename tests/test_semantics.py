"""SQL MERGE rules, one test each, on real Spark tables."""

from __future__ import annotations

import logging
import re
from decimal import Decimal

import pytest

from merge_core import DuplicateMatchError, MergeError, explain, history, merge
from merge_core.common import macros

from .conftest import rows, snapshot, table_files, tree

pytestmark = pytest.mark.cluster  # also run on a standalone cluster (test_cluster.py)


@pytest.fixture
def kv(spark, db):
    """Partitioned target kv(id, v, p) and a helper to make sources."""
    spark.sql(f"CREATE TABLE {db}.kv (id INT, v STRING, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {db}.kv VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 2), (NULL, 'n', 2)")

    def source(values: str, name: str = "src") -> str:
        spark.sql(f"DROP TABLE IF EXISTS {db}.{name}")
        spark.sql(f"CREATE TABLE {db}.{name} USING parquet AS SELECT * FROM VALUES {values} AS x(id, v, p)")
        return f"{db}.{name}"

    return f"{db}.kv", source


UPSERT = (
    "MERGE INTO {t} t USING {s} s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v, p) VALUES (s.id, s.v, s.p)"
)


def test_null_keys_never_match(spark, kv):
    t, source = kv
    s = source("(CAST(NULL AS INT), 'new-null', 2), (1, 'A', 1)")
    r = merge(spark, UPSERT.format(t=t, s=s))
    assert rows(spark, t, "id, v") == [(None, "n", 2), (None, "new-null", 2), (1, "A", 1), (2, "b", 1), (3, "c", 2)]
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (1, 1)


@pytest.mark.cluster_ci
def test_first_matching_clause_wins(spark, kv):
    t, source = kv
    s = source("(1, 'x', 1), (2, 'y', 1)")
    merge(
        spark,
        f"MERGE INTO {t} t USING {s} s ON t.id = s.id "
        f"WHEN MATCHED AND s.v = 'x' THEN UPDATE SET v = 'first' "
        f"WHEN MATCHED AND s.v IN ('x', 'y') THEN UPDATE SET v = 'second' "
        f"WHEN MATCHED THEN DELETE",
    )
    assert rows(spark, t, "id, v")[1:3] == [(1, "first", 1), (2, "second", 1)]


@pytest.mark.cluster_ci
def test_update_moves_row_to_another_partition(spark, kv):
    t, source = kv
    s = source("(1, 'moved', 5)")
    r = merge(spark, f"MERGE INTO {t} t USING {s} s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v, p = s.p")
    assert (1, "moved", 5) in rows(spark, t, "id")
    assert spark.sql(f"SELECT count(*) FROM {t} WHERE p = 1").collect()[0][0] == 1
    assert r.metrics["numTargetPartitionsRewritten"] == 2  # the partition it left and the one it entered


class TestDuplicateRules:
    """Two source rows for target id 1; whether that is an error depends on the rule."""

    def _run(self, spark, kv, values, clauses, rule):
        t, source = kv
        s = source(values)
        before = snapshot(spark, t)
        try:
            merge(spark, f"MERGE INTO {t} t USING {s} s ON t.id = s.id {clauses}", duplicate_rule=rule)
        except DuplicateMatchError as e:
            assert snapshot(spark, t) == before  # nothing written
            return e
        return None

    def test_same_clause_is_an_error_under_every_rule(self, spark, kv):
        for rule in ("trino", "postgres", "strict"):
            e = self._run(spark, kv, "(1, 'x', 1), (1, 'y', 1)", "WHEN MATCHED THEN UPDATE SET v = s.v", rule)
            assert e is not None, rule
            assert str(e).startswith(
                "MERGE_TARGET_ROW_MULTIPLE_MATCHES: One MERGE target table row matched more than one source row"
            )
            assert "id='1'" in str(e)
            [example] = e.examples
            assert (example["id"], example["source_rows"]) == ("1", 2)
            clause = "WHEN MATCHED clause 1 (UPDATE)"
            assert sorted(example["matches"], key=lambda m: m["source"]["v"]) == [
                {"source": {"id": 1, "v": "x", "p": 1}, "clause": clause},
                {"source": {"id": 1, "v": "y", "p": 1}, "clause": clause},
            ]

    def test_no_clause_twice(self, spark, kv):
        """Both rows pick no clause: Trino counts case -1 too; PostgreSQL only counts writes."""
        values, clauses = "(1, 'x', 1), (1, 'y', 1)", "WHEN MATCHED AND s.v = 'z' THEN DELETE"
        assert self._run(spark, kv, values, clauses, "trino") is not None
        assert self._run(spark, kv, values, clauses, "postgres") is None
        assert self._run(spark, kv, values, clauses, "strict") is not None

    def test_different_clauses(self, spark, kv):
        """One row updates, the other picks no clause: only strict objects."""
        values, clauses = "(1, 'x', 1), (1, 'y', 1)", "WHEN MATCHED AND s.v = 'x' THEN UPDATE SET v = s.v"
        assert self._run(spark, kv, values, clauses, "trino") is None
        assert rows(spark, kv[0], "id")[1] == (1, "x", 1)

    def test_strict_allows_lone_unconditional_delete(self, spark, kv):
        assert self._run(spark, kv, "(1, 'x', 1), (1, 'y', 1)", "WHEN MATCHED THEN DELETE", "strict") is None
        assert [r[0] for r in rows(spark, kv[0], "id")] == [None, 2, 3]

    def test_at_most_five_examples(self, spark, db):
        spark.sql(f"CREATE TABLE {db}.big USING parquet AS SELECT id, 'v' AS v FROM range(20)")
        spark.sql(
            f"CREATE TABLE {db}.dup USING parquet AS SELECT id, 'w' AS v FROM range(20) UNION ALL SELECT id, 'w' FROM range(20)"
        )
        with pytest.raises(DuplicateMatchError) as e:
            merge(spark, f"MERGE INTO {db}.big t USING {db}.dup s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v")
        assert len(e.value.examples) == 5
        assert all(len(ex["matches"]) == 2 for ex in e.value.examples)  # each with the source rows that matched it


def test_subquery_source_and_conditions_on_both_sides(spark, kv):
    t, source = kv
    s = source("(1, 'x', 1), (1, 'y', 1), (3, 'z', 2), (9, 'q', 3)")
    merge(
        spark,
        f"""MERGE INTO {t} AS tgt
        USING (SELECT id, max(v) AS v, min(p) AS p FROM {s} GROUP BY id) AS u
        ON tgt.id = u.id AND u.v <> 'q'
        WHEN MATCHED AND tgt.v < u.v AND tgt.p = u.p THEN UPDATE SET v = concat(tgt.v, u.v)
        WHEN NOT MATCHED AND u.id > 5 THEN INSERT (id, v, p) VALUES (u.id, upper(u.v), u.p)""",
    )
    assert rows(spark, t, "id") == [(None, "n", 2), (1, "ay", 1), (2, "b", 1), (3, "cz", 2), (9, "Q", 3)]


def test_one_sided_clauses_resolve_unqualified_names_on_their_side(spark, kv):
    """As Spark resolves them: a WHEN NOT MATCHED clause sees only the source, so its unqualified
    `id`, `v`, `p` are the source's even though the target has the same columns; a WHEN NOT MATCHED
    BY SOURCE clause sees only the target. A WHEN MATCHED clause sees both, so there an
    unqualified name both sides have is ambiguous, and refused before anything is written."""
    t, source = kv
    s = source("(1, 'A', 1), (4, 'D', 2), (5, 'E', 1)")
    r = merge(
        spark,
        f"MERGE INTO {t} t USING {s} s ON t.id = s.id "
        f"WHEN NOT MATCHED AND v <> 'E' THEN INSERT (id, v, p) VALUES (id, upper(v) || '!', p) "
        f"WHEN NOT MATCHED BY SOURCE AND v = 'b' THEN UPDATE SET v = v || '?'",
    )
    assert rows(spark, t, "id, v") == [(None, "n", 2), (1, "a", 1), (2, "b?", 1), (3, "c", 2), (4, "D!", 2)]
    assert (r.metrics["numTargetRowsInserted"], r.metrics["numTargetRowsNotMatchedBySourceUpdated"]) == (1, 1)
    # inside a subquery a name is its own FROM's first: count(id) counts the subquery's rows
    merge(
        spark,
        f"MERGE INTO {t} t USING {s} s ON t.id = s.id WHEN NOT MATCHED AND id = 5 "
        f"THEN INSERT (id, v, p) VALUES (id, CAST((SELECT count(id) FROM {s}) AS STRING), p)",
    )
    assert (5, "3", 1) in rows(spark, t, "id, v")
    before = snapshot(spark, t)
    with pytest.raises(MergeError, match="AMBIGUOUS_REFERENCE"):
        merge(spark, f"MERGE INTO {t} t USING {s} s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = v")
    assert snapshot(spark, t) == before


def test_values_are_cast_to_target_types(spark, db):
    spark.sql(f"CREATE TABLE {db}.money (id BIGINT, amount DECIMAL(10,2), d DATE, n STRING) USING parquet")
    spark.sql(f"INSERT INTO {db}.money VALUES (1, 1.00, DATE'2024-01-01', 'x')")
    merge(
        spark,
        f"""MERGE INTO {db}.money t
        USING (SELECT 1 AS id, 2.555D AS amount, TIMESTAMP'2024-02-03 10:00:00' AS d, 42 AS n
               UNION ALL SELECT 2, 7, TIMESTAMP'2024-03-04 00:00:00', 7) s
        ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET amount = s.amount, d = s.d, n = s.n
        WHEN NOT MATCHED THEN INSERT *""",
    )
    import datetime

    assert rows(spark, f"{db}.money") == [
        (1, Decimal("2.56"), datetime.date(2024, 2, 3), "42"),
        (2, Decimal("7.00"), datetime.date(2024, 3, 4), "7"),
    ]
    assert [f.dataType.simpleString() for f in spark.table(f"{db}.money").schema] == [
        "bigint",
        "decimal(10,2)",
        "date",
        "string",
    ]


@pytest.mark.cluster_ci
def test_update_and_delete_statements(spark, kv):
    t, _ = kv
    r = merge(spark, f"UPDATE {t} AS x SET v = upper(x.v) WHERE x.p = 1")
    assert r.metrics["numTargetRowsUpdated"] == 2 and r.metrics["numTargetPartitionsRewritten"] == 1
    r = merge(spark, f"DELETE FROM {t} WHERE id IS NULL OR v = 'A'")
    assert r.metrics["numTargetRowsDeleted"] == 2
    assert rows(spark, t, "id") == [(2, "B", 1), (3, "c", 2)]
    r = merge(spark, f"DELETE FROM {t} WHERE id = 42")
    assert r.metrics["numTargetPartitionsRewritten"] == 0


def test_a_leading_with_clause(spark, kv):
    """WITH before MERGE, UPDATE and DELETE: the CTEs are read where the statement names them
    (the source, and subqueries in ON, WHERE and SET)."""
    t, _ = kv
    r = merge(
        spark,
        f"WITH changes(id, v) AS (VALUES (1, 'one'), (5, 'five')), "
        f"big AS (SELECT id FROM changes WHERE id > 2) "
        f"MERGE INTO {t} t USING changes c ON t.id = c.id "
        f"WHEN MATCHED THEN UPDATE SET v = c.v "
        f"WHEN NOT MATCHED AND c.id IN (SELECT id FROM big) THEN INSERT (id, v, p) VALUES (c.id, c.v, 3)",
    )
    assert (r.metrics["numTargetRowsUpdated"], r.metrics["numTargetRowsInserted"]) == (1, 1)
    merge(spark, f"WITH gone AS (SELECT 2 AS id) DELETE FROM {t} WHERE id IN (SELECT id FROM gone)")
    merge(spark, f"WITH top AS (SELECT max(id) AS m FROM {t}) UPDATE {t} SET v = 'max' WHERE id = (SELECT m FROM top)")
    assert rows(spark, t, "id") == [(None, "n", 2), (1, "one", 1), (3, "c", 2), (5, "max", 3)]


def test_column_defaults(spark, db):
    """DEFAULT in SET and INSERT values, and INSERT columns left out, take the column's default (from
    CREATE TABLE or ADD COLUMN), else NULL, as in Spark; a column named `default` is a column."""
    t = f"{db}.dflt"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING DEFAULT 'x', n INT DEFAULT 40 + 2, `default` INT) USING parquet")
    spark.sql(f"ALTER TABLE {t} ADD COLUMN w DOUBLE DEFAULT 1.5")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 1, 7, 0.0), (2, 'b', 2, 8, 0.0)")
    merge(spark, f"UPDATE {t} SET v = DEFAULT, n = `default`, w = default WHERE id = 1")
    merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT 3 AS id) s ON t.id = s.id "
        f"WHEN NOT MATCHED THEN INSERT (id, n) VALUES (s.id, DEFAULT)",
    )
    merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT 4 AS id) s ON t.id = s.id "
        f"WHEN NOT MATCHED THEN INSERT (id, v, n, `default`, w) VALUES (s.id, 'z', 0, DEFAULT, DEFAULT)",
    )
    assert rows(spark, t) == [(1, "x", 7, 7, 1.5), (2, "b", 2, 8, 0.0), (3, "x", 42, None, 1.5), (4, "z", 0, None, 1.5)]


@pytest.mark.cluster_ci
def test_insert_only_appends_without_rewriting(spark, kv):
    t, source = kv
    s = source("(1, 'dup', 1), (7, 'seven', 1), (8, 'eight', 9)")
    before = table_files(spark, t)
    r = merge(spark, f"MERGE INTO {t} t USING {s} s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *")
    after = table_files(spark, t)
    assert set(before) <= set(after)  # every old file is still read: nothing rewritten
    assert r.metrics["numTargetPartitionsRewritten"] == 0 and r.metrics["numTargetRowsInserted"] == 2
    assert rows(spark, t, "id")[-2:] == [(7, "seven", 1), (8, "eight", 9)]


@pytest.mark.object_store
@pytest.mark.object_store_ci
def test_emptied_partition_and_table(spark, kv, db):
    t, _ = kv
    merge(spark, f"DELETE FROM {t} WHERE p = 1")
    assert spark.sql(f"SELECT count(*) FROM {t} WHERE p = 1").collect()[0][0] == 0
    assert rows(spark, t, "v") == [(3, "c", 2), (None, "n", 2)]
    spark.sql(f"CREATE TABLE {db}.flat USING parquet AS SELECT id FROM range(3)")
    merge(spark, f"DELETE FROM {db}.flat")
    assert rows(spark, f"{db}.flat") == []
    merge(spark, f"MERGE INTO {db}.flat t USING (SELECT 5L AS id) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *")
    assert rows(spark, f"{db}.flat") == [(5,)]


def test_orc_table(spark, db):
    spark.sql(f"CREATE TABLE {db}.o (id INT, v STRING, p INT) USING orc PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {db}.o VALUES (1, 'a', 1), (1, 'a', 1), (2, 'b', 1), (3, 'c', 2)")
    merge(
        spark,
        f"MERGE INTO {db}.o t USING (SELECT 1 AS id, 'z' AS v UNION ALL SELECT 4, 'd') s ON t.id = s.id "
        f"WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v, p) VALUES (s.id, s.v, 3)",
    )
    # identical rows in one file share their fate: both updated, none lost
    assert rows(spark, f"{db}.o", "id") == [(1, "z", 1), (1, "z", 1), (2, "b", 1), (3, "c", 2), (4, "d", 3)]
    with pytest.raises(DuplicateMatchError):
        merge(
            spark,
            f"MERGE INTO {db}.o t USING (SELECT 2 AS id UNION ALL SELECT 2) s ON t.id = s.id WHEN MATCHED THEN DELETE",
            duplicate_rule="postgres",
        )
    # the trino rule: two identical target rows and one source row are no duplicate
    r = merge(
        spark,
        f"MERGE INTO {db}.o t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'y'",
        duplicate_rule="trino",
    )
    assert r.metrics["numTargetRowsUpdated"] == 2
    # strict, a lone DELETE: two source rows delete the two identical rows, counted once each
    r = merge(
        spark,
        f"MERGE INTO {db}.o t USING (SELECT 1 AS id UNION ALL SELECT 1) s ON t.id = s.id WHEN MATCHED THEN DELETE",
        duplicate_rule="strict",
    )
    assert r.metrics["numTargetRowsDeleted"] == 2
    assert rows(spark, f"{db}.o", "id") == [(2, "b", 1), (3, "c", 2), (4, "d", 3)]


def test_no_change_writes_nothing(spark, kv):
    t, source = kv
    s = source("(42, 'x', 1)")
    before = snapshot(spark, t)
    r = merge(spark, f"MERGE INTO {t} t USING {s} s ON t.id = s.id WHEN MATCHED THEN DELETE")
    assert r.metrics["numTargetPartitionsRewritten"] == 0 and r.metrics["numSourceRows"] == 1
    assert snapshot(spark, t)[:2] == before[:2]
    assert r.noop and "no changes, nothing written" in r.summary()
    [entry] = history(spark, t)  # recorded, and marked as a statement that changed nothing
    assert entry["merge_id"] == r.merge_id and entry["status"] == "no-op"
    assert entry["version_before"] == entry["version_after"]
    changed = merge(spark, f"DELETE FROM {t} WHERE id = 1")
    assert not changed.noop and history(spark, t)[0]["status"] == "committed"


def test_explain_runs_nothing_and_history_records_runs(spark, kv, caplog):
    t, source = kv
    s = source("(1, 'x', 1), (5, 'y', 1)")
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {t} AS JSON").collect()[0][0]
    import json

    root = json.loads(location)["location"]
    files_before = tree(root)
    plan = explain(spark, UPSERT.format(t=t, s=s), verbose=True)
    assert "CACHE LAZY TABLE" in plan and "RIGHT JOIN" in plan and "SET LOCATION" in plan
    # its headings are the plan's own steps, numbered as the progress lines number them (plan_steps)
    headings = re.findall(r"^-- (\d)\. (\w+):", plan, re.M)
    steps = macros.plan_steps()
    assert [name for _, name in headings] == [steps[int(n) - 1] for n, _ in headings]
    numbers = [int(n) for n, _ in headings]
    assert numbers == sorted(set(numbers)) and {"source", "changes", "summary", "write", "commit"} <= set(
        dict(headings).values()
    )
    assert tree(root) == files_before
    assert history(spark, t) == []
    with caplog.at_level(logging.INFO, logger="spark_merge"):
        r1 = merge(spark, UPSERT.format(t=t, s=s))
    # explain ran the plan the run runs: the run's progress lines name the same steps, in that order
    ran = re.findall(r"step (\d)/\d \((\w+)\):", caplog.text)
    assert ran == headings, (ran, headings)
    r2 = merge(spark, f"DELETE FROM {t} WHERE id = 5")
    entries = history(spark, t)
    assert [e["merge_id"] for e in entries] == [r2.merge_id, r1.merge_id]
    assert entries[1]["metrics"]["numTargetRowsInserted"] == 1 and entries[0]["kind"] == "delete"
    assert entries[1]["plan_hash"] == r1.plan_hash


def test_string_partitions_moved_by_matched_and_by_source_updates(spark, db):
    """The summary's partition bookkeeping with text partition values (aggregated by sorting, not
    by hash), NULL among them, and a target row matched by two source rows of which one chooses no
    clause: each row counted once, in the partition it leaves and the one it enters."""
    t = f"{db}.sp"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, region STRING) USING parquet PARTITIONED BY (region)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 'eu'), (2, 'b', 'eu'), (3, 'c', 'us'), (4, 'd', NULL), (5, 'e', 'old')")
    r = merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT * FROM VALUES (1, 'x', 'us'), (1, 'y', 'us'), (3, 'z', NULL), "
        f"(6, 'n', 'apac') AS s(id, v, region)) s ON t.id = s.id "
        "WHEN MATCHED AND s.v = 'x' THEN UPDATE SET v = s.v, region = s.region "
        "WHEN MATCHED AND s.v = 'z' THEN UPDATE SET region = s.region "
        "WHEN NOT MATCHED THEN INSERT * "
        "WHEN NOT MATCHED BY SOURCE AND t.region = 'old' THEN UPDATE SET region = 'eu'",
        duplicate_rule="trino",
    )
    assert rows(spark, t, "id") == [
        (1, "x", "us"),
        (2, "b", "eu"),
        (3, "c", None),
        (4, "d", None),
        (5, "e", "eu"),
        (6, "n", "apac"),
    ]
    m = r.metrics
    assert (
        m["numTargetRowsUpdated"],
        m["numTargetRowsNotMatchedBySourceUpdated"],
        m["numTargetRowsInserted"],
        m["numTargetRowsDeleted"],
    ) == (3, 1, 1, 0)
    assert sorted(p["region"] or "" for p in r.partitions) == ["", "apac", "eu", "old", "us"]
    # no MATCHED clause moves rows (the summary's hash path); a by-source update still does
    r = merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT 2 AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'w' "
        "WHEN NOT MATCHED BY SOURCE AND t.region = 'apac' THEN UPDATE SET region = NULL",
    )
    assert rows(spark, t, "id") == [
        (1, "x", "us"),
        (2, "w", "eu"),
        (3, "c", None),
        (4, "d", None),
        (5, "e", "eu"),
        (6, "n", None),
    ]
    assert sorted(p["region"] or "" for p in r.partitions) == ["", "apac", "eu"]
    assert r.metrics["numTargetRowsUpdated"] == 2
