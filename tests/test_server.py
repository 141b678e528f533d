"""`spark-merge server start|stop|status`: later commands on the warehouse use the warm server."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import free_port

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "merge_core", *args], capture_output=True, text=True)
    assert (done.returncode == 0) == ok, done.stdout + done.stderr[-3000:]
    return done


# a command line run in this process, then the heavy modules it imported
LEAN = (
    "import sys; from merge_core.api.cli import main; rc = main({args!r}); "
    "print('heavy modules:', [m for m in ('pyspark', 'pyarrow', 'sqlglot') if m in sys.modules]); sys.exit(rc)"
)


def test_server_start_run_history_stop(tmp_path):
    from merge_core.api import service_client

    w, port, merges_port = str(tmp_path / "w"), str(free_port()), str(free_port())
    assert cli("server", "status", "--warehouse", w, ok=False).stdout.strip() == "not running"
    url = f"sc://127.0.0.1:{port}"
    try:
        started = cli(
            "server", "start", "--warehouse", w, "--port", port, "--merges-port", merges_port, "--warm-up", "3"
        ).stdout
        service = f"http://127.0.0.1:{merges_port}"
        assert url in started and f"merge service (run, upsert, deferrable Airflow tasks): {service}" in started
        assert cli("server", "status", "--warehouse", w).stdout.strip() == url
        setup = (
            f"from merge_core.session import get_session; s = get_session(remote='{url}'); "
            "s.sql('CREATE DATABASE d'); s.sql('CREATE TABLE d.t (id INT, v STRING) USING parquet'); "
            "s.sql(\"INSERT INTO d.t VALUES (1, 'a'), (2, 'b')\")"
        )
        subprocess.run([sys.executable, "-c", setup], check=True, capture_output=True)
        # the CLI runs through the server: the embedded Derby metastore, held by the server, admits
        # no second process, so a command that started its own Spark here would fail. `run` submits
        # to the merge service, which runs it in the server's process (its log names the merge) and
        # hands its progress lines back as they come; its errors come back as they were raised
        run = cli("run", "--warehouse", w, "--sql", "UPDATE d.t SET v = 'z' WHERE id = 2")
        assert "updated 1" in run.stdout
        merge_id = run.stdout.split("merge ", 1)[1].split()[0]
        assert merge_id in (tmp_path / "w" / "connect-logs" / "server.log").read_text()
        assert "step 3/6 (changes): join target and source" in run.stderr, run.stderr
        # and the command itself starts no Spark: it imports neither PySpark nor pyarrow nor sqlglot
        # (what the warm server's half second per command would otherwise go to)
        for args in (["run", "--warehouse", w, "--sql", "UPDATE d.t SET v = 'x' WHERE id = 2", "-q"],
                     ["server", "status", "--warehouse", w]):  # fmt: skip
            lean = subprocess.run(
                [sys.executable, "-c", LEAN.format(args=args)], capture_output=True, text=True, check=True
            )
            assert lean.stdout.splitlines()[-1] == "heavy modules: []", lean.stdout + lean.stderr
        refused = cli("run", "--warehouse", w, "--sql", "UPDATE d.t SET nope = 1", "-q", ok=False)
        assert refused.stderr.startswith("error: MERGE_VALIDATION_ERROR") and "nope" in refused.stderr
        assert refused.stderr.count("\n") == 1, refused.stderr
        # the other commands, and an explicit --remote, use Spark Connect on the same driver
        over_connect = cli("run", "--remote", url, "--sql", "UPDATE d.t SET v = 'y' WHERE id = 1", "-q")
        assert "updated 1" in over_connect.stdout
        assert "update" in cli("history", "d.t", "--warehouse", w, "-q").stdout
        assert (tmp_path / "w" / "warehouse" / "d.db" / "t").is_dir()  # the server's warehouse is this one
        # the merge service beside it answers (tests/test_airflow.py runs deferrable merges through one)
        assert service_client.status(service, "k") == {"run_key": "k", "state": "unknown"}
        # the warm-up the service ran as it started (beside the merges above) merged, then dropped its
        # database: nothing of it is left in the catalog
        log = tmp_path / "w" / "connect-logs" / "server.log"
        deadline = time.monotonic() + 180
        while "warm-up: 3 merges in" not in log.read_text():
            assert time.monotonic() < deadline and "warm-up did not finish" not in log.read_text(), log.read_text()[
                -3000:
            ]
            time.sleep(0.5)
        listed = subprocess.run(
            [sys.executable, "-c", f"from merge_core.session import get_session; s = get_session(remote='{url}'); "
             "print([r[0] for r in s.sql('SHOW DATABASES').collect()])"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert "'d'" in listed and "__sm_warmup" not in listed, listed
    finally:
        assert cli("server", "stop", "--warehouse", w).stdout.strip() == "stopped"
    assert cli("server", "status", "--warehouse", w, ok=False).stdout.strip() == "not running"
    with pytest.raises(service_client.ServiceUnreachable):  # stopped with its server
        service_client.status(service, "k")


def test_the_warm_up_waits_while_a_submitted_merge_runs_and_drops_what_a_stopped_one_left(spark, caplog):
    """The warm-up (merge_service.warm_up) over this test's Spark: first it drops a database a stopped
    warm-up left; then, while the service has a merge running, it creates its table and merges nothing
    into it; once that merge has ended, it runs its merges, drops its database and logs."""
    import threading

    from merge_core.api import merge_service

    left_behind = f"{merge_service.WARM_UP_PREFIX}left_behind"
    spark.sql(f"CREATE DATABASE {left_behind}")
    service = merge_service.MergeService(merge_service.driver_sessions(spark))
    service.runs["k"] = merge_service.Run("k")  # a submitted merge, running
    warming = threading.Thread(target=merge_service.warm_up, args=(service, 2))
    with caplog.at_level("INFO", logger="spark_merge"):
        warming.start()
        deadline = time.monotonic() + 120
        while "warm-up: waiting while a submitted merge runs" not in caplog.text:
            assert time.monotonic() < deadline and warming.is_alive(), caplog.text
            time.sleep(0.2)
        [db] = warm_up_databases(spark)  # the one left behind is gone
        assert db != left_behind
        time.sleep(2)  # still waiting: nothing merged
        assert [r[0] for r in spark.sql(f"SELECT DISTINCT v FROM {db}.t").collect()] == ["a"]
        assert "warm-up: 2 merges" not in caplog.text
        service.runs["k"].state = "finished"
        warming.join(120)
    assert not warming.is_alive()
    assert "warm-up: 2 merges in" in caplog.text, caplog.text
    assert warm_up_databases(spark) == []


def warm_up_databases(spark) -> list[str]:
    from merge_core.api import merge_service
    from merge_core.common import macros

    like = macros.show_databases_sql(merge_service.WARM_UP_PREFIX + "*")
    return sorted(r[0] for r in spark.sql(like).collect())


def test_the_first_command_starts_a_server_every_entry_point_uses_and_it_stops_when_idle(tmp_path):
    """One warehouse per project, whichever folder a command runs from; the first command starts its
    warm server in the background (like Gradle's daemon); get_session(), the Airflow hook and a dbt
    session profile then go through it; it stops by itself once idle."""
    import os

    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    env = {**os.environ, "SPARK_MERGE_AUTO_SERVER": "1", "SPARK_MERGE_SERVER_IDLE_MINUTES": "0.5",
           "SPARK_MERGE_SERVER_WARM_UP": "0"}  # fmt: skip
    env.pop("SPARK_MERGE_HOME", None)
    home = project / "var"
    from merge_core.spark import server

    def run(*args: str, cwd=project, ok: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        assert (done.returncode == 0) == ok, done.stdout + done.stderr[-3000:]
        return done

    try:
        first = run(
            sys.executable, "-m", "merge_core", "run", "--sql", "UPDATE d.t SET v = 1", cwd=project / "sub", ok=False
        )
        assert f"starting a warm spark-merge server for {home}" in first.stderr, first.stderr
        assert "MERGE_TARGET_ERROR: target table d.t not found" in first.stderr
        setup = (
            "import logging; logging.basicConfig(level=logging.INFO); from merge_core import get_session; "
            "s = get_session(); print(type(s).__module__); s.sql('CREATE DATABASE d'); "
            "s.sql('CREATE TABLE d.t (id INT, v INT) USING parquet'); s.sql('INSERT INTO d.t VALUES (1, 1)')"
        )
        made = run(sys.executable, "-c", setup, cwd=project / "sub")
        assert "pyspark.sql.connect" in made.stdout and "this session is a Spark Connect session to it" in made.stderr
        second = run(sys.executable, "-m", "merge_core", "run", "--sql", "UPDATE d.t SET v = 2")
        assert "updated 1" in second.stdout and "starting a warm" not in second.stderr
        hook = run(
            sys.executable,
            "-c",
            "from airflow_provider.hooks import SparkMergeHook; print(SparkMergeHook().session_args())",
        )
        url = server.status(str(home))
        assert f"'remote': '{url}'" in hook.stdout
        # the example dbt project's session profile, in a folder of the project: through the server
        dbt_dir = project / "dbt"
        shutil.copytree(
            ROOT / "examples" / "dbt_project", dbt_dir, ignore=shutil.ignore_patterns("target", "logs", "dbt_packages")
        )
        (dbt_dir / "packages.yml").write_text(f"packages:\n  - local: {ROOT / 'dbt_macros'}\n")
        dbt = [str(Path(sys.executable).parent / "dbt"), "--project-dir", str(dbt_dir), "--profiles-dir", str(dbt_dir)]
        run(dbt[0], "deps", *dbt[1:], cwd=dbt_dir)
        shown = run(dbt[0], "show", *dbt[1:], "--inline", "select count(*) as n from d.t", cwd=dbt_dir)
        assert f"spark-merge: the warehouse {home}, through its spark-merge server at {url}" in shown.stdout, (
            shown.stdout
        )
        assert "| 1 |" in shown.stdout, shown.stdout
    except BaseException:
        server.stop(str(home))
        raise
    idle_since = time.monotonic()

    while server.status(str(home)) and time.monotonic() - idle_since < 120:
        time.sleep(2)
    assert server.status(str(home)) is None and not (home / server.STATE).exists()
    assert "idle for 0.5 minutes: stopping the server" in (home / "connect-logs" / "server.log").read_text()


@pytest.mark.parametrize(
    "args,error",
    [
        (["explain", "--sql", "MERGE INTO d.t USING d.s ON WHEN MATCHED THEN DELETE"], "MERGE_PARSE_ERROR"),
        (["run", "--sql", "UPDATE d.t SET v = 1 WHERE"], "MERGE_PARSE_ERROR"),
    ],
)
def test_a_statement_that_cannot_run_is_refused_before_spark_starts(tmp_path, args, error):
    """Parsing and checking options need no Spark: a fresh project's first command with a syntax error
    answers at once, starting no warm server and creating no warehouse."""
    import os

    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    env = {**os.environ, "SPARK_MERGE_AUTO_SERVER": "1"}
    env.pop("SPARK_MERGE_HOME", None)
    done = subprocess.run(
        [sys.executable, "-m", "merge_core", *args], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and error in done.stderr, done.stderr[-3000:]
    assert "starting a warm spark-merge server" not in done.stderr
    assert not (project / "var").exists()
