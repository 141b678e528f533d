"""OpenLineage datasets for a merge: its source tables as inputs, its target as the output with row
counts and the table version it committed. Used by SparkMergeOperator when the OpenLineage provider is installed.

Datasets follow OpenLineage's naming for files (namespace from the location's scheme and host, name its
path) and carry a symlink to the catalog name (`db.table`), as Spark's own OpenLineage integration does.
What Spark must be asked (locations) is collected while the task runs (`describe`), so building the
facets afterwards needs no Spark session.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

from merge_core.common import macros

CATALOG_NAMESPACE = "spark_catalog"


def dataset_name(location: str | None, table: str) -> tuple[str, str]:
    """(namespace, name) of a table stored at `location`; a table without one (a view) keeps its name."""
    if not location:
        return CATALOG_NAMESPACE, table
    url = urlparse(location)
    scheme = {"s3a": "s3", "s3n": "s3"}.get(url.scheme, url.scheme or "file")
    if scheme in ("file", "") or not url.netloc:
        return scheme, url.path
    return f"{scheme}://{url.netloc}", url.path.lstrip("/") if scheme in ("s3", "gs", "abfss", "wasbs") else url.path


def describe(spark: Any, table: str) -> dict:
    """Name and location of a table from the catalog; a view or an unknown name keeps only its name."""
    try:
        desc = json.loads(spark.sql(macros.describe_json_sql(table)).collect()[0][0])
    except Exception:  # lineage must never fail the merge
        return {"table": table, "location": None}
    name = ".".join(p for p in (desc.get("namespace") or [])[-1:] + [desc.get("table_name")] if p) or table
    props = desc.get("table_properties") or {}
    return {"table": name, "location": props.get("spark_merge.root") or desc.get("location")}


def postgres_table(jdbc_url: str, parts: list[str]) -> dict:
    """A PostgreSQL target, named as OpenLineage names PostgreSQL tables (database.schema.table);
    a bare table name is in `public`, as merge_core reads it."""
    where = urlparse(jdbc_url.removeprefix("jdbc:"))
    schema, table = (["public"] + list(parts))[-2:]
    database = where.path.strip("/") or "postgres"
    return {
        "table": f"{schema}.{table}",
        "location": None,
        "namespace": f"postgres://{where.hostname}:{where.port or 5432}",
        "name": f"{database}.{schema}.{table}",
    }


def operator_lineage(inputs: list[dict], output: dict, metrics: dict | None, version: int | None = None):
    """OperatorLineage for the OpenLineage provider (imported here: it is optional). ``version``: the
    target's table version after the merge, reported as the output's ``version`` facet."""
    from airflow.providers.common.compat.openlineage.facet import (
        Identifier,
        InputDataset,
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
        SymlinksDatasetFacet,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.generated.dataset_version_dataset import DatasetVersionDatasetFacet

    def dataset(kind, info: dict, facets: dict | None = None, **extra):
        namespace, name = (
            (info["namespace"], info["name"]) if "namespace" in info else dataset_name(info["location"], info["table"])
        )
        symlink = SymlinksDatasetFacet(
            identifiers=[Identifier(namespace=CATALOG_NAMESPACE, name=info["table"], type="TABLE")]
        )
        return kind(namespace=namespace, name=name, facets={"symlinks": symlink, **(facets or {})}, **extra)

    stats = {}
    if metrics:  # rows and bytes the merge wrote (the rewritten partitions' rows, copied ones included)
        stats["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
            rowCount=metrics.get("numOutputRows", 0), size=metrics.get("numTargetBytesAdded", 0)
        )
    versioned = {"version": DatasetVersionDatasetFacet(datasetVersion=str(version))} if version is not None else {}
    return OperatorLineage(
        inputs=[dataset(InputDataset, i) for i in inputs],
        outputs=[dataset(OutputDataset, output, versioned, outputFacets=stats)],
    )
