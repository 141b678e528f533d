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
  and DROP TABLE, REFRESH) plus the batched repoint (the temporary views of a merge and the commit
  lock, which is a file, are not the metastore's; nor are begin's DESCRIBE QUERY statements, which
  only analyse a query: the source's columns, the types of the request's parts);
- file statistics: the host's file_stats answers (none of them a Spark job when the files are listed),
  and the catalog reads that listing made (a partition's location each).
"""

from __future__ import annotations

from merge_core.spark import host, metastore

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


def count(spark, fn) -> dict:
    """Run fn(); the Spark jobs it ran, the statements the lifecycle issued, and its metastore statements."""
    sc = spark.sparkContext
    global _groups
    _groups += 1
    group = f"sm_count_{_groups}"
    sc.setJobGroup(group, "spark-merge job count")
    host.trace = _Trace(sc.statusTracker(), group)
    reads = metastore.reads
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
    return {
        "jobs": jobs,
        "statements": len(sql) + len(stages),
        "data statements": len(data),
        "metastore statements": len(catalog) + len(repoints),
        "file statistics": sum(1 for kind, _ in trace if kind == "file_stats"),
        "catalog reads": metastore.reads - reads,
        "jobs by statement": trace.by_entry(),
        "result": result,
    }
