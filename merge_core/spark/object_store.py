"""Object stores for spark-merge's own file work (listing, footers, carrying files over, vacuum).

Spark reads an S3 warehouse through Hadoop's S3A connector (``s3a://``), configured by ``fs.s3a.*``
settings (``spark.hadoop.fs.s3a.*`` in Spark's conf, or core-site.xml). pyarrow's ``S3FileSystem``
does spark-merge's part of the work; it is built from those same settings, read from the active
Spark session's Hadoop configuration, so a user sets the endpoint and the credentials once. Settings
Spark does not have (none at all: an instance role, environment variables) leave pyarrow to AWS's
default chain, as S3A does.

``s3a://``, ``s3n://`` and ``s3://`` name the same objects. Other schemes (``gs://``, ``abfs://``,
``hdfs://``) go to pyarrow's own URI resolution.

No step of a commit needs a rename to be atomic, which S3 has not: staging goes to a directory of its
own that no reader lists and is checked against the plan's row counts, files carried over are
server-side copies, and the commit is the metastore's repoint. Sessions keep Spark's own output
committer on S3 (it copies each file it writes once more at commit): the S3A committers (magic,
directory), which do not, refuse the absolute output paths Spark uses for a partition whose location
is not the table's default, and every partition spark-merge rewrote is one, so an INSERT INTO it (an
insert-only merge, any append) would fail.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlparse

from pyarrow import fs

S3_SCHEMES = ("s3a", "s3n", "s3")

# the S3A settings read, each looked up per bucket first (fs.s3a.bucket.<bucket>.<name>), as S3A does
_KEYS = (
    "endpoint",
    "endpoint.region",
    "access.key",
    "secret.key",
    "session.token",
    "path.style.access",
    "connection.ssl.enabled",
    "aws.credentials.provider",
)
_lock = threading.Lock()
_cache: dict[tuple, fs.S3FileSystem] = {}
_settings: dict[tuple[int, str], dict[str, str]] = {}


def _hadoop_settings(bucket: str) -> dict[str, str]:
    """The fs.s3a.* settings (per-bucket ones first) of the active Spark session's Hadoop
    configuration; {} without a classic session (Spark Connect: its server owns the settings).
    Read once per session and bucket: each is a call into the JVM, and every file a merge lists,
    reads or carries resolves its location."""
    from pyspark.sql import SparkSession

    # the session of this thread, else the application's (a worker thread of ours has no active one)
    session = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    key = (id(session), bucket)
    if key in _settings:
        return _settings[key]
    hadoop: Any = None
    try:
        hadoop = session.sparkContext._jsc.hadoopConfiguration() if session is not None else None
    except Exception:  # noqa: BLE001 - a Connect session has no SparkContext
        pass
    out: dict[str, str] = {}
    for name in _KEYS if hadoop is not None else ():
        value = hadoop.get(f"fs.s3a.bucket.{bucket}.{name}") or hadoop.get(f"fs.s3a.{name}")
        if value:
            out[name] = value.strip()
    _settings[key] = out
    return out


def s3_options(settings: dict[str, str]) -> dict:
    """pyarrow S3FileSystem keyword arguments for S3A ``settings`` (fs.s3a.* names without the prefix)."""
    options: dict = {}
    endpoint = settings.get("endpoint")
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"//{endpoint}")
        ssl = settings.get("connection.ssl.enabled", "true").lower() != "false"
        options["scheme"] = parsed.scheme or ("https" if ssl else "http")
        options["endpoint_override"] = parsed.netloc
        # S3A addresses buckets as virtual hosts unless told to use paths (MinIO, moto, Ceph)
        options["force_virtual_addressing"] = settings.get("path.style.access", "false").lower() != "true"
    if settings.get("endpoint.region"):
        options["region"] = settings["endpoint.region"]
    if settings.get("access.key") and settings.get("secret.key"):
        options["access_key"], options["secret_key"] = settings["access.key"], settings["secret.key"]
        if settings.get("session.token"):
            options["session_token"] = settings["session.token"]
    elif "Anonymous" in settings.get("aws.credentials.provider", ""):
        options["anonymous"] = True
    return options


def s3_filesystem(bucket: str) -> fs.S3FileSystem:
    """The file system of ``bucket``, built from Spark's S3A settings (one per distinct settings)."""
    options = s3_options(_hadoop_settings(bucket))
    key = tuple(sorted(options.items()))
    with _lock:
        if key not in _cache:
            _cache[key] = fs.S3FileSystem(**options)
        return _cache[key]


def resolve(location: str) -> tuple[fs.FileSystem, str]:
    """A location on a remote file system as pyarrow's file system and a path in it."""
    parsed = urlparse(location)
    if parsed.scheme in S3_SCHEMES:
        return s3_filesystem(parsed.netloc), parsed.netloc + parsed.path
    filesystem, root = fs.FileSystem.from_uri(f"{parsed.scheme}://{parsed.netloc}/")  # root: "bucket" or "/"
    return filesystem, root.rstrip("/") + parsed.path
