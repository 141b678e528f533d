"""A PostgreSQL target stores exactly what PostgreSQL's own MERGE stores: a differential test.

Each case runs twice on copies of one table: through spark-merge (a Spark source, Spark's SQL), and
as PostgreSQL's own MERGE of the same statement (the same rows as a VALUES source, PostgreSQL's SQL,
written by hand). The outcomes must agree: the same rows, or an error with the same SQLSTATE (and
nothing written). The concurrency cases run another session's change between spark-merge's plan and
its commit, and before PostgreSQL's MERGE: a conditional clause must judge the row as it is then.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psycopg
import pytest

from merge_core import MergeError, to_spec
from merge_core.lifecycle.merge_run import run
from merge_core.targets.postgres import PostgresTarget


@dataclass
class Case:
    name: str
    table: str  # CREATE TABLE {t} ...
    rows: str  # INSERT INTO {t} VALUES ...
    spark: str  # the statement for spark-merge: {t} the target
    postgres: str  # the same statement for PostgreSQL's MERGE: {t} the copy
    meanwhile: str = ""  # another session's statement, between the plan and the commit: {t}
    zone: str = ""  # the database's time zone (Spark's session stays UTC)


CASES = [
    Case(
        "a too-long string is refused, not truncated",
        "(id int PRIMARY KEY, v varchar(5), c char(3))",
        "(1, 'a', 'x')",
        "MERGE INTO {t} t USING (SELECT 1 AS id, 'abcdefghij' AS v) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
        "MERGE INTO {t} t USING (VALUES (1, 'abcdefghij')) s(id, v) ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
    ),
    Case(
        "a too-long char(n) is refused",
        "(id int PRIMARY KEY, v varchar(5), c char(3))",
        "(1, 'a', 'x')",
        "MERGE INTO {t} t USING (SELECT 2 AS id, 'abcd' AS c) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, c) VALUES (s.id, s.c)",
        "MERGE INTO {t} t USING (VALUES (2, 'abcd')) s(id, c) ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, c) VALUES (s.id, s.c)",
    ),
    Case(
        "a conditional DELETE skips a row changed since the plan",
        "(id int PRIMARY KEY, bal int)",
        "(1, 10), (2, 20)",
        "MERGE INTO {t} t USING (SELECT * FROM VALUES (1), (2) AS s(id)) s ON t.id = s.id WHEN MATCHED AND t.bal < 25 THEN DELETE",
        "MERGE INTO {t} t USING (VALUES (1), (2)) s(id) ON t.id = s.id WHEN MATCHED AND t.bal < 25 THEN DELETE",
        meanwhile="UPDATE {t} SET bal = 1000 WHERE id = 1",
    ),
    Case(
        "a conditional UPDATE skips a row closed since the plan, the next clause takes it",
        "(id int PRIMARY KEY, status text, n int)",
        "(1, 'open', 0), (2, 'open', 0)",
        "MERGE INTO {t} t USING (SELECT * FROM VALUES (1), (2) AS s(id)) s ON t.id = s.id "
        "WHEN MATCHED AND t.status = 'open' THEN UPDATE SET n = t.n + 1 WHEN MATCHED THEN UPDATE SET n = -1",
        "MERGE INTO {t} t USING (VALUES (1), (2)) s(id) ON t.id = s.id "
        "WHEN MATCHED AND t.status = 'open' THEN UPDATE SET n = t.n + 1 WHEN MATCHED THEN UPDATE SET n = -1",
        meanwhile="UPDATE {t} SET status = 'closed' WHERE id = 2",
    ),
    Case(
        "an increment reads the value as it is at the commit",
        "(id int PRIMARY KEY, bal int)",
        "(1, 10)",
        "MERGE INTO {t} t USING (SELECT 1 AS id, 5 AS amount) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET bal = t.bal + s.amount",
        "MERGE INTO {t} t USING (VALUES (1, 5)) s(id, amount) ON t.id = s.id WHEN MATCHED THEN UPDATE SET bal = t.bal + s.amount",
        meanwhile="UPDATE {t} SET bal = 100 WHERE id = 1",
    ),
    Case(
        "timestamp without time zone is a local date-time, whatever the database's zone",
        "(id int PRIMARY KEY, ts timestamp, tz timestamptz)",
        "(1, NULL, NULL)",
        "MERGE INTO {t} t USING (SELECT * FROM VALUES (1, TIMESTAMP'2024-07-01 12:00:00'), (2, TIMESTAMP'0001-01-01 00:00:00') "
        "AS s(id, ts)) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET ts = s.ts, tz = s.ts "
        "WHEN NOT MATCHED THEN INSERT (id, ts, tz) VALUES (s.id, s.ts, s.ts)",
        "MERGE INTO {t} t USING (VALUES (1, TIMESTAMPTZ '2024-07-01 12:00:00+00'), (2, TIMESTAMPTZ '0001-01-01 00:00:00+00')) "
        "s(id, ts) ON t.id = s.id WHEN MATCHED THEN UPDATE SET ts = s.ts AT TIME ZONE 'UTC', tz = s.ts "
        "WHEN NOT MATCHED THEN INSERT (id, ts, tz) VALUES (s.id, s.ts AT TIME ZONE 'UTC', s.ts)",
        zone="Asia/Tokyo",
    ),
    Case(
        "a TIMESTAMP_NTZ source into timestamp",
        "(id int PRIMARY KEY, ts timestamp)",
        "(1, NULL)",
        "MERGE INTO {t} t USING (SELECT 1 AS id, TIMESTAMP_NTZ'2024-07-01 12:00:00.123456' AS ts) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET ts = s.ts",
        "MERGE INTO {t} t USING (VALUES (1, TIMESTAMP '2024-07-01 12:00:00.123456')) s(id, ts) ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET ts = s.ts",
        zone="Asia/Tokyo",
    ),
    Case(
        "unbounded numeric keeps every digit",
        "(id int PRIMARY KEY, v numeric)",
        "(1, 1.1234567890123456789012345)",
        "MERGE INTO {t} t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = t.v + 1",
        "MERGE INTO {t} t USING (VALUES (1)) s(id) ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = t.v + 1",
    ),
    Case(
        "a huge unbounded numeric in another column does not stop a merge",
        "(id int PRIMARY KEY, big numeric, note text)",
        "(1, 1e40, 'a'), (2, -123456789012345678901234567890123456789012.5, 'b')",
        "UPDATE {t} SET note = 'x' WHERE id = 1",
        "MERGE INTO {t} t USING (VALUES (1)) s(id) ON t.id = 1 AND s.id = 1 WHEN MATCHED THEN UPDATE SET note = 'x'",
    ),
    Case(
        "columns named like spark-merge's own",
        "(id int PRIMARY KEY, __sm_op text, __sm_case int, __sm_srow int)",
        "(1, 'a', 1, 1)",
        "MERGE INTO {t} t USING (SELECT 1 AS id, 'b' AS __sm_op, 2 AS __sm_case) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET __sm_op = s.__sm_op, __sm_case = s.__sm_case, __sm_srow = 7",
        "MERGE INTO {t} t USING (VALUES (1, 'b', 2)) s(id, __sm_op, __sm_case) ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET __sm_op = s.__sm_op, __sm_case = s.__sm_case, __sm_srow = 7",
    ),
    Case(
        "a numeric(6,2) overflow is PostgreSQL's error",
        "(id int PRIMARY KEY, amt numeric(6,2) NOT NULL)",
        "(1, 1.5)",
        "MERGE INTO {t} t USING (SELECT 1 AS id, 123456.789 AS amt) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET amt = s.amt",
        "MERGE INTO {t} t USING (VALUES (1, 123456.789)) s(id, amt) ON t.id = s.id WHEN MATCHED THEN UPDATE SET amt = s.amt",
    ),
    Case(
        "numeric(6,2) rounds as PostgreSQL rounds",
        "(id int PRIMARY KEY, amt numeric(6,2))",
        "(1, 1.5)",
        "MERGE INTO {t} t USING (SELECT 1 AS id, 12.345 AS amt) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET amt = s.amt * 3",
        "MERGE INTO {t} t USING (VALUES (1, 12.345)) s(id, amt) ON t.id = s.id WHEN MATCHED THEN UPDATE SET amt = s.amt * 3",
    ),
    # cases that agreed before, kept agreeing
    Case(
        "composite keys with NULL parts and defaults",
        "(a int, b text, v int DEFAULT 42, PRIMARY KEY (a, b))",
        "(1, 'x', 1), (2, 'y', 2)",
        "MERGE INTO {t} t USING (SELECT * FROM VALUES (1, 'x', 10), (3, 'z', 30), (2, CAST(NULL AS STRING), 5) AS s(a, b, v)) s "
        "ON t.a = s.a AND t.b = s.b WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED AND s.b IS NOT NULL THEN INSERT (a, b) VALUES (s.a, s.b)",
        "MERGE INTO {t} t USING (VALUES (1, 'x', 10), (3, 'z', 30), (2, NULL, 5)) s(a, b, v) "
        "ON t.a = s.a AND t.b = s.b WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED AND s.b IS NOT NULL THEN INSERT (a, b) VALUES (s.a, s.b)",
    ),
    Case(
        "jsonb, bytea, arrays, uuid and unicode",
        "(id int PRIMARY KEY, j jsonb, b bytea, arr int[], u uuid, name text)",
        "(1, '{\"a\": 1}', '\\x00ff', '{1,2}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'ä')",
        "MERGE INTO {t} t USING (SELECT 1 AS id, '{{\"b\": [1, 2]}}' AS j, X'01FE' AS b, array(3, 4) AS arr, "
        "'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12' AS u, 'ñ日本' AS name) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET j = s.j, b = s.b, arr = s.arr, u = s.u, name = t.name || s.name",
        "MERGE INTO {t} t USING (VALUES (1, '{{\"b\": [1, 2]}}', '\\x01fe'::bytea, ARRAY[3, 4], "
        "'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', 'ñ日本')) s(id, j, b, arr, u, name) ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET j = s.j::jsonb, b = s.b, arr = s.arr, u = s.u::uuid, name = t.name || s.name",
    ),
]


@pytest.fixture
def pg_schema(postgres):
    target = PostgresTarget(postgres)
    schema = f"d{os.getpid()}_{time.monotonic_ns()}"
    with target.connect() as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        yield target, schema, conn
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _outcome(fn, conn, table):
    try:
        fn()
    except psycopg.Error as e:
        return ("error", e.sqlstate)
    except MergeError as e:
        return ("error", getattr(e, "sqlstate", e.code))
    return ("rows", [tuple(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_spark_merge_stores_what_postgres_merge_stores(spark, pg_schema, case):
    target, schema, conn = pg_schema
    a, b = f"{schema}.a", f"{schema}.b"
    for t in (a, b):
        conn.execute(f"CREATE TABLE {t} {case.table}")
        conn.execute(f"INSERT INTO {t} VALUES {case.rows}")
    if case.zone:
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET timezone = '{case.zone}'")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:

        def meanwhile(info):
            if case.meanwhile:
                with target.connect() as other:
                    other.execute(case.meanwhile.format(t=a))

        ours = _outcome(
            lambda: run(spark, to_spec(case.spark.format(t=a)), on_planned=meanwhile, target=target), conn, a
        )

        def reference():
            with target.connect() as own:
                if case.meanwhile:
                    own.execute(case.meanwhile.format(t=b))
                own.execute(case.postgres.format(t=b))

        theirs = _outcome(reference, conn, b)
    finally:
        if case.zone:
            conn.execute(f"ALTER DATABASE {conn.info.dbname} RESET timezone")
    assert ours == theirs, case.name
    if ours[0] == "error":  # nothing written: the table as set up (and as the other session left it)
        conn.execute(f"DELETE FROM {b}")
        conn.execute(f"INSERT INTO {b} VALUES {case.rows}")
        if case.meanwhile:
            conn.execute(case.meanwhile.format(t=b))
        assert (
            conn.execute(f"SELECT * FROM {a} ORDER BY 1").fetchall()
            == conn.execute(f"SELECT * FROM {b} ORDER BY 1").fetchall()
        )
