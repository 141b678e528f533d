"""The unit tier (make unit): no JVM, no dbt run, no server. Starting a JVM here is a failure, not a
slow test: the guard below makes pyspark's gateway launcher refuse."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_jvm(monkeypatch):
    import pyspark.java_gateway

    def refuse(*args, **kwargs):
        raise AssertionError("a unit test started a JVM: it belongs in tests/, not tests/unit/")

    monkeypatch.setattr(pyspark.java_gateway, "launch_gateway", refuse)
    monkeypatch.setattr("pyspark.core.context.launch_gateway", refuse)
