"""Airflow provider for spark-merge: a connection type, a hook that gives a SparkSession, and
SparkMergeOperator (registered through the `apache_airflow_provider` entry point)."""

from __future__ import annotations


def get_provider_info() -> dict:
    return {
        "package-name": "spark-merge",
        "name": "spark-merge",
        "description": "SQL MERGE, UPDATE, DELETE and watermark upserts on plain parquet/ORC Spark tables.",
        "versions": ["0.1.0"],
        "connection-types": [
            {"connection-type": "spark_merge", "hook-class-name": "airflow_provider.hooks.SparkMergeHook"},
        ],
        "hooks": [{"integration-name": "spark-merge", "python-modules": ["airflow_provider.hooks"]}],
        "operators": [{"integration-name": "spark-merge", "python-modules": ["airflow_provider.operators"]}],
    }
