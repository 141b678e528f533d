"""Each day, upsert that day's slice of a CDC feed into a table.

A run merges the day that ends at its logical date (its data interval, [date - 1 day, date)): the
run of 2026-11-02 merges the changes of 2026-11-01, and its log says so (the source it read).
Idempotent, so catchup, re-runs and backfills of any day are safe: the merge is a watermark upsert
(primary key + `changed_at` watermark + `op = 'D'` tombstone), so applying a day again, or an older
day after a newer one, changes nothing. Params name the tables (defaults: demo.orders, demo.orders_cdc).
Runs out of the box: the first task creates the two demo tables, with three days of sample changes
(2026-11-01 to 03), when they are the tables named and missing; other tables must exist.

Each run emits an asset event on the target's asset (spark-merge://spark_catalog/demo/orders by
default) with what the merge changed; `orders_changed` is scheduled on it. The target is a param, so
the task reaches that asset through an AssetAlias outlet.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, AssetAlias, task
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

    @task
    def example_tables(params=None) -> list[str]:
        from airflow_provider.example_tables import create_missing
        from airflow_provider.hooks import SparkMergeHook

        return create_missing(SparkMergeHook().get_conn(), [params["target"], params["source"]])

    example_tables() >> SparkMergeOperator(
        task_id="merge_day",
        outlets=[AssetAlias("cdc_daily_merge_target")],
        spec={
            "target": "{{ params.target }}",
            "source": "SELECT * FROM {{ params.source }} "
            "WHERE changed_at >= TIMESTAMP'{{ data_interval_start | ts }}' "
            "AND changed_at < TIMESTAMP'{{ data_interval_end | ts }}'",
        },
        options={
            "primary_key": "order_id",
            "watermark_key": "changed_at",
            "tombstone_key": "op",
            "tombstone_string_key_value": "D",
        },
    )
