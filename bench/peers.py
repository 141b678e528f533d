"""The peers' Spark session settings, defined once for every bench that runs beside Delta and Iceberg.

Delta Lake and Iceberg are published for a Spark minor version, not for every one: delta-spark 4.3 and
iceberg-spark-runtime-4.1 1.12 are both built for Spark 4.1, the newest Spark they share (Delta 4.4 is
built for Spark 4.2 and Iceberg 1.12 has no Spark 4.2 runtime; neither runs on Spark 4.3, the project's
version: delta-spark 4.4 fails inside its own code with a NoSuchMethodError on LogicalRDD.<init>, which
changed in 4.3). So the benches that compare run on Spark 4.1: `make bench-*` fetches pyspark 4.1 and the
jars into var/peers, outside the project's environment, and names the jars in $PEER_JARS; spark-merge
runs unchanged there.

Delta's catalog is the session catalog (a Delta table is created in the metastore as Delta users do);
Iceberg's tables live in a catalog of their own, `ice`, a Hadoop catalog under a warehouse folder the
bench names (`spark.sql.catalog.ice.warehouse`). Its table cache is off, so each statement reads the
table's current snapshot.
"""

from __future__ import annotations

import os

JARS = os.environ.get("PEER_JARS", "")


def peer_conf(home) -> dict[str, str]:
    """The session settings that load the peers (none when $PEER_JARS is unset); Iceberg's tables go
    under ``home``/iceberg."""
    if not JARS:
        return {}
    return {
        "spark.jars": JARS,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension,"
        "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalog.ice": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.ice.type": "hadoop",
        "spark.sql.catalog.ice.warehouse": f"{home}/iceberg",
        "spark.sql.catalog.ice.cache-enabled": "false",
    }


# Iceberg's two write modes as its users set them; merge-on-read in format 3 writes deletion vectors
ICEBERG_MODES = {
    "iceberg-cow": {"format-version": "2", "mode": "copy-on-write"},
    "iceberg-mor": {"format-version": "3", "mode": "merge-on-read"},
}


def iceberg_table(spark, name: str, files: str, engine: str, partitioned_by: str = "") -> int:
    """An Iceberg table `name` (in catalog `ice`) made by CTAS from the parquet files under `files`, in
    `engine`'s write mode for MERGE, UPDATE and DELETE; the id of the snapshot the CTAS made."""
    props = ICEBERG_MODES[engine]
    mode = props["mode"]
    part = f"PARTITIONED BY ({partitioned_by})" if partitioned_by else ""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.rsplit('.', 1)[0]}")
    spark.sql(
        f"CREATE TABLE {name} USING iceberg {part} TBLPROPERTIES ('format-version' = '{props['format-version']}', "
        f"'write.merge.mode' = '{mode}', 'write.update.mode' = '{mode}', 'write.delete.mode' = '{mode}') "
        f"AS SELECT * FROM parquet.`{files}`"
    )
    return spark.sql(f"SELECT snapshot_id FROM {name}.snapshots").first()[0]


def iceberg_restored(spark, name: str, snapshot: int) -> str:
    """Iceberg table `name` set back to `snapshot` (a metadata commit: no data file is written), so
    each run merges into the same rows as a fresh copy would hold."""
    catalog, _, table = name.partition(".")
    spark.sql(f"CALL {catalog}.system.set_current_snapshot(table => '{table}', snapshot_id => {snapshot})").collect()
    return name
