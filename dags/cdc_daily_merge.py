"""Each day, upsert that day's slice of a CDC feed into a table.

Idempotent, so catchup, re-runs and backfills of any day are safe: the merge is a watermark upsert
(primary key + `changed_at` watermark + `op = 'D'` tombstone), so applying a day again, or an older
day after a newer one, changes nothing. Params name the tables (defaults: demo.orders, demo.orders_cdc).
"""
from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_provider.operators import SparkMergeOperator

with DAG(
    dag_id="cdc_daily_merge",
    # data intervals [day, day + 1): the run for a day sees that day's slice (Airflow 3's plain cron
    # schedules give zero-length intervals)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=datetime(2026, 11, 1),
    catchup=True,
    max_active_runs=1,
    params={"target": "demo.orders", "source": "demo.orders_cdc"},
    tags=["spark-merge"],
) as dag:
    SparkMergeOperator(
        task_id="merge_day",
        spec={
            "target": "{{ params.target }}",
            "source": "SELECT * FROM {{ params.source }} "
                      "WHERE changed_at >= TIMESTAMP'{{ data_interval_start | ts }}' "
                      "AND changed_at < TIMESTAMP'{{ data_interval_end | ts }}'",
        },
        options={"primary_key": "order_id", "watermark_key": "changed_at", "tombstone_key": "op",
                 "tombstone_string_key_value": "D"},
    )
