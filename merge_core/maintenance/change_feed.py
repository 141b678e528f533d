"""Reading the change feed: the row changes each commit recorded (lifecycle/changes.sql writes them).

A commit of a table whose property spark_merge.change_feed is true writes its change rows into its own
directory, `<root>/_merge_<id>/_changes/`, before its journal; its history entry, written with the
commit, says so (`change_feed`). So the rows become readable exactly when the commit does, a crash
leaves feed and table agreeing (the entry is there or not), and vacuum removes them with the version.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from merge_core.common import macros
from merge_core.common.errors import UnsupportedError, codes, error_for
from merge_core.lifecycle.merge_on_read import LOG_SUFFIX
from merge_core.maintenance import history_store
from merge_core.spark import files
from merge_core.spark.catalog import describe_table
from merge_core.spark.host import SparkHost


def table_changes(
    spark: SparkSession,
    table_name: str,
    since: str | None = None,
    until: str | None = None,
    accept_plain_writes: bool = False,
) -> DataFrame:
    """The change rows of the commits after ``since`` up to ``until`` (history.py's order), as one
    DataFrame (spark_merge__changes_read_sql, the query dbt's spark_merge.changes runs too).

    A partition those commits touched that holds other rows now than its last commit left (a write
    that bypassed spark-merge: INSERT OVERWRITE, TRUNCATE, DROP PARTITION, a plain INSERT) makes the
    feed contradict the table: an error, unless ``accept_plain_writes``."""
    parts = [p.strip("`") for p in table_name.split(".")]
    log_parts = [*parts[:-1], parts[-1] + LOG_SUFFIX]
    if spark.catalog.tableExists(".".join(log_parts)):  # a merge-on-read table: its log takes the commits
        parts = log_parts
    table = describe_table(spark, parts)
    entries = history_store.load(table).require_readable("the change feed").entries
    chosen = macros.changes_range(table, entries, since, until)
    if chosen.get("error"):
        code, message = chosen["error"]
        raise error_for(codes()[code], message)
    for entry in chosen["entries"]:
        location = macros.changes_location(table, entry["merge_id"])
        if files.exists(location) is False:
            raise UnsupportedError(
                f"the change rows of merge {entry['merge_id']} on {table['name']} were removed by vacuum with its "
                f"version; read the changes after a later merge (since=...)"
            )
    if not accept_plain_writes:
        _refuse_plain_writes(spark, table, chosen["ordered"], chosen["entries"])
    return spark.sql(macros.changes_read_sql(table, chosen["entries"]))


def _refuse_plain_writes(spark: SparkSession, table: dict, ordered: list[dict], chosen: list[dict]) -> None:
    """Raise when writes that bypassed spark-merge changed a partition the ``chosen`` commits touched
    since the last commit of the history (``ordered``, in commit order) recorded its rows (feed.sql:
    plain_writes): its rows counted now as an append counts them (write.sql: lifecycle_rows_now, from
    the files' footers, no Spark job where the files are reachable)."""
    recorded = macros.recorded_rows(table, ordered)
    wanted = macros.plain_writes(table, chosen, recorded, None)["partitions"]
    if not wanted:
        return
    now = macros.lifecycle_rows_now(SparkHost(spark), table, wanted)
    changed = macros.plain_writes(table, chosen, recorded, now)["changed"]
    if changed:
        raise UnsupportedError(
            macros.plain_writes_message(table, changed, "accept_plain_writes=True (--accept-plain-writes)")
        )
