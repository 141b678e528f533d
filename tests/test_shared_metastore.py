"""Several Spark applications, one shared Hive metastore (PostgreSQL behind it): the production
topology of several Airflow tasks merging into one table at once.

The soak starts three writer applications (one through the Python API, one as Airflow DAG runs of
SparkMergeOperator whose connection names the metastore, one running each merge as its own
`spark-merge run --metastore ...` process) and a fourth application that reads the table in a loop, all on one metastore service (tests/hive_metastore.py) and one warehouse folder. Writers merge
into overlapping (p=0) and disjoint (their own p) partitions at once. Afterwards:

- every reported failure is a clean MERGE_CONFLICT, and no merge failed otherwise;
- no update is lost: each counter equals the successes its writer reported, each success inserted
  exactly its one row, the history holds exactly the reported successes, no lock or journal is left;
- no row is duplicated, in the final rows or in any read;
- every read saw a state the table had: for each writer, the table as after some prefix of its
  successes (README "What a concurrent reader sees": a classic session's commit moves every existing
  partition it rewrites in one metastore call, so a reader sees the old or the new version).

Counts are printed in the test summary. SPARK_MERGE_APPS_SOAK_MERGES sets the merges per writer
(default 1, three writers at once; `make test-all` runs 6).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from merge_core.spark.session import embedded_conf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apps_soak_driver import PARTITIONS, ROWS, WRITERS, new_id, touched  # noqa: E402

DRIVER = Path(__file__).resolve().parent / "apps_soak_driver.py"
MERGES = int(os.environ.get("SPARK_MERGE_APPS_SOAK_MERGES", "1"))  # per writer; make test-all: 6
REPORT: dict = {}  # printed in the terminal summary (conftest.py)


def test_a_shared_metastore_replaces_the_embedded_derby(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_MERGE_METASTORE", raising=False)
    shared = embedded_conf(tmp_path, "local[2]", "thrift://hms:9083")
    assert shared["spark.hadoop.hive.metastore.uris"] == "thrift://hms:9083"
    assert not any("derby" in f"{k}={v}" for k, v in shared.items())
    embedded = embedded_conf(tmp_path, "local[2]")
    assert "spark.hadoop.hive.metastore.uris" not in embedded
    assert "jdbc:derby:" in embedded["spark.hadoop.javax.jdo.option.ConnectionURL"]
    # the variable names it for every session spark-merge starts (get_session and `server start` alike)
    monkeypatch.setenv("SPARK_MERGE_METASTORE", "thrift://env:9083")
    assert embedded_conf(tmp_path, "local[2]")["spark.hadoop.hive.metastore.uris"] == "thrift://env:9083"


def test_the_cli_does_not_hand_a_named_metastore_to_a_warm_server(tmp_path, monkeypatch):
    """`spark-merge server start` keeps the metastore it started with: a --metastore given to a
    command goes to a session of the command's own, not to that server."""
    from merge_core.api import cli
    from merge_core.spark import server, session

    asked = []
    monkeypatch.setattr(server, "status", lambda warehouse: "sc://127.0.0.1:15002")
    monkeypatch.setattr(session, "get_session", lambda **kw: asked.append(kw))
    args = cli._parser().parse_args(["history", "d.t", "--warehouse", str(tmp_path), "--metastore", "thrift://h:9083"])
    cli._session(args)
    assert asked[-1]["metastore"] == "thrift://h:9083" and asked[-1]["remote"] is None
    args = cli._parser().parse_args(["history", "d.t", "--warehouse", str(tmp_path)])
    cli._session(args)
    assert asked[-1] == {"remote": "sc://127.0.0.1:15002"}  # without one, the warm server serves


def state(successes: list[int], k: int) -> dict:
    """Writer k's part of the table after its merges ``successes`` (in order): the w<k> counter of
    each original row and the ids of the rows it inserted."""
    counters = {}
    for p in range(PARTITIONS):
        n = sum(1 for i in successes if p in touched(k, i))
        counters.update({10 * p + j: n for j in range(ROWS)})
    return {"counters": counters, "inserted": {new_id(k, i) for i in successes}}


def seen(rows: list[list], k: int) -> dict:
    """Writer k's part of what one read returned (rows: id, w0..w2, p)."""
    return {
        "counters": {r[0]: r[1 + k] for r in rows if r[0] < new_id(0, 0)},
        "inserted": {r[0] for r in rows if new_id(k, 0) <= r[0] < new_id(k + 1, 0)},
    }


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
def test_three_applications_merge_into_one_table_while_a_fourth_reads(hive_metastore, tmp_path):
    REPORT.update(soak(hive_metastore.uri, tmp_path))


def soak(uri: str, tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    """The soak (module docstring) on the metastore at ``uri``; its counts. ``env``: added to the
    applications' environment (test_object_store.py: an S3 warehouse)."""
    env = {**os.environ, "SPARK_LOG_LEVEL": "ERROR", **(env or {})}
    tmp_path.mkdir(parents=True, exist_ok=True)

    def start(*args: str, name: str) -> subprocess.Popen:
        log = open(tmp_path / f"{name}.log", "w")
        return subprocess.Popen(
            [sys.executable, str(DRIVER), *args], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    folder = str(tmp_path)
    started = time.monotonic()
    reader = start("reader", uri, folder, name="reader")
    kinds = ["writer", "airflow-writer", "cli-writer"]  # the Python API, Airflow, the CLI
    writers = [start(kinds[k], uri, folder, str(k), str(MERGES), name=f"writer{k}") for k in range(WRITERS)]
    try:
        for k, w in enumerate(writers):
            w.wait(timeout=900)
            assert w.returncode == 0, (tmp_path / f"writer{k}.log").read_text()[-3000:]
    finally:
        (tmp_path / "stop").touch()
        try:
            reader.wait(timeout=300)
        finally:
            for p in [reader, *writers]:
                if p.poll() is None:
                    os.killpg(p.pid, 9)
    assert reader.returncode == 0, (tmp_path / "reader.log").read_text()[-3000:]

    outcomes = {k: _lines(tmp_path / f"writer{k}.jsonl") for k in range(WRITERS)}
    assert all(len(o) == MERGES for o in outcomes.values()), outcomes
    failures = [o for lines in outcomes.values() for o in lines if "error" in o]
    unclean = [o for o in failures if o["error"] != "ConflictError" or "MERGE_CONFLICT" not in o["message"]]
    assert not unclean, unclean
    successes = {k: [o["i"] for o in lines if "ok" in o] for k, lines in outcomes.items()}

    final = json.loads((tmp_path / "final.json").read_text())
    ids = [r[0] for r in final["rows"]]
    assert len(ids) == len(set(ids)), "a row was duplicated"
    for k in range(WRITERS):  # no lost update: the table is exactly every writer's reported successes
        assert seen(final["rows"], k) == state(successes[k], k), f"writer {k}"
    assert sorted(final["history"]) == sorted(o["ok"] for lines in outcomes.values() for o in lines if "ok" in o)
    assert final["lock"] is None and final["journal_parts"] == "0", final

    reads = _lines(tmp_path / "reads.jsonl")
    errors = [r["error"] for r in reads if "error" in r]
    assert not errors, errors[:3]
    versions = set()
    for n, read in enumerate(reads):
        ids = [r[0] for r in read["rows"]]
        assert len(ids) == len(set(ids)), f"read {n} saw a duplicated row"
        prefixes = []
        for k in range(WRITERS):
            part = seen(read["rows"], k)
            matching = [j for j in range(len(successes[k]) + 1) if state(successes[k][:j], k) == part]
            assert matching, f"read {n} saw writer {k}'s rows in a state the table never had: {part}"
            prefixes.append(matching[0])
        versions.add(tuple(prefixes))
    conflicts = Counter(o["error"] for o in failures)
    counts = dict(
        writers=WRITERS,
        merges=WRITERS * MERGES,
        succeeded=sum(map(len, successes.values())),
        conflicts=conflicts.get("ConflictError", 0),
        reads=len(reads),
        versions=len(versions),
        seconds=round(time.monotonic() - started),
    )
    assert counts["succeeded"] > 0 and len(reads) > 0
    return counts


@pytest.mark.slow
@pytest.mark.extended  # CI: dbt's session tests (test_dbt.py) and the soak above, whose writers use the metastore
def test_a_dbt_session_profile_merges_through_the_shared_metastore(hive_metastore, tmp_path):
    """The example project with `method: session` and the metastore in server_side_parameters (the
    README's profile): the first run creates the model, the second merges, and the tables are in the
    shared metastore's PostgreSQL database, where every other application finds them."""
    from tests.cluster import FAST_CONF
    from tests.pg_server import binaries
    from tests.test_dbt import example_project

    project = example_project(tmp_path / "project")
    conf = {
        "spark.hadoop.hive.metastore.uris": hive_metastore.uri,
        "spark.sql.warehouse.dir": str(tmp_path / "warehouse"),
        "spark.sql.catalogImplementation": "hive",
        "spark.master": "local[1]",
        "spark.log.level": "ERROR",
        "spark.ui.showConsoleProgress": "false",
        **FAST_CONF,
    }
    (project / "profiles.yml").write_text(
        json.dumps(
            {
                "spark_merge_example": {
                    "target": "shared",
                    "outputs": {
                        "shared": {
                            "type": "spark",
                            "method": "session",
                            "host": "NA",
                            "schema": "{{ env_var('SPARK_MERGE_DBT_SCHEMA') }}",
                            "server_side_parameters": conf,
                        }
                    },
                }
            }
        )
    )  # JSON is YAML
    done = subprocess.run(
        [sys.executable, str(DRIVER.with_name("dbt_metastore_driver.py")), str(project), "dbt_shared"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["metastore"] == hive_metastore.uri
    assert out["rows"] == [
        [1, "ann", 10.0, "eu"],
        [2, "bob", 25.0, "us"],
        [3, "cy", 0.0, "eu"],
        [4, "di", 40.0, "apac"],
    ]
    assert out["history"][0] == "merge"  # the second run merged, and recorded it
    tables = subprocess.run(
        [
            str(binaries() / "psql"),
            "-h",
            hive_metastore.pg_host,
            "-p",
            hive_metastore.pg_port,
            "-U",
            "postgres",
            "-d",
            hive_metastore.database,
            "-Atc",
            'SELECT "TBL_NAME" FROM "TBLS" JOIN "DBS" USING ("DB_ID") WHERE "NAME" = \'dbt_shared\'',
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "accounts" in tables
