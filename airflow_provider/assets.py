"""Airflow assets for spark-merge tables: the URI scheme, its sanitizer, and the event a merge emits.

A Spark catalog table is the asset ``spark-merge://spark_catalog/<database>/<table>``: the catalog
(Spark's session catalog is ``spark_catalog``), then the database and the table, lower case as the
Hive metastore stores them. The provider registers the scheme (``get_provider_info``'s
``asset-uris``), so Airflow normalizes every spelling of one table to one URI and refuses a URI
that names no table. A merge's task emits one event per run on that asset, whose ``extra`` says
what changed (``event_extra``); a DAG scheduled on the asset reads it from its triggering events.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult

SCHEME = "spark-merge"
CATALOG = "spark_catalog"


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Airflow's URI handler for ``spark-merge://``: catalog, database and table, lower case."""
    if not uri.netloc:
        raise ValueError(f"a {SCHEME} asset URI names its catalog: {SCHEME}://{CATALOG}/<database>/<table>")
    parts = [p for p in uri.path.split("/") if p]
    if len(parts) != 2:
        raise ValueError(
            f"a {SCHEME} asset URI names a database and a table: {SCHEME}://{uri.netloc}/<database>/<table>, "
            f"not {uri.path!r}"
        )
    if uri.query:
        raise ValueError(f"a {SCHEME} asset URI takes no query: {uri.query!r}")
    return uri._replace(netloc=uri.netloc.lower(), path="/" + "/".join(p.lower() for p in parts))


def table_uri(table: str, catalog: str = CATALOG) -> str:
    """The asset URI of a catalog table named ``database.table`` (a bare name is in ``default``)."""
    parts = [p.strip("`") for p in table.split(".")]
    database, name = (["default"] + parts)[-2:]
    return f"{SCHEME}://{catalog.lower()}/{database.lower()}/{name.lower()}"


def table_asset(table: str, catalog: str = CATALOG, **kwargs: Any):
    """The Asset of a catalog table, for an operator's ``outlets`` or a DAG's ``schedule``:
    ``table_asset("sales.orders")``. Keyword arguments go to Asset (``name``, ``group``, ``extra``)."""
    from airflow.sdk import Asset

    return Asset(uri=table_uri(table, catalog), **kwargs)


def create_asset(database: str, table: str, catalog: str = CATALOG, **kwargs: Any):
    """Airflow's asset factory for the scheme (``asset-uris``' ``factory``)."""
    return table_asset(f"{database}.{table}", catalog, **kwargs)


def convert_asset_to_openlineage(asset: Any, lineage_context: Any = None):
    """The asset as an OpenLineage dataset: namespace the catalog, name ``database.table``, as the
    ``symlinks`` facet of spark-merge's own lineage names a table."""
    from urllib.parse import urlsplit

    from airflow.providers.common.compat.openlineage.facet import Dataset

    parsed = urlsplit(asset.uri)
    return Dataset(namespace=parsed.netloc, name=".".join(p for p in parsed.path.split("/") if p))


def event_extra(result: Any) -> dict:
    """What one merge tells the DAGs scheduled on its table: the merge id, the table version it
    committed (unchanged for a run that changed nothing), whether it changed anything, the rows it
    inserted, updated and deleted, and the partitions it rewrote."""
    m = result.metrics
    return {
        "merge_id": result.merge_id,
        "table": result.target,
        "version": result.version,
        "noop": bool(result.noop),
        "replayed": bool(result.replayed),
        "rows_inserted": m.get("numTargetRowsInserted", 0),
        "rows_updated": m.get("numTargetRowsUpdated", 0),
        "rows_deleted": m.get("numTargetRowsDeleted", 0),
        "partitions": [{k: None if v is None else str(v) for k, v in p.items()} for p in result.partitions],
    }
