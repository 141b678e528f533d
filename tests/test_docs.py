"""The README's quick-start blocks run as written, in a fresh directory laid out as a clone (its own
SPARK_MERGE_HOME and Airflow home), so a doc that stops working fails the suite.

A block runs when a line `<!-- run: python -->` or `<!-- run: shell -->` precedes its fence; `, slow`
puts it in the extended tier (make test-all: the command-line, Airflow and dbt blocks, whose features
their own tests cover in CI: a `spark-merge run` process per merge in test_shared_metastore.py, the
example DAGs in test_airflow.py, the example project in test_dbt.py). Blocks run in order, so a later
block may use what an earlier one made.
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
BLOCK = re.compile(r"<!-- run: (python|shell)(, slow)? -->\n```[a-z]*\n(.*?)```", re.S)


def blocks(doc: Path) -> list[tuple[str, bool, str]]:
    return [(kind, bool(slow), text) for kind, slow, text in BLOCK.findall(doc.read_text())]


def test_the_readme_marks_its_quick_starts():
    kinds = [(kind, slow) for kind, slow, _ in blocks(ROOT / "README.md")]
    assert kinds == [("python", False), ("shell", True), ("shell", True), ("shell", True)], kinds


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.extended)], ids=["ci", "slow"])
def test_the_readme_quick_starts_run_as_written(tmp_path, slow):
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in (".venv", "dags", "dbt_macros", "merge_core", "airflow_provider"):
        (clone / name).symlink_to(ROOT / name)
    shutil.copytree(
        ROOT / "examples", clone / "examples", ignore=shutil.ignore_patterns("target", "dbt_packages", "logs")
    )
    env = {**os.environ, "SPARK_MERGE_HOME": str(tmp_path / "home")}
    env.pop("PYSPARK_PYTHON", None)
    for kind, is_slow, text in blocks(ROOT / "README.md"):
        if is_slow and not slow:
            continue
        command = [sys.executable, "-c", text] if kind == "python" else ["bash", "-euc", text]
        done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, f"{text}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        if kind == "python":
            assert "inserted 1, updated 1, deleted 1" in done.stdout, done.stdout[-2000:]
