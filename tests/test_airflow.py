"""The Airflow provider under real Airflow: dag.test() against a migrated SQLite metadata DB."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from .conftest import rows, snapshot

DAGS = Path(__file__).resolve().parents[1] / "dags"
DAY = datetime(2026, 11, 1, tzinfo=UTC)
SLOW_DAG = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_provider.operators import SparkMergeOperator

# the source sleeps 60 s in a Spark task (java.lang.Thread.sleep): the timeout strikes while the plan runs
with DAG(dag_id="slow_merge", schedule=None, start_date=datetime(2026, 11, 1), params={"table": "x"}) as dag:
    SparkMergeOperator(task_id="merge", execution_timeout=timedelta(seconds=8), retries=0,
                       sql="MERGE INTO {{ params.table }} t USING (SELECT id, v FROM VALUES (1, 5) AS x(id, v) "
                           "WHERE java_method('java.lang.Thread', 'sleep', 60000L) IS NULL) s ON t.id = s.id "
                           "WHEN MATCHED THEN UPDATE SET v = s.v")
"""
CONNECT_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider.operators import SparkMergeOperator

with DAG(dag_id="connect_merge", schedule=None, start_date=datetime(2026, 11, 1)) as dag:
    SparkMergeOperator(task_id="merge", spark_merge_conn_id="sm_live",
                       sql="MERGE INTO sc.accounts t USING (SELECT * FROM VALUES (2, 5, 'us'), (4, 40, 'apac') "
                           "AS s(id, amount, region)) s ON t.id = s.id "
                           "WHEN MATCHED THEN UPDATE SET amount = t.amount + s.amount WHEN NOT MATCHED THEN INSERT *")
"""
DEFER_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider.operators import SparkMergeOperator

with DAG(dag_id="defer_merge", schedule=None, start_date=datetime(2026, 11, 1), params={"table": "x"}) as dag:
    SparkMergeOperator(task_id="bump", spark_merge_conn_id="sm_defer", deferrable=True, poll_interval=1,
                       sql="UPDATE {{ params.table }} SET n = n + 1 WHERE id = 1")
    SparkMergeOperator(task_id="dup", spark_merge_conn_id="sm_defer", deferrable=True, poll_interval=1,
                       sql="MERGE INTO {{ params.table }} t USING (SELECT 1 AS id, 5 AS n UNION ALL SELECT 1, 6) s "
                           "ON t.id = s.id WHEN MATCHED THEN UPDATE SET n = s.n")
"""
SLOW_DEFER_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider.operators import SparkMergeOperator

# the source sleeps 20 s in a Spark task: the merge is still running when the test aborts it
with DAG(dag_id="defer_slow", schedule=None, start_date=datetime(2026, 11, 1), params={"table": "x"}) as dag:
    SparkMergeOperator(task_id="slow", spark_merge_conn_id="sm_defer", deferrable=True, poll_interval=1,
                       sql="MERGE INTO {{ params.table }} t USING (SELECT id, 7 AS n FROM VALUES (2) AS x(id) "
                           "WHERE java_method('java.lang.Thread', 'sleep', 20000L) IS NULL) s ON t.id = s.id "
                           "WHEN MATCHED THEN UPDATE SET n = s.n")
"""
PG_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider.operators import SparkMergeOperator

with DAG(dag_id="pg_merge", schedule=None, start_date=datetime(2026, 11, 1), params={"table": "x"}) as dag:
    SparkMergeOperator(task_id="merge", postgres_conn_id="pg_target",
                       sql="MERGE INTO {{ params.table }} t USING (SELECT * FROM VALUES (1, 'paid'), (3, 'new') "
                           "AS s(id, status)) s ON t.id = s.id "
                           "WHEN MATCHED THEN UPDATE SET status = s.status WHEN NOT MATCHED THEN INSERT *")
"""
DUP_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider.operators import SparkMergeOperator

with DAG(dag_id="dup_merge", schedule=None, start_date=datetime(2026, 11, 1), params={"table": "x"}) as dag:
    SparkMergeOperator(task_id="merge", sql="MERGE INTO {{ params.table }} t USING (SELECT 1 AS id, 5 AS v "
                       "UNION ALL SELECT 1, 6) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v")
"""

OUTLET_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider.assets import table_asset
from airflow_provider.operators import SparkMergeOperator

# the outlet names another table than the one the task changes
with DAG(dag_id="wrong_outlet", schedule=None, start_date=datetime(2026, 11, 1), params={"table": "x"}) as dag:
    SparkMergeOperator(task_id="merge", outlets=[table_asset("elsewhere.other")], sql="UPDATE {{ params.table }} SET v = 1")
"""

FLAKY_DAG = """
import os
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_provider.operators import SparkMergeOperator


class FlakyMerge(SparkMergeOperator):
    # the first try dies: after its merge committed, or in the middle of the commit (past the journal)
    def __init__(self, *, dies, **kwargs):
        super().__init__(**kwargs)
        self.dies = dies

    def execute(self, context):
        first = context["ti"].try_number == 1
        if first and self.dies == "mid_commit":
            os.environ["SPARK_MERGE_FAULT_RAISE"] = "after_journal"
        try:
            result = super().execute(context)
        finally:
            os.environ.pop("SPARK_MERGE_FAULT_RAISE", None)
        if first:
            raise RuntimeError("the worker was lost after the merge committed")
        return result


with DAG(dag_id="flaky_merge", schedule=None, start_date=datetime(2026, 11, 1), params={"a": "x", "b": "y"}) as dag:
    for dies, table in (("after_commit", "{{ params.a }}"), ("mid_commit", "{{ params.b }}")):
        FlakyMerge(task_id=dies, dies=dies, retries=1, retry_delay=timedelta(0),
                   sql=f"UPDATE {table} SET n = n + 1")
"""


@pytest.fixture(scope="module")
def airflow_home():
    """This process's Airflow home (conftest.py points Airflow at it before any import): its DAGs, its
    connections and its metadata database."""
    home = Path(os.environ["AIRFLOW_HOME"])
    # dag.test() runs DAGs of the DAGs folder: ours, and one that must fail
    dags = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__"))
    (dags / "dup_merge.py").write_text(DUP_DAG)
    (dags / "wrong_outlet.py").write_text(OUTLET_DAG)
    (dags / "flaky_merge.py").write_text(FLAKY_DAG)
    (dags / "slow_merge.py").write_text(SLOW_DAG)
    (dags / "connect_merge.py").write_text(CONNECT_DAG)
    (dags / "pg_merge.py").write_text(PG_DAG)
    (dags / "defer_merge.py").write_text(DEFER_DAG)
    (dags / "defer_slow.py").write_text(SLOW_DEFER_DAG)
    os.environ.update(
        {
            "AIRFLOW_CONN_SM_LOCAL": '{"conn_type": "spark_merge", "host": "local[1]", '
            '"extra": {"conf": {"spark.sql.shuffle.partitions": "2"}, "warehouse": "/tmp/w"}}',
            "AIRFLOW_CONN_SM_CONNECT": '{"conn_type": "spark_merge", "host": "sc://spark.internal", "port": 15002}',
            "AIRFLOW_CONN_SM_SHARED": '{"conn_type": "spark_merge", "host": "yarn", '
            '"extra": {"metastore": "thrift://hms:9083", "warehouse": "/shared/w"}}',
            # the form's fields as a UI may store them: prefixed with the connection type, conf as text
            "AIRFLOW_CONN_SM_FORM": '{"conn_type": "spark_merge", "host": "spark://m:7077", "extra": '
            '{"extra__spark_merge__warehouse": "/form/w", "extra__spark_merge__conf": "{\\"spark.a\\": \\"1\\"}"}}',
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True, env=os.environ
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return home


def load_dag(name):
    spec = importlib.util.spec_from_file_location(
        f"dag_{name}", Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]) / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def xcom(dag_run, task_id, key):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(
            select(XComModel).where(
                XComModel.dag_id == dag_run.dag_id,
                XComModel.run_id == dag_run.run_id,
                XComModel.task_id == task_id,
                XComModel.key == key,
            )
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


@pytest.fixture
def cdc(spark, db):
    """Three days of changes to orders: a delete on day 2, and two changes of order 1 on day 1."""
    target, source = f"{db}.orders", f"{db}.orders_cdc"
    spark.sql(
        f"CREATE TABLE {target} (order_id INT, status STRING, changed_at TIMESTAMP, op STRING, "
        f"region STRING) USING parquet PARTITIONED BY (region)"
    )
    spark.sql(f"""CREATE TABLE {source} USING parquet AS SELECT * FROM VALUES
        (1, 'new',     TIMESTAMP'2026-11-01 08:00:00', 'I', 'eu'),
        (2, 'new',     TIMESTAMP'2026-11-01 09:00:00', 'I', 'us'),
        (1, 'paid',    TIMESTAMP'2026-11-02 10:00:00', 'U', 'eu'),
        (2, 'gone',    TIMESTAMP'2026-11-02 11:00:00', 'D', 'us'),
        (3, 'new',     TIMESTAMP'2026-11-02 12:00:00', 'I', 'eu'),
        (3, 'shipped', TIMESTAMP'2026-11-03 08:00:00', 'U', 'eu'),
        (1, 'late',    TIMESTAMP'2026-11-01 23:00:00', 'U', 'eu')
        AS s(order_id, status, changed_at, op, region)""")
    return target, source


def test_provider_is_registered(airflow_home):
    import warnings

    import jsonschema
    from airflow.providers_manager import ProvidersManager

    from airflow_provider import get_provider_info

    pm = ProvidersManager()
    assert "spark-merge" in pm.providers
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert pm.hooks["spark_merge"].hook_class_name == "airflow_provider.hooks.SparkMergeHook"
    # the form is declared in the provider info (Airflow 3.2+), not by the deprecated hook methods
    assert not [w for w in caught if "SparkMergeHook" in str(w.message)], [str(w.message) for w in caught]
    behaviour = pm.field_behaviours["spark_merge"]
    assert behaviour["hidden_fields"] == ["schema", "login"]
    assert behaviour["relabeling"]["host"] == "Spark master or Spark Connect URL"
    assert behaviour["relabeling"]["password"] == "Merge service token"
    fields = {w.field_name for w in pm.connection_form_widgets.values()}
    assert {"warehouse", "metastore", "conf", "merge_service"} <= fields
    assert ("spark-merge", "airflow_provider.triggers") in {(t.package_name, t.trigger_class_name) for t in pm.trigger}
    assert pm.asset_uri_handlers["spark-merge"].__name__ == "sanitize_uri"
    # the connection type as Airflow's own provider.yaml schema defines it
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider.yaml.schema.json").read_text())
    [connection] = get_provider_info()["connection-types"]
    jsonschema.validate(connection, schema["properties"]["connection-types"]["items"])


def test_hook_reads_the_connection(airflow_home):
    from airflow_provider.hooks import SparkMergeHook

    assert SparkMergeHook("sm_local").session_args() == {
        "conf": {"spark.sql.shuffle.partitions": "2"},
        "master": "local[1]",
        "warehouse": "/tmp/w",
    }
    assert SparkMergeHook("sm_connect").session_args() == {"conf": {}, "remote": "sc://spark.internal:15002"}
    assert SparkMergeHook("sm_shared").session_args() == {
        "conf": {},
        "master": "yarn",
        "warehouse": "/shared/w",
        "metastore": "thrift://hms:9083",
    }
    # without a connection: the warehouse of the project, as the command line and the Python API use it
    from merge_core.spark.session import home_dir

    assert SparkMergeHook().session_args() == {"warehouse": str(home_dir())}
    assert SparkMergeHook("sm_form").session_args() == {
        "conf": {"spark.a": "1"},
        "master": "spark://m:7077",
        "warehouse": "/form/w",
    }


def test_table_assets_have_one_uri_per_table(airflow_home):
    from airflow.sdk import Asset

    from airflow_provider.assets import table_asset
    from airflow_provider.operators import SparkMergeOperator

    assert table_asset("Demo.Orders").uri == "spark-merge://spark_catalog/demo/orders"
    assert Asset("spark-merge://Spark_Catalog/DEMO/orders/").uri == "spark-merge://spark_catalog/demo/orders"
    for bad in ("spark-merge://spark_catalog/orders", "spark-merge:///demo/orders", "spark-merge://c/a/b/c"):
        with pytest.raises(ValueError, match="asset URI"):
            Asset(bad)
    # a target the DAG file names is an outlet without being declared; a templated one is not
    merge = "MERGE INTO {t} t USING src s ON t.id = s.id WHEN MATCHED THEN DELETE"
    named = SparkMergeOperator(task_id="a", sql=merge.format(t="Sales.Orders"))
    assert [o.uri for o in named.outlets] == ["spark-merge://spark_catalog/sales/orders"]
    assert SparkMergeOperator(task_id="b", sql=merge.format(t="{{ params.t }}")).outlets == []
    assert (
        SparkMergeOperator(task_id="c", spec={"target": "x.y", "source": "src"}, options={"primary_key": "id"})
        .outlets[0]
        .uri.endswith("/x/y")
    )


@pytest.mark.extended  # CI: the same DAG in test_example_dags_run_out_of_the_box, retries in test_durable.py
def test_daily_cdc_backfill_is_idempotent_and_records_the_lifecycle(spark, airflow_home, cdc):
    target, source = cdc
    dag = load_dag("cdc_daily_merge")
    conf = {"target": target, "source": source}
    # dag.test() runs a day's interval [end - 1 day, end): end = the day after
    runs = [dag.test(logical_date=DAY + timedelta(days=d + 1), run_conf=conf) for d in range(3)]
    assert [r.data_interval_start for r in runs] == [DAY + timedelta(days=d) for d in range(3)]
    assert all(r.state == "success" for r in runs)
    once = rows(spark, target)
    # order 1's freshest change is day 2's 'paid' (the 23:00 day-1 change is older); order 2 is a tombstone
    assert once == [
        (1, "paid", datetime(2026, 11, 2, 10), "U", "eu"),
        (2, "gone", datetime(2026, 11, 2, 11), "D", "us"),
        (3, "shipped", datetime(2026, 11, 3, 8), "U", "eu"),
    ]
    begin, finish = xcom(runs[1], "merge_day", "merge_begin"), xcom(runs[1], "merge_day", "merge_finish")
    assert begin["target"] == target and begin["paradigm"] == "DELETE_ROW_AND_INSERT_ROW" and begin["plan_hash"]
    assert sorted(p["region"] for p in begin["partitions_to_rewrite"]) == ["eu", "us"]
    assert finish["merge_id"] == begin["merge_id"] and finish["numTargetRowsUpdated"] == 2
    assert finish["numTargetRowsInserted"] == 1
    assert xcom(runs[1], "merge_day", "return_value")["numTargetRowsUpdated"] == 2

    before = snapshot(spark, target)
    for d in (3, 1, 2):  # the whole backfill again, out of order
        assert dag.test(logical_date=DAY + timedelta(days=d), run_conf=conf).state == "success"
    assert snapshot(spark, target) == before  # rows, files and properties: nothing was rewritten


def asset_events(uri):
    """The extra of each event on the asset ``uri``, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        found = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
        )
        return [dict(e.extra) for e in found]


def lineage_events(home, job_suffix):
    path = Path(home) / "lineage.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in events if e["job"]["name"].endswith(job_suffix) and e["eventType"] == "COMPLETE"]


@pytest.mark.extended  # CI: the operator's lineage event of a PostgreSQL merge (test_operator_merges_into_a_postgres_table_...)
def test_openlineage_reports_sources_and_target_with_row_counts(spark, airflow_home, cdc):
    from merge_core import history

    target, source = cdc
    run = load_dag("cdc_daily_merge").test(
        logical_date=DAY + timedelta(days=1), run_conf={"target": target, "source": source}
    )
    assert run.state == "success"
    event = lineage_events(airflow_home, "cdc_daily_merge.merge_day")[-1]
    assert [i["facets"]["symlinks"]["identifiers"][0]["name"] for i in event["inputs"]] == [source]
    [output] = event["outputs"]
    assert output["facets"]["symlinks"]["identifiers"][0]["name"] == target
    location = json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {target} AS JSON").collect()[0][0])["location"]
    assert (output["namespace"], output["name"]) == ("file", location.removeprefix("file:"))
    stats = output["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == 2 and stats["size"] > 0  # day 1: orders 1 and 2 written
    assert output["facets"]["version"]["datasetVersion"] == str(history(spark, target)[0]["version_after"])


def test_outlets_naming_another_table_fail_the_task_before_it_writes(spark, airflow_home, db, capfd):
    t = f"{db}.acct"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 0)")
    before = snapshot(spark, t)
    assert load_dag("wrong_outlet").test(logical_date=DAY, run_conf={"table": t}).state == "failed"
    assert "but its outlets declare spark-merge://spark_catalog/elsewhere/other" in "".join(capfd.readouterr())
    assert snapshot(spark, t) == before
    assert asset_events("spark-merge://spark_catalog/elsewhere/other") == []


def test_a_retried_task_whose_merge_committed_returns_that_merge(spark, airflow_home, db):
    """Airflow retries both tasks; neither merges twice (n + 1 would show it). The one that died
    mid-commit has its commit finished by the retry, which then returns it."""
    from merge_core import history

    tables = {}
    for key in ("a", "b"):
        tables[key] = f"{db}.counter_{key}"
        spark.sql(f"CREATE TABLE {tables[key]} (id INT, n INT) USING parquet")
        spark.sql(f"INSERT INTO {tables[key]} VALUES (1, 0)")
    run = load_dag("flaky_merge").test(logical_date=DAY, run_conf=tables)
    assert run.state == "success"
    assert {ti.task_id: ti.try_number for ti in run.get_task_instances()} == {"after_commit": 2, "mid_commit": 2}
    for task, key in (("after_commit", "a"), ("mid_commit", "b")):
        assert rows(spark, tables[key]) == [(1, 1)]
        [entry] = history(spark, tables[key])
        assert entry["run_key"] == f"airflow:flaky_merge/{run.run_id}/{task}/-1"
        assert xcom(run, task, "merge_finish")["merge_id"] == entry["merge_id"]
        assert xcom(run, task, "return_value")["numTargetRowsUpdated"] == 1
    # both tasks cleared and run again in that run (as `airflow tasks clear` then a worker would):
    # each returns the commit it made
    from argparse import Namespace

    from airflow.cli.commands import task_command
    from airflow.models.taskinstance import TaskInstance, clear_task_instances
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        tis = session.scalars(select(TaskInstance).where(TaskInstance.run_id == run.run_id)).all()
        clear_task_instances(tis, session)
    with create_session() as session:
        assert {t.state for t in session.scalars(select(TaskInstance).where(TaskInstance.run_id == run.run_id))} == {
            None
        }
    dag = load_dag("flaky_merge")
    for task, key in (("after_commit", "a"), ("mid_commit", "b")):
        args = Namespace(
            task_id=task,
            map_index=-1,
            logical_date_or_run_id=run.run_id,
            env_vars=None,
            task_params=None,
            post_mortem=False,
        )
        task_command.task_test(args, dag=dag)
        with create_session() as session:
            ti = session.scalars(
                select(TaskInstance).where(TaskInstance.run_id == run.run_id, TaskInstance.task_id == task)
            ).one()
            assert ti.state == "success"  # cleared (no state), it ran once more and succeeded
        assert rows(spark, tables[key]) == [(1, 1)] and len(history(spark, tables[key])) == 1
        assert xcom(run, task, "merge_finish")["merge_id"] == history(spark, tables[key])[0]["merge_id"]


def test_failing_merge_fails_the_task_and_leaves_the_table(spark, airflow_home, db, capfd):
    t = f"{db}.acct"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 0)")
    before = snapshot(spark, t)
    run = load_dag("dup_merge").test(logical_date=DAY, run_conf={"table": t})
    assert run.state == "failed"
    # the task's log names the target row, each source row that matched it and the clause it chose
    log = "".join(capfd.readouterr())
    assert "MERGE_TARGET_ROW_MULTIPLE_MATCHES" in log and "id='1', source_rows=2, matched by:" in log
    for v in (5, 6):
        assert f"source row (id=1, v={v}) chose WHEN MATCHED clause 1 (UPDATE)" in log
    assert snapshot(spark, t) == before
    # the one-pass write finds the duplicate as it writes, after the plan was recorded without counts
    assert xcom(run, "merge", "merge_begin")["changed_rows"] is None


@pytest.mark.extended  # CI: the injection case below and test_example_dags_run_out_of_the_box
def test_gdpr_delete_removes_the_customers_everywhere(spark, airflow_home, db):
    t = f"{db}.purchases"
    spark.sql(
        f"CREATE TABLE {t} USING parquet PARTITIONED BY (day) AS SELECT CAST(id AS INT) AS id, "
        f"CAST(id % 5 AS INT) AS customer_id, CAST(id % 7 AS INT) AS day FROM range(70)"
    )
    run = load_dag("gdpr_delete").test(logical_date=DAY, run_conf={"table": t, "key": "customer_id", "ids": [1, 3]})
    assert run.state == "success"
    assert rows(spark, f"(SELECT DISTINCT customer_id FROM {t})") == [(0,), (2,), (4,)]
    assert spark.table(t).count() == 42


def test_gdpr_delete_takes_ids_as_values_never_as_sql(spark, airflow_home, db):
    """Ids reach the DELETE only through the core's quoting: a quote inside an id is part of the id,
    a backslash does not escape the closing quote, and an id that reads like SQL is only a value."""
    t = f"{db}.customers"
    names = ["O'Brien", "OBrien", "\\", ") OR 1=1 --", "x", "a"]
    spark.createDataFrame([(n, i) for i, n in enumerate(names)], "name STRING, n INT").write.format(
        "parquet"
    ).saveAsTable(t)
    dag = load_dag("gdpr_delete")
    left = list(names)
    for day, (ids, gone) in enumerate(
        [(["O'Brien"], ["O'Brien"]), (["\\", ") OR 1=1 --"], ["\\", ") OR 1=1 --"]), (["x' OR 'a'='a"], [])]
    ):
        run = dag.test(logical_date=DAY + timedelta(days=day), run_conf={"table": t, "key": "name", "ids": ids})
        assert run.state == "success"
        left = [n for n in left if n not in gone]
        assert sorted(r[0] for r in spark.table(t).collect()) == sorted(left), ids
    assert sorted(left) == ["OBrien", "a", "x"]
    # a table name that is not one is refused by the DAG's params, before any task runs
    with pytest.raises(Exception, match="does not match|pattern"):
        dag.test(
            logical_date=DAY + timedelta(days=5), run_conf={"table": f"{t} WHERE 1=1 --", "key": "name", "ids": [1]}
        )
    assert spark.table(t).count() == 3


def test_execution_timeout_aborts_the_merge_and_stops_its_spark_job(spark, airflow_home, db):
    t = f"{db}.slow"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 0)")
    before = snapshot(spark, t)
    root = Path(
        json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {t} AS JSON").collect()[0][0])["location"].removeprefix("file:")
    )
    run = load_dag("slow_merge").test(logical_date=DAY, run_conf={"table": t})
    assert run.state == "failed"
    # the sleeping job was interrupted by the abort, not left to run out its 60 s
    deadline = time.monotonic() + 20
    while spark.sparkContext.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    assert snapshot(spark, t) == before
    assert not [r for r in spark.sql("SHOW TABLES").collect() if r.tableName.startswith("__sm_changes")]
    assert not list(root.glob("_merge_*"))
    assert spark.sql(f"SHOW TABLES IN {db} LIKE '__sm_lock_*'").count() == 0


@pytest.mark.extended  # the example project runs through dbt itself in CI (test_dbt.py)
def test_dbt_dag_runs_the_example_project(airflow_home, tmp_path, monkeypatch):
    from dbt_macros import PACKAGE_DIR

    project = tmp_path / "dbt_project"
    shutil.copytree(Path(__file__).resolve().parents[1] / "examples" / "dbt_project", project)
    (project / "packages.yml").write_text(f"packages:\n  - local: {PACKAGE_DIR}\n")
    monkeypatch.setenv("SPARK_MERGE_DBT_PROJECT", str(project))
    monkeypatch.setenv("SPARK_MERGE_HOME", str(tmp_path / "warehouse"))  # dbt's own Spark, its own metastore
    run = load_dag("dbt_spark_merge").test(logical_date=DAY, run_conf={"batch": 1})
    assert run.state == "success"
    results = json.loads((project / "target" / "run_results.json").read_text())["results"]
    assert {r["unique_id"].split(".")[-1]: r["status"] for r in results} == {
        "accounts": "success",
        "account_balances": "success",
        "accounts_latest": "success",
        "accounts_log": "success",
        "account_activity": "success",
    }
    metrics = xcom(run, "merge_metrics", "return_value")
    assert metrics["accounts"]["status"] == "success" and metrics["accounts"]["rows"] == 3  # batch 1, created
    # an upsert's first load is a merge: its id and metrics, as a Python merge returns them
    assert (
        metrics["accounts_latest"]["merge_id"] and metrics["accounts_latest"]["metrics"]["numTargetRowsInserted"] == 3
    )


def run_driver(script: str, args: list[str], **env: str) -> tuple[dict, str]:
    """Run a driver script of tests/ (a process of its own: its Spark Connect client never meets this
    run's classic SparkSession); its RESULT line, and its output."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name(script)), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    Path(os.environ.get("SPARK_MERGE_DRIVER_LOG", os.devnull)).write_text(done.stdout + done.stderr)
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(lines[-1].removeprefix("RESULT ")), done.stdout + done.stderr


@pytest.mark.extended  # Spark Connect runs in CI through the Python API (test_dataframe_api.py)
def test_operator_over_spark_connect(airflow_home, connect_server):
    """The same operator, given a connection to a Spark Connect server: the merge runs on the server."""
    connection = {"conn_type": "spark_merge", "host": connect_server}
    result, _ = run_driver("connect_driver.py", [connect_server], AIRFLOW_CONN_SM_LIVE=json.dumps(connection))
    assert result["state"] == "success"
    assert result["rows"] == [[1, 10, "eu"], [2, 25, "us"], [3, 30, "eu"], [4, 40, "apac"]]
    begin, finish = result["xcom"]["merge_begin"], result["xcom"]["merge_finish"]
    assert begin["target"] == "sc.accounts" and sorted(p["region"] for p in begin["partitions_to_rewrite"]) == [
        "apac",
        "us",
    ]
    assert finish["merge_id"] == begin["merge_id"] and finish["numTargetRowsUpdated"] == 1
    assert finish["numTargetRowsInserted"] == 1 and finish["numTargetPartitionsRewritten"] == 2


@pytest.fixture
def merge_service(connect_server, tmp_path):
    """`spark-merge merge-service --remote` beside a Spark Connect server (`server start` runs the service
    as the owner of its Spark driver instead: test_server.py)."""
    from .conftest import free_port

    port = free_port()
    with open(tmp_path / "merge-service.log", "wb") as out:
        service = subprocess.Popen(
            [sys.executable, "-m", "merge_core", "merge-service", "--remote", connect_server, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    from merge_core.api import service_client

    deadline = time.monotonic() + 60
    while True:
        try:
            service_client.status(url, "probe")
            break
        except service_client.ServiceUnreachable:
            assert time.monotonic() < deadline and service.poll() is None, (tmp_path / "merge-service.log").read_text()
            time.sleep(0.5)
    yield url, tmp_path / "merge-service.log"
    service.terminate()
    service.wait(30)


@pytest.fixture
def triggerer(airflow_home, tmp_path):
    """`airflow triggerer` on the tests' metadata DB."""
    from .conftest import free_port

    env = {**os.environ, "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port())}  # not the fixed 8794
    with open(tmp_path / "triggerer.log", "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "airflow", "triggerer"], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    yield tmp_path / "triggerer.log"
    process.terminate()
    process.wait(60)


# CI: the trigger run inline by dag.test(); make test-all: in a real `airflow triggerer` process too
@pytest.mark.parametrize("mode", [pytest.param("triggerer", marks=pytest.mark.extended), "inline"])
def test_a_deferrable_task_waits_in_the_trigger_while_the_merge_service_merges(
    airflow_home, connect_server, merge_service, mode, request
):
    """A deferred task as Airflow runs it: execute checks, submits and defers; the trigger (serialized,
    rebuilt from its kwargs) polls the merge service in `airflow triggerer` (``triggerer``; dag.test()
    runs the trigger itself with ``inline``); execute_complete resumes with a blocking run's XCom. A
    failing merge fails its task with the merge's own error. A user marking a deferred task failed
    makes the triggerer call on_kill, which aborts the merge and leaves the table as it was."""
    url, service_log = merge_service
    triggerer_log = request.getfixturevalue("triggerer") if mode == "triggerer" else None
    connection = {"conn_type": "spark_merge", "host": connect_server, "extra": {"merge_service": url}}
    result, log = run_driver(
        "deferrable_driver.py", [connect_server, url, mode], AIRFLOW_CONN_SM_DEFER=json.dumps(connection)
    )
    # three tasks deferred; their triggers ran in the triggerer process, or in line
    assert log.count("deferring") == 3, log[-5000:]
    if triggerer_log is not None:  # dag.test() ran no trigger: the triggerer process fired their events
        assert "running trigger in line" not in log

        def trigger_logs(dag_id: str) -> str:  # the triggerer writes a trigger's log beside its task's
            return "".join(p.read_text() for p in (airflow_home / "logs" / f"dag_id={dag_id}").rglob("*.trigger.*"))

        assert trigger_logs("defer_merge").count("Trigger fired event") == 2
        assert "Trigger cancelled by user action, invoking on_kill" in trigger_logs("defer_slow")
    else:
        assert log.count("running trigger in line") == 3
    assert result["state"] == "failed"
    assert result["tasks"] == {"bump": {"state": "success", "tries": 1}, "dup": {"state": "failed", "tries": 1}}
    # the merge ran in the service process (its log), under the task instance's run key
    [entry] = result["history"]
    run_key = entry["run_key"]
    assert run_key.startswith("airflow:defer_merge/") and run_key.endswith("/bump/-1")
    served = service_log.read_text()
    assert f"[{run_key}] merge {entry['merge_id']}" in served
    assert result["rows"] == [[1, 1], [2, 0]]
    x = result["xcom"]
    assert x["bump.merge_begin"]["merge_id"] == x["bump.merge_finish"]["merge_id"] == entry["merge_id"]
    assert x["bump.return_value"]["numTargetRowsUpdated"] == 1 and x["bump.merge_begin"]["target"] == f"sc.{mode}"
    # the failed merge's error, as the blocking task reports it
    assert "MERGE_TARGET_ROW_MULTIPLE_MATCHES" in log and "source row (id=1, n=5) chose WHEN MATCHED clause 1" in log
    assert "dup.merge_finish" not in x
    # the killed task: its merge was running, then aborted (its Spark job interrupted), nothing written
    killed = result["killed"]
    assert killed["before"] == "running" and killed["after"]["state"] == "failed", killed
    assert killed["tasks"] == {"slow": {"state": "failed", "tries": 1}}, killed
    assert "abort asked for" in served and "ABORT: interrupted" in served, served[-3000:]
    assert result["rows_after_kill"] == [[1, 1], [2, 0]]


def test_operator_merges_into_a_postgres_table_through_an_airflow_connection(
    spark, airflow_home, postgres, monkeypatch
):
    from urllib.parse import urlparse

    from merge_core.targets.postgres import PostgresTarget

    url = urlparse(postgres.removeprefix("jdbc:"))
    monkeypatch.setenv(
        "AIRFLOW_CONN_PG_TARGET",
        json.dumps(
            {"conn_type": "postgres", "host": url.hostname, "port": url.port, "schema": "postgres", "login": "postgres"}
        ),
    )
    with PostgresTarget(postgres).connect() as conn:
        conn.execute("DROP TABLE IF EXISTS public.af_orders")
        conn.execute("CREATE TABLE public.af_orders (id int PRIMARY KEY, status text)")
        conn.execute("INSERT INTO public.af_orders VALUES (1, 'new'), (2, 'new')")
        run = load_dag("pg_merge").test(logical_date=DAY, run_conf={"table": "public.af_orders"})
        assert run.state == "success"
        assert conn.execute("SELECT * FROM public.af_orders ORDER BY id").fetchall() == [
            (1, "paid"),
            (2, "new"),
            (3, "new"),
        ]
    finish = xcom(run, "merge", "merge_finish")
    assert finish["numTargetRowsUpdated"] == 1 and finish["numTargetRowsInserted"] == 1
    [output] = lineage_events(airflow_home, "pg_merge.merge")[-1]["outputs"]
    assert (output["namespace"], output["name"]) == (
        f"postgres://{url.hostname}:{url.port}",
        "postgres.public.af_orders",
    )


def test_example_dags_run_out_of_the_box(spark, airflow_home):
    """cdc_daily_merge and gdpr_delete with their default params, nothing created by hand: the first
    task makes demo.orders and demo.orders_cdc; a GDPR run without ids runs nothing; with vacuum the
    deleted customer's rows are gone from every file under the table's root."""
    import pyarrow.parquet as pq

    from merge_core import history
    from merge_core.spark import file_index

    for t in ("demo.orders", "demo.orders_cdc"):
        spark.sql(f"DROP TABLE IF EXISTS {t}")
    try:
        cdc = load_dag("cdc_daily_merge")
        runs = [cdc.test(logical_date=DAY + timedelta(days=d + 1)) for d in range(3)]
        assert [r.state for r in runs] == ["success"] * 3
        assert xcom(runs[0], "example_tables", "return_value") == ["demo.orders", "demo.orders_cdc"]
        assert xcom(runs[1], "example_tables", "return_value") == []
        assert [r[:3] for r in rows(spark, "demo.orders")] == [
            (1, 17, "paid"),
            (2, 42, "gone"),
            (3, 42, "shipped"),
            (4, 99, "new"),
        ]
        entries = len(history(spark, "demo.orders"))
        # each merge emitted an event on the table's asset saying what it changed; the consumer DAG reads it
        events = asset_events("spark-merge://spark_catalog/demo/orders")
        finish = [xcom(r, "merge_day", "merge_finish") for r in runs]
        assert [e["merge_id"] for e in events] == [f["merge_id"] for f in finish]
        assert [e["version"] for e in events] == [h["version_after"] for h in reversed(history(spark, "demo.orders"))]
        assert [(e["rows_inserted"], e["rows_updated"], e["rows_deleted"]) for e in events] == [
            (f["numTargetRowsInserted"], f["numTargetRowsUpdated"], f["numTargetRowsDeleted"]) for f in finish
        ]
        changed = load_dag("orders_changed").test(logical_date=DAY + timedelta(days=3))
        assert changed.state == "success"
        assert xcom(changed, "what_changed", "return_value") == [events[-1]]
        # and reads exactly that merge's change rows from the feed, not the earlier merges' ones
        last = events[-1]
        kinds = ("insert", "rows_inserted"), ("update_preimage", "rows_updated"), ("update_postimage", "rows_updated")
        expected = {kind: last[n] for kind, n in (*kinds, ("delete", "rows_deleted")) if last[n]}
        assert expected and xcom(changed, "changed_rows", "return_value") == expected

        gdpr = load_dag("gdpr_delete")
        idle = gdpr.test(logical_date=DAY)  # no ids: the delete is skipped
        assert idle.state == "success"
        states = {ti.task_id: ti.state for ti in idle.get_task_instances()}
        assert states["delete_customers"] == states["vacuum"] == "skipped"
        assert len(history(spark, "demo.orders")) == entries

        root = Path(
            json.loads(spark.sql("DESCRIBE TABLE EXTENDED demo.orders AS JSON").collect()[0][0])[
                "location"
            ].removeprefix("file:")
        )

        def customers_on_disk() -> set[int]:
            """Every customer id in a data file, or kept as a key range in the file index."""
            ranges = [pq.read_table(f).to_pylist() for f in root.rglob("*" + file_index.SUFFIX)]
            return {
                c
                for f in root.rglob("*.parquet")
                for c in pq.read_table(f, columns=["customer_id"]).column(0).to_pylist()
            } | {int(r[k]) for m in ranges for r in m if r["column"] == "customer_id" for k in ("lo", "hi") if r[k]}

        assert 42 in customers_on_disk()
        run = gdpr.test(logical_date=DAY + timedelta(days=1), run_conf={"ids": [42], "vacuum": True})
        assert run.state == "success"
        assert [r[:3] for r in rows(spark, "demo.orders")] == [(1, 17, "paid"), (4, 99, "new")]
        assert xcom(run, "vacuum", "return_value")["files"] > 0
        assert customers_on_disk() == {17, 99}  # the old versions went with the vacuum
    finally:
        for t in ("demo.orders", "demo.orders_cdc"):
            spark.sql(f"DROP TABLE IF EXISTS {t}")
