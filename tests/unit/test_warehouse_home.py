"""One warehouse per project, whichever folder a command runs from (session.home_dir): no Spark."""

from __future__ import annotations

from pathlib import Path

from merge_core.spark.session import home_dir, project_home


def test_a_project_has_one_warehouse_from_every_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_MERGE_HOME", raising=False)
    project = tmp_path / "clone"
    (project / "examples" / "dbt_project").mkdir(parents=True)
    (project / "dags").mkdir()
    (project / ".git").mkdir()
    # before any warehouse exists: var/ beside the project's .git, from the top or a subfolder
    assert project_home(project) == project_home(project / "examples" / "dbt_project") == project / "var"
    # once one exists, the nearest one above wins (a warehouse a command made in a subfolder)
    (project / "var" / "metastore_db").mkdir(parents=True)
    assert project_home(project / "dags") == project / "var"
    (project / "examples" / "dbt_project" / "var" / "warehouse").mkdir(parents=True)
    assert project_home(project / "examples" / "dbt_project") == project / "examples" / "dbt_project" / "var"
    # outside any project: the folder's own var/
    loose = tmp_path / "loose"
    loose.mkdir()
    assert project_home(loose) == loose / "var"


def test_an_explicit_warehouse_or_spark_merge_home_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_MERGE_HOME", str(tmp_path / "chosen"))
    assert home_dir() == (tmp_path / "chosen").resolve() and home_dir().is_dir()
    assert home_dir(str(tmp_path / "given")) == (tmp_path / "given").resolve()
    monkeypatch.delenv("SPARK_MERGE_HOME")
    (tmp_path / "p" / "sub").mkdir(parents=True)
    (tmp_path / "p" / "pyproject.toml").write_text("")
    assert home_dir(start=Path(tmp_path / "p" / "sub")) == (tmp_path / "p" / "var").resolve()
