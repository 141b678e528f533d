"""What a user can get wrong, and what other tools leave behind: bad metadata and options, tables
of another format registered as parquet, catalog tables of killed merges. Every failure is a
MergeError that names the problem and the fix; the table stays byte-identical."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from merge_core import CorruptJournal, MergeError, SpecError, TargetError, merge, repair_journal, vacuum
from merge_core.api.cli import main
from merge_core.spark.catalog import describe_table

from .conftest import rows, snapshot


@pytest.fixture
def t(spark, db):
    name = f"{db}.t"
    spark.sql(f"CREATE TABLE {name} (id INT, d DECIMAL(5, 2), p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {name} VALUES (1, 1.50, 1), (2, 2.50, 2)")
    return name


def _location(spark, name) -> Path:
    return Path(describe_table(spark, name.split("."))["location"].removeprefix("file:"))


def test_a_corrupt_journal_stops_merges_with_a_repair_command_that_changes_nothing_else(spark, t, capsys):
    spark.sql(
        f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.journal.parts' = '2', "
        f"'spark_merge.journal.0' = '{{\"merge_id\": \"m\", \"repo', 'spark_merge.journal.merge_id' = 'm')"
    )
    before = snapshot(spark, t)
    with pytest.raises(
        CorruptJournal,
        match=r"cannot be used: its 2 part\(s\) are not the JSON a commit wrote.*spark-merge repair-journal",
    ):
        merge(spark, f"UPDATE {t} SET d = 0 WHERE id = 1")
    assert snapshot(spark, t) == before
    assert main(["recover", t, "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: MERGE_CORRUPT_JOURNAL: ")
    assert main(["repair-journal", t, "-q"]) == 0
    out = capsys.readouterr().out
    assert "the commit journal cannot be used" in out and "cleared it" in out and '"merge_id": "m", "repo' in out
    after_rows, after_files, props = snapshot(spark, t)
    assert (after_rows, after_files) == before[:2] and props["spark_merge.journal.parts"] == "0"
    assert not [k for k in props if k.startswith("spark_merge.journal.") and k[-1].isdigit()]
    assert repair_journal(spark, t) is None
    merge(spark, f"UPDATE {t} SET d = 0 WHERE id = 1")
    assert rows(spark, t)[0][1] == 0


def test_a_readable_journal_is_never_cleared_by_repair(spark, t):
    spark.sql(
        f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.journal.parts' = '1', "
        f'\'spark_merge.journal.0\' = \'{{"merge_id": "m", "repoints": []}}\')'
    )
    with pytest.raises(SpecError, match="can be used: `spark-merge recover"):
        repair_journal(spark, t)


def test_a_bad_retention_property_is_named_with_its_fix(spark, t, capsys):
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.retention_hours' = 'abc')")
    before = snapshot(spark, t)
    with pytest.raises(SpecError, match=r"spark_merge.retention_hours of .* is 'abc'.*SET TBLPROPERTIES"):
        vacuum(spark, t)
    assert main(["vacuum", t, "-q"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert snapshot(spark, t) == before


def test_a_decimal_overflow_is_a_merge_error_before_any_write(spark, t):
    before = snapshot(spark, t)
    with pytest.raises(MergeError, match="nothing was written") as e:
        merge(spark, f"UPDATE {t} SET d = d * 1000 WHERE id = 1")
    assert "Py4J" not in str(e.value) and "\tat " not in str(e.value)
    assert snapshot(spark, t) == before


@pytest.mark.parametrize(
    "marker,format_name",
    [
        ("_delta_log/00000000000000000000.json", "Delta Lake"),
        ("metadata/v1.metadata.json", "Apache Iceberg"),
        (".hoodie/hoodie.properties", "Apache Hudi"),
    ],
)
def test_a_table_of_another_format_registered_as_parquet_is_refused(spark, t, marker, format_name):
    path = _location(spark, t) / marker
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    before = snapshot(spark, t)
    with pytest.raises(TargetError, match=f"holds {format_name}"):
        merge(spark, f"UPDATE {t} SET d = 0 WHERE id = 1")
    with pytest.raises(TargetError, match=f"holds {format_name}"):
        vacuum(spark, t)
    assert snapshot(spark, t) == before


def test_catalog_tables_of_killed_merges_are_dropped_by_begin_and_vacuum(spark, t, db, tmp_path, caplog):
    young = f"__sm_stage_{datetime.now(UTC):%Y%m%d%H%M%S}_0000beef"
    for name in ("__sm_stage_20200101000000_deadbeef", "__sm_chg_20200101000000_deadbeef", young):
        spark.sql(f"CREATE TABLE {db}.{name} (x INT) USING parquet LOCATION '{tmp_path / name}'")
    with caplog.at_level("WARNING", logger="spark_merge"):
        merge(spark, f"UPDATE {t} SET d = 0 WHERE id = 1")
    assert "dropped 2 table(s) left by merges that died" in caplog.text  # the user is told
    left = sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN {db} LIKE '__sm_*'").collect() if not r.isTemporary)
    assert left == [young]  # a younger one may belong to a merge of another process still running
    spark.sql(f"CREATE TABLE {db}.__sm_src_20200101000000_deadbeef (x INT) USING parquet")
    vacuum(spark, t)
    assert sorted(
        r.tableName for r in spark.sql(f"SHOW TABLES IN {db} LIKE '__sm_*'").collect() if not r.isTemporary
    ) == [young]
