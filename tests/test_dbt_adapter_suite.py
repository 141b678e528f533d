"""dbt's own reusable adapter tests (dbt-tests-adapter) for `incremental_strategy='merge'` on parquet,
through spark-merge: the expectations are dbt's, subclassed as dbt-spark's functional tests subclass
them (tests/functional/adapter/incremental/ there), with the file format parquet instead of delta.

The project each class gets is dbt's test project (dbt.tests.fixtures.project) with this package
installed (`dbt deps`) and the one-line override of the incremental materialization a user adds
(docs/dbt.md), over dbt-spark's session method on this run's SparkSession. docs/dbt.md lists which of
dbt's tests run here, and why the others do not.
"""

from __future__ import annotations

import pytest
from dbt.tests.adapter.basic.test_incremental import BaseIncremental, BaseIncrementalNotSchemaChange
from dbt.tests.adapter.incremental.test_incremental_merge_exclude_columns import BaseMergeExcludeColumns
from dbt.tests.adapter.incremental.test_incremental_microbatch import (
    BaseMicrobatch,
    _microbatch_model_sql as MICROBATCH_MODEL,
)
from dbt.tests.adapter.incremental.test_incremental_on_schema_change import BaseIncrementalOnSchemaChange
from dbt.tests.adapter.incremental.test_incremental_predicates import BaseIncrementalPredicates
from dbt.tests.adapter.incremental.test_incremental_unique_id import BaseIncrementalUniqueKey
from dbt.tests.fixtures.project import *  # noqa: F403 - dbt's project fixtures, as its adapter suites use them
from dbt.tests.util import run_dbt

from dbt_macros import PACKAGE_DIR

# dbt's suites declare class-scoped fixtures as methods, which pytest 9 warns about
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")

# the override a project adds to run dbt-spark's incremental models on spark-merge (docs/dbt.md)
OVERRIDES = {
    "spark_merge_incremental.sql": "{% materialization incremental, adapter='spark' %}"
    "{{ return(spark_merge.incremental()) }}{% endmaterialization %}",
    "is_incremental.sql": "{% macro is_incremental() %}{{ return(spark_merge.is_incremental()) }}{% endmacro %}",
}
MERGE_ON_PARQUET = {"+file_format": "parquet", "+incremental_strategy": "merge"}


@pytest.fixture(scope="module", autouse=True)
def session_conf(spark):
    """The session's settings this module changes, put back for the tests after it once every class's
    project is torn down (dbt-spark turns ANSI mode off at each statement it runs, its schema drops too)."""
    names = ("spark.sql.storeAssignmentPolicy", "spark.sql.ansi.enabled")
    kept = {name: spark.conf.get(name) for name in names}
    yield
    for name, value in kept.items():
        spark.conf.set(name, value)


class SparkMergeProject:
    """dbt's test project on this run's SparkSession (dbt-spark's session method reuses it), with the
    package installed and the override in its macros."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, spark):
        return {"type": "spark", "method": "session", "host": "NA", "threads": 1, "schema": "dbt_suite"}

    @pytest.fixture(scope="class", autouse=True)
    def lenient_inserts(self, spark, session_conf):
        """dbt's fixtures insert date text into DATE columns (`insert into seed values (..., '2022-05-13')`),
        which Spark 4's ANSI store assignment refuses and Spark 3, which dbt-spark's suite ran on, cast."""
        spark.conf.set("spark.sql.storeAssignmentPolicy", "LEGACY")

    @pytest.fixture(scope="class", autouse=True)
    def null_seed_cells(self):
        """dbt-spark's session method loads an empty seed cell as the text 'None' (its binding quotes
        every value: SessionConnectionWrapper._fix_binding), where dbt's expectations, and its Thrift
        method, have NULL: that one function is corrected for these tests."""
        from dbt.adapters.spark.session import SessionConnectionWrapper

        quoted = SessionConnectionWrapper.__dict__["_fix_binding"]
        SessionConnectionWrapper._fix_binding = classmethod(
            lambda cls, value: "NULL" if value is None else quoted.__func__(cls, value)
        )
        yield
        SessionConnectionWrapper._fix_binding = quoted

    @pytest.fixture(scope="class")
    def packages(self):
        return {"packages": [{"local": str(PACKAGE_DIR)}]}

    @pytest.fixture(scope="class")
    def macros(self):
        return OVERRIDES

    @pytest.fixture(scope="class", autouse=True)
    def installed(self, project):
        run_dbt(["deps"])
        run_dbt(["parse"])  # deps leaves no adapter registered; the suites' fixtures use it before a run

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": MERGE_ON_PARQUET}


class TestIncrementalUniqueKeyOnParquet(SparkMergeProject, BaseIncrementalUniqueKey):
    pass


class TestMergeExcludeColumnsOnParquet(SparkMergeProject, BaseMergeExcludeColumns):
    pass


class TestIncrementalPredicatesMergeOnParquet(SparkMergeProject, BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {**MERGE_ON_PARQUET, "+incremental_predicates": ["dbt_internal_dest.id != 2"]}}


class TestPredicatesMergeOnParquet(SparkMergeProject, BaseIncrementalPredicates):
    """dbt-spark reads the older name `predicates` too: applied, never ignored."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {**MERGE_ON_PARQUET, "+predicates": ["dbt_internal_dest.id != 2"]}}


class TestIncrementalOnSchemaChangeOnParquet(SparkMergeProject, BaseIncrementalOnSchemaChange):
    def test_run_incremental_sync_all_columns(self, project):
        """dbt's test drops a column in place; a parquet table's columns cannot be dropped or retyped
        in place (ALTER TABLE ... DROP COLUMNS is refused for it), so the run that would is refused,
        naming the fix, and writes nothing (docs/dbt.md)."""
        select = "model_a incremental_sync_all_columns"
        run_dbt(["run", "--select", select])
        results = run_dbt(["run", "--select", select], expect_pass=False)
        [failed] = [r for r in results if r.status == "error"]
        assert failed.node.name == "incremental_sync_all_columns"
        assert "on_schema_change sync_all_columns cannot drop or retype columns of a parquet table" in failed.message


class TestIncrementalOnParquet(SparkMergeProject, BaseIncremental):
    pass


class TestIncrementalNotSchemaChangeOnParquet(SparkMergeProject, BaseIncrementalNotSchemaChange):
    pass


class TestMicrobatchOnParquet(SparkMergeProject, BaseMicrobatch):
    """dbt's microbatch model, without its unique_key: a batch replaces its window of event_time whatever
    the key, so spark-merge refuses a unique_key there rather than ignore it (docs/dbt.md)."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+file_format": "parquet"}}

    @pytest.fixture(scope="class")
    def microbatch_model_sql(self):
        assert "unique_key='id', " in MICROBATCH_MODEL
        return MICROBATCH_MODEL.replace("unique_key='id', ", "")
