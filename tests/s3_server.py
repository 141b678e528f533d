"""An S3 endpoint for the tests and the request-count bench: moto's S3 server on loopback, and what
Spark needs to reach it. Not a test module itself (test_object_store.py).

Spark reaches S3 through Hadoop's S3A connector (`hadoop-aws`, built against the Hadoop of pyspark's
own jars, and the AWS SDK bundle that Hadoop release names). They come from Maven Central into var/s3a (ignored by git), once; nothing
is installed by hand. The server records every request (moto's recorder), so a test can count what
one merge asked of the store.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from tests.cluster import CONF_ENV, SPARK_HOME, _port, stop_group, wait_listening  # noqa: F401 - CONF_ENV for the tests

ROOT = Path(__file__).resolve().parents[1]
JARS = ROOT / "var" / "s3a"
MAVEN = "https://repo1.maven.org/maven2"
BUCKET = "spark-merge-tests"
KEYS = {"access": "testing", "secret": "testing", "region": "us-east-1"}


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read()


def _artifacts() -> list[tuple[str, str]]:
    """(Maven path, file name) of each jar Spark needs for s3a://, by the versions pyspark's jars imply."""
    hadoop = next(
        re.finditer(r"hadoop-client-api-([\d.]+)\.jar", " ".join(p.name for p in (SPARK_HOME / "jars").iterdir()))
    )
    hv = hadoop.group(1)
    pom = _get(f"{MAVEN}/org/apache/hadoop/hadoop-project/{hv}/hadoop-project-{hv}.pom").decode()
    sdk = re.search(r"<aws-java-sdk-v2.version>([^<]+)<", pom).group(1)
    accel = re.search(r"<amazon-s3-analyticsaccelerator-s3.version>([^<]+)<", pom)
    out = [
        (f"org/apache/hadoop/hadoop-aws/{hv}", f"hadoop-aws-{hv}.jar"),
        (f"software/amazon/awssdk/bundle/{sdk}", f"bundle-{sdk}.jar"),
    ]
    if accel:
        a = accel.group(1)
        out.append(
            (f"software/amazon/s3/analyticsaccelerator/analyticsaccelerator-s3/{a}", f"analyticsaccelerator-s3-{a}.jar")
        )
    return out


def jars() -> list[Path]:
    """The jars, fetched into var/s3a on first use (a lock file keeps two processes from racing)."""
    JARS.mkdir(parents=True, exist_ok=True)
    listed = JARS / "jars.json"
    with open(JARS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not listed.exists():
            names = []
            for path, name in _artifacts():
                if not (JARS / name).exists():
                    partial = JARS / f"{name}.part"
                    urllib.request.urlretrieve(f"{MAVEN}/{path}/{name}", partial)
                    partial.rename(JARS / name)
                names.append(name)
            listed.write_text(json.dumps(names))
    return [JARS / n for n in json.loads(listed.read_text())]


class S3Server:
    """moto's S3 server (`python -m moto.server`) on a free loopback port, with one bucket."""

    def __init__(self, root: Path):
        self.root, self.port = root, _port()
        self.proc: subprocess.Popen | None = None

    @classmethod
    def at(cls, endpoint: str) -> S3Server:
        """The server another process started, at ``endpoint`` (to count its requests)."""
        server = cls(Path("."))
        server.port = int(endpoint.rsplit(":", 1)[1])
        return server

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        self.root.mkdir(parents=True, exist_ok=True)
        log = open(self.root / "moto.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,  # the recorder's file goes here
            env={**os.environ, "MOTO_ENABLE_RECORDING": "true"},
            start_new_session=True,
        )
        if not wait_listening(self.proc, self.port, 60):
            raise RuntimeError(f"moto did not listen: {(self.root / 'moto.log').read_text()[-2000:]}")
        self.filesystem().create_dir(BUCKET)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc, timeout=10)

    def filesystem(self):
        """pyarrow's file system of this server (the tests' own view of the bucket)."""
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key=KEYS["access"],
            secret_key=KEYS["secret"],
            region=KEYS["region"],
            scheme="http",
            endpoint_override=f"127.0.0.1:{self.port}",
            allow_bucket_creation=True,
        )

    def spark_conf(self, warehouse: str | None = None) -> dict[str, str]:
        """Spark settings of an application whose warehouse is on this server: the S3A connector's
        endpoint and keys (spark-merge's own file work reads the same ones) and the jars."""
        return {
            # on the class path where they are (every JVM of the tests runs on this machine): as
            # spark.jars, each application would copy the SDK bundle (700 MB) for its executors
            "spark.driver.extraClassPath": ":".join(str(j) for j in jars()),
            "spark.executor.extraClassPath": ":".join(str(j) for j in jars()),
            "spark.sql.warehouse.dir": warehouse or f"s3a://{BUCKET}/warehouse",
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": KEYS["region"],
            "spark.hadoop.fs.s3a.access.key": KEYS["access"],
            "spark.hadoop.fs.s3a.secret.key": KEYS["secret"],
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        }

    def hadoop_conf(self) -> dict[str, str]:
        """The fs.s3a.* settings alone (a Hive metastore service's, which creates directories too)."""
        return {
            k.removeprefix("spark.hadoop."): v for k, v in self.spark_conf().items() if k.startswith("spark.hadoop.")
        }

    def _recorder(self, action: str, method: str = "POST") -> bytes:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/recorder/{action}", method=method)
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.read()

    def start_counting(self) -> None:
        self._recorder("reset-recording")
        self._recorder("start-recording")

    def stop_counting(self) -> Counter:
        """The requests since start_counting, as {(client, operation): count}; client "spark" (S3A)
        or "spark-merge" (pyarrow), operation LIST, HEAD, GET, PUT, COPY, DELETE or POST (multipart)."""
        self._recorder("stop-recording")
        recorded = self._recorder("download-recording", "GET").decode()
        return classify(json.loads(line) for line in recorded.splitlines() if line.strip())


def classify(requests) -> Counter:
    counts: Counter = Counter()
    for r in requests:
        headers = {k.lower(): v for k, v in r["headers"].items()}
        url = urlparse(r["url"])
        if url.path.startswith("/moto-api"):
            continue
        query, method = parse_qs(url.query, keep_blank_values=True), r["method"]
        client = "spark-merge" if "aws-sdk-cpp" in headers.get("user-agent", "") else "spark"
        if method == "GET" and ({"list-type", "prefix", "delimiter"} & set(query)):
            op = "LIST"
        elif method == "PUT" and "x-amz-copy-source" in headers:
            op = "COPY"
        elif method == "POST" and "delete" in query:
            op = "DELETE"
        else:
            op = method
        counts[(client, op)] += 1
    return counts
