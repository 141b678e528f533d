"""Every code block of README.md and docs/*.md runs as written, in a fresh clone (its own warehouse and
Airflow home), after the blocks before it in the same file; or it is marked as a fragment. A doc that
stops working fails the suite, and a guide that leaves files behind does too (`git status` of the clone
is clean after it).

The line before a block's fence says which: `<!-- run: python -->` or `<!-- run: shell -->` (`, slow`
puts it in the extended tier, make test-all), or `<!-- fragment: why -->` (a model file, a config
excerpt, a diagram: not a thing to run on its own). Consecutive Python blocks of a file run as one
script, so a later one uses what an earlier one defined; a shell block runs with bash -eu in the clone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```", re.M)
MARK = re.compile(r"<!-- (run: (python|shell)(, slow)?|fragment(: [^>]*)?) -->\n$")
BLOCK = re.compile(r"(<!-- [^\n]* -->\n)?```[a-z]*\n(.*?)^```", re.S | re.M)


def blocks(doc: Path) -> list[tuple[str, bool, str]]:
    """(kind, slow, text) of each block: kind python, shell or fragment."""
    out = []
    for match in BLOCK.finditer(doc.read_text()):
        mark = MARK.match(match.group(1) or "")
        kind = "unmarked" if mark is None else (mark.group(2) or "fragment")
        out.append((kind, bool(mark and mark.group(3)), match.group(2)))
    return out


def clone(tmp_path: Path) -> Path:
    """The committed files of this checkout (git ls-files), as a new repository, with .venv linked."""
    into = tmp_path / "clone"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    (into / ".venv").symlink_to(ROOT / ".venv")
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@test", "-C", str(into)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "clone"], check=True)
    return into


def run_doc(doc: Path, tmp_path: Path, slow: bool) -> list[str]:
    """Run the doc's blocks of the tier (all of them when ``slow``) in a fresh clone; their outputs.
    The clone's warm server, if a block started one, is stopped after; the clone's status must be
    clean."""
    where = clone(tmp_path)
    env = {**os.environ, "SPARK_MERGE_AUTO_SERVER": "1", "SPARK_MERGE_SERVER_IDLE_MINUTES": "10"}
    for name in ("PYSPARK_PYTHON", "SPARK_MERGE_HOME", "AIRFLOW_HOME"):
        env.pop(name, None)
    outputs, script = [], []

    def flush() -> None:
        if script:
            outputs.append(_run([sys.executable, "-c", "\n".join(script)], where, env))
            script.clear()

    try:
        for kind, is_slow, text in blocks(doc):
            if kind == "fragment" or (is_slow and not slow):
                continue
            if kind == "python":
                script.append(text)
                continue
            flush()
            outputs.append(_run(["bash", "-euc", text], where, env))
        flush()
    finally:
        subprocess.run(
            [str(where / ".venv/bin/spark-merge"), "server", "stop"], cwd=where, env=env, capture_output=True
        )
    status = subprocess.run(["git", "status", "--porcelain"], cwd=where, capture_output=True, text=True).stdout
    assert status == "", f"{doc.name} left files in the clone:\n{status}"
    return outputs


def _run(command: list[str], where: Path, env: dict) -> str:
    done = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{command[-1]}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.extended)], ids=["ci", "slow"])
def test_the_readme_runs_as_written_and_every_entry_point_sees_one_warehouse(tmp_path, slow):
    outputs = run_doc(ROOT / "README.md", tmp_path, slow)
    assert "inserted 1, updated 1, deleted 1" in outputs[0], outputs[0][-2000:]
    assert "steps:" in outputs[0] and "__sm_" not in outputs[0]  # the plan for a person: no plan columns
    if slow:  # the command line sees the tables the Airflow DAG and the dbt project made
        assert " merge " in outputs[2], outputs[2][-2000:]  # the DAG's upsert, a MERGE in the table's history
        assert " merge " in outputs[3], outputs[3][-2000:]


GUIDES = [doc for doc in DOCS if doc.parent.name == "docs" and any(k in ("python", "shell") for k, _, _ in blocks(doc))]


@pytest.mark.extended
@pytest.mark.parametrize("doc", GUIDES, ids=[doc.name for doc in GUIDES])
def test_each_guide_runs_as_written(tmp_path, doc):
    run_doc(doc, tmp_path, slow=True)
