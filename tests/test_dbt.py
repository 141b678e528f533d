"""The spark_merge materialization under real `dbt run`, through both dbt-spark connection methods
a Spark user has without a vendor: `method: session` (this process's Spark, the test's session) and
`method: thrift` (a Spark Thrift Server, its own application: tests/thrift_server.py). Tests taking
`project` run once per method and check the tables through ``project.sql`` (the session, or SQL over
the same Thrift protocol); the two taking `session_project` share the warehouse with the Python path.
"""

from __future__ import annotations

import json
import os
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from dbt.cli.main import dbtRunner  # the [dbt] extra, installed by `make test`

from dbt_macros import PACKAGE_DIR
from merge_core import history
from merge_core.common import macros
from merge_core.common.result import parse_message

from .conftest import rows, snapshot

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dbt_project"
METHODS = ["session", pytest.param("thrift", marks=pytest.mark.slow)]


def example_project(path: Path) -> Path:
    """A copy of the example dbt project at ``path``, using this checkout's package."""
    shutil.copytree(EXAMPLE, path)
    (path / "packages.yml").write_text(f"packages:\n  - local: {PACKAGE_DIR}\n")
    return path


class Project:
    def __init__(self, path: Path, schema: str, sql, spark=None):
        self.path, self.schema, self.sql, self.spark = path, schema, sql, spark
        self.logs: list[str] = []

    def dbt(self, *args: str, vars: dict | None = None, ok: bool = True):
        """One dbt command in this process (dbt-spark's session method reuses the test's SparkSession)."""
        ansi = self.spark.conf.get("spark.sql.ansi.enabled") if self.spark else None
        argv = [*args, "--project-dir", str(self.path), "--profiles-dir", str(self.path)]
        if vars:
            argv += ["--vars", json.dumps(vars)]
        self.logs = []
        os.environ["SPARK_MERGE_DBT_SCHEMA"] = self.schema
        runner = dbtRunner(callbacks=[lambda e: self.logs.append(e.info.msg)])
        try:
            result = runner.invoke(argv)
        finally:
            if self.spark:
                self.spark.conf.set("spark.sql.ansi.enabled", ansi)  # dbt-spark turns it off
        assert result.success == ok, "\n".join(self.logs[-30:])
        return result

    def model(self, name: str, text: str) -> None:
        (self.path / "models" / f"{name}.sql").write_text(text)

    def run_results(self) -> dict:
        data = json.loads((self.path / "target" / "run_results.json").read_text())
        return {r["unique_id"].split(".")[-1]: r for r in data["results"]}

    def table(self, name: str) -> str:
        return f"{self.schema}.{name}"


@pytest.fixture(scope="module")
def projects(spark, tmp_path_factory):
    """The example project per connection method, made on first use (the Thrift server with it)."""
    made: dict[str, Project] = {}
    servers = []

    def get(method: str) -> Project:
        if method in made:
            return made[method]
        path = example_project(tmp_path_factory.mktemp(f"dbt_{method}") / "project")
        schema = f"dbt_{os.getpid()}"
        if method == "session":
            p = Project(path, schema, spark, spark)
        else:
            from .thrift_server import ThriftServer, ThriftSql

            server = ThriftServer(tmp_path_factory.mktemp("thrift_server")).start()
            servers.append(server)
            profile = (path / "profiles.yml").read_text()
            head = profile[: profile.index("  target: local")]
            (path / "profiles.yml").write_text(
                head + "  target: thrift\n  outputs:\n    thrift:\n" + server.profile(schema)
            )
            p = Project(path, schema, ThriftSql(server))
        p.dbt("deps")
        p.dbt("seed")
        made[method] = p
        return p

    yield get
    for p in made.values():
        p.sql.sql(f"DROP DATABASE IF EXISTS {p.schema} CASCADE")
    for server in servers:
        server.stop()


@pytest.fixture(scope="module", params=METHODS)
def project(request, projects):
    return projects(request.param)


@pytest.fixture
def session_project(projects):
    return projects("session")


def test_first_run_creates_later_runs_merge_full_refresh_rebuilds(project):  # over Thrift in the extended tier
    db = project.sql  # the test's session, or the Thrift server's tables
    t = project.table("accounts")
    project.dbt("run", "-s", "accounts", vars={"batch": 1})
    assert rows(db, t) == [(1, "ann", 10.0, "eu"), (2, "bob", 20.0, "us"), (3, "cy", 30.0, "eu")]
    created = project.run_results()["accounts"]["adapter_response"]  # the first run reports its rows too
    assert (created["code"], created["rows_affected"], created["_message"]) == ("CREATE", 3, "CREATE 3 row(s)")
    provider = json.loads(db.sql(f"DESCRIBE TABLE EXTENDED {t} AS JSON").collect()[0][0])
    assert provider["provider"] == "parquet" and provider["partition_columns"] == ["region"]

    project.dbt("run", "-s", "accounts", vars={"batch": 2})
    assert rows(db, t) == [
        (1, "ann", 10.0, "eu"),
        (2, "bob", 25.0, "us"),
        (3, "cy", 0.0, "eu"),
        (4, "di", 40.0, "apac"),
    ]
    response = project.run_results()["accounts"]["adapter_response"]
    newest = history(db, t)[0]
    assert response["code"] == "MERGE" and response["rows_affected"] == 3
    assert response["_message"].startswith(f"MERGE {newest['merge_id']}: inserted 1, updated 2, deleted 0")
    assert "partitions rewritten 3" in response["_message"]
    # what an Airflow task reading run_results.json gets: the merge id and the metrics of the history
    parsed = parse_message(response["_message"])
    assert parsed["merge_id"] == newest["merge_id"] and len(parsed["metrics"]) == 7
    assert parsed["metrics"] == {k: newest["metrics"][k] for k in parsed["metrics"]}
    # the history entry has the Python path's shape
    assert set(newest) >= {
        "merge_id",
        "target",
        "kind",
        "paradigm",
        "plan_hash",
        "status",
        "finished_at",
        "metrics",
        "partitions",
        "repoints",
        "version_before",
    }
    assert newest["metrics"]["numTargetPartitionsRewritten"] == 3 and newest["metrics"]["numTargetRowsCopied"] == 1
    assert db.sql(f"SHOW TBLPROPERTIES {t} ('spark_merge.retention_hours')").collect()[0][1] == "72"

    project.dbt("run", "-s", "accounts", "--full-refresh", vars={"batch": 3})
    assert rows(db, t) == [(4, "di", 45.0, "apac"), (5, "ed", 50.0, "us")]


COMPACTED = """{{ config(materialized='spark_merge', unique_key='id', partition_by=['region']) }}
select id, name, region from {{ ref('account_updates') }} where batch = {{ var('batch', 1) }}
"""


def test_dbt_rewrites_the_partitions_it_touches_whole_so_auto_compaction_has_nothing_to_fold(session_project):
    """The dbt host has no listing of the files to carry them by: a merge rewrites each partition it
    touches whole, into the files its rebalance writes, which compacts them on every run. A table with
    the auto compaction policy merges as any other (the policy is read, nothing is folded on top)."""
    p = session_project
    t = p.table("compacted")
    p.model("compacted", COMPACTED)
    p.dbt("run", "-s", "compacted", vars={"batch": 1})
    p.sql.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.auto_compact.min_files' = '2')")
    for i in range(3):  # three small files in the eu partition, rows batch 2 does not name
        p.sql.sql(f"INSERT INTO {t} VALUES ({100 + i}, 'late', 'eu')")

    def eu_files() -> set[str]:
        return {r[0] for r in p.sql.sql(f"SELECT DISTINCT _metadata.file_path FROM {t} WHERE region = 'eu'").collect()}

    before = eu_files()
    assert len(before) == 4
    p.dbt("run", "-s", "compacted", vars={"batch": 2})
    after = eu_files()
    assert not after & before and len(after) < len(before)  # every file rewritten, into fewer
    assert rows(p.sql, t) == [(1, "ann", "eu"), (2, "bob", "us"), (3, "cy", "eu"), (4, "di", "apac"),
                              (100, "late", "eu"), (101, "late", "eu"), (102, "late", "eu")]  # fmt: skip
    newest = history(p.sql, t)[0]
    assert newest["metrics"]["numTargetFilesCompacted"] == 0 and newest["metrics"]["numTargetRowsCopied"] == 4


REFRESHED = """{{ config(materialized='spark_merge', unique_key='id', partition_by=['region']) }}
select id, {{ var('name', 'name') }} as name, region from {{ ref('account_updates') }} where batch = {{ var('batch', 1) }}
"""


def test_full_refresh_is_a_commit_rollback_undoes(project):
    """--full-refresh of a table the model keeps the shape of: the new rows are written beside the old
    ones, then one journaled commit repoints every partition (one emptied: eu has no row in batch 3).
    A refresh that fails while the model runs leaves the table as it was; rollback returns to the
    version before the refresh; a refresh that changes the columns re-creates the table, and says so."""
    db = project.sql
    t = project.table("refreshed")
    project.model("refreshed", REFRESHED)
    project.dbt("run", "-s", "refreshed", vars={"batch": 1})
    project.dbt("run", "-s", "refreshed", vars={"batch": 2})
    before = snapshot(db, t)
    assert rows(db, f"(SELECT id, name, region FROM {t})") == [
        (1, "ann", "eu"),
        (2, "bob", "us"),
        (3, "cy", "eu"),
        (4, "di", "apac"),
    ]

    # the model fails at run time (a raise_error on one row): nothing changed, no staging table left
    project.dbt(
        "run",
        "-s",
        "refreshed",
        "--full-refresh",
        vars={"batch": 3, "name": "if(id = 5, raise_error('boom'), name)"},
        ok=False,
    )
    assert "boom" in project.run_results()["refreshed"]["message"]
    assert snapshot(db, t) == before
    assert [r for r in db.sql(f"SHOW TABLES IN {project.schema} LIKE '__sm_stage_*'").collect()] == []

    project.dbt("run", "-s", "refreshed", "--full-refresh", vars={"batch": 3})
    assert rows(db, f"(SELECT id, name, region FROM {t})") == [(4, "di", "apac"), (5, "ed", "us")]
    response = project.run_results()["refreshed"]["adapter_response"]
    entry = history(db, t)[0]
    assert entry["kind"] == "full_refresh" and entry["status"] == "committed"
    assert response["code"] == "FULL_REFRESH" and response["rows_affected"] == 2
    assert response["_message"] == f"FULL REFRESH {entry['merge_id']}: 2 row(s) replaced 4 in 3 partition(s)"
    m = entry["metrics"]
    assert (m["numTargetRowsInserted"], m["numTargetRowsDeleted"], m["numTargetPartitionsRewritten"]) == (2, 4, 3)
    assert entry["version_after"] == entry["version_before"] + 1
    assert sorted(r["partition"]["region"] for r in entry["repoints"]) == ["apac", "eu", "us"]
    assert [r for r in db.sql(f"SHOW TABLES IN {project.schema} LIKE '__sm_stage_*'").collect()] == []

    # rollback returns to the version before the refresh, a journaled commit of its own
    project.dbt("run-operation", "spark_merge.rollback", "--args", json.dumps({"relation": t, "to": entry["merge_id"]}))
    assert snapshot(db, t)[:2] == before[:2]  # the rows and the very files (the version moved on: a commit)
    assert history(db, t)[0]["rolled_back"] == [entry["merge_id"]]

    # new columns: the table is re-created (its history starts again), and the log says why
    project.model("refreshed", REFRESHED.replace("region from", "region, batch from"))
    project.dbt("run", "-s", "refreshed", "--full-refresh", vars={"batch": 3})
    assert any("--full-refresh re-creates" in line and "batch" in line for line in project.logs)
    assert rows(db, f"(SELECT id, name, region, batch FROM {t})") == [(4, "di", "apac", 3), (5, "ed", "us", 3)]
    assert project.run_results()["refreshed"]["adapter_response"]["code"] == "CREATE"


MB_EVENTS = """{{ config(materialized='view', event_time='ts') }}
select * from values
  (1, timestamp'2026-01-01 08:00:00', 10, 'eu'),
  (2, timestamp'2026-01-01 23:59:59', 20, 'us'),
  (3, timestamp'2026-01-02 00:00:00', {{ var('amount3', 30) }}, 'eu'),
  (4, timestamp'2026-01-02 12:00:00', 40, 'us'),
  {% if var('new7', false) %}(7, timestamp'2026-01-02 13:00:00', 70, 'apac'),{% endif %}
  (5, timestamp'2026-01-03 06:00:00', 50, 'eu'),
  (6, timestamp'2026-01-04 06:00:00', 60, 'us')
  as t(id, ts, amount, region)
where id != {{ var('drop', 0) }}
"""

MB_DAILY = """{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='ts', batch_size='day',
                  begin='2026-01-01', partition_by='region') }}
select id, ts, if(id = {{ env_var('SPARK_MERGE_TEST_FAIL_ID', '0') }}, raise_error('boom'), amount) as amount, region
from {{ ref('mb_events') }}
{% if var('stray', false) %}union all select 99, timestamp'2026-02-01 00:00:00', 1, 'eu'{% endif %}
"""


@pytest.mark.extended  # CI: the incremental materialization in test_dbt_sparks_incremental_merge_runs_on_parquet_and_orc_as_on_delta
def test_microbatch_batches_are_commits_that_replace_their_window(project, monkeypatch):
    """A microbatch model (materialized='incremental', through the example project's override file): each batch
    a commit replacing exactly its day of `ts` in a table partitioned by region (windows and partitions do
    not align); a batch re-run is idempotent; a failed batch leaves the others committed and `dbt retry`
    runs only it; a row outside its batch's window fails the batch; --full-refresh is a commit too."""
    db = project.sql
    t = project.table("mb_daily")
    project.model("mb_events", MB_EVENTS)
    project.model("mb_daily", MB_DAILY)
    days = ("--event-time-start", "2026-01-01", "--event-time-end", "2026-01-04")

    project.dbt("run", "-s", "mb_events", "mb_daily", *days)
    assert [r[:3] for r in rows(db, f"(SELECT id, amount, region FROM {t})")] == [
        (1, 10, "eu"),
        (2, 20, "us"),
        (3, 30, "eu"),
        (4, 40, "us"),
        (5, 50, "eu"),
    ]  # id 6 (January 4th) is outside the run
    assert [e["kind"] for e in history(db, t)] == ["merge", "merge"]  # batch 1 created the table

    # day 2 changes upstream (id 3's amount, id 4 gone, id 7 new): a run of day 2 replaces exactly the rows of
    # day 2 in both partitions it shares with day 1, twice over with the same result
    changed = {"amount3": 33, "drop": 4, "new7": True}
    day2 = ("--event-time-start", "2026-01-02", "--event-time-end", "2026-01-03")
    for _ in range(2):
        project.dbt("run", "-s", "mb_events", "mb_daily", *day2, vars=changed)
        assert rows(db, f"(SELECT id, amount FROM {t})") == [(1, 10), (2, 20), (3, 33), (5, 50), (7, 70)]
    entry = history(db, t)[0]
    assert (entry["metrics"]["numTargetRowsInserted"], entry["metrics"]["numTargetRowsDeleted"]) == (2, 2)

    # the batch of January 2nd fails in Spark: January 1st and 3rd commit, the 2nd keeps its rows;
    # dbt retry, the failure gone, runs January 2nd alone
    changed["amount3"] = 36
    monkeypatch.setenv("SPARK_MERGE_TEST_FAIL_ID", "7")
    project.dbt("run", "-s", "mb_events", "mb_daily", *days, vars=changed, ok=False)
    result = project.run_results()["mb_daily"]
    assert result["status"] == "partial success"
    assert [b[0][:10] for b in result["batch_results"]["failed"]] == ["2026-01-02"]
    assert rows(db, f"(SELECT id, amount FROM {t})") == [(1, 10), (2, 20), (3, 33), (5, 50), (7, 70)]
    merges = len(history(db, t))
    monkeypatch.delenv("SPARK_MERGE_TEST_FAIL_ID")
    project.dbt("retry")
    assert rows(db, f"(SELECT id, amount FROM {t})") == [(1, 10), (2, 20), (3, 36), (5, 50), (7, 70)]
    assert len(history(db, t)) == merges + 1

    # a row outside its batch's window fails the batch before anything is written
    before = snapshot(db, t)
    project.dbt("run", "-s", "mb_daily", *day2, vars={**changed, "stray": True}, ok=False)
    assert any("outside its window" in line for line in project.logs)
    assert snapshot(db, t) == before

    # --full-refresh: the first batch replaces every row in one commit, the next merges its day
    days23 = ("--event-time-start", "2026-01-02", "--event-time-end", "2026-01-04")
    project.dbt("run", "-s", "mb_daily", "--full-refresh", *days23, vars=changed)
    assert rows(db, f"(SELECT id, amount FROM {t})") == [(3, 36), (5, 50), (7, 70)]
    assert [e["kind"] for e in history(db, t)][:2] == ["merge", "full_refresh"]

    # an incremental model that is not microbatch keeps dbt-spark's materialization (append, here)
    project.model("plain_incremental", "{{ config(materialized='incremental') }}\nselect 1 as id")
    for _ in range(2):
        project.dbt("run", "-s", "plain_incremental")
    assert rows(db, project.table("plain_incremental")) == [(1,), (1,)]

    # a config that would choose another merge is refused, not ignored
    project.model("mb_keyed", MB_DAILY.replace("event_time='ts'", "event_time='ts', unique_key='id'"))
    project.dbt("run", "-s", "mb_keyed", *day2, ok=False)
    assert any("unique_key does not apply to it" in line for line in project.logs)


INCREMENTAL = """{{ config(materialized='spark_merge', unique_key='id') }}
select batch, id, name, amount, region from {{ ref('account_updates') }}
where batch <= {{ var('batch') }}
{% if is_incremental() %} and batch > (select max(batch) from {{ this }}) {% endif %}
"""


def test_is_incremental_filters_the_runs_that_merge(project):
    """The standard incremental model: every batch so far, filtered to the new ones once the table
    exists. Without the filter the second run would see bob twice (batches 1 and 2) and fail."""
    db = project.sql  # the test's session, or the Thrift server's tables
    t = project.table("incremental_accounts")
    project.model("incremental_accounts", INCREMENTAL)
    project.dbt("run", "-s", "incremental_accounts", vars={"batch": 1})
    project.dbt("run", "-s", "incremental_accounts", vars={"batch": 2})
    assert project.run_results()["incremental_accounts"]["adapter_response"]["rows_affected"] == 3
    assert rows(db, f"(SELECT id, name, batch FROM {t})") == [(1, "ann", 1), (2, "bob", 2), (3, "cy", 2), (4, "di", 2)]
    project.dbt("run", "-s", "incremental_accounts", "--full-refresh", vars={"batch": 2})  # all batches again
    assert project.run_results()["incremental_accounts"]["adapter_response"]["rows_affected"] == 6

    # without the project's one-line macro, dbt's is_incremental() is false here: say so, change nothing
    shim = project.path / "macros" / "is_incremental.sql"
    text = shim.read_text()
    shim.unlink()
    try:
        before = snapshot(db, t)
        project.dbt("run", "-s", "incremental_accounts", vars={"batch": 3}, ok=False)
        message = project.run_results()["incremental_accounts"]["message"]
        assert "Compilation Error" in message and "calls is_incremental()" in message
        assert "{{ return(spark_merge.is_incremental()) }}" in message
        assert snapshot(db, t) == before
    finally:
        shim.write_text(text)


@pytest.mark.extended  # CI: test_validation.py (the same macro), dbt's statements in test_conformance.py
def test_lossy_assignment_warns_or_refuses(project):
    """A model whose value no longer fits the table's column type: dbt warns (and Spark rounds), or,
    with lossy_assignments='refuse', the model fails before any write."""
    db = project.sql  # the test's session, or the Thrift server's tables
    t = project.table("lossy")
    project.model(
        "lossy",
        "{{ config(materialized='spark_merge', unique_key='id', lossy_assignments=var('lossy', 'warn')) }}\n"
        "select 1 as id, {{ var('v', 'cast(2.5 as decimal(3,1))') }} as v",
    )
    project.dbt("run", "-s", "lossy")
    project.dbt("run", "-s", "lossy", vars={"v": "cast(2.75 as decimal(3,2))"})
    assert any("lossy assignment" in line and "rounds it to 1 decimal place(s)" in line for line in project.logs)
    assert rows(db, t)[0][1] in (Decimal("2.8"), Decimal("2.7"))  # rounded, as Spark stores it
    before = snapshot(db, t)
    project.dbt("run", "-s", "lossy", vars={"v": "cast(3.25 as decimal(3,2))", "lossy": "refuse"}, ok=False)
    message = project.run_results()["lossy"]["message"]
    assert "Compilation Error" in message and "value for column v: storing a value of type decimal(3,2)" in message
    assert snapshot(db, t) == before
    # the same key under meta, where dbt 1.10 asks for keys it does not know, is the same option
    project.model(
        "lossy",
        "{{ config(materialized='spark_merge', unique_key='id', meta={'lossy_assignments': 'refuse'}) }}\n"
        "select 1 as id, cast(3.25 as decimal(3,2)) as v",
    )
    project.dbt("run", "-s", "lossy", ok=False)
    assert "storing a value of type decimal(3,2)" in project.run_results()["lossy"]["message"]
    assert snapshot(db, t) == before


@pytest.mark.extended  # CI: a failing model in test_duplicate_match_fails_the_model_and_leaves_the_table; the check in test_char_varchar.py
def test_a_value_longer_than_its_varchar_fails_the_model_and_leaves_the_table(project):
    """A VARCHAR(3) target (created outside dbt): 'xyz   ' is stored trimmed, as Spark stores it, and
    'abcd' fails the model with the length error before any write (tests/test_char_varchar.py has the
    rule value by value against Spark)."""
    db = project.sql  # the test's session, or the Thrift server's tables
    t = project.table("chars")
    db.sql(f"CREATE TABLE {t} (id INT, v VARCHAR(3)) USING parquet")
    project.model(
        "chars",
        "{{ config(materialized='spark_merge', unique_key='id') }}\nselect 1 as id, {{ var('v', \"'xyz   '\") }} as v",
    )
    project.dbt("run", "-s", "chars")
    assert rows(db, t) == [(1, "xyz")]
    before = snapshot(db, t)
    project.dbt("run", "-s", "chars", vars={"v": "'abcd'"}, ok=False)
    message = project.run_results()["chars"]["message"]
    assert "MERGE_EXCEED_LIMIT_LENGTH" in message and "column v VARCHAR(3)" in message
    assert snapshot(db, t) == before


@pytest.mark.thrift_ci
def test_clauses_with_delete(project):
    db = project.sql  # the test's session, or the Thrift server's tables
    t = project.table("account_balances")
    project.dbt("run", "-s", "account_balances", vars={"batch": 1})
    project.dbt("run", "-s", "account_balances", vars={"batch": 2})
    # bob's balance adds up, cy is deleted, di inserted
    assert rows(db, f"(SELECT id, name, balance FROM {t})") == [(1, "ann", 10.0), (2, "bob", 45.0), (4, "di", 40.0)]
    assert project.run_results()["account_balances"]["adapter_response"]["rows_affected"] == 3


def test_show_unit_tests_and_empty_runs_work_on_a_merge_model(session_project):
    """dbt show and dbt's unit tests run the model's SELECT; --empty runs the materialization on no
    rows: the merge changes nothing."""
    project, db = session_project, session_project.sql
    t = project.table("account_balances")
    project.dbt("run", "-s", "account_balances", vars={"batch": 1})
    before = snapshot(db, t)
    project.dbt("show", "-s", "account_balances", "--vars", '{"batch": 2}', "--output", "json")
    shown = "\n".join(project.logs)
    assert '"name": "bob"' in shown and '"name": "di"' in shown, shown[-2000:]
    project.dbt("test", "-s", "account_balances,test_type:unit")
    assert project.run_results()["account_balances_reads_one_batch"]["status"] == "pass"
    project.dbt("run", "-s", "account_balances", "--empty", vars={"batch": 2})
    assert project.run_results()["account_balances"]["adapter_response"]["rows_affected"] == 0
    assert snapshot(db, t) == before


def test_duplicate_match_fails_the_model_and_leaves_the_table(project):  # over Thrift in the extended tier
    db = project.sql  # the test's session, or the Thrift server's tables
    project.model(
        "dups",
        "{{ config(materialized='spark_merge', unique_key='id') }}\n"
        "select * from values {{ var('rows', '(1, 1)') }} as s(id, v)",
    )
    project.dbt("run", "-s", "dups")
    t = project.table("dups")
    before = snapshot(db, t)
    project.dbt("run", "-s", "dups", vars={"rows": "(1, 2), (1, 3)"}, ok=False)
    message = project.run_results()["dups"]["message"]
    assert "MERGE_TARGET_ROW_MULTIPLE_MATCHES" in message and "id='1', source_rows=2, matched by:" in message
    # dbt's error names each source row that matched the target row, and the clause it chose
    assert (
        "source row (id=1, v=2) chose WHEN MATCHED" in message
        and "source row (id=1, v=3) chose WHEN MATCHED" in message
    )
    # a failure while the model runs is not a config error: dbt labels it a Database Error
    assert "Database Error" in message and "Compilation Error" not in message, message
    assert snapshot(db, t) == before
    assert db.sql("SHOW TABLES LIKE '__sm_lock_dups'").count() == 0


@pytest.mark.extended  # CI: the conflict case of test_conformance.py runs a dbt operation against a live lock
def test_a_live_commit_lock_makes_the_model_wait_then_fail_clean(session_project, spark):
    """A live holder (its lease runs) of the target's commit lock: the run waits until its deadline
    (here spark_merge_lock_wait_seconds=2, 120 by default) and fails MERGE_CONFLICT naming the holder,
    leaving the table and the other merge's lock as they were."""
    from merge_core.spark.catalog import describe_table

    p = session_project
    p.model(
        "held",
        "{{ config(materialized='spark_merge', unique_key='id') }}\n"
        "select * from values {{ var('rows', '(1, 1)') }} as s(id, v)",
    )
    p.dbt("run", "-s", "held")
    t = p.table("held")
    table = describe_table(spark, [p.schema, "held"])
    spark.sql(
        macros.render(
            "lock_sql", table, "other", "2026-11-25T00:00:00+00:00", "2999-01-01T00:00:00+00:00", "host-a pid 1"
        )
    )
    try:
        before = snapshot(spark, t)
        p.dbt("run", "-s", "held", vars={"rows": "(1, 5), (2, 6)", "spark_merge_lock_wait_seconds": 2}, ok=False)
        message = p.run_results()["held"]["message"]
        for part in (
            "MERGE_CONFLICT",
            "being committed by merge other on host-a pid 1",
            "which is alive",
            "gave up after",
        ):
            assert part in message, message
        assert snapshot(spark, t) == before
        assert (
            spark.sql(f"SHOW TBLPROPERTIES {macros.render('lock_relation', table)}")
            .where("key = 'spark_merge.lock.merge_id'")
            .first()["value"]
            == "other"
        )
    finally:
        spark.sql(macros.render("unlock_sql", table))
    p.dbt("run", "-s", "held", vars={"rows": "(1, 5), (2, 6)"})
    assert sorted(map(tuple, spark.table(t).collect())) == [(1, 5), (2, 6)]


@pytest.mark.parametrize(
    "mode, ok, expected",
    [
        pytest.param("ignore", True, [(1, "a"), (2, "b")], marks=pytest.mark.extended),
        ("append_new_columns", True, [(1, "a", None), (2, "b", "x")]),
        ("sync_all_columns", True, [(1, "a", None), (2, "b", "x")]),
        # a failing model, as in test_duplicate_match_fails_the_model_and_leaves_the_table (CI)
        pytest.param("fail", False, "columns differ", marks=pytest.mark.extended),
        # the merge option: dbt's append_new_columns (CI: that mode)
        pytest.param("schema_evolution", True, [(1, "a", None), (2, "b", "x")], marks=pytest.mark.extended),
    ],
)
def test_on_schema_change(project, mode, ok, expected):
    db = project.sql  # the test's session, or the Thrift server's tables
    name = f"osc_{mode}"
    config = "schema_evolution=true" if mode == "schema_evolution" else f"on_schema_change='{mode}'"
    project.model(
        name,
        f"{{{{ config(materialized='spark_merge', unique_key='id', {config}) }}}}\n"
        "select * from values {{ var('rows', \"(1, 'a')\") }} as s(id, name{{ var('extra', '') }})",
    )
    project.dbt("run", "-s", name)
    t = project.table(name)
    project.dbt("run", "-s", name, vars={"rows": "(2, 'b', 'x')", "extra": ", tag"}, ok=ok)
    if ok:
        assert rows(db, t) == expected
    else:
        assert expected in project.run_results()[name]["message"] and rows(db, t) == [(1, "a")]


@pytest.mark.extended  # CI: sync_all_columns in test_on_schema_change
def test_sync_all_columns_cannot_drop_a_column(project):
    project.model(
        "osc_drop",
        "{{ config(materialized='spark_merge', unique_key='id', on_schema_change='sync_all_columns') }}\n"
        "select 1 as id{{ var('extra', \", 'a' as name\") }}",
    )
    project.dbt("run", "-s", "osc_drop")
    project.dbt("run", "-s", "osc_drop", vars={"extra": ""}, ok=False)
    assert "cannot drop or retype columns" in project.run_results()["osc_drop"]["message"]


# (config, what the model's error says): every refusal a model's config meets, before anything is
# written; "later=True" (and the cases decided against the existing table) on a model that ran before
CONFIG_ERRORS = [
    ("", "set unique_key"),
    ("unique_key='id', file_format='delta'", "file_format must be parquet or orc"),
    (
        "unique_key='id', on_schema_change='explode'",
        "on_schema_change must be ignore, fail, append_new_columns or sync_all_columns",
    ),
    ("unique_key='id', duplicate_rule='first'", "duplicate_rule must be trino, postgres or strict"),
    ("unique_key='id', meta={'duplicate_rule': 'first'}", "duplicate_rule must be trino, postgres or strict"),
    ("unique_key='id', duplicate_rule='strict', meta={'duplicate_rule': 'trino'}", "duplicate_rule is set twice"),
    ("unique_key='id', merge_clauses=[{'when': 'always', 'action': 'update'}]", "merge_clauses[0].when"),
    ("unique_key='id', merge_clauses=[{'when': 'matched', 'action': 'upsert'}]", "merge_clauses[0].action"),
    ("unique_key='id', merge_clauses=[{'when': 'matched', 'action': 'update', 'sett': {}}]", "unknown key(s) sett"),
    ("unique_key='id', merge_clauses='update'", "merge_clauses must be a non-empty list"),
    ("unique_key='id', merge_update_columns=['v'], merge_exclude_columns=['v']", "not both"),
    ("unique_key='id', retention_hours=-1", "retention_hours must be"),
    ("incremental_strategy='microbatch', event_time='v'", "dbt runs batches only for materialized='incremental'"),
    (
        "unique_key='id', merge_clauses=[{'when': 'matched', 'action': 'update', 'set': {'nope': '1'}}]",
        "SET assigns unknown column nope",
    ),
    (
        "unique_key='id', merge_clauses=[{'when': 'not_matched', 'action': 'delete'}]",
        "DELETE is only allowed in WHEN MATCHED",
    ),
    ("unique_key='id', sequence_field='v'", "sequence_field applies only to merge engines"),
    ("merge_engine='aggregation'", "a merge engine needs unique_key"),
    (
        "unique_key='id', merge_engine='aggregation', aggregate_function={'v': 'median'}",
        "unknown function median for v",
    ),
    ("unique_key='id', merge_engine='first-row', sequence_field='v'", "sequence_field is not allowed"),
    # a column a config key names must exist: partition_by on the first run (before the CTAS), the keys a
    # merge reads on the runs that merge (a first load by merge: an upsert), as dbt's test__bad_unique_key
    (
        "unique_key='id', partition_by=['dt']",
        "partition_by names column 'dt', which the model does not have (its columns: id, v)",
    ),
    ("unique_key='id', watermark_key='ts'", "watermark_key names column 'ts'"),
    ("unique_key='idd', later=True", "unique_key names column 'idd', which the model does not have"),
]
FOUND_AGAINST_THE_TABLE = ("nope", "DELETE", "median", "not allowed")


def test_config_errors_are_compilation_errors(project):
    """Each case is a model of its own, all refused in one dbt run: dbt goes on past one model's
    compilation error, and each model's message is its own (run_results.json)."""
    good = "{{ config(materialized='spark_merge', unique_key='id') }}\nselect 1 as id, 2 as v"
    later = [f"bad_{i}" for i, (config, fragment) in enumerate(CONFIG_ERRORS)
             if ", later=True" in config or any(f in fragment for f in FOUND_AGAINST_THE_TABLE)]  # fmt: skip
    for name in later:
        project.model(name, good)
    project.dbt("run", "-s", *later, "--full-refresh")
    for i, (config, _) in enumerate(CONFIG_ERRORS):
        config = config.replace(", later=True", "")
        project.model(f"bad_{i}", "{{ config(materialized='spark_merge', " + config + ") }}\nselect 1 as id, 2 as v")
    project.dbt("run", "-s", *[f"bad_{i}" for i in range(len(CONFIG_ERRORS))], ok=False)
    results = project.run_results()
    wrong = {
        config: results[f"bad_{i}"]["message"]
        for i, (config, fragment) in enumerate(CONFIG_ERRORS)
        if "Compilation Error" not in (results[f"bad_{i}"]["message"] or "")
        or fragment not in results[f"bad_{i}"]["message"]
    }
    assert not wrong, wrong
    for i in range(len(CONFIG_ERRORS)):
        (project.path / "models" / f"bad_{i}.sql").unlink()  # no later test meets them


CONTRACT_YML = """
version: 2
models:
  - name: contracted
    config:
      contract: {enforced: true}
    columns:
      - name: id
        data_type: int
        constraints: [{type: check, expression: "id > 0"}]
      - name: v
        data_type: string
        constraints: [{type: not_null}]
"""


@pytest.mark.extended  # CI: the model's columns are checked by test_on_schema_change and test_config_errors_are_compilation_errors
def test_an_enforced_contract_checks_the_columns_and_enforces_not_null(project):
    """dbt's own contract check runs before anything is written; a not_null constraint is enforced by
    spark-merge's NOT NULL check, on the first load and on merges; a check constraint is warned about."""
    db = project.sql
    t = project.table("contracted")
    (project.path / "models" / "contracted.yml").write_text(CONTRACT_YML)
    project.model(
        "contracted",
        "{{ config(materialized='spark_merge', unique_key='id') }}\n"
        "select {{ var('id', '1') }} as id, {{ var('v', \"'a'\") }} as v",
    )
    try:
        project.dbt("run", "-s", "contracted", "--full-refresh", vars={"v": "cast(null as string)"}, ok=False)
        assert "NOT NULL column v" in project.run_results()["contracted"]["message"]
        assert rows(db, f"(SELECT * FROM {t} WHERE v IS NULL)") == []
        project.dbt("run", "-s", "contracted", "--full-refresh")
        assert any("The constraint type check is not enforced by spark_merge" in line for line in project.logs)
        assert rows(db, t) == [(1, "a")]
        before = snapshot(db, t)
        project.dbt("run", "-s", "contracted", vars={"id": "2", "v": "cast(null as string)"}, ok=False)
        assert "NOT NULL column v" in project.run_results()["contracted"]["message"]
        project.dbt("run", "-s", "contracted", vars={"id": "2", "v": "5"}, ok=False)  # v is an int now
        message = project.run_results()["contracted"]["message"]
        assert "This model has an enforced contract that failed" in message and "data type mismatch" in message, message
        assert snapshot(db, t) == before
        project.dbt("run", "-s", "contracted", vars={"id": "2", "v": "'b'"})
        assert rows(db, t) == [(1, "a"), (2, "b")]
    finally:
        (project.path / "models" / "contracted.yml").unlink()
        (project.path / "models" / "contracted.sql").unlink()


@pytest.mark.extended
def test_grants_are_applied_as_dbt_sparks_own_table_applies_them(session_project):
    """The same grants config on a dbt-spark table and on a spark_merge model: both issue dbt's GRANT
    (apply_grants) after creating the table, and open-source Spark refuses both the same way."""
    project = session_project
    seen = {}
    for materialized in ("table", "spark_merge"):
        name = f"granted_{materialized}"
        project.model(
            name,
            "{{ config(materialized='" + materialized + "', unique_key='id', file_format='parquet', "
            "grants={'select': ['analyst']}) }}\nselect 1 as id",
        )
        try:
            project.dbt("run", "-s", name, ok=False)
            message = project.run_results()[name]["message"]
            assert f"grant select on {project.table(name)} to `analyst`" in message, message
            seen[materialized] = "INVALID_STATEMENT_OR_CLAUSE" in message
            assert rows(project.sql, project.table(name)) == [(1,)]  # created before the grant
        finally:
            (project.path / "models" / f"{name}.sql").unlink()
    assert seen == {"table": True, "spark_merge": True}


def test_own_config_keys_under_meta_pass_dbts_config_validation(tmp_path, monkeypatch):
    """dbt 1.10 validates model configs against its JSON schema (for some adapters; here for spark
    too) and warns about a key it does not know, unless it is under meta. spark_merge reads its own
    keys from either place; under meta no warning is printed. No Spark: dbt parse only."""
    from dbt.jsonschemas import jsonschemas

    monkeypatch.setattr(jsonschemas, "_JSONSCHEMA_SUPPORTED_ADAPTERS", {"spark"})
    path = example_project(tmp_path / "project")
    for name, config in [
        ("as_config", "duplicate_rule='strict', watermark_key='v'"),
        ("under_meta", "meta={'duplicate_rule': 'strict', 'watermark_key': 'v'}"),
    ]:
        (path / "models" / f"{name}.sql").write_text(
            "{{ config(materialized='spark_merge', unique_key='id', " + config + ") }}\nselect 1 as id, 2 as v"
        )
    events = []
    argv = ["--project-dir", str(path), "--profiles-dir", str(path)]
    assert dbtRunner().invoke(["deps", *argv]).success
    result = dbtRunner(callbacks=[events.append]).invoke(
        ["parse", "--show-all-deprecations", "--no-partial-parse", *argv]
    )
    assert result.success
    custom = [e.info.msg for e in events if e.info.name == "CustomKeyInConfigDeprecation"]
    assert any("duplicate_rule" in m and "as_config" in m for m in custom), custom  # the check is live
    assert not [m for m in custom if "under_meta" in m], custom


CASES = [
    ("quote", ["we`ird"]),
    ("literal", ["it's"]),
    ("partition_filter", ["TABLE", [{"dt": "2026-01-01"}, {"dt": "2026-01-02"}]]),
    ("cache_source_sql", ["SPEC", "CTX"]),
    ("source_stats_sql", ["TABLE", "CTX"]),
    ("matched_partitions_sql", ["SPEC", "TABLE", "CTX", 10]),
    ("scan_filter", ["SPEC", "TABLE", [{"partition": {"dt": "2026-01-01"}}, {"partition": {"dt": None}}]]),
    ("cache_changes_sql", ["SPEC", "TABLE", "RESOLVED", "CTX"]),
    ("duplicates_sql", ["SPEC", "TABLE", "RESOLVED", "CTX"]),
    ("change_summary_sql", ["SPEC", "TABLE", "RESOLVED", "CTX"]),
    ("read_once_probe_sql", ["CTX", "source"]),
    ("determinism_probe_sql", ["SPEC", "TABLE", "PARTS"]),
    ("stage_sql", ["TABLE", "CTX", [{"dt": "2026-01-01"}]]),
    ("fused_rewrite_select", ["SPEC", "TABLE", "RESOLVED", "CTX", [{"dt": "2026-01-01"}]]),
    ("append_sql", ["TABLE", "CTX"]),
    ("file_stats_sql", ["TABLE", "`db`.`acc`", "dt = '2026-01-01'"]),
    (
        "journal_sql",
        [
            "TABLE",
            "m1",
            [{"partition": {"dt": "2026-01-01"}, "location": "file:/w/n", "old_location": "file:/w/o", "exists": True}],
        ],
    ),
    ("journal_done_sql", ["TABLE", "m1"]),
    ("describe_parts_sql", ["SPEC", "TABLE", "PARTS"]),
    ("lock_sql", ["TABLE", "m1", "2026-11-22T00:00:00+00:00", "2026-11-22T00:00:30+00:00", "host pid 1"]),
    ("renew_lock_sql", ["TABLE", "2026-11-22T00:00:40+00:00"]),
    ("history_read_sql", ["CTX"]),
]


def test_macros_render_the_same_sql_in_dbt_and_in_merge_core(session_project):
    """Each macro, given the same data, through dbt's jinja (run-operation) and merge_core's jinja2."""
    from merge_core import parse
    from tests.unit.test_macros import DESC, TYPES

    table = macros.fill("table_info", DESC, TYPES)
    spec = parse(
        "MERGE INTO db.acc t USING src s ON t.id = s.id WHEN MATCHED AND s.v = 'x' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
    ).to_dict()
    resolved = macros.fill("resolve", spec, table)
    ctx = macros.fill("context", spec, table, "m1")
    ctx["on_keys"] = [
        {"target": "id", "source": "id", "null_safe": False},
        {"target": "dt", "source": "dt", "null_safe": True},
    ]
    ctx["match_filter"] = "(`id` BETWEEN CAST('1' AS bigint) AND CAST('9' AS bigint))"
    data = {"SPEC": spec, "TABLE": table, "RESOLVED": resolved, "CTX": ctx, "PARTS": resolved["parts"][:2]}
    calls = [(name, [data.get(a, a) if isinstance(a, str) else a for a in args]) for name, args in CASES]
    lines = ["{% macro render_cases() %}"]
    for i, (name, args) in enumerate(calls):
        lines.append(f"{{% set args = fromjson({json.dumps(json.dumps(args))}) %}}")
        lines.append(f"{{% do log('CASE{i}=' ~ tojson(spark_merge.spark_merge__{name}(*args) | trim), info=true) %}}")
    lines.append("{% endmacro %}")
    (session_project.path / "macros").mkdir(exist_ok=True)
    (session_project.path / "macros" / "render_cases.sql").write_text("\n".join(lines))
    session_project.dbt("run-operation", "render_cases")
    from_dbt = {}
    for line in session_project.logs:
        if line.startswith("CASE"):
            key, value = line.split("=", 1)
            from_dbt[int(key[4:])] = json.loads(value)
    assert len(from_dbt) == len(calls)
    for i, (name, args) in enumerate(calls):
        assert from_dbt[i] == macros.render(name, *args), name


def test_commit_interrupted_in_python_is_finished_by_the_next_dbt_run(spark, session_project, monkeypatch):
    """Both hosts share the journal: a dbt run rolls a crashed commit forward before merging."""
    from merge_core import merge
    from merge_core.spark.host import SparkHost

    t = session_project.table("accounts")
    session_project.dbt("run", "-s", "accounts", "--full-refresh", vars={"batch": 1})

    def crash_after_first_repoint(self, table, merge_id, repoints, *args, **kwargs):
        self.spark.sql(macros.fill_list("repoint_statements", table, repoints)[0])
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(SparkHost, "repoint", crash_after_first_repoint)
    with pytest.raises(KeyboardInterrupt):
        merge(spark, f"UPDATE {t} SET name = upper(name)")
    monkeypatch.undo()
    assert sorted(r[0] for r in spark.sql(f"SELECT name FROM {t}").collect()) != ["ANN", "BOB", "CY"]  # half done
    session_project.dbt("run", "-s", "accounts", vars={"batch": 3})
    assert rows(spark, t) == [
        (1, "ANN", 10.0, "eu"),
        (2, "BOB", 20.0, "us"),
        (3, "CY", 30.0, "eu"),
        (4, "di", 45.0, "apac"),
        (5, "ed", 50.0, "us"),
    ]
    assert spark.sql(f"SHOW TBLPROPERTIES {t} ('spark_merge.journal.parts')").collect()[0][1] == "0"
    assert any("recovering interrupted merge" in line for line in session_project.logs)


@pytest.mark.extended  # CI: the watermark shape of test_conformance.py, idempotence in test_upsert.py
def test_watermark_upsert_model_is_idempotent_across_backfills(project):
    db = project.sql  # the test's session, or the Thrift server's tables
    t = project.table("accounts_latest")
    project.dbt("run", "-s", "accounts_latest", "--full-refresh", vars={"batch": 3})
    direct = rows(db, t)
    assert direct == [
        (1, "ann", 10.0, 1, False),
        (2, "bob", 25.0, 2, False),
        (3, "cy", 0.0, 2, True),
        (4, "di", 45.0, 3, False),
        (5, "ed", 50.0, 3, False),
    ]
    project.dbt("run", "-s", "accounts_latest", "--full-refresh", vars={"batch": 1})
    project.dbt("run", "-s", "accounts_latest", vars={"batch": 3})
    project.dbt("run", "-s", "accounts_latest", vars={"batch": 2})  # a backfill of an older day
    project.dbt("run", "-s", "accounts_latest", vars={"batch": 3})  # and the newest again
    assert rows(db, t) == direct
    assert project.run_results()["accounts_latest"]["adapter_response"]["rows_affected"] == 0


@pytest.mark.extended  # CI: the merge-on-read shape of test_conformance.py
def test_merge_on_read_model_reads_like_the_copy_on_write_one(project):
    db = project.sql  # the test's session, or the Thrift server's tables
    cow, mor = project.table("accounts_latest"), project.table("accounts_log")
    for batch, refresh in ((1, True), (3, False), (2, False), (3, False)):
        args = ["run", "-s", "accounts_latest", "accounts_log"] + (["--full-refresh"] if refresh else [])
        project.dbt(*args, vars={"batch": batch})
        assert rows(db, mor) == rows(db, f"(SELECT * FROM {cow} WHERE NOT deleted)")
    assert db.table(f"{mor}__sm_log").count() == 3 + 8 + 6 + 8  # every run only appended
    assert project.run_results()["accounts_log"]["adapter_response"]["rows_affected"] == 8


@pytest.mark.extended  # CI: the engines in test_engines.py, dbt's statements in test_conformance.py
def test_aggregation_engine_model(project):
    """Batch by batch, and all batches in one run (a full refresh), give the same rows."""
    db = project.sql  # the test's session, or the Thrift server's tables
    t = project.table("account_activity")
    project.dbt("run", "-s", "account_activity", "--full-refresh", vars={"batch": 1})
    project.dbt("run", "-s", "account_activity", vars={"batch": 2})
    assert project.run_results()["account_activity"]["adapter_response"]["rows_affected"] == 3  # 2 updated, 1 new
    project.dbt("run", "-s", "account_activity", vars={"batch": 3})
    expected = [
        (1, 10.0, 1, 10.0, ["eu"], "ann"),
        (2, 45.0, 2, 25.0, ["us"], "bob"),
        (3, 30.0, 2, 30.0, ["eu"], "cy"),
        (4, 85.0, 2, 45.0, ["apac"], "di"),
        (5, 50.0, 1, 50.0, ["us"], "ed"),
    ]
    assert rows(db, t) == expected
    project.dbt("run", "-s", "account_activity", "--full-refresh", vars={"batches": [1, 2, 3]})
    assert rows(db, t) == expected


@pytest.mark.extended  # CI: the same macros through Python (test_corruption: NULL partitions, rand()), dbt's statements in test_conformance
def test_null_partitions_random_sources_and_conditions_through_dbt(project):
    """The dbt path: rows move into and out of the NULL partition (never confused with 'None'), a
    model drawing rand() is read once, and a non-deterministic merge condition is refused."""
    db = project.sql  # the test's session, or the Thrift server's tables
    project.model(
        "nulls",
        "{{ config(materialized='spark_merge', unique_key='id', partition_by=['p']) }}\n"
        "select * from values {{ var('rows', \"(1, 'a', CAST(NULL AS STRING)), (2, 'b', 'None'), (3, 'c', 'x')\") }} "
        "as s(id, v, p)",
    )
    project.dbt("run", "-s", "nulls")
    t = project.table("nulls")
    project.dbt("run", "-s", "nulls", vars={"rows": "(1, 'a2', 'x'), (2, 'b2', CAST(NULL AS STRING)), (4, 'd', NULL)"})
    assert rows(db, t) == [(1, "a2", "x"), (2, "b2", None), (3, "c", "x"), (4, "d", None)]

    project.model(
        "rnd",
        "{{ config(materialized='spark_merge', unique_key='id', partition_by=['p']) }}\n"
        "select CAST(id AS INT) AS id, CAST(floor(rand() * 5) AS INT) AS p from range(0, {{ var('n', 10) }})",
    )
    project.dbt("run", "-s", "rnd")
    project.dbt("run", "-s", "rnd", vars={"n": 20})
    assert sorted(r[0] for r in rows(db, project.table("rnd"))) == list(range(20))

    project.model(
        "rnd",
        "{{ config(materialized='spark_merge', unique_key='id', partition_by=['p'], "
        "merge_clauses=[{'when': 'matched', 'condition': 'rand() < 0.5', 'action': 'delete'}]) }}\n"
        "select CAST(id AS INT) AS id, 0 AS p from range(0, 5)",
    )
    before = snapshot(db, project.table("rnd"))
    project.dbt("run", "-s", "rnd", ok=False)
    assert "is not deterministic" in project.run_results()["rnd"]["message"]
    assert snapshot(db, project.table("rnd")) == before


@pytest.mark.extended  # CI: the Python host's test_rows_another_application_appended_before_the_merge_are_kept (test_corruption.py); dbt's statements in test_conformance.py
def test_rows_another_application_appended_are_kept_by_the_next_run(session_project, spark):
    """dbt's begin refreshes the table's listing too: a file another application added to a
    partition this session had listed is rewritten with the partition, not dropped."""
    import pyarrow as pa

    from .test_corruption import _append_as_another_application

    session_project.model(
        "appended",
        "{{ config(materialized='spark_merge', unique_key='id', partition_by=['p']) }}\n"
        "select * from values {{ var('rows', \"(1, 'a', 'x'), (2, 'b', 'y')\") }} as s(id, v, p)",
    )
    session_project.dbt("run", "-s", "appended")
    t = session_project.table("appended")
    assert spark.sql(f"SELECT count(*) FROM {t}").collect()[0][0] == 2  # listed, cached
    _append_as_another_application(spark, t, "p = 'x'", {"id": pa.array([7], pa.int32()), "v": ["elsewhere"]})
    session_project.dbt("run", "-s", "appended", vars={"rows": "(1, 'z', 'x')"})
    assert rows(spark, t) == [(1, "z", "x"), (2, "b", "y"), (7, "elsewhere", "x")]


def test_rows_appended_while_a_model_stages_make_a_conflict(session_project, spark):
    """dbt's commit queries the files after REFRESH TABLE under the lock: a file another application
    added to a partition while the model staged its rewrite fails the model (MERGE_CONFLICT) and
    is kept; without the refresh the query read the listing cached while planning, and the commit
    dropped the row."""
    import pyarrow as pa

    from .test_corruption import append_once_staging_begins

    session_project.model(
        "appended_late",
        "{{ config(materialized='spark_merge', unique_key='id', partition_by=['p']) }}\n"
        "select * from values {{ var('rows', \"(1, 'a', 'x'), (2, 'b', 'y')\") }} as s(id, v, p)",
    )
    session_project.dbt("run", "-s", "appended_late")
    t = session_project.table("appended_late")
    thread, done = append_once_staging_begins(
        spark, t, "p = 'x'", {"id": pa.array([7], pa.int32()), "v": ["elsewhere"]}
    )
    session_project.dbt("run", "-s", "appended_late", vars={"rows": "(1, 'z', 'x')"}, ok=False)
    thread.join()
    assert done.is_set()
    assert "changed since this merge read them" in session_project.run_results()["appended_late"]["message"]
    spark.sql(f"REFRESH TABLE {t}")
    assert rows(spark, t) == [(1, "a", "x"), (2, "b", "y"), (7, "elsewhere", "x")]


@pytest.mark.slow
@pytest.mark.extended  # dbt over Thrift runs in CI (the tests marked thrift_ci)
def test_a_long_lived_thrift_session_sees_each_commit(projects):
    """What another client of the same Thrift Server (a BI tool's open connection) sees, as the README
    says: a partitioned table's copy-on-write commit at once (its partitions point at directories no
    session has listed, and Spark asks the metastore for a partitioned table's partitions at every
    query); an unpartitioned table's commit and a merge-on-read append after REFRESH TABLE (or once its
    cached listing is older than spark.sql.metadataCacheTTLSeconds), Spark's rule for any write by
    another session, its own INSERT INTO included."""
    from .thrift_server import ThriftSql

    project = projects("thrift")
    reader = ThriftSql(project.sql.server, keep_session=True)
    try:
        for name, partition in (("seen_parts", ", partition_by=['p']"), ("seen_flat", "")):
            project.model(
                name,
                "{{ config(materialized='spark_merge', unique_key='id'" + partition + ") }}\n"
                "select * from values {{ var('rows', \"(1, 'a', 1), (2, 'b', 2)\") }} as s(id, v, p)",
            )
            project.dbt("run", "-s", name)
            t = project.table(name)
            assert rows(reader, t) == [(1, "a", 1), (2, "b", 2)]
            project.dbt("run", "-s", name, vars={"rows": "(1, 'a2', 1), (3, 'c', 3)"})
            if not partition:
                reader.sql(f"REFRESH TABLE {t}")
            assert rows(reader, t) == [(1, "a2", 1), (2, "b", 2), (3, "c", 3)], name

        log = project.table("accounts_log")
        project.dbt("run", "-s", "accounts_log", "--full-refresh", vars={"batch": 1})
        reader.sql(f"REFRESH TABLE {log}__sm_log")  # dbt's CTAS made it again at the same directory
        first = reader.sql(f"SELECT count(*) FROM {log}__sm_log").collect()[0][0]
        project.dbt("run", "-s", "accounts_log", vars={"batch": 2})
        reader.sql(f"REFRESH TABLE {log}__sm_log")
        assert reader.sql(f"SELECT count(*) FROM {log}__sm_log").collect()[0][0] > first
        assert rows(reader, log) == rows(project.sql, log)
    finally:
        reader.close()


INCREMENTAL_MERGE = """{{{{ config(materialized='incremental', incremental_strategy='merge', file_format='{file_format}', {config}) }}}}
select * from values {{{{ var('rows') }}}} as s(id, name, amount, region)"""


@pytest.mark.parametrize("file_format", ["parquet", pytest.param("orc", marks=pytest.mark.extended)])
def test_dbt_sparks_incremental_merge_runs_on_parquet_and_orc_as_on_delta(project, file_format):
    """A model in dbt-spark's own spelling (materialized='incremental', incremental_strategy='merge'), which
    dbt-spark refuses unless the format is delta, iceberg or hudi, runs through spark-merge with dbt's
    configs: unique_key, incremental_predicates, merge_update_columns, partition_by, on_schema_change.
    The rows are the ones dbt-databricks' merge gives on a Delta table: matched rows get the listed
    columns, the others are inserted, a row the predicate excludes from the match is inserted again."""
    model = f"inc_merge_{file_format}"  # one table per format: the project is shared
    db, t = project.sql, project.table(model)
    config = (
        "unique_key='id', partition_by=['region'], merge_update_columns=['amount'], "
        "incremental_predicates=[\"DBT_INTERNAL_DEST.region <> 'frozen'\"], on_schema_change='fail'"
    )
    project.model(model, INCREMENTAL_MERGE.format(file_format=file_format, config=config))
    first = "(1, 'ann', 10, 'eu'), (2, 'bob', 20, 'us'), (3, 'cy', 30, 'frozen')"
    project.dbt("run", "-s", model, vars={"rows": first})
    described = db.sql(f"DESCRIBE TABLE EXTENDED {t}").collect()  # a session's or the Thrift server's rows
    assert [r[1] for r in described if r[0] == "Provider"] == [file_format]
    second = "(1, 'ANN', 11, 'eu'), (3, 'CY', 31, 'frozen'), (4, 'di', 40, 'us')"
    project.dbt("run", "-s", model, vars={"rows": second})
    assert sorted(rows(db, t)) == [
        (1, "ann", 11, "eu"),  # matched: only merge_update_columns (amount) change
        (2, "bob", 20, "us"),
        (3, "CY", 31, "frozen"),  # the predicate keeps the frozen row out of the match: inserted again
        (3, "cy", 30, "frozen"),
        (4, "di", 40, "us"),
    ]
    result = project.run_results()[model]
    assert result["adapter_response"]["rows_affected"] == 3 and "inserted 2, updated 1" in result["message"]
    # on_schema_change='fail': a model whose columns change fails before anything is written
    project.model(model, INCREMENTAL_MERGE.format(file_format=file_format, config=config).replace(
        "as s(id, name, amount, region)", "as s(id, name, amount, region, extra)"))  # fmt: skip
    before = snapshot(db, t)
    project.dbt("run", "-s", model, vars={"rows": "(5, 'eve', 50, 'us', 1)"}, ok=False)
    assert "on_schema_change is fail" in project.run_results()[model]["message"]
    assert snapshot(db, t) == before


def test_dbt_sparks_merge_without_a_unique_key_inserts_and_other_strategies_are_refused_or_dbt_sparks(project):
    """Without unique_key, dbt-spark's merge matches nothing (ON FALSE): every row is inserted. A strategy
    spark-merge does not run is an error, never ignored; append stays dbt-spark's."""
    db, t = project.sql, project.table("inc_keyless")
    project.model("inc_keyless", INCREMENTAL_MERGE.format(file_format="parquet", config="partition_by=['region']"))
    project.dbt("run", "-s", "inc_keyless", vars={"rows": "(1, 'ann', 10, 'eu')"})
    project.dbt("run", "-s", "inc_keyless", vars={"rows": "(1, 'ann', 10, 'eu')"})
    assert rows(db, t) == [(1, "ann", 10, "eu"), (1, "ann", 10, "eu")]
    assert "MERGE" in project.run_results()["inc_keyless"]["message"]
    project.model("inc_keyless", INCREMENTAL_MERGE.format(file_format="parquet", config="unique_key='id'").replace(
        "'merge'", "'delete+insert'"))  # fmt: skip
    project.dbt("run", "-s", "inc_keyless", vars={"rows": "(1, 'ann', 10, 'eu')"}, ok=False)
    assert "incremental_strategy='delete+insert' is not one spark-merge runs" in "\n".join(project.logs)
    project.model("inc_refused", "{{ config(materialized='spark_merge', unique_key='id', incremental_strategy='append') }}\n"
                  "select 1 as id")  # fmt: skip
    project.dbt("run", "-s", "inc_refused", ok=False)
    assert "incremental_strategy='append' does not apply to materialized='spark_merge'" in "\n".join(project.logs)
    project.model("inc_append", INCREMENTAL_MERGE.format(file_format="parquet", config="partition_by=['region']").replace(
        "'merge'", "'append'"))  # fmt: skip
    project.dbt("run", "-s", "inc_append", vars={"rows": "(1, 'ann', 10, 'eu')"})
    assert "MERGE" not in project.run_results()["inc_append"]["message"]  # dbt-spark's own append


def test_a_project_without_the_override_file_merges_with_the_packages_flag(spark, tmp_path):
    """The package's own copy of the incremental override applies when the project sets dbt's flag:
    the model file stays as dbt-spark users write it, the project adds the package and two lines."""
    path = example_project(tmp_path / "project")
    (path / "macros" / "spark_merge_incremental.sql").unlink()
    with open(path / "dbt_project.yml", "a") as f:
        f.write("flags:\n  require_explicit_package_overrides_for_builtin_materializations: false\n")
    schema = f"dbt_flag_{os.getpid()}"
    p = Project(path, schema, spark, spark)
    p.model("inc_flag", INCREMENTAL_MERGE.format(file_format="parquet", config="unique_key='id'"))
    p.dbt("deps")
    try:
        p.dbt("run", "-s", "inc_flag", vars={"rows": "(1, 'ann', 10, 'eu')"})
        p.dbt("run", "-s", "inc_flag", vars={"rows": "(1, 'ann', 11, 'eu'), (2, 'bob', 20, 'us')"})
        assert rows(spark, p.table("inc_flag")) == [(1, "ann", 11, "eu"), (2, "bob", 20, "us")]
        assert "inserted 1, updated 1" in p.run_results()["inc_flag"]["message"]
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")


def test_a_change_feed_that_plain_writes_contradict_fails_the_model_reading_it(session_project, spark):
    """dbt's spark_merge.changes checks the partitions the commits it reads touched, as table_changes does:
    after a plain INSERT OVERWRITE of one, the model reading the feed fails naming it, unless it accepts."""
    p = session_project
    p.model(
        "fed_source",
        "{{ config(materialized='spark_merge', unique_key='id', partition_by=['p']) }}\n"
        "select * from values {{ var('rows', \"(1, 'a', 'x')\") }} as s(id, v, p)",
    )
    p.model(
        "fed_reader",
        "{{ config(materialized='table') }}\n"
        "select id, _change_type from {{ spark_merge.changes(ref('fed_source'), "
        "accept_plain_writes=var('accept', false)) }}",
    )
    p.dbt("run", "-s", "fed_source")
    t = p.table("fed_source")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.change_feed' = 'true')")
    p.dbt("run", "-s", "fed_source", vars={"rows": "(2, 'b', 'x')"})
    p.dbt("run", "-s", "fed_reader")
    assert rows(spark, p.table("fed_reader")) == [(2, "insert")]
    spark.sql(f"INSERT OVERWRITE {t} PARTITION (p = 'x') SELECT 9, 'z'")
    p.dbt("run", "-s", "fed_reader", ok=False)
    assert any(
        "does not tell the whole story" in line and "holds 1 row(s), where its last commit left 2" in line
        for line in p.logs
    )
    p.dbt("run", "-s", "fed_reader", vars={"accept": True})
    assert rows(spark, p.table("fed_reader")) == [(2, "insert")]
