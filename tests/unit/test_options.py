"""Every option is declared once (dbt_macros/macros/core/options.sql); each host follows it.

Pure tests, no Spark: the declaration is well formed; merge()'s spec takes every keyword it declares
and refuses others; the CLI offers each declared flag and hands its value to the option of that name;
the Airflow operator documents every option merge() takes. (dbt's config check reads the same table:
tests/test_dbt.py::test_config_errors_are_compilation_errors.)
"""

from __future__ import annotations

import subprocess
import sys
import typing
from pathlib import Path

import pytest

from merge_core import MergeSpec, SpecError, to_spec
from merge_core.api.cli import _parser, field_option_names, field_options, upsert_flags
from merge_core.request import options

MERGE = "MERGE INTO db.t t USING db.s s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v"
KINDS = {"string", "list", "choice", "bool", "number", "fields"}
GROUPS = {"merge", "upsert", "engine", "table", "dbt"}


def test_the_declaration_is_well_formed():
    names = [o["name"] for o in options.table()]
    assert len(names) == len(set(names))
    for o in options.table():
        assert set(o) - {"needs"} == {"name", "kind", "group", "choices", "default", "cli", "dbt", "help"}, o["name"]
        assert set(o.get("needs", [])) <= set(names), o["name"]
        assert o["kind"] in KINDS and o["group"] in GROUPS and o["help"], o["name"]
        assert (o["kind"] == "choice") == bool(o["choices"]), o["name"]
        assert o["default"] is None or o["kind"] != "choice" or o["default"] in o["choices"], o["name"]


def test_merge_takes_every_declared_keyword_and_refuses_others():
    fields = set(MergeSpec.__dataclass_fields__)
    assert set(options.names("merge")) <= fields  # a statement's options are the spec's own fields
    spec = to_spec(MERGE, duplicate_rule="strict", partition_filter="t.dt = '1'", key_columns=["id"])
    assert (spec.duplicate_rule, spec.partition_filter, spec.key_columns) == ("strict", "t.dt = '1'", ["id"])
    upsert = to_spec(
        {"target": "db.t", "source": "db.s"},
        primary_key="id",
        merge_engine="aggregation",
        default_aggregate_function="sum",
        aggregate_function={"v": "max"},
    )
    assert upsert.upsert["primary_key"] == ["id"] and upsert.upsert["default_aggregate_function"] == "sum"
    with pytest.raises(SpecError, match="unknown option"):
        to_spec(MERGE).with_options(duplicate_rules="strict")
    with pytest.raises(SpecError, match="duplicate_rule"):
        to_spec(MERGE, duplicate_rule="first")


def test_the_cli_offers_each_declared_flag():
    args = ["upsert", "--target", "db.t", "--source", "db.s"]
    for name in upsert_flags():
        o = options.option(name)
        value = (o["choices"] or ["x"])[-1]
        args += [o["cli"]] if o["kind"] == "bool" else [o["cli"], value]
    parsed = _parser().parse_args(args)
    for name in upsert_flags():
        o = options.option(name)
        expected = True if o["kind"] == "bool" else (o["choices"] or ["x"])[-1]
        assert getattr(parsed, name) == ([expected] if o["kind"] == "list" else expected), name
    assert upsert_flags(), "the upsert command offers no declared flag"
    field_names = field_option_names()
    assert set(field_names.values()) == set(options.names("engine", kind="fields"))
    fields = field_options([f"c.{flag}=1" for flag in field_names])
    assert fields == {name: {"c": "1"} for name in field_names.values()}
    run = _parser().parse_args(["run", "--sql", MERGE, "--duplicate-rule", "postgres", "--partition-filter", "x"])
    assert (run.duplicate_rule, run.partition_filter) == ("postgres", "x")
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "--sql", MERGE, "--duplicate-rule", "first"])


def test_the_options_table_is_generated_from_the_declarations(capsys):
    """The docs' options table is `spark-merge options`'s output; the Airflow operator points to it."""
    from pathlib import Path

    from merge_core.api.cli import main

    assert main(["options"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == options.markdown()
    for o in options.table():
        assert f"| `{o['name']}` |" in printed, o["name"]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "python-and-cli.md").read_text()
    section = doc.split("<!-- options:begin -->\n", 1)[1].split("\n<!-- options:end -->", 1)[0]
    assert section == printed, "docs/python-and-cli.md's options table is stale: run make docs"

    # imported here: Airflow reads its configuration when first imported (test_airflow.py sets it up)
    from airflow_provider.operators import SparkMergeOperator

    assert "spark-merge options" in SparkMergeOperator.__doc__


def test_codes_are_declared_once():
    """Error and operation codes live in macros/core/codes.sql: no other macro or module spells one
    as a literal (a comment may name it), and each exception class carries its declared code."""
    import re
    from pathlib import Path

    from merge_core.common import errors, macros

    root = Path(__file__).resolve().parents[2]
    codes = macros.fill("codes")
    declared = set(codes["error"].values())
    assert len(declared) == len(codes["error"]) and sorted(codes["op"].values()) == [-1, 1, 2, 3]
    spelled = []
    for path in [
        *root.glob("dbt_macros/macros/**/*.sql"),
        *root.glob("merge_core/*.py"),
        *root.glob("airflow_provider/*.py"),
    ]:
        if path.as_posix().endswith("macros/core/codes.sql"):
            continue
        text = re.sub(r"\{#.*?#\}", "", path.read_text(), flags=re.S)  # Jinja comments
        spelled += [f"{path.name}: {m}" for m in re.findall(r"""["']MERGE_(?!ON_READ|ID)[A-Z_]+\b""", text)]
        spelled += [f"{path.name}: {m}" for m in re.findall(r"__sm_op\s*(?:=|IN\s*\()\s*-?\d", text)]
    assert spelled == []
    classes = errors._all(errors.MergeError)
    assert {c.code for c in classes} <= declared
    # a planned-rows check raised inside Spark maps back to its class
    assert isinstance(errors.error_for(codes["error"]["conflict"], "x"), errors.ConflictError)
    assert isinstance(errors.error_for(codes["error"]["version_moved"], "x"), errors.RetryableConflict)


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"sequence_field": "ts", "row_kind_field": "op", "ignore_delete": True},
            "sequence_field, row_kind_field, ignore_delete apply only to merge engines",
        ),
        ({"aggregate_function": {"v": "sum"}}, "aggregate_function applies only to merge engines"),
        ({"tombstone_key": "op"}, "tombstone_key applies only to watermark upserts"),
        ({"upsert_mode": "merge-on-read"}, "upsert_mode applies only to watermark upserts and merge engines"),
    ],
)
def test_an_option_that_would_do_nothing_is_refused(options, message):
    """Given without the option that makes it apply, an option is refused before anything runs,
    never accepted and ignored (the same check dbt's config makes: option_errors)."""
    with pytest.raises(SpecError, match=message):
        to_spec({"target": "db.t", "source": "db.s"}, primary_key="id", **options)
    assert to_spec(
        {"target": "db.t", "source": "db.s"}, primary_key="id", merge_engine="deduplicate", sequence_field="ts"
    ).upsert["sequence_field"] == ["ts"]


def test_the_typed_options_are_the_declared_ones_with_their_kinds_and_choices():
    """MergeOptions (what merge() and to_spec() take, for type checkers) names every option merge()
    takes, typed by its declared kind; a choice's Literal holds exactly its declared values, and the
    spec's own fields of a choice are typed the same."""
    hints = typing.get_type_hints(options.MergeOptions)
    assert list(hints) == list(options.merge_keywords())
    kinds = {"bool": bool, "string": str, "list": str | list[str], "fields": dict[str, typing.Any]}
    for o in options.table():
        if o["name"] not in hints:
            continue
        hint = hints[o["name"]]
        if o["kind"] == "choice":
            assert typing.get_origin(hint) is typing.Literal and list(typing.get_args(hint)) == o["choices"], o["name"]
        elif o["name"] == "key_columns":  # the statement's own list: MergeSpec keeps a list
            assert hint == list[str]
        else:
            assert hint == kinds[o["kind"]], o["name"]
    spec_hints = typing.get_type_hints(MergeSpec)
    for name in options.names("merge", kind="choice"):
        assert spec_hints[name] == hints[name], name


def test_an_unknown_value_of_a_choice_is_refused_naming_the_option_and_its_values():
    with pytest.raises(
        SpecError, match="option duplicate_rule: unknown value 'mysql'; expected one of trino, postgres, strict"
    ):
        to_spec(MERGE, duplicate_rule="mysql")  # type: ignore[typeddict-item]


def test_a_type_checker_refuses_an_unknown_value_of_a_choice_at_the_call(tmp_path):
    """The typed options reach the caller: mypy flags merge(..., duplicate_rule="mysql") and accepts
    the declared values (docs/python-and-cli.md says so)."""
    call = tmp_path / "call.py"
    call.write_text(
        "from typing import Any\nfrom merge_core import merge, to_spec\nspark: Any = None\n"
        'merge(spark, "MERGE ...", duplicate_rule="mysql")\n'
        'to_spec("MERGE ...", duplicate_rule="strict", schema_evolution=True, primary_key=["id"])\n'
    )
    root = Path(__file__).parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(root / "pyproject.toml"), str(call)],
        capture_output=True, text=True, cwd=root,
    ).stdout  # fmt: skip
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "call.py:4:" in errors[0] and '"duplicate_rule"' in errors[0], out


def test_upsert_options_are_lifted_the_same_into_a_dict_request_and_onto_a_parsed_statement():
    """One lifting (spec.lift_upsert_options) for both ways in: a key given as one name becomes a list."""
    from_dict = to_spec({"target": "db.t", "source": "db.s"}, primary_key="id", watermark_key="ts")
    parsed = to_spec(
        "MERGE INTO db.t t USING db.s s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *",
        primary_key="id",
        watermark_key="ts",
    )
    assert from_dict.upsert == parsed.upsert and from_dict.upsert["primary_key"] == ["id"]
    assert not parsed.clauses  # the upsert generates its statement at begin
    # a dict's own upsert options and the keywords meet in one upsert
    both = to_spec({"target": "db.t", "source": "db.s", "upsert": {"primary_key": ["id"]}}, watermark_key="ts")
    assert both.upsert == from_dict.upsert
