"""Runs when a merge commits into demo.orders (the target of `cdc_daily_merge`) and reports what it
changed, from the asset event spark-merge emits with each merge: merge id, table version, rows
inserted, updated and deleted, partitions rewritten. No query of the table is needed to know that.
Then it reads exactly the change rows of that merge from the table's change feed (demo.orders
records them: its property spark_merge.change_feed), as a downstream job that processes only what
changed would.

Run by hand (`airflow dags test orders_changed`), it reports the latest merge into the table.
"""

from __future__ import annotations

import logging
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider.assets import table_asset

ORDERS = table_asset("demo.orders")

with DAG(
    dag_id="orders_changed",
    schedule=[ORDERS],
    start_date=datetime(2026, 11, 1),
    catchup=False,
    tags=["spark-merge"],
) as dag:

    @task(inlets=[ORDERS])
    def what_changed(triggering_asset_events=None, inlet_events=None) -> list[dict]:
        """The merges that triggered this run (by hand: the latest one), one dict each."""
        events = list(triggering_asset_events[ORDERS]) if triggering_asset_events else []
        if not events:
            events = list(inlet_events[ORDERS][-1:])
        for e in events:
            x = e.extra
            logging.getLogger(__name__).info(
                "merge %s made %s version %s: %s inserted, %s updated, %s deleted, partitions %s",
                x["merge_id"],
                x["table"],
                x["version"],
                x["rows_inserted"],
                x["rows_updated"],
                x["rows_deleted"],
                x["partitions"],
            )
        return [dict(e.extra) for e in events]

    @task
    def changed_rows(merges: list[dict]) -> dict:
        """The change rows of each merge that triggered the run, counted by kind."""
        from airflow_provider.hooks import SparkMergeHook
        from merge_core import history, table_changes

        spark = SparkMergeHook().get_conn()
        counts: dict = {}
        for m in merges:
            if m.get("noop") or m.get("replayed"):
                continue
            # exactly this merge's changes: those after the commit before it (history lists newest first)
            ids = [e["merge_id"] for e in history(spark, m["table"], limit=10_000)]
            older = ids[ids.index(m["merge_id"]) + 1 :]
            rows = table_changes(spark, m["table"], since=older[0] if older else None, until=m["merge_id"])
            for kind, n in rows.groupBy("_change_type").count().collect():
                counts[kind] = counts.get(kind, 0) + n
        logging.getLogger(__name__).info("change rows of the merge(s): %s", counts)
        return counts

    changed_rows(what_changed())
