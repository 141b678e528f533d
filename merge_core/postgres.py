"""PostgreSQL targets over JDBC: the CHANGE_ONLY_UPDATED_COLUMNS row-change paradigm.

The plan is the file tables' (same spec, parser, validation, duplicate rules, engines and watermark
guard): Spark reads the target through a JDBC view whose row id is the primary key, joins it with the
source and computes the changed rows. Then, instead of rewriting files:

1. the changed rows (operation, WHEN clause, old primary key, new values) go to a staging table in the
   target's schema, written by Spark's JDBC writer;
2. one PostgreSQL transaction applies them: DELETE by primary key, one UPDATE per WHEN MATCHED ...
   UPDATE clause setting only the columns that clause assigns (a column another session changed
   meanwhile keeps that change), one INSERT per WHEN NOT MATCHED clause with only its columns (the
   others take their defaults), and the history row. Each statement must change exactly the rows the
   plan counted, else the transaction rolls back with MERGE_CONFLICT;
3. the staging table is dropped.

A failure anywhere rolls the transaction back (a killed process too: PostgreSQL drops its
connection). A merge holds a session advisory lock named after its merge id while it lives, so the
next begin can tell a staging table of a dead merge (lock free: dropped) from a running one's.

Python talks to PostgreSQL with psycopg; Spark needs the PostgreSQL JDBC driver on its class path
(`spark.jars`, e.g. Debian's /usr/share/java/postgresql.jar, see session.get_session).
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from . import macros
from .errors import ConflictError, SpecError, TargetError
from .paradigms import RowChangeParadigm

log = logging.getLogger("spark_merge")
DRIVER = "org.postgresql.Driver"
HISTORY_TABLE = "spark_merge_history"
STAGE_PREFIX = "__sm_stage_"


@dataclass
class PostgresTarget:
    """Where the target table lives: a `jdbc:postgresql://host:port/database` URL and credentials
    (arguments, or `user`/`password` in the URL's query)."""

    url: str
    user: str | None = None
    password: str | None = None

    def __post_init__(self) -> None:
        parsed = urlparse(self.url.removeprefix("jdbc:"))
        if not self.url.startswith("jdbc:postgresql://") or not parsed.hostname:
            raise SpecError(f"jdbc_url must look like jdbc:postgresql://host:5432/database, got {self.url!r}")
        query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        self.user = self.user or query.get("user")
        self.password = self.password or query.get("password") or os.environ.get("SPARK_MERGE_JDBC_PASSWORD")
        self.host, self.port = parsed.hostname, parsed.port or 5432
        self.database = parsed.path.lstrip("/") or "postgres"

    def connect(self, autocommit: bool = True):
        import psycopg

        return psycopg.connect(host=self.host, port=self.port, dbname=self.database, user=self.user,
                               password=self.password, autocommit=autocommit)

    def jdbc_properties(self) -> dict[str, str]:
        props = {"driver": DRIVER}
        if self.user:
            props["user"] = self.user
        if self.password:
            props["password"] = self.password
        return props

    def jdbc_url(self) -> str:
        """The URL Spark gets (credentials travel as properties, not in the URL)."""
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"


def _lock_key(merge_id: str) -> str:
    return f"spark_merge:{merge_id}"


def split_name(parts: list[str]) -> tuple[str, str]:
    """(schema, table) of a target name; a bare table is in `public`."""
    if len(parts) == 1:
        return "public", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise SpecError(f"a PostgreSQL target is schema.table (the database is in jdbc_url), got {'.'.join(parts)}")


def describe(spark, target: PostgresTarget, parts: list[str], merge_id: str) -> dict:
    """The `table` dict every macro takes, for a PostgreSQL table that Spark reads through a temporary
    view of this merge (its `relation`; ChangeOnlyUpdatedColumns.release drops it)."""
    schema, name = split_name(parts)
    view = f"__sm_pg_{merge_id}"
    with target.connect() as conn:
        oid = conn.execute("SELECT to_regclass(%s)::oid", (sql_identifier(schema, name),)).fetchone()[0]
        if oid is None:
            raise TargetError(f"target table {schema}.{name} not found in PostgreSQL database {target.database}")
        columns = conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef OR attidentity <> '' "
            "FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (oid,)).fetchall()
        pk = [r[0] for r in conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = %s AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)", (oid,))]
    if not pk:
        raise TargetError(f"PostgreSQL table {schema}.{name} has no primary key: CHANGE_ONLY_UPDATED_COLUMNS "
                          f"identifies the rows it changes by it (add one with ALTER TABLE ... ADD PRIMARY KEY)")
    (spark.read.jdbc(target.jdbc_url(), sql_identifier(schema, name), properties=target.jdbc_properties())
     .createOrReplaceTempView(view))
    spark_types = [(r[0], r[1]) for r in spark.sql(f"DESCRIBE QUERY SELECT * FROM `{view}`").collect()]
    not_null = {r[0].lower() for r in columns if r[2]}
    # an INSERT that does not name a column with a default (or identity) lets PostgreSQL fill it in
    defaults = {r[0].lower() for r in columns if r[3]}
    cols = [macros.fill("column_record", n, t, {"nullable": n.lower() not in not_null, "has_default": n.lower() in defaults})
            for n, t in spark_types]
    return {
        "name": f"{schema}.{name}", "database": schema, "table_name": name, "columns": cols,
        "columns_by_name": {c["name"].lower(): c for c in cols}, "partition_columns": [], "provider": "jdbc",
        "location": "", "root": "", "version": 0, "managed": False, "properties": {}, "errors": [],
        "relation": f"`{view}`", "primary_key": pk, "pg_types": {r[0].lower(): r[1] for r in columns},
    }


def forget(spark, table: dict) -> None:
    """Drop the temporary view describe() made (when the merge ends, whichever way)."""
    spark.sql(f"DROP VIEW IF EXISTS {table['relation']}")


def sql_identifier(*parts: str) -> str:
    return ".".join('"' + p.replace('"', '""') + '"' for p in parts)


class ChangeOnlyUpdatedColumns(RowChangeParadigm):
    """Rows identified by the primary key; each UPDATE sets only the columns its clause assigns."""

    name = "CHANGE_ONLY_UPDATED_COLUMNS"

    def __init__(self, target: PostgresTarget):
        self.target = target
        self.session = None  # holds the merge's advisory lock for its lifetime

    # -- lifecycle hooks -----------------------------------------------------------------
    def begin(self, table: dict, merge_id: str) -> None:
        """Hold this merge's lock, then drop staging tables of merges that died (their locks are free)."""
        self.session = self.target.connect()
        self.session.execute("SELECT pg_advisory_lock(hashtext(%s))", (_lock_key(merge_id),))
        schema = table["database"]
        for (name,) in self.session.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s AND starts_with(tablename, %s)",
                (schema, STAGE_PREFIX)).fetchall():
            key = _lock_key(name.removeprefix(STAGE_PREFIX))
            if self.session.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]:
                log.warning("dropping staging table %s.%s of a merge that did not finish", schema, name)
                self.session.execute(f"DROP TABLE IF EXISTS {sql_identifier(schema, name)}")
                self.session.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))

    def release(self, spark, s: dict) -> None:
        if self.session is not None:
            self.session.close()  # releases the advisory lock
            self.session = None

    def discard_staged(self, s: dict) -> None:
        with self.target.connect() as conn:
            conn.execute(f"DROP TABLE IF EXISTS {self._stage(s)}")

    # -- write -------------------------------------------------------------------------
    @staticmethod
    def _stage(s: dict) -> str:
        return sql_identifier(s["table"]["database"], STAGE_PREFIX + s["merge_id"])

    def write(self, host: Any, s: dict) -> None:
        table, m = s["table"], s["metrics"]
        stage = self._stage(s)
        host.step("execute: write the changed rows to a PostgreSQL staging table")
        s["staged"] = True
        rows = host._sql(macros.render("jdbc_stage_select", table, s["ctx"]))
        rows.write.jdbc(self.target.jdbc_url(), stage, mode="error", properties=self.target.jdbc_properties())
        host.failpoint("after_staging")
        m.update({"numOutputRows": m["numTargetRowsInserted"] + m["numTargetRowsUpdated"],
                  "numTargetRowsCopied": 0, "numTargetPartitionsRewritten": 0})
        per_case = {r["case"]: r["n"] for r in host.rows(macros.render("jdbc_case_counts_sql", s["ctx"]))}
        statements = self.statements(s, per_case)
        host.step(f"commit: one PostgreSQL transaction ({len(statements)} statements)")
        with host.guard:
            host.stop_check()
            host.journaled = True  # from here the transaction decides; the staging table goes either way
        try:
            with self.target.connect(autocommit=False) as conn:
                with conn.transaction():
                    for n, (statement, expected, what) in enumerate(statements):
                        changed = conn.execute(statement).rowcount
                        if changed != expected:
                            raise ConflictError(
                                f"{what} changed {changed} row(s) of {table['name']} where the plan counted "
                                f"{expected}: rows changed in PostgreSQL since Spark read them; rolled back, "
                                f"nothing was written, run it again")
                        if n == 0:
                            host.failpoint("inside_transaction")
                    for statement, params in self._history(host, s):
                        conn.execute(statement, params)
        finally:
            self.discard_staged(s)
        s["journaled"] = True  # the transaction held the history row: finish writes no other

    def statements(self, s: dict, per_case: dict[int, int]) -> list[tuple[str, int, str]]:
        """(PostgreSQL statement, rows it must change, what it is): DELETE, one UPDATE per update clause,
        one INSERT per insert clause; only the columns a clause assigns are written. `per_case`: rows
        the plan gives each WHEN clause (by its index)."""
        table, resolved = s["table"], s["resolved"]
        target = sql_identifier(table["database"], table["table_name"])
        stage = self._stage(s)
        pk = table["primary_key"]
        by_pk = " AND ".join(f"t.{sql_identifier(k)} = s.__sm_pk{i}" for i, k in enumerate(pk))
        names = {c["name"].lower(): c["name"] for c in table["columns"]}

        def value(col: str) -> str:
            return f"CAST(s.{sql_identifier(names[col])} AS {table['pg_types'][col]})"

        op = macros.fill("codes")["op"]
        out: list[tuple[str, int, str]] = []
        deletes = [cl["index"] for cl in resolved["clauses"] if cl["action"] == "delete"]
        if deletes:
            out.append((f"DELETE FROM {target} AS t USING {stage} AS s WHERE s.__sm_op = {op['delete']} AND {by_pk}",
                        sum(per_case.get(i, 0) for i in deletes), "the DELETE"))
        for cl in resolved["clauses"]:
            count = per_case.get(cl["index"], 0)
            cols = [c for c in names if c in cl["outputs"]]
            if cl["action"] == "update":
                sets = ", ".join(f"{sql_identifier(names[c])} = {value(c)}" for c in cols)
                out.append((f"UPDATE {target} AS t SET {sets} FROM {stage} AS s "
                            f"WHERE s.__sm_op = {op['update']} AND s.__sm_case = {cl['index']} AND {by_pk}", count, cl["label"]))
            elif cl["action"] == "insert":
                out.append((f"INSERT INTO {target} ({', '.join(sql_identifier(names[c]) for c in cols)}) "
                            f"SELECT {', '.join(value(c) for c in cols)} FROM {stage} AS s "
                            f"WHERE s.__sm_op = {op['insert']} AND s.__sm_case = {cl['index']}", count, cl["label"]))
        return out

    def _history(self, host: Any, s: dict) -> list[tuple[str, tuple]]:
        """The history row (spark_merge__history_entry, the one builder), written in the merge's own
        transaction, so it exists iff the merge does."""
        s["metrics"]["executionTimeMs"] = host.elapsed_ms()
        entry = dict(macros.fill("history_entry", s, s["table"]["version"]), finished_at=host.now())
        history_table = sql_identifier(s["table"]["database"], HISTORY_TABLE)
        return [(f"CREATE TABLE IF NOT EXISTS {history_table} (merge_id text PRIMARY KEY, target text NOT NULL, "
                 f"finished_at timestamptz NOT NULL, entry jsonb NOT NULL)", ()),
                (f"INSERT INTO {history_table} (merge_id, target, finished_at, entry) VALUES (%s, %s, now(), %s)",
                 (s["merge_id"], s["table"]["name"], json.dumps(entry, default=str)))]

    def explain(self, spark, s: dict, ctx: dict) -> list[str]:
        return ["-- 5. stage the changed rows in PostgreSQL (Spark's JDBC writer)",
                macros.render("jdbc_stage_select", s["table"], ctx),
                "-- 6. one PostgreSQL transaction; each statement must change the rows the plan counts for it",
                *[st for st, _, _ in self.statements(s, {})]]


def history(target: PostgresTarget, table: str, limit: int = 20) -> list[dict]:
    schema, _ = split_name(table.split("."))
    with target.connect() as conn:
        if conn.execute("SELECT to_regclass(%s)", (sql_identifier(schema, HISTORY_TABLE),)).fetchone()[0] is None:
            return []
        rows = conn.execute(f"SELECT entry FROM {sql_identifier(schema, HISTORY_TABLE)} WHERE target = %s "
                            f"ORDER BY finished_at DESC LIMIT %s", (table, limit)).fetchall()
    return [r[0] if isinstance(r[0], dict) else json.loads(r[0]) for r in rows]
