"""The tables the example DAGs use (demo.orders, demo.orders_cdc), created with sample rows when missing.

Only these names are ever created: a DAG pointed at other tables (its params) expects them to exist,
so a typo in a table name fails the merge instead of quietly making a new demo table.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

COLUMNS = "order_id INT, customer_id INT, status STRING, changed_at TIMESTAMP, op STRING, region STRING"
# three days of changes: order 1 changes twice (its 23:00 day-1 change arrives late, older than day 2's),
# order 2 is deleted (op 'D') on day 2
CHANGES = """
    (1, 17, 'new',     TIMESTAMP'2026-11-01 08:00:00', 'I', 'eu'),
    (2, 42, 'new',     TIMESTAMP'2026-11-01 09:00:00', 'I', 'us'),
    (1, 17, 'paid',    TIMESTAMP'2026-11-02 10:00:00', 'U', 'eu'),
    (2, 42, 'gone',    TIMESTAMP'2026-11-02 11:00:00', 'D', 'us'),
    (3, 42, 'new',     TIMESTAMP'2026-11-02 12:00:00', 'I', 'eu'),
    (3, 42, 'shipped', TIMESTAMP'2026-11-03 08:00:00', 'U', 'eu'),
    (4, 99, 'new',     TIMESTAMP'2026-11-03 09:00:00', 'I', 'us'),
    (1, 17, 'late',    TIMESTAMP'2026-11-01 23:00:00', 'U', 'eu')"""
STATEMENTS = {
    "demo.orders": f"CREATE TABLE IF NOT EXISTS demo.orders ({COLUMNS}) USING parquet PARTITIONED BY (region) "
    f"TBLPROPERTIES ('spark_merge.change_feed' = 'true')",
    "demo.orders_cdc": f"CREATE TABLE IF NOT EXISTS demo.orders_cdc USING parquet AS "
    f"SELECT * FROM VALUES {CHANGES} AS s({', '.join(c.split()[0] for c in COLUMNS.split(', '))})",
}


def create_missing(spark: Any, tables: list[str]) -> list[str]:
    """Create those of `tables` that are example tables and missing; returns the ones created."""
    created = []
    for name in tables:
        if name not in STATEMENTS or spark.catalog.tableExists(name):
            continue
        spark.sql("CREATE DATABASE IF NOT EXISTS demo")
        spark.sql(STATEMENTS[name])
        log.info("created the example table %s", name)
        created.append(name)
    return created
