"""One SparkSession for the whole run (a cold start costs 15-25 s), a fresh database per test."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster import app_conf

_counter = itertools.count()
# a command of the suite (in this process or a subprocess) starts no warm server by itself: the tests
# that exercise that start and stop their own (test_server.py)
os.environ["SPARK_MERGE_AUTO_SERVER"] = "0"


def pytest_configure(config):
    """Airflow reads its home and metadata database, and installs a root log handler on the output of
    the moment, when it is first imported; more than one test file imports it (unit/test_options.py,
    test_airflow.py), in whatever order a worker runs them. So each process points Airflow at its own
    home and imports it here, before any test: its handler then writes to the session's output, not to
    one test's captured output, which is closed when that test ends. test_airflow.py's ``airflow_home``
    fills the home in (its DAGs, its database)."""
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="sm-airflow-"))
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            # OpenLineage events of every task, one JSON per line
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                {"type": "file", "log_file_path": str(home / "lineage.jsonl"), "append": True}
            ),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "spark_merge_tests",
            # emit from a thread, not a fork: a forked child closes the py4j socket it shares with the task
            "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
        }
    )
    config.add_cleanup(lambda: shutil.rmtree(home, ignore_errors=True))
    import airflow.settings  # noqa: F401  (the import is the point: see above)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from merge_core.spark.session import get_session

    home = tmp_path_factory.mktemp("spark_home")
    master = os.environ.get("SPARK_MASTER", "local[2]")  # test_cluster.py runs a subset on spark://
    conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        # one driver for the whole run: its parser and plan caches grow with every test's statements
        "spark.driver.memory": "3g",
        **app_conf(master, short_lived=False),
    }
    session = get_session(master=master, warehouse=str(home), conf=conf)
    if master.startswith("spark://"):
        _wait_for_executors(session, 2)
    yield session
    session.stop()


def _wait_for_executors(session, n: int, timeout: float = 90) -> None:
    """A cluster run must really run tasks in other JVMs: wait until ``n`` executors registered."""
    deadline = time.monotonic() + timeout
    while session.sparkContext._jsc.sc().getExecutorIds().size() < n:
        if time.monotonic() > deadline:
            pytest.fail(f"{n} executors did not register with {session.sparkContext.master} in {timeout:.0f} s")
        time.sleep(0.5)


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """A throwaway PostgreSQL server (tests/pg_server.py); its JDBC URL. CI installs PostgreSQL
    (.ci/run); elsewhere, without it, the PostgreSQL tests are skipped."""
    from tests.pg_server import Server, binaries

    if binaries() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed: .ci/run installs the postgresql package")
        pytest.skip("PostgreSQL server binaries not installed (Debian package postgresql)")
    root = Path("/tmp") / f"sm_pg_{os.getpid()}"  # the postgres user must reach it: not under /root
    server = Server(root).start()
    yield server.url
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def hive_metastore(postgres, tmp_path_factory):
    from tests.hive_metastore import HiveMetastore

    service = HiveMetastore(tmp_path_factory.mktemp("hms"), postgres).start()
    yield service
    service.stop()


@pytest.fixture
def db(spark):
    """A database of its own for each test, so tests never see each other's tables."""
    name = f"t{os.getpid()}_{next(_counter)}"
    spark.sql(f"CREATE DATABASE {name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


@pytest.fixture
def traced():
    """The statements and host primitives of every lifecycle the test runs, in order (host.trace)."""
    from merge_core.spark import host

    host.trace = []
    yield host.trace
    host.trace = None


@pytest.fixture
def parts(spark, db):
    """ids 1-5 over partitions 0, 1 (two rows), NULL and 2."""
    t = f"{db}.parts"
    spark.sql(f"CREATE TABLE {t} (id INT, v STRING, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 0), (2, 'b', 1), (3, 'c', 1), (4, 'd', CAST(NULL AS INT)), (5, 'e', 2)")
    return t


@pytest.fixture
def sales(spark, db):
    """Four partitions p=0..3 of five rows each, in the default partition directories."""
    t = f"{db}.sales"
    spark.sql(
        f"CREATE TABLE {t} USING parquet PARTITIONED BY (p) "
        f"AS SELECT CAST(id AS INT) AS id, CAST(id * 10 AS INT) AS v, CAST(id % 4 AS INT) AS p FROM range(20)"
    )
    return t


def location(spark, table: str, partition: str | None = None) -> str:
    """Where the catalog points the table, or one partition of it ("p=1")."""
    spec = f" PARTITION ({partition})" if partition else ""
    return json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {table}{spec} AS JSON").collect()[0][0])["location"]


def props(spark, table: str) -> dict[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A real Spark Connect server from pyspark's own sbin scripts, on a free loopback port."""
    import pyspark

    home = tmp_path_factory.mktemp("connect")
    spark_home = Path(pyspark.__file__).parent
    port = free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_LOG_DIR": str(home / "logs"),
        "SPARK_PID_DIR": str(home),
        "SPARK_IDENT_STRING": f"sm{port}",
    }
    confs = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(home / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={home / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={home}",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
    }
    args = [str(spark_home / "sbin" / "start-connect-server.sh"), "--master", "local[2]"]
    for k, v in confs.items():
        args += ["--conf", f"{k}={v}"]
    started = subprocess.run(args, env=env, capture_output=True, text=True)
    assert started.returncode == 0, started.stdout + started.stderr
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(1)
    else:
        logs = "\n".join(p.read_text()[-3000:] for p in (home / "logs").glob("*"))
        pytest.fail(f"Spark Connect server did not listen on {port}: {logs}")
    yield f"sc://127.0.0.1:{port}"
    subprocess.run([str(spark_home / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True)


def rows(spark, table: str, order: str = "1") -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT * FROM {table} ORDER BY {order}").collect()]


def table_files(spark, table: str) -> dict[str, int]:
    """Every data file the table reads now, with its size: what 'unchanged' means."""
    return {
        r[0]: r[1]
        for r in spark.sql(f"SELECT DISTINCT _metadata.file_path, _metadata.file_size FROM {table}").collect()
    }


def snapshot(spark, table: str):
    """Rows, files and table properties: a rejected merge must leave all three as they were."""
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    return rows(spark, table), table_files(spark, table), props


def tree(path: str) -> set[str]:
    root = Path(path.removeprefix("file:"))
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# End-to-end tests CI leaves to the extended tier (make test-all) to stay within its half hour, each
# with the CI test that covers the same rule (a test id, or its prefix for every parameter of it)
CI_LEAVES_OUT = {
    "test_dbt.py::test_full_refresh_is_a_commit_rollback_undoes": "test_conformance.py's rollbacks, test_retention.py",
    "test_dbt.py::test_is_incremental_filters_the_runs_that_merge": "test_dbt_sparks_incremental_merge_runs_on_parquet_...",
    "test_dbt.py::test_duplicate_match_fails_the_model_and_leaves_the_table": "test_config_errors_are_compilation_errors, test_corruption.py's duplicates",
    "test_dbt.py::test_on_schema_change[session-append_new_columns": "test_on_schema_change[session-sync_all_columns-...]",
    "test_dbt.py::test_show_unit_tests_and_empty_runs_work_on_a_merge_model": "test_first_run_creates_later_runs_merge_...",
    "test_dbt.py::test_commit_interrupted_in_python_is_finished_by_the_next_dbt_run": "test_durable.py, test_conformance.py's recover",
    "test_dbt.py::test_rows_appended_while_a_model_stages_make_a_conflict": "test_corruption.py's appends, dbt's statements in test_conformance.py",
    "test_dbt.py::test_a_project_without_the_override_file_merges_with_the_packages_flag": "test_dbt_sparks_incremental_merge_runs_...",
    "test_dbt.py::test_dbt_sparks_merge_without_a_unique_key_inserts": "test_dbt_sparks_incremental_merge_runs_on_parquet_...",
    "test_crash.py::test_sigkill_with_the_change_feed_leaves_feed_and_table_agreeing": "test_soak.py's kills, test_changes_over_time.py",
    "test_changes_over_time.py::test_the_feed_records_every_change_of_every_commit_and_replays_to_the_table[unpartitioned]": "[partitioned]",
    "test_changes_over_time.py::test_read_as_of_reads_each_version_without_touching_the_table[unpartitioned]": "[partitioned]",
    "test_catalog_operations.py::test_a_renamed_table_keeps_its_identity_history_rollback_and_vacuum_once_adopted[unpartitioned]": "[partition]",
    "test_catalog_operations.py::test_add_partition_msck_and_refresh_change_nothing_spark_merge_keeps": "the random operations test",
    "test_server.py::test_server_start_run_history_stop": "test_the_first_command_starts_a_server_every_entry_point_uses_...",
    "test_shared_metastore.py": "test_concurrency.py (threads of one application), test_soak.py",
    "test_airflow.py::test_a_deferrable_task_waits_in_the_trigger": "test_server.py's merge service, test_durable.py",
    "test_airflow.py::test_gdpr_delete_takes_ids_as_values_never_as_sql": "test_hostile_inputs.py",
    "test_airflow.py::test_outlets_naming_another_table_fail_the_task_before_it_writes": "test_example_dags_run_...",
    "test_dbt.py::test_clauses_with_delete[thrift]": "dbt in-session in CI; Thrift: test_dataframe_api.py over Spark Connect",
    "test_dbt.py::test_on_schema_change": "test_schema_evolution.py, dbt's statements in test_conformance.py",
    "test_engines.py::test_sequence_group": "test_partial_update_fills_fields_with_the_latest_non_null",
    "test_engines.py::test_aggregation_in": "test_aggregation_max_and_sum",
    "test_engines.py::test_default_aggregate_function_in_partial_update": "test_aggregation_max_and_sum",
    "test_engines.py::test_remove_record_on_delete_removes": "test_remove_record_on_delete_refused_where_...",
    "test_engines.py::test_remove_record_on_delete_in_aggregation": "test_remove_record_on_delete_refused_where_...",
    "test_engines.py::test_nested_update_builds_a_wide_order": "test_nested_fields.py",
    "test_engines.py::test_retraction_of_every_function_that_supports_it": "test_functions_that_cannot_retract_...",
    "test_engines.py::test_each_function": "test_aggregation_max_and_sum, test_changes_over_time.py's engines",
    "test_engines.py::test_distinct_collect_and_listagg_with_delimiter": "test_aggregation_max_and_sum",
    "test_engines.py::test_deduplicate_stale_record_changes_nothing": "test_deduplicate_keeps_the_latest_...",
    "test_engines.py::test_deduplicate_latest_delete": "test_deduplicate_keeps_the_latest_..., test_upsert.py",
    "test_engines.py::test_input_order_is_the_source_tables_files": "test_deduplicate_keeps_the_latest_...",
    "test_engines.py::test_a_query_source_with_a_repeated_key_needs_a_sequence_field": "test_configuration_errors_...",
    "test_engines.py::test_cli_engine_upsert_with_paimon_style_field_options": "test_field_options_parse_paimon_names",
    "test_char_varchar.py::test_the_dataframe_builder_and_the_insert_only_path_refuse_too": "the other test there",
    "test_readers.py::test_a_classic_session_commits_all_partitions_in_one_metastore_call": "test_statement_by_...",
    "test_upsert.py::test_shuffled_and_repeated_batches_give_the_same_table": "test_reapplying_a_batch_changes_nothing",
    "test_postgres.py::test_killed_merge_leaves_no_trace": "test_soak.py's kills, test_postgres.py's noop and refusals",
    "test_conformance.py::test_dbt_and_python_issue_the_same_statements[not_matched_by_source]": "[upsert], [insert_only]",
    "test_conformance.py::test_dbt_and_python_issue_the_same_statements[merge_on_read]": "[upsert], [insert_only]",
    "test_conformance.py::test_dbt_operations_and_python_statements_issue_the_same_statements[update]": "[conflict]",
    "test_conformance.py::test_dbt_operations_and_python_statements_issue_the_same_statements[delete]": "[conflict]",
    "test_catalog_operations.py::test_an_edited_table_id_is_refused_before_anything_is_written_and_adopt_restores_it[another": "[garbage]",
    "test_corruption.py::test_null_partitions_through_merge_on_read_compaction_and_a_merge_engine": "the NULL partition tests",
    "test_corruption.py::test_an_integer_null_partition_with_upsert_rollback_and_vacuum": "the NULL partition tests",
    "test_fused_write.py::test_a_source_too_large_to_broadcast_is_joined_once_and_spread[t.id = s.id AND": "[t.id = s.id]",
    # the end-to-end streaming kill and the DataFrame API over a Connect server of its own
    "test_streaming.py::test_a_killed_and_restarted_query_merges_every_batch_exactly_once": "test_a_batch_replayed_from_the_checkpoint_...",
    "test_dataframe_api.py::test_over_spark_connect": "test_docs.py's README and test_server.py's first command (the warm server is a Connect server)",
    # a scenario under each duplicate rule: one rule per scenario in CI; every rule against DuckDB in test_differential.py,
    # and each rule's check SQL in tests/unit/golden
    "test_corruption.py::test_two_source_rows_choosing_different_clauses_for_one_row_are_refused[UPDATE SET a = 200-postgres]": "[...-trino], [DELETE-postgres]",
    "test_corruption.py::test_two_source_rows_choosing_different_clauses_for_one_row_are_refused[DELETE-trino]": "[DELETE-postgres], [...-trino]",
    "test_corruption.py::test_two_source_rows_choosing_different_clauses_for_one_row_are_refused[DELETE-strict]": "[UPDATE SET a = 200-strict]",
    "test_corruption.py::test_one_update_and_one_unchosen_match_differ_only_by_rule[postgres": "[trino-False], [strict-True]",
    "test_corruption.py::test_a_lone_unconditional_delete_matched_twice[postgres": "[trino-True], [strict-False]",
    "test_corruption.py::test_only_not_matched_clauses_with_a_repeated_match[postgres": "[trino-True], [strict-False]",
    "test_fused_write.py::test_a_row_joined_with_several_source_rows_is_written_once[postgres": "[trino-...], [strict-...]",
    # more cases of one rule
    "test_trust.py::test_a_journal_that_cannot_be_used_is_refused_and_repair_journal_clears_it[[1, 2]": "the other journal cases, unit/test_metadata_shapes.py",
    'test_trust.py::test_a_journal_that_cannot_be_used_is_refused_and_repair_journal_clears_it[{"merge_id": "x", "repoints": [{"a": 1}]}': "the other journal cases, unit/test_metadata_shapes.py",
    "test_trust.py::test_a_history_entry_that_cannot_be_used_stops_vacuum_and_rollback_until_repaired[not json]": "[another table's], test_metadata_fuzz.py",
    "test_fused_write.py::test_a_write_without_a_shuffled_join_keeps_rows_in_their_scan_tasks[DELETE": "the UPDATE cases",
    "test_fused_write.py::test_a_write_without_a_shuffled_join_keeps_rows_in_their_scan_tasks[UPDATE {t} SET v = 'u' WHERE id IN": "[UPDATE {t} SET v = 'u' WHERE id = 1-1]",
    "test_fused_write.py::test_a_small_target_is_broadcast_to_the_summary_and_the_inserts[by source": "[partitioned-False], [unpartitioned-True]",
    "test_fused_write.py::test_a_small_target_is_broadcast_to_the_summary_and_the_inserts[too many rows": "[partitioned-False]",
    "test_upsert.py::test_bad_upsert_options_are_rejected_before_anything_is_touched[options1": "[options0-...], unit/test_options.py",
    "test_upsert.py::test_bad_upsert_options_are_rejected_before_anything_is_touched[options2": "[options0-...], unit/test_options.py",
    "test_upsert.py::test_bad_upsert_options_are_rejected_before_anything_is_touched[options4": "[options3-...], unit/test_options.py",
    "test_upsert.py::test_each_tombstone_type[INT": "the BOOLEAN and STRING cases",
    "test_upsert.py::test_each_tombstone_type[TIMESTAMP": "the BOOLEAN and STRING cases",
    "test_cost_and_commit.py::test_a_merge_leaves_no_cached_data_and_no_view_behind[cached]": "[written_once]",
    "test_conformance.py::test_dbt_and_python_issue_the_same_statements[engine_upsert]": "[upsert] (the log's begin and plan), test_engines.py",
    # each engine's fold runs in CI in test_changes_over_time.py's per-engine changelog test, and its SQL is
    # pinned in tests/unit/golden (engine_*.sql, functions_*.sql)
    "test_engines.py::test_first_row_keeps_the_first_row": "test_each_merge_engine_records_the_changelog_paimon_would, unit goldens",
    "test_engines.py::test_aggregation_max_and_sum": "test_each_merge_engine_records_the_changelog_paimon_would, unit goldens",
    "test_engines.py::test_deduplicate_keeps_the_latest_by_sequence_field_out_of_order": "test_each_merge_engine_records_...",
    # a statement that does not parse is refused before any Spark call: its messages are unit/test_parse.py's
    "test_validation.py::test_rejected_before_anything_is_touched[unparsable SQL]": "unit/test_parse.py::test_bad_statements",
    "test_validation.py::test_rejected_before_anything_is_touched[not a DML statement]": "unit/test_parse.py::test_bad_statements",
    "test_validation.py::test_rejected_before_anything_is_touched[MERGE without ON]": "unit/test_parse.py::test_bad_statements",
    "test_validation.py::test_rejected_before_anything_is_touched[two statements]": "unit/test_parse.py::test_bad_statements",
    # the warm server's automatic start: the README test starts it by its first command, runs every
    # block through it and stops it
    "test_server.py::test_the_first_command_starts_a_server_every_entry_point_uses": "test_docs.py's README test",
    # the random model of catalog operations: each operation has its own test in the same file
    "test_catalog_operations.py::test_random_operations_keep_the_rows_of_a_model": "the file's test of each operation",
    "test_upsert.py::test_merge_on_read_view_agrees_with_copy_on_write": "test_changes_over_time.py's merge-on-read upsert",
    "test_upsert.py::test_definition_examples[batches1]": "[batches0], [batches2]",
    "test_upsert.py::test_definition_examples[batches3]": "[batches0], [batches2]",
    "test_semantics.py::TestDuplicateRules::test_same_clause_is_an_error_under_every_rule": "test_differential.py (every rule)",
    "test_cli_and_abort.py::test_explain_counts_prints_the_planning_statements_the_run_issues[update": "[merge], [by_source]",
    "test_cli_and_abort.py::test_explain_counts_prints_the_planning_statements_the_run_issues[delete": "[merge], [by_source]",
    # the engines' refusals are the unit tier's (unit/test_engine_options.py, every case against the macro);
    # through a merge in CI: an unknown engine, a type, an allowed configuration, two kinds of upsert
    "test_engines.py::test_configuration_errors_name_the_problem[options1-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options3-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options4-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options5-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options6-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options7-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options8-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options9-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options10-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options11-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options12-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options14-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options15-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options16-": "unit/test_engine_options.py",
    "test_engines.py::test_configuration_errors_name_the_problem[options17-": "unit/test_engine_options.py",
    "test_corruption.py::test_a_random_partition_move_keeps_every_row": "test_a_random_assignment_of_the_partition_column_keeps_every_row, test_fused_write.py's seeded move",
    "test_semantics.py::TestDuplicateRules::test_no_clause_twice": "test_differential.py (every rule), test_corruption.py's unchosen match by rule",
    "test_semantics.py::test_a_leading_with_clause": "unit/test_parse.py::test_leading_with_is_inlined_where_the_statement_names_it",
    "test_upsert.py::test_definition_examples[batches2]": "[batches0]",
    "test_fused_write.py::test_a_target_row_outside_partition_filter_is_absent_yet_copied[True]": "[False]",
    "test_fused_write.py::test_a_small_target_is_broadcast_to_the_summary_and_the_inserts[unpartitioned": "[partitioned-False], [by source-False]",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """A dbt test runs over Thrift in CI only when marked thrift_ci (test_dbt.py), and then only over
    Thrift (the session is every other test's); every dbt test runs both ways in the extended tier
    (make test-all). The tests of CI_LEAVES_OUT run in the extended tier only."""
    for item in items:
        params = getattr(item, "callspec", None)
        project = params.params.get("project") if params else None
        if project and (project == "thrift") != bool(item.get_closest_marker("thrift_ci")):
            item.add_marker(pytest.mark.extended)
        name = item.nodeid.removeprefix("tests/")
        if any(name.startswith(left_out) for left_out in CI_LEAVES_OUT):
            item.add_marker(pytest.mark.extended)


class _Lines(list):
    """What a worker of pytest-xdist (make test runs two) would have written; its controller prints it."""

    def write_line(self, line: str) -> None:
        self.append(line)


def _worker_reports() -> Path:
    import tempfile

    return Path(tempfile.gettempdir()) / f"spark-merge-test-reports-{os.environ.get('PYTEST_XDIST_TESTRUNUID', 'one')}"


def pytest_sessionfinish(session):
    """A worker of pytest-xdist writes its reports where its controller's summary finds them."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        lines = _Lines()
        _report(lines)
        _worker_reports().mkdir(exist_ok=True)
        (_worker_reports() / worker).write_text("".join(f"{line}\n" for line in lines))


def pytest_terminal_summary(terminalreporter):
    """The soak, fuzz and differential reports, this process's and its workers'."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _report(terminalreporter)
    if _worker_reports().exists():
        for path in sorted(_worker_reports().iterdir()):
            for line in path.read_text().splitlines():
                terminalreporter.write_line(line)
        shutil.rmtree(_worker_reports(), ignore_errors=True)


def _report(terminalreporter) -> None:
    """Say how many random MERGE statements were compared with DuckDB, and the seed to replay them."""
    from tests.test_cluster import REPORT as CLUSTER
    from tests.test_differential import REPORT
    from tests.test_metadata_fuzz import REPORT as FUZZ
    from tests.test_object_store import REPORT as S3
    from tests.test_shared_metastore import REPORT as APPS
    from tests.test_soak import REPORT as SOAK

    if FUZZ["cases"]:
        terminalreporter.write_line(
            f"metadata corruption: {FUZZ['cases']} (object, garbage) cases, {FUZZ['worked'] + FUZZ['refused']} commands: "
            f"{FUZZ['worked']} worked, {FUZZ['refused']} refused in one line, no live row lost; replay with "
            f"SPARK_MERGE_CORRUPTION_SEED={FUZZ['seed']}"
        )
    if CLUSTER:
        terminalreporter.write_line(
            f"standalone cluster (master + 2 workers): {CLUSTER['tests']} tests marked `cluster` passed, "
            f"{CLUSTER['applications']} Spark applications ran on it"
        )
    if S3.get("tests"):
        counts = ", ".join(f"{n} partitions {c['total']}" for n, c in S3["requests"].items())
        terminalreporter.write_line(
            f"S3 warehouse (moto): {S3['tests']} tests passed with the warehouse on s3a://"
            + (f" on a standalone cluster ({S3['applications']} applications)" if S3.get("applications") else "")
            + f"; requests of a merge touching 5 partitions of a table of {counts}"
        )
    if S3.get("kills"):
        k = S3["kills"]
        terminalreporter.write_line(
            f"kill soak on S3: {k['operations']} operations SIGKILLed at random moments, recovered: old {k['old']}, "
            f"new {k['new']}, corrupt {k['corrupt']}, recovery-failed {k['recovery_failed']}"
        )
    if S3.get("soak"):
        c = S3["soak"]
        terminalreporter.write_line(
            f"shared metastore soak on S3: {c['writers']} writer applications, {c['merges']} merges: {c['succeeded']} "
            f"committed, {c['conflicts']} MERGE_CONFLICT, no lost update or duplicated row; {c['reads']} reads saw "
            f"{c['versions']} versions, each one the table had"
        )
    if APPS:
        terminalreporter.write_line(
            f"shared metastore soak: {APPS['writers']} writer applications, {APPS['merges']} merges at once on one "
            f"table: {APPS['succeeded']} committed, {APPS['conflicts']} failed with MERGE_CONFLICT, 0 other failures, "
            f"no lost update or duplicated row; a reader application read it {APPS['reads']} times, seeing "
            f"{APPS['versions']} versions, each one the table had ({APPS['seconds']} s)"
        )
    if SOAK:
        c = SOAK["counts"]
        terminalreporter.write_line(
            f"kill soak: {SOAK['iterations']} operations SIGKILLed at random moments, recovered: old {c['old']}, "
            f"new {c['new']}, corrupt {c['corrupt']}, recovery-failed {c['recovery-failed']}; "
            f"replay with SPARK_MERGE_SOAK_SEED={SOAK['seed']}"
        )
        for line in SOAK["details"]:
            terminalreporter.write_line(f"  {line}")

    if REPORT:
        o = REPORT["outcomes"]
        total = sum(sum(v.values()) for v in o.values())
        terminalreporter.write_line(
            f"differential test: {total} of {REPORT['cases']} random MERGE statements checked against each duplicate "
            f"rule's definition (DuckDB computes the clause choices and the rows); replay with "
            f"SPARK_MERGE_DIFF_SEED={REPORT['seed']}"
        )
        for (rule, shape), n in sorted(o.items()):
            terminalreporter.write_line(
                f"  {rule:8} {shape:13}: same rows {n['rows']}, both refused a duplicate match {n['duplicate']}, "
                f"both rejected the statement {n['invalid']}"
            )
        bys = REPORT.get("not_matched_by_source") or {}
        terminalreporter.write_line(
            "  with WHEN NOT MATCHED BY SOURCE: "
            + ", ".join(f"{shape} {outcome} {n}" for (shape, outcome), n in sorted(bys.items()))
        )
