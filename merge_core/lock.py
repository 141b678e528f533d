"""The commit lock (see spark_merge_lock.sql): one committer per table at a time."""
from __future__ import annotations

import logging
import random
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Iterator

from pyspark.sql import SparkSession

from . import files, macros
from .catalog import SPARK_ERRORS, spark_message
from .errors import ConflictError

log = logging.getLogger("spark_merge")

LOCK_WAIT_S = 120     # how long a committer waits for another's commit to finish
LOCK_STALE_S = 900    # a lock this old belongs to a dead process (commits take seconds)


def holder(spark: SparkSession, table: dict) -> dict | None:
    """{'merge_id', 'since'} of the lock on ``table``, or None when it is free."""
    # look before reading: a missing table would make Spark log an error stack for every merge
    name = macros.render("literal", f"__sm_lock_{table['table_name']}")
    if not spark.sql(f"SHOW TABLES IN {macros.render('quote', table['database'])} LIKE {name}").collect():
        return None
    try:
        props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {macros.render('lock_relation', table)}").collect()}
    except SPARK_ERRORS:  # released in between
        return None
    return {"merge_id": props.get("spark_merge.lock.merge_id", "?"), "since": props.get("spark_merge.lock.since", "")}


def _age_s(since: str) -> float:
    try:
        return (datetime.now(timezone.utc) - datetime.fromisoformat(since)).total_seconds()
    except ValueError:
        return float("inf")


def break_lock(spark: SparkSession, table: dict) -> None:
    spark.sql(macros.render("unlock_sql", table))


@contextmanager
def table_lock(spark: SparkSession, table: dict, merge_id: str,
               wait_s: float | None = None, stale_s: float | None = None) -> Iterator[None]:
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    stale_s = LOCK_STALE_S if stale_s is None else stale_s
    deadline = time.monotonic() + wait_s
    while True:
        since = datetime.now(timezone.utc).isoformat()
        try:
            spark.sql(macros.render("lock_sql", table, merge_id, since))
            break
        except SPARK_ERRORS as e:
            owner = holder(spark, table)
            if owner is None:
                if "ALREADY_EXISTS" in str(e):
                    continue  # released between our attempt and the look
                raise ConflictError(f"cannot take the commit lock on {table['name']}: {spark_message(e)}") from None
            if _age_s(owner["since"]) > stale_s:
                log.warning("breaking stale lock of merge %s on %s (since %s)", owner["merge_id"], table["name"], owner["since"])
                break_lock(spark, table)
                continue
            if time.monotonic() > deadline:
                raise ConflictError(
                    f"{table['name']} is being committed by merge {owner['merge_id']} (since {owner['since']}); "
                    f"gave up after {wait_s:.0f} s"
                ) from None
            time.sleep(0.2 + random.random() * 0.3)
    try:
        yield
    finally:
        owner = holder(spark, table)
        if owner is not None and owner["merge_id"] == merge_id:
            spark.sql(macros.render("unlock_sql", table))
        files.remove(f"{table['root'].rstrip('/')}/_spark_merge/locks/{merge_id}")
