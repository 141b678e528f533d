"""The host contract (merge_core/common/host_contract.py) against what the macros call and what each
host provides: the dbt dict of macros, and the Python classes (mypy checks their signatures)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from merge_core.common import host_contract
from merge_core.common.host_contract import BeginHost, RollbackHost, StatementHost, primitives
from merge_core.lifecycle.merge_host import MergeHost
from merge_core.maintenance import rollback
from merge_core.spark.host import SparkHost

MACROS = Path(__file__).resolve().parents[2] / "dbt_macros" / "macros"
ALL = primitives(BeginHost, RollbackHost)


def dbt_host_names() -> set[str]:
    text = (MACROS / "materializations" / "spark_merge_host.sql").read_text()
    body = text[text.index("{% macro spark_merge__dbt_host() -%}") :]
    body = body[: body.index("{%- endmacro %}")]
    return set(re.findall(r"'(\w+)':", body))


def called_by_the_macros() -> set[str]:
    """Every ``host.<name>(`` in the macros (comments left out)."""
    called = set()
    for path in MACROS.rglob("*.sql"):
        text = re.sub(r"\{#.*?#\}", "", path.read_text(), flags=re.S)
        called |= set(re.findall(r"\bhost\.(\w+)\(", text))
    return called


def test_the_dbt_host_provides_exactly_the_contract():
    assert dbt_host_names() == ALL


def test_the_macros_call_only_the_contract_and_all_of_it():
    """A primitive the macros call that is not declared has no checked signature; one declared that
    no macro calls is dead weight in both hosts."""
    assert called_by_the_macros() == ALL


@pytest.mark.parametrize(
    "host, contract",
    [(SparkHost, StatementHost), (MergeHost, BeginHost), (rollback.RollbackHost, RollbackHost)],
    ids=["SparkHost", "MergeHost", "RollbackHost"],
)
def test_each_python_host_implements_every_primitive_itself(host, contract):
    """A Python host subclasses its protocol, so a primitive it forgot would silently inherit the
    protocol's empty body: each must come from a class of the host, not of the contract."""
    assert contract in host.__mro__
    for name in primitives(contract):
        owner = next(c for c in host.__mro__ if name in vars(c))
        assert owner.__module__ != host_contract.__name__, f"{host.__name__}.{name} is not implemented"


def test_the_contract_s_members_are_documented():
    for protocol in (StatementHost, BeginHost, RollbackHost):
        for name, member in vars(protocol).items():
            if not name.startswith("_"):
                assert member.__doc__, f"{protocol.__name__}.{name} has no docstring"
