"""The Spark host of the lifecycle: its primitives over a SparkSession (host.py), the commit lock,
the metastore's repoint, the catalog, the file system (pyarrow), validation against the real table,
the sessions spark-merge builds, and failpoints for crash tests."""
