"""`make demo`: a real MERGE on the embedded local Spark warehouse (the project's var/).

Creates demo.accounts (parquet, partitioned by region) and its monthly update
from examples/demo_data/, runs examples/demo.sql, and prints what it changed,
the table before and after, the merge history, the metrics and, last, the plan
(spark-merge explain). Safe to run again: the demo tables are recreated each time.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from merge_core import explain, get_session, history, merge

HERE = Path(__file__).resolve().parent


def load(spark, name: str, partitioned: bool) -> None:
    csv = HERE / "demo_data" / f"{name}.csv"
    spark.sql(f"DROP TABLE IF EXISTS demo.{name}")
    spark.read.csv(
        str(csv), header=True, schema="customer STRING, purchases DECIMAL(10,2), address STRING, region STRING"
    ).createOrReplaceTempView(f"{name}_csv")
    part = "PARTITIONED BY (region)" if partitioned else ""
    spark.sql(f"CREATE TABLE demo.{name} USING parquet {part} AS SELECT * FROM {name}_csv")


def show(spark, title: str) -> None:
    print(f"\n== {title}")
    for r in spark.sql("SELECT * FROM demo.accounts ORDER BY region, customer").collect():
        print(f"   {r.customer:<14} {r.purchases:>8}  {r.address:<14} {r.region}")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    spark = get_session()
    spark.sql("CREATE DATABASE IF NOT EXISTS demo")
    load(spark, "accounts", partitioned=True)
    load(spark, "monthly_accounts_update", partitioned=False)
    sql = (HERE / "demo.sql").read_text()
    show(spark, "demo.accounts before")
    print("\n== the statement\n" + sql)
    result = merge(spark, sql)
    print("== what it did\n" + result.summary())
    show(spark, "demo.accounts after")
    print("\n== metrics")
    print(
        json.dumps(
            {
                "merge_id": result.merge_id,
                "paradigm": result.paradigm,
                "plan_hash": result.plan_hash,
                "partitions_rewritten": result.partitions,
                **result.metrics,
            },
            indent=2,
        )
    )
    print("\n== history (spark-merge history demo.accounts)")
    for e in history(spark, "demo.accounts", limit=3):
        print(f"   {e['finished_at']}  {e['merge_id']}  {e['kind']}  {e['metrics']['executionTimeMs']} ms")
    print("\n== the plan (spark-merge explain; --verbose prints each step's SQL)\n" + explain(spark, sql))


if __name__ == "__main__":
    main()
