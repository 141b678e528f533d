"""What dead merges leave behind, and tables spark-merge must not rewrite.

A merge killed before its clean-up can leave cached views in its session and tables (staging,
read-once) in the target's database; they carry the dead merge's id, so nothing reads them, and
begin and vacuum remove them. A directory holding another table format's metadata but registered
as parquet/ORC is refused.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession

from merge_core.common import macros
from merge_core.common.errors import TargetError
from merge_core.lifecycle.run import live_ids
from merge_core.spark import files
from merge_core.spark.catalog import SPARK_ERRORS

log = logging.getLogger("spark_merge")


_LEFTOVER = re.compile(r"^__sm_(?:source|changes)_(\d{14}_[0-9a-f]{8})$")


def drop_dead_leftovers(spark: SparkSession) -> list[str]:
    """Uncache and drop this session's temporary views of merges no longer alive in this process.

    A merge killed without its clean-up (a thread stopped hard, a task killed in a long-lived
    worker) leaves its cached views in the session. Their plans carry their merge id, so no
    other merge can read them; this returns their memory. A session shared by several
    processes (one Spark Connect session id used by two clients) is not supported.
    """
    dropped: list[str] = []
    try:
        views = spark.sql(macros.show_views_sql("__sm_*")).collect()
    except SPARK_ERRORS as e:  # a catalog without views: nothing to drop
        log.debug("listing views: %s", e)
        return dropped
    live = live_ids()
    for v in views:
        found = _LEFTOVER.match(v["viewName"])
        if not v["isTemporary"] or not found or found.group(1) in live:
            continue
        name = macros.quote(v["viewName"])
        try:
            spark.sql(macros.uncache_sql(name))
        except SPARK_ERRORS as e:  # its table is gone: the view cannot be analyzed, nor read again
            log.debug("uncaching %s: %s", name, e)
        spark.sql(macros.drop_view_sql(name))
        dropped.append(v["viewName"])
    if dropped:
        log.warning(
            "dropped %d cached view(s) of merges that are no longer running: %s", len(dropped), ", ".join(dropped)
        )
    return dropped


ORPHAN_MIN_AGE_HOURS = 1.0  # a merge's tables and staging older than this belong to a dead merge (retention.py too)


_MERGE_TABLE = re.compile(r"^__sm_(?:stage|src|chg)_((\d{14})_[0-9a-f]{8})$")


def refuse_foreign_format(table: dict) -> None:
    """A directory of another table format registered as parquet/ORC is not spark-merge's to rewrite."""
    for location in dict.fromkeys([table["root"], table["location"]]):
        found = files.foreign_format(location)
        if found:
            raise TargetError(
                f"{table['name']} is registered as a {table['provider']} table, but its location "
                f"{location} holds {found} metadata: rewriting it as plain {table['provider']} would leave "
                f"that metadata describing files that are gone. Merge through that format's own MERGE, "
                f"or register the table with its real format"
            )


def drop_dead_stage_tables(spark: SparkSession, table: dict, min_age_hours: float = ORPHAN_MIN_AGE_HOURS) -> list[str]:
    """Drop the catalog tables (__sm_stage_/__sm_src_/__sm_chg_<id>) of merges killed before their
    clean-up, in the target's database (dead_stage_tables). Staging tables are external: dropping
    them leaves their files to vacuum."""
    dropped = dead_stage_tables(spark, macros.show_tables_sql(table["database"], "__sm_*"), min_age_hours)
    for name in dropped:
        spark.sql(macros.drop_table_sql(macros.relation(table["database"], name)))
    if dropped:
        log.warning("dropped %d table(s) left by merges that died: %s", len(dropped), ", ".join(dropped))
    return dropped


def dead_stage_tables(spark: SparkSession, listing_sql: str, min_age_hours: float = ORPHAN_MIN_AGE_HOURS) -> list[str]:
    """The tables ``listing_sql`` (SHOW TABLES of a database, ``__sm_*``) names that merges killed
    before their clean-up left: not alive in this process and older than ``min_age_hours`` (a merge
    of another process may still be writing a younger one)."""
    try:
        found = spark.sql(listing_sql).collect()
    except SPARK_ERRORS as e:
        log.debug("listing tables: %s", e)
        return []
    cutoff = datetime.now(UTC) - timedelta(hours=min_age_hours)
    live = live_ids()
    dead = []
    for r in found:
        name = r["tableName"]
        matched = _MERGE_TABLE.match(name)
        if not matched or r["isTemporary"] or matched.group(1) in live:
            continue
        started = datetime.strptime(matched.group(2), "%Y%m%d%H%M%S").replace(tzinfo=UTC)
        if started <= cutoff:
            dead.append(name)
    return dead
