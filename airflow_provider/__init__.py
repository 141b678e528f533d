"""Airflow provider for spark-merge: a connection type, a hook that gives a SparkSession,
SparkMergeOperator and the ``spark-merge://`` asset scheme (registered through the
`apache_airflow_provider` entry point)."""

from __future__ import annotations


def get_provider_info() -> dict:
    """What Airflow's ProvidersManager reads without importing the hook: the connection type with its
    form (the host is a Spark master or a Spark Connect URL; the extra holds the conf, the warehouse,
    the metastore and the merge service of deferrable tasks), the operator, hook and trigger modules,
    and the asset scheme with its URI sanitizer."""
    return {
        "package-name": "spark-merge",
        "name": "spark-merge",
        "description": "SQL MERGE, UPDATE, DELETE and watermark upserts on plain parquet/ORC Spark tables.",
        "versions": ["0.1.0"],
        "integrations": [
            {
                "integration-name": "spark-merge",
                "external-doc-url": "https://github.com/spark-merge/spark-merge/blob/main/docs/airflow.md",
                "tags": ["software"],
            }
        ],
        "connection-types": [
            _connection_type(),
        ],
        "hooks": [{"integration-name": "spark-merge", "python-modules": ["airflow_provider.hooks"]}],
        "operators": [{"integration-name": "spark-merge", "python-modules": ["airflow_provider.operators"]}],
        "triggers": [{"integration-name": "spark-merge", "python-modules": ["airflow_provider.triggers"]}],
        "asset-uris": [
            {
                "schemes": ["spark-merge"],
                "handler": "airflow_provider.assets.sanitize_uri",
                "factory": "airflow_provider.assets.create_asset",
                "to_openlineage_converter": "airflow_provider.assets.convert_asset_to_openlineage",
            }
        ],
    }


def _connection_type() -> dict:
    """The `spark_merge` connection type: its hook, its form's fields and how the UI shows them."""
    return {
        "connection-type": "spark_merge",
        "hook-class-name": "airflow_provider.hooks.SparkMergeHook",
        "hook-name": "spark-merge",
        "ui-field-behaviour": {
            "hidden-fields": ["schema", "login"],
            "relabeling": {
                "host": "Spark master or Spark Connect URL",
                "port": "Spark Connect port",
                "password": "Merge service token",
            },
            "placeholders": {"host": "local[*], yarn, spark://host:7077 or sc://host", "port": "15002"},
        },
        "conn-fields": {
            "warehouse": {
                "label": "Warehouse directory",
                "description": "spark.sql.warehouse.dir of the application (a local master or a cluster)",
                "schema": {"type": ["string", "null"]},
            },
            "metastore": {
                "label": "Hive metastore URI",
                "description": "thrift://host:9083: a metastore several applications share (every task is "
                "an application of its own; the embedded Derby metastore admits one at a time)",
                "schema": {"type": ["string", "null"]},
            },
            "merge_service": {
                "label": "Merge service URL",
                "description": "http://host:15003: where deferrable tasks submit their merges "
                "(spark-merge server start, or spark-merge merge-service beside a Spark Connect server)",
                "schema": {"type": ["string", "null"]},
            },
            "conf": {
                "label": "Spark conf",
                "description": 'Spark settings as JSON, for example {"spark.executor.memory": "4g"}',
                "schema": {"type": ["object", "null"]},
            },
        },
    }
