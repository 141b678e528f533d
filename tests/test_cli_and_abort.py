"""The command line, and the abort path after data was staged."""

from __future__ import annotations

import json
import logging
import re

import pytest

from merge_core import merge
from merge_core.api.cli import main
from merge_core.spark.host import SparkHost

from .conftest import snapshot, tree


@pytest.fixture
def people(spark, db):
    t = f"{db}.people"
    spark.sql(f"CREATE TABLE {t} (id INT, name STRING, city STRING) USING parquet PARTITIONED BY (city)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'ann', 'a b+c%d:e=f'), (2, 'bob', 'plain'), (3, 'cy', 'x/y')")
    return t


def test_partition_values_with_special_characters(spark, people):
    merge(spark, f"UPDATE {people} SET name = upper(name) WHERE id IN (1, 3)")
    merge(
        spark,
        f"MERGE INTO {people} t USING (SELECT 4 AS id, 'di' AS name, 'a b+c%d:e=f' AS city) s "
        f"ON t.id = s.id WHEN NOT MATCHED THEN INSERT *",
    )
    got = sorted(tuple(r) for r in spark.sql(f"SELECT id, name, city FROM {people}").collect())
    assert got == [(1, "ANN", "a b+c%d:e=f"), (2, "bob", "plain"), (3, "CY", "x/y"), (4, "di", "a b+c%d:e=f")]


def test_cli_run_explain_history(spark, people, capsys):
    sql = f"UPDATE {people} SET name = 'zed' WHERE id = 2"
    assert main(["explain", "--sql", sql, "-q"]) == 0
    outline = capsys.readouterr().out  # for a person: the statement and the steps, no SQL, no plan columns
    assert "WHEN MATCHED THEN UPDATE" in outline and "steps:" in outline and "3. changes" in outline
    assert "CACHE LAZY TABLE" not in outline and "__sm_" not in outline, outline
    assert main(["explain", "--sql", sql, "-q", "--verbose"]) == 0
    verbose = capsys.readouterr().out  # each step's SQL: the summary's aggregation, the commit's repoint
    assert "-- 4. summary:" in verbose and "GROUP BY op, bys" in verbose and "SET LOCATION" in verbose
    # a dry run: the planning jobs run, the counts are reported, nothing is written or recorded
    root = json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {people} AS JSON").collect()[0][0])["location"]
    before, files_before = snapshot(spark, people), tree(root)
    assert main(["explain", "--sql", sql, "--counts", "-q"]) == 0
    out = capsys.readouterr().out
    ran = out.split("-- the statements the dry run ran")[1]  # the planning statements, then the counts
    assert "GROUP BY op, bys" in ran and "would insert 0, update 1, delete 0" in ran
    assert "rewriting 1 partition(s); nothing written" in out
    assert main(["run", "--sql", f"DELETE FROM {people} WHERE id >= 2", "--dry-run", "--json", "-q"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert (
        dry["dry_run"]
        and dry["metrics"]["numTargetRowsDeleted"] == 2
        and dry["metrics"]["numTargetPartitionsRewritten"] == 2
    )
    assert snapshot(spark, people) == before and tree(root) == files_before
    assert main(["history", people, "-q"]) == 0 and capsys.readouterr().out == ""
    assert main(["run", "--sql", sql, "--json", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics"]["numTargetRowsUpdated"] == 1 and out["partitions"] == [{"city": "plain"}]
    assert main(["history", people, "-q"]) == 0
    assert out["merge_id"] in capsys.readouterr().out
    assert main(["run", "--sql", f"UPDATE {people} SET nope = 1", "-q"]) == 2
    assert "unknown column nope" in capsys.readouterr().err
    # a duplicate match: the error names the target row, the source rows that matched it, the clauses
    dup = (
        f"MERGE INTO {people} t USING (SELECT 2 AS id, 'b1' AS name UNION ALL SELECT 2, 'b2') s ON t.id = s.id "
        "WHEN MATCHED AND s.name = 'b1' THEN UPDATE SET name = s.name WHEN MATCHED THEN DELETE"
    )
    assert main(["run", "--sql", dup, "-q"]) == 2
    err = capsys.readouterr().err
    assert "id='2', source_rows=2, matched by:" in err
    assert "source row (id=2, name='b1') chose WHEN MATCHED clause 1 (UPDATE) AND s.name = 'b1'" in err
    assert "source row (id=2, name='b2') chose WHEN MATCHED clause 2 (DELETE)" in err


def test_cli_run_prints_its_summary_once_and_logs_progress_not_json(spark, people, capsys, caplog):
    """The CLI prints the end-of-run summary to stdout; its log (stderr) keeps the progress lines but
    neither repeats the summary nor carries the step records (BEGIN/PLAN/FINISH JSON, at DEBUG)."""
    caplog.set_level(logging.INFO)
    assert main(["run", "--sql", f"UPDATE {people} SET name = 'yan' WHERE id = 2"]) == 0
    out = capsys.readouterr().out
    assert out.count("updated 1, deleted 0") == 1, out
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "updated 1, deleted 0" not in logged
    assert re.search(r"^\[[^]]+\] \w", logged, re.M), logged  # the steps, as they run
    assert not re.search(r"^(BEGIN|PLAN|FINISH) \{", logged, re.M), logged


@pytest.mark.parametrize(
    "kind, statement",
    [
        (
            "merge",
            "MERGE INTO {t} t USING (SELECT 2 AS id, 'zed' AS name) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET name = s.name",
        ),
        (
            "by_source",
            "MERGE INTO {t} t USING (SELECT 2 AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE "
            "WHEN NOT MATCHED BY SOURCE AND city = 'x/y' THEN UPDATE SET name = 'gone'",
        ),
        (
            "insert_only",
            "MERGE INTO {t} t USING (SELECT 9 AS id, 'new' AS name, 'plain' AS city) s ON t.id = s.id "
            "WHEN NOT MATCHED THEN INSERT *",
        ),
        ("update", "UPDATE {t} SET name = 'zed' WHERE id = 2"),
        ("delete", "DELETE FROM {t} WHERE city = 'x/y'"),
    ],
)
def test_explain_counts_prints_the_planning_statements_the_run_issues(spark, people, capsys, kind, statement):
    """explain prints the plan before anything runs, but the key range and the partitions are only known
    once the source is read: --counts runs the planning jobs and prints the statements they ran. A real
    run of the same statement then issues exactly those statements first (apart from the merge id)."""
    from merge_core.api.cli import _recorded

    sql = statement.format(t=people)
    assert main(["explain", "--sql", sql, "--counts", "-q"]) == 0
    out = capsys.readouterr().out
    dry = out.split("-- the statements the dry run ran")[1].split("\n", 1)[1]
    dry = dry.split(";\n\n")[:-1]  # each statement ends with ";" and a blank line; the summary follows
    planning = list(dry)
    while planning and planning[-1].startswith(("UNCACHE", "DROP")):  # the dry run's clean-up follows
        planning.pop()
    ids = re.compile(r"\d{14}_[0-9a-f]{8}")
    status, issued = _recorded(lambda: main(["run", "--sql", sql, "-q"]))
    assert status == 0
    if kind == "merge":
        assert any("BETWEEN CAST('2' AS int) AND CAST('2' AS int)" in st for st in planning)  # the real range
    assert len(planning) >= 3 and len(issued) > len(planning)  # then the write and the commit
    dry_run, run = [ids.sub("<id>", st) for st in planning], [ids.sub("<id>", st) for st in issued[: len(planning)]]
    if kind == "merge":
        # the run writes in one pass: where the dry run counts the changes in the summary, the run joins
        # the rows ON matches (to name the files holding one), and its write counts them
        found = run[-1].startswith("CACHE LAZY TABLE `__sm_found_") or " AS files\nFROM " in run[-1]
        assert dry_run[-1].startswith("SELECT op, bys") and found, (
            dry_run[-1],
            run[-1],
        )
        dry_run, run = dry_run[:-1], run[:-1]
    assert dry_run == run


def test_failure_after_staging_leaves_table_and_disk_as_they_were(spark, people, monkeypatch):
    root = json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {people} AS JSON").collect()[0][0])["location"]
    before, files_before = snapshot(spark, people), tree(root)

    def fail(*args):
        raise RuntimeError("metastore went away")

    monkeypatch.setattr(SparkHost, "journal", fail)
    with pytest.raises(RuntimeError, match="metastore went away"):
        merge(spark, f"UPDATE {people} SET name = 'x' WHERE id = 1")
    assert snapshot(spark, people) == before
    # the staged _merge_<id> directory is gone; only spark-merge's own (empty) lock folder may remain
    assert {p for p in tree(root) if not p.startswith("_spark_merge")} == files_before
    db = people.split(".")[0]
    assert not [r for r in spark.sql(f"SHOW TABLES IN {db}").collect() if r.tableName.startswith("__sm_")]
