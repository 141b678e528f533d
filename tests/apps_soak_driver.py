"""Subprocess side of the several-applications soak (test_shared_metastore.py). Not a test module itself.
Each process is its own Spark application on the shared Hive metastore.

    python tests/apps_soak_driver.py reader URI DIR          create the table, then read it in a loop
    python tests/apps_soak_driver.py writer URI DIR K N      N merges by writer K through the Python API
    python tests/apps_soak_driver.py cli-writer URI DIR K N  the same, each merge a `spark-merge run` process
    python tests/apps_soak_driver.py airflow-writer URI DIR K N  the same, each merge a DAG run (dag.test()) of
                                                      SparkMergeOperator, its connection naming the metastore

The table holds partitions p=0..5, four rows each (id = 10 p + j) and a counter column per writer
(w0..w2). Writer K's merge i, when i is even, adds 1 to w<K> of the rows of its own partition K+1
and of the shared partition 0 (so writers overlap there and are disjoint elsewhere), and inserts
one row (id 1000 + 100 K + i) into partition K+1: a rewrite of both partitions. When i is odd it
only inserts its row, into the shared partition 0: an append to the files of a partition the other
applications rewrite, from listings their sessions cached earlier. Each writer appends one JSON line per merge to
DIR/writer<K>.jsonl (ok with the merge id, or the error's class and message); the reader appends
what each of its queries returned to DIR/reads.jsonl until DIR/stop exists, then writes the table's
final rows, its history and its lock to DIR/final.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from datetime import UTC

from merge_core import history, merge  # noqa: E402
from merge_core.spark import lock  # noqa: E402
from merge_core.spark.catalog import describe_table  # noqa: E402
from merge_core.spark.session import get_session  # noqa: E402
from tests.cluster import app_conf  # noqa: E402

T = "apps.acct"
WRITERS, PARTITIONS, ROWS = 3, 6, 4
# app_conf: the short-lived applications' settings, and $SPARK_MERGE_TEST_CONF's (an S3 warehouse)
CONF = {**app_conf("local[1]"), "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "1"}


ZEROS = ", ".join("0" for _ in range(WRITERS))


def touched(k: int, i: int) -> list[int]:
    """The partitions whose counters writer k's merge i adds to: its own and the shared p=0 when i
    is even; none when it is odd (an insert-only merge)."""
    return [0, k + 1] if i % 2 == 0 else []


def new_id(k: int, i: int) -> int:
    """The id of the row writer k's merge i inserts (into its own partition k + 1)."""
    return 1000 + 100 * k + i


def statement(k: int, i: int) -> str:
    values = [f"({10 * p + j}, {p})" for p in touched(k, i) for j in range(ROWS)]
    values.append(f"({new_id(k, i)}, {k + 1 if i % 2 == 0 else 0})")
    return (
        f"MERGE INTO {T} t USING (SELECT * FROM VALUES {', '.join(values)} AS s(id, p)) s ON t.id = s.id AND t.p = s.p "
        + (f"WHEN MATCHED THEN UPDATE SET w{k} = t.w{k} + 1 " if i % 2 == 0 else "")
        + f"WHEN NOT MATCHED THEN INSERT (id, {', '.join(f'w{n}' for n in range(WRITERS))}, p) VALUES (s.id, {ZEROS}, s.p)"
    )


def session(uri: str, folder: Path):
    return get_session(
        master="local[1]",
        metastore=uri,
        warehouse=str(folder / "home"),
        conf=CONF,
        app_name=f"apps-soak-{sys.argv[1]}-{sys.argv[4] if len(sys.argv) > 4 else ''}",
    )


def _wait_for(path: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} did not appear in {timeout:.0f} s")
        time.sleep(0.2)


def reader(uri: str, folder: Path) -> None:
    spark = session(uri, folder)
    spark.sql("CREATE DATABASE IF NOT EXISTS apps")
    cols = ", ".join(f"w{n} INT" for n in range(WRITERS))
    spark.sql(f"CREATE TABLE {T} (id INT, {cols}, p INT) USING parquet PARTITIONED BY (p)")
    spark.sql(
        f"INSERT INTO {T} VALUES "
        + ", ".join(f"({10 * p + j}, {ZEROS}, {p})" for p in range(PARTITIONS) for j in range(ROWS))
    )
    (folder / "ready").touch()
    with open(folder / "reads.jsonl", "a") as out:
        while not (folder / "stop").exists():
            try:
                rows = [list(r) for r in spark.sql(f"SELECT * FROM {T}").collect()]
                out.write(json.dumps({"rows": rows}) + "\n")
            except Exception as e:  # noqa: BLE001 - the test asserts there is none
                out.write(json.dumps({"error": f"{type(e).__name__}: {e}"[:2000]}) + "\n")
            out.flush()
    # what the table holds now: this session's listings of directories appended to since it read
    # them are up to spark.sql.metadataCacheTTLSeconds old (docs/operations.md), so drop them first
    spark.sql(f"REFRESH TABLE {T}")
    final = {
        "rows": [list(r) for r in spark.sql(f"SELECT * FROM {T}").collect()],
        "history": [h["merge_id"] for h in history(spark, T, limit=1000)],
        "lock": lock.holder(spark, describe_table(spark, T.split("."))),
        "journal_parts": {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {T}").collect()}.get(
            "spark_merge.journal.parts", "0"
        ),
    }  # "0": no commit left unfinished
    (folder / "final.json").write_text(json.dumps(final, default=str))


def _record(folder: Path, k: int, n: int, attempt) -> None:
    """Writer k's n merges, after the table exists: ``attempt(i)`` runs merge i and returns its outcome
    ({"ok": merge id} or {"error": class, "message": ...}), appended as a line to DIR/writer<k>.jsonl."""
    _wait_for(folder / "ready")
    with open(folder / f"writer{k}.jsonl", "a") as out:
        for i in range(n):
            out.write(json.dumps({"i": i, **attempt(i)}) + "\n")
            out.flush()


def writer(uri: str, folder: Path, k: int, n: int) -> None:
    spark = session(uri, folder)

    def attempt(i: int) -> dict:
        try:
            return {"ok": merge(spark, statement(k, i), duplicate_rule="strict").merge_id}
        except Exception as e:  # noqa: BLE001 - any failure is reported; the test accepts only MERGE_CONFLICT
            return {"error": type(e).__name__, "message": str(e)[:2000]}

    _record(folder, k, n, attempt)


def cli_writer(uri: str, folder: Path, k: int, n: int) -> None:
    """The same merges through the command line, each its own application, more patient with
    commits elsewhere in the table (--max-retries 5)."""
    conf = [a for key, value in CONF.items() for a in ("--conf", f"{key}={value}")]

    def attempt(i: int) -> dict:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "merge_core",
                "run",
                "--sql",
                statement(k, i),
                "--duplicate-rule",
                "strict",
                "--max-retries",
                "5",
                "--master",
                "local[1]",
                "--metastore",
                uri,
                "--warehouse",
                str(folder / "home"),
                "--json",
                "-q",
                *conf,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            return {"ok": json.loads(done.stdout)["merge_id"]}
        message = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        code = "ConflictError" if message.startswith("error: MERGE_CONFLICT") else f"exit {done.returncode}"
        return {"error": code, "message": done.stderr[-2000:]}

    _record(folder, k, n, attempt)


AIRFLOW_DAG = """
from datetime import datetime
from pathlib import Path
from airflow.sdk import DAG
from airflow_provider.operators import SparkMergeOperator

def failed(context):  # the failure's class and message, for the soak's outcome line
    e = context.get("exception")
    Path({out!r}).write_text(type(e).__name__ + ": " + str(e))

with DAG(dag_id="apps_soak_merge", schedule=None, start_date=datetime(2026, 11, 1), params={{"sql": ""}}) as dag:
    SparkMergeOperator(task_id="merge", sql="{{{{ params.sql }}}}", spark_merge_conn_id="sm_shared",
                       options={{"duplicate_rule": "strict"}}, on_failure_callback=failed)
"""


def airflow_writer(uri: str, folder: Path, k: int, n: int) -> None:
    """The same merges as Airflow tasks: a one-task DAG run per merge, SparkMergeOperator with a
    spark_merge connection whose extra names the metastore (README "A shared metastore")."""
    import importlib.util
    import os
    from datetime import datetime, timedelta

    home = folder / "airflow"
    (home / "dags").mkdir(parents=True, exist_ok=True)
    failure = home / "failure.txt"
    (home / "dags" / "apps_soak_merge.py").write_text(AIRFLOW_DAG.format(out=str(failure)))
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__OPENLINEAGE__DISABLED": "True",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW_CONN_SM_SHARED": json.dumps(
                {
                    "conn_type": "spark_merge",
                    "host": "local[1]",
                    "extra": {"metastore": uri, "warehouse": str(folder / "home"), "conf": CONF},
                }
            ),
        }
    )
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location("apps_soak_merge", home / "dags" / "apps_soak_merge.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    def attempt(i: int) -> dict:
        failure.unlink(missing_ok=True)
        run = module.dag.test(
            logical_date=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=i),
            run_conf={"sql": statement(k, i)},
        )
        with create_session() as session:
            finish = [
                XComModel.deserialize_value(x)
                for x in session.scalars(
                    select(XComModel).where(
                        XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id, XComModel.key == "merge_finish"
                    )
                )
            ]
        if finish:
            return {"ok": finish[0]["merge_id"]}
        message = failure.read_text() if failure.exists() else f"the DAG run ended {run.state} without a failure"
        return {"error": message.split(":", 1)[0], "message": message[:2000]}

    _record(folder, k, n, attempt)


if __name__ == "__main__":
    role, uri, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if role == "reader":
        reader(uri, folder)
    else:
        {"writer": writer, "cli-writer": cli_writer, "airflow-writer": airflow_writer}[role](
            uri, folder, int(sys.argv[4]), int(sys.argv[5])
        )
