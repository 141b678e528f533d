"""Tables a released spark-merge wrote, read, merged, rolled back and vacuumed by this code.

tests/fixtures/release-<version>.zip was made by that release's own code (tests/release_fixture.py):
its tables' files with their modification times, and the statements that rebuild their catalog entries.
Its files go back where the release wrote them (it recorded absolute locations), into a catalog that never
saw them.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from merge_core import history, merge, rollback, vacuum

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RELEASES = sorted(p.name.removeprefix("release-").removesuffix(".zip") for p in FIXTURES.glob("release-*.zip"))


@pytest.fixture
def release(spark, request):
    """The release's tables in this session's catalog; its manifest."""
    with zipfile.ZipFile(FIXTURES / f"release-{request.param}.zip") as z:
        manifest = json.loads(z.read("manifest.json"))
        root = Path(manifest["root"])
        shutil.rmtree(root, ignore_errors=True)
        z.extractall(root, members=[n for n in z.namelist() if n != "manifest.json"])
    for name, mtime_ns in manifest["mtimes_ns"].items():  # as the release left them: rollback reads them
        os.utime(root / name, ns=(mtime_ns, mtime_ns))
    spark.sql(f"DROP DATABASE IF EXISTS {manifest['database']} CASCADE")
    for sql in manifest["ddl"]:
        spark.sql(sql)
    yield manifest
    spark.sql(f"DROP DATABASE IF EXISTS {manifest['database']} CASCADE")
    shutil.rmtree(root, ignore_errors=True)


def rows(spark, table: str) -> list[list]:
    return [list(r) for r in spark.sql(f"SELECT * FROM {table} ORDER BY id").collect()]


def test_the_previous_release_has_a_fixture():
    assert "0.1.0" in RELEASES, "make it with tests/release_fixture.py"


@pytest.mark.parametrize("release", RELEASES, indirect=True)
def test_a_table_of_an_earlier_release_is_read_merged_rolled_back_and_vacuumed(spark, release):
    db = release["database"]
    for name, facts in release["tables"].items():
        table = f"{db}.{name}"
        assert rows(spark, table) == facts["rows_after"][-1]
        assert [e["merge_id"] for e in reversed(history(spark, table))] == facts["merge_ids"]
        props = dict(spark.sql(f"SHOW TBLPROPERTIES {table}").collect())
        assert "spark_merge.format_version" not in props  # format 1: the first release wrote none

        result = merge(spark, f"UPDATE {table} SET id = id + 100 WHERE id = 2")
        assert result.metrics["numTargetRowsUpdated"] == 1
        props = dict(spark.sql(f"SHOW TBLPROPERTIES {table}").collect())
        assert props["spark_merge.format_version"] == "2"  # upgraded by its first commit

        # back to before the release's last merge: the release's own versions are restored
        rollback(spark, table, facts["merge_ids"][-1])
        assert rows(spark, table) == facts["rows_after"][-2]
        vacuum(spark, table, retain_hours=0)
        assert rows(spark, table) == facts["rows_after"][-2]
        entries = history(spark, table, limit=100)
        assert {e["merge_id"] for e in entries} >= set(facts["merge_ids"])  # the release's history, kept
        assert {e["kind"] for e in entries if e["merge_id"] not in facts["merge_ids"]} >= {"update", "rollback"}
