"""What one merge costs, counted (not timed): its Spark jobs, statements and catalog reads.

Counts are deterministic (they do not depend on the machine's speed), so tests may assert them
(tests/test_cost_and_commit.py does). How they are counted:
- Spark jobs: every job Spark runs for the merge, found by a job group set on the calling thread
  (SQL executions carry it into their own jobs, broadcasts and adaptive query stages included); and
  per statement, the jobs run between it and the next (`jobs by statement`);
- SQL statements: what the lifecycle issues (merge_core.spark.host.trace); of them "data statements" are
  the queries that run Spark work (not the EXPLAIN probes, not the DDL), and the staging write (the
  host's stage: on the Python host files written by the DataFrame writer, no catalog table);
- metastore statements: those that read or write the catalog's persistent objects (ALTER, CREATE
  and DROP TABLE, REFRESH, the two DESCRIBE TABLE statements of each describe of the table), the
  batched repoint, and the commit lock's statements or catalog calls (create, look, release: the
  lock is a table of the catalog); not the temporary views of a merge, nor begin's DESCRIBE QUERY
  statements, which only analyse a query (the source's columns, the types of the request's parts);
- file statistics: the host's file_stats answers (none of them a Spark job when the files are listed),
  and the catalog reads that listing made (a partition's location each);
- files and bytes read and written: the scans' and writes' own SQL metrics (`scanned`), from the SQL
  executions Spark's status store keeps (no UI needed), per table scanned: a file two statements read
  counts twice, as it is read twice. A scan that adaptive execution drops from the final plan after
  running it (the side of a join it found empty) is not in the plan Spark keeps: its files are not
  counted.
"""

from __future__ import annotations

import re

from merge_core.spark import host, lock, metastore

_groups = 0


class _Trace(list):
    """host.trace that notes, as each entry is added, how many Spark jobs the group has run so far:
    an entry is added as its statement starts, so the jobs run until the next entry are its own."""

    def __init__(self, tracker, group: str):
        super().__init__()
        self.jobs = lambda: len(tracker.getJobIdsForGroup(group))
        self.before: list[int] = []

    def append(self, item) -> None:
        self.before.append(self.jobs())
        super().append(item)

    def by_entry(self) -> list[tuple[str, str, int]]:
        """(kind, the statement's first line, Spark jobs) of each entry that ran any."""
        ends = [*self.before[1:], self.jobs()]
        return [
            (kind, text.strip().split("\n")[0], end - start)
            for (kind, text), start, end in zip(self, self.before, ends, strict=True)
            if end > start
        ]


CATALOG_WORDS = ("ALTER ", "CREATE ", "DROP TABLE ", "REFRESH ", "DESCRIBE TABLE", "SHOW ")
SESSION_WORDS = ("CACHE ", "UNCACHE ", "DROP VIEW ", "EXPLAIN ", "DESCRIBE QUERY ")


# a scan's metrics: parquet and ORC files (FileSourceScanExec), and Iceberg's (its BatchScan's custom metrics)
_READ = {
    "number of files read": "files",
    "size of files read": "bytes",
    "number of result data files": "files",
    "total data file size (bytes)": "bytes",
}
_WRITTEN = {"number of written files": "files", "written output": "bytes"}
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _number(text: str) -> int:
    """A metric as the status store shows it ("1,024", "213.3 KiB", or a sum of tasks' "total (min, med,
    max ...)\n12.3 KiB (...)" lines: the total) as a number."""
    first = text.strip().split("\n")[-1] if text.strip().startswith("total") else text.strip()
    m = re.match(r"([0-9][0-9,]*(?:\.[0-9]+)?)\s*([KMGT]?i?B)?", first)
    if not m:
        return 0
    return round(float(m.group(1).replace(",", "")) * _UNITS.get(m.group(2) or "B", 1))


def last_execution(spark) -> int:
    """The id of the newest SQL execution Spark's status store holds (-1: none)."""
    store = spark._jsparkSession.sharedState().statusStore()
    it, last = store.executionsList().iterator(), -1
    while it.hasNext():
        last = max(last, it.next().executionId())
    return last


def scanned(spark, since: int) -> dict:
    """What the SQL executions after execution ``since`` read and wrote, from their plans' metrics:
    {"read": {table: {"files", "bytes", "scans"}}, "written": {"files", "bytes"}}, where "scans" counts
    the scans of the table that ran. A table is named as its scan names it ("spark_catalog.db.t"; a
    path for a scan by path). The listener bus is drained first, so the metrics of the statement just
    run are there."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    store = spark._jsparkSession.sharedState().statusStore()
    read: dict[str, dict[str, int]] = {}
    written = {"files": 0, "bytes": 0}
    it = store.executionsList().iterator()
    while it.hasNext():
        execution = it.next()
        eid = execution.executionId()
        if eid <= since:
            continue
        values, seen = store.executionMetrics(eid), set()
        nodes = store.planGraph(eid).allNodes().iterator()
        while nodes.hasNext():
            node = nodes.next()
            name = node.name()
            scan = name.startswith(("Scan ", "BatchScan "))
            metrics = node.metrics().iterator()
            while metrics.hasNext():
                metric = metrics.next()
                kind = (_READ if scan else _WRITTEN).get(metric.name())
                value = values.get(metric.accumulatorId())
                if kind is None or metric.accumulatorId() in seen or value.isEmpty():
                    continue
                seen.add(metric.accumulatorId())
                if scan:
                    table = read.setdefault(name.split(" ", 2)[-1], {"files": 0, "bytes": 0, "scans": 0})
                    table[kind] += _number(value.get())
                    table["scans"] += kind == "files"
                else:
                    written[kind] += _number(value.get())
    return {"read": read, "written": written}


def count(spark, fn) -> dict:
    """Run fn(); the Spark jobs it ran, the statements the lifecycle issued, and its metastore statements."""
    sc = spark.sparkContext
    global _groups
    _groups += 1
    group = f"sm_count_{_groups}"
    sc.setJobGroup(group, "spark-merge job count")
    host.trace = _Trace(sc.statusTracker(), group)
    reads, lock_calls = metastore.reads, lock.calls
    since = last_execution(spark)
    try:
        result = fn()
    finally:
        trace, host.trace = host.trace, None
        sc.setLocalProperty("spark.jobGroup.id", None)
    jobs = len(sc.statusTracker().getJobIdsForGroup(group))
    sql = [text for kind, text in trace if kind == "sql"]
    catalog = [text for text in sql if text.upper().startswith(CATALOG_WORDS)]
    session = [text for text in sql if text.upper().startswith(SESSION_WORDS)]
    data = [text for text in sql if text not in catalog and text not in session]
    stages = [text for kind, text in trace if kind == "stage"]
    data += stages
    repoints = [kind for kind, _ in trace if kind == "repoint"]
    describes = 2 * sum(1 for kind, _ in trace if kind == "catalog")  # DESCRIBE ... AS JSON, DESCRIBE
    return {
        "jobs": jobs,
        "statements": len(sql) + len(stages),
        "data statements": len(data),
        "metastore statements": len(catalog) + len(repoints) + describes + lock.calls - lock_calls,
        "file statistics": sum(1 for kind, _ in trace if kind == "file_stats"),
        "catalog reads": metastore.reads - reads,
        "jobs by statement": trace.by_entry(),
        "scanned": scanned(spark, since),
        "result": result,
    }
