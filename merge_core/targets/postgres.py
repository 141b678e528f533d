"""PostgreSQL targets over JDBC: the CHANGE_ONLY_UPDATED_COLUMNS row-change paradigm.

The plan is the file tables' (same spec, parser, validation, duplicate rules, engines and watermark
guard): Spark reads the target through a JDBC view whose row id is the primary key, joins it with the
source and checks the duplicate rule. What reaches the table is then decided by PostgreSQL's own
MERGE (pg_merge.py), so the table holds exactly what PostgreSQL's MERGE of the statement would:

1. the source's rows (as Spark computed them: the merge's read-once source) go to a staging table in
   the target's schema, typed so that no value changes on the way (exact decimals, date-times as text);
2. one PostgreSQL transaction, in Spark's session time zone: lock the rows the merge can touch, count
   the rows each WHEN clause takes, MERGE from the staging table (the ON and WHEN conditions and the
   values transpiled to PostgreSQL's SQL, evaluated against each row as it is now; each UPDATE sets
   only the columns its clause assigns, each INSERT only its columns, the others take their
   defaults), the WHEN NOT MATCHED BY SOURCE clauses, and the history row. PostgreSQL assigns,
   checks lengths and constraints and converts time zones by its own rules: a value the column cannot
   hold fails with PostgreSQL's error, and the transaction rolls back;
3. the staging table is dropped.

A failure anywhere rolls the transaction back (a killed process too: PostgreSQL drops its
connection). A merge holds a session advisory lock named after its merge id while it lives, so the
next begin can tell a staging table of a dead merge (lock free: dropped) from a running one's.
PostgreSQL 15 or newer (MERGE) is required.

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

from merge_core.common import macros
from merge_core.common.errors import (
    ConflictError,
    MergeError,
    SpecError,
    TargetError,
    UnsupportedError,
    codes,
    error_for,
)
from merge_core.common.run_state import RunState
from merge_core.targets import pg_merge
from merge_core.targets.paradigms import RowChangeParadigm

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

        return psycopg.connect(
            host=self.host,
            port=self.port,
            dbname=self.database,
            user=self.user,
            password=self.password,
            autocommit=autocommit,
        )

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
    columns, pk = _catalog(target, schema, name)
    if not pk:
        raise TargetError(
            f"PostgreSQL table {schema}.{name} has no primary key: CHANGE_ONLY_UPDATED_COLUMNS "
            f"identifies the rows it changes by it (add one with ALTER TABLE ... ADD PRIMARY KEY)"
        )
    not_null = {r[0].lower() for r in columns if r[2]}
    # an INSERT that does not name a column with a default (or identity) lets PostgreSQL fill it in
    defaults = {r[0].lower() for r in columns if r[3]}
    cols = [
        {
            **macros.column_record(n, t, {"nullable": n.lower() not in not_null, "has_default": n.lower() in defaults}),
            "computed_by_target": True,
        }  # PostgreSQL computes, casts and checks what it stores (pg_merge.py)
        for n, t in _spark_view(spark, target, schema, name, view, columns)
    ]
    return {
        "name": f"{schema}.{name}",
        "database": schema,
        "table_name": name,
        "columns": cols,
        "columns_by_name": {c["name"].lower(): c for c in cols},
        "partition_columns": [],
        "provider": "jdbc",
        "location": "",
        "root": "",
        "version": 0,
        "managed": False,
        "properties": {},
        "errors": [],
        "relation": f"`{view}`",
        "primary_key": pk,
        "pg_types": {r[0].lower(): r[1] for r in columns},
        # a value is converted to the column's type as a literal would be (jsonb, uuid, dates from a
        # Spark string), except into a string column (category S), where PostgreSQL's assignment
        # checks the length: the type without its length, precision or time-zone-less spelling
        "pg_casts": {r[0].lower(): None if r[5] == "S" else r[4] for r in columns},
    }


def _catalog(target: PostgresTarget, schema: str, name: str) -> tuple[list[tuple], list[str]]:
    """From PostgreSQL's catalog: per column (name, type, not null, has a default or identity, its
    base type, its type category), and the primary key's columns in order."""
    with target.connect() as conn:
        oid = conn.execute("SELECT to_regclass(%s)::oid", (pg_merge.ident(schema, name),)).fetchone()[0]
        if oid is None:
            raise TargetError(f"target table {schema}.{name} not found in PostgreSQL database {target.database}")
        columns = conn.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atthasdef OR a.attidentity <> '', "
            "format('%%I.%%I', n.nspname, t.typname), t.typcategory "
            "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid JOIN pg_namespace n ON n.oid = t.typnamespace "
            "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (oid,),
        ).fetchall()
        pk = [
            r[0]
            for r in conn.execute(
                "SELECT a.attname FROM pg_index i "
                "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                "WHERE i.indrelid = %s AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)",
                (oid,),
            )
        ]
    return columns, pk


def _spark_view(spark, target: PostgresTarget, schema: str, name: str, view: str, columns: list[tuple]) -> list:
    """Register the table as Spark's temporary ``view``; its columns' (name, Spark type).

    A numeric without precision holds values no Spark decimal can (more than 38 digits): Spark, which
    only plans (PostgreSQL computes every value the merge stores), reads it as a double; a timestamp
    without time zone is a local date-time, not an instant."""
    unbounded = [r[0] for r in columns if r[1] == "numeric"]
    reader = spark.read.option("preferTimestampNTZ", "true")
    if unbounded:
        reader = reader.option("customSchema", ", ".join(f"`{c.replace('`', '``')}` DOUBLE" for c in unbounded))
    try:
        frame = reader.jdbc(target.jdbc_url(), pg_merge.ident(schema, name), properties=target.jdbc_properties())
    except Exception as e:
        if DRIVER in str(e) or "No suitable driver" in str(e):
            raise TargetError(missing_driver()) from None
        raise
    frame.createOrReplaceTempView(view)
    return [(r[0], r[1]) for r in spark.sql(macros.describe_relation_sql(macros.quote(view))).collect()]


def missing_driver() -> str:
    """What to do when the Spark session lacks PostgreSQL's JDBC driver."""
    from merge_core.spark.session import POSTGRES_JDBC_JAR

    return (
        f"this Spark session has no PostgreSQL JDBC driver ({DRIVER}), which a PostgreSQL target needs: install "
        f"Debian's libpostgresql-jdbc-java ({POSTGRES_JDBC_JAR}, which get_session adds), or set "
        f"$SPARK_MERGE_JDBC_JARS to the driver's jar (Maven Central: org.postgresql:postgresql), or give your own "
        f"session spark.jars; then start a new session. Nothing was written"
    )


def forget(spark, table: dict) -> None:
    """Drop the temporary view describe() made (when the merge ends, whichever way)."""
    spark.sql(macros.drop_view_sql(table["relation"]))


class ChangeOnlyUpdatedColumns(RowChangeParadigm):
    """Rows identified by the primary key; each UPDATE sets only the columns its clause assigns."""

    name = "CHANGE_ONLY_UPDATED_COLUMNS"

    def __init__(self, target: PostgresTarget):
        self.target = target
        self.session: Any = None  # holds the merge's advisory lock for its lifetime

    # -- lifecycle hooks -----------------------------------------------------------------
    def begin(self, table: dict, merge_id: str) -> None:
        """Hold this merge's lock, then drop staging tables of merges that died (their locks are free).
        PostgreSQL before 15 has no MERGE: refused here, before anything is read."""
        self.session = self.target.connect()
        version = int(self.session.execute("SHOW server_version_num").fetchone()[0])
        if version < 150000:
            raise UnsupportedError(
                f"{table['name']} is in PostgreSQL {version // 10000}, which has no MERGE: "
                f"spark-merge commits into PostgreSQL with its own MERGE, so it needs 15 or newer"
            )
        self.session.execute("SELECT pg_advisory_lock(hashtext(%s))", (_lock_key(merge_id),))
        schema = table["database"]
        for (name,) in self.session.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND starts_with(tablename, %s)",
            (schema, STAGE_PREFIX),
        ).fetchall():
            key = _lock_key(name.removeprefix(STAGE_PREFIX))
            if self.session.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]:
                log.warning("dropping staging table %s.%s of a merge that did not finish", schema, name)
                self.session.execute(pg_merge.drop_table(pg_merge.ident(schema, name)))
                self.session.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))

    def release(self, spark, s: RunState) -> None:
        if self.session is not None:
            self.session.close()  # releases the advisory lock
            self.session = None

    def discard_staged(self, s: RunState) -> None:
        with self.target.connect() as conn:
            conn.execute(pg_merge.drop_table(self._stage(s)))

    # -- write -------------------------------------------------------------------------
    @staticmethod
    def _stage(s: RunState) -> str:
        return pg_merge.ident(s["table"]["database"], STAGE_PREFIX + s["merge_id"])

    def staged(self, host: Any, s: RunState) -> pg_merge.Staged:
        """The staging table's columns: the source's, as Spark types them (none for UPDATE/DELETE)."""
        if s["spec"]["source_kind"] == "none":
            return pg_merge.Staged(self._stage(s))
        described = host.rows(macros.describe_relation_sql(s["ctx"]["source"]))
        return pg_merge.Staged(
            self._stage(s),
            [
                (r["col_name"], *pg_merge.transport(r["data_type"])[::2])
                for r in described
                if r["col_name"] not in ("__sm_srow", "__sm_merge")
            ],
        )

    def _write_stage(self, host: Any, s: RunState, staged: pg_merge.Staged) -> None:
        """The source's rows into the staging table, created first with the types transport() chose."""
        if not staged.columns:
            return
        types = {
            name: pg_merge.transport(t)
            for name, t in (
                (r["col_name"], r["data_type"]) for r in host.rows(macros.describe_relation_sql(s["ctx"]["source"]))
            )
        }
        with self.target.connect() as conn:
            conn.execute(pg_merge.create_table(staged.table, [(name, types[name][0]) for name, _, _ in staged.columns]))
        columns = [[types[name][1].format(macros.quote(name)), name] for name, _, _ in staged.columns]
        host._sql(macros.select_sql(columns, s["ctx"]["source"])).write.jdbc(
            self.target.jdbc_url(), staged.table, mode="append", properties=self.target.jdbc_properties()
        )

    def write(self, host: Any, s: RunState) -> None:
        table = s["table"]
        host.step("execute: stage the source's rows in PostgreSQL")
        s["staged"] = True
        staged = self.staged(host, s)
        plan = pg_merge.build(s["spec"], table, s["resolved"], staged, table["database"], table["table_name"])
        self._write_stage(host, s, staged)
        host.failpoint("after_staging")
        zone = host.spark.conf.get("spark.sql.session.timeZone")
        host.step(
            "commit: one PostgreSQL transaction (lock, count, MERGE"
            + (", NOT MATCHED BY SOURCE" if plan.by_source else "")
            + ")"
        )
        with host.guard:
            host.stop_check()
            host.journaled = True  # from here the transaction decides; the staging table goes either way
        try:
            with self.target.connect(autocommit=False) as conn:
                with conn.transaction():
                    conn.execute("SELECT set_config('TimeZone', %s, true)", (zone,))  # Spark's clock
                    for statement in plan.lock:
                        conn.execute(statement)
                    host.failpoint("inside_transaction")
                    if plan.capture:
                        conn.execute(plan.capture)
                    counts = {k: n for k, n in conn.execute(plan.count).fetchall()}
                    merged = conn.execute(plan.merge).rowcount if plan.merge else 0
                    expected = sum(counts.get(i, 0) for i in plan.merge_clauses)
                    checks = [(merged, expected, "the MERGE")]
                    for statement, index, what in plan.by_source:
                        checks.append((conn.execute(statement).rowcount, counts.get(index, 0), what))
                    if plan.release:
                        conn.execute(plan.release)
                    for changed, wanted, what in checks:
                        if changed != wanted:
                            raise ConflictError(
                                f"{what} changed {changed} row(s) of {table['name']} where the rows locked for it "
                                f"gave {wanted}: another session added rows it matches meanwhile; rolled back, "
                                f"nothing was written, run it again"
                            )
                    self._count(s, counts)
                    for statement, params in self._history(host, s):
                        conn.execute(statement, params)
        except psycopg_errors() as e:
            raise refused(e, table) from None
        finally:
            self.discard_staged(s)
        s["journaled"] = True  # the transaction held the history row: finish writes no other

    def record(self, host: Any, s: RunState) -> None:
        """A merge that changes nothing: its history row (status no-op), in PostgreSQL's history table
        like every other merge into the table; finish writes no other."""
        with self.target.connect(autocommit=False) as conn, conn.transaction():
            for statement, params in self._history(host, s):
                conn.execute(statement, params)
        s["journaled"] = True

    @staticmethod
    def _count(s: RunState, counts: dict[int, int]) -> None:
        """The metrics from the rows PostgreSQL gave each clause (not Spark's plan: PostgreSQL decided)."""
        m = s["metrics"]
        for k in (
            "numTargetRowsInserted",
            "numTargetRowsUpdated",
            "numTargetRowsDeleted",
            "numTargetRowsNotMatchedBySourceUpdated",
            "numTargetRowsNotMatchedBySourceDeleted",
        ):
            m[k] = 0
        for cl in s["resolved"]["clauses"]:
            n = counts.get(cl["index"], 0)
            name = {
                "insert": "numTargetRowsInserted",
                "update": "numTargetRowsUpdated",
                "delete": "numTargetRowsDeleted",
            }[cl["action"]]
            m[name] += n
            if cl["by_source"]:
                m[name.replace("numTargetRows", "numTargetRowsNotMatchedBySource")] += n
        m.update(
            {
                "numOutputRows": m["numTargetRowsInserted"] + m["numTargetRowsUpdated"],
                "numTargetRowsCopied": 0,
                "numTargetPartitionsRewritten": 0,
            }
        )

    def _history(self, host: Any, s: RunState) -> list[tuple[str, tuple]]:
        """The history row (spark_merge__history_entry, the one builder), written in the merge's own
        transaction, so it exists iff the merge does."""
        s["metrics"]["executionTimeMs"] = host.elapsed_ms()
        entry = dict(macros.history_entry(s, s["table"]["version"]), finished_at=host.now())
        history_table = pg_merge.ident(s["table"]["database"], HISTORY_TABLE)
        return [
            (pg_merge.create_history(history_table), ()),
            (
                pg_merge.insert_history(history_table),
                (s["merge_id"], s["table"]["name"], json.dumps(entry, default=str)),
            ),
        ]

    def explain(self, spark, s: RunState, ctx: dict) -> list[str]:
        table = s["table"]
        staged = (
            pg_merge.Staged(self._stage(s), [])
            if s["spec"]["source_kind"] == "none"
            else pg_merge.Staged(
                self._stage(s),
                [
                    (r[0], *pg_merge.transport(r[1])[::2])
                    for r in spark.sql(macros.describe_relation_sql(macros.source_relation(s["spec"]))).collect()
                ],
            )
        )
        plan = pg_merge.build(s["spec"], table, s["resolved"], staged, table["database"], table["table_name"])
        return [
            macros.step_comment(
                "write", "stage the source's rows in PostgreSQL (Spark's JDBC writer, date-times as text)"
            ),
            macros.step_comment(
                "commit",
                "one PostgreSQL transaction in Spark's session time zone: lock the rows the merge can touch, count "
                "each clause's rows, MERGE (PostgreSQL evaluates the conditions and values on each row as it is then), "
                "the NOT MATCHED BY SOURCE clauses, the history row",
            ),
            *plan.lock,
            *([plan.capture] if plan.capture else []),
            plan.count,
            *([plan.merge] if plan.merge else []),
            *[st for st, _, _ in plan.by_source],
            *([plan.release] if plan.release else []),
        ]


def psycopg_errors() -> type[Exception]:
    import psycopg

    return psycopg.Error


def refused(e: Exception, table: dict) -> MergeError:
    """PostgreSQL's refusal as spark-merge's error, by its SQLSTATE (not by its text)."""
    state = getattr(e, "sqlstate", None) or ""
    diag = getattr(e, "diag", None)
    text = (getattr(diag, "message_primary", None) or str(e).splitlines()[0]).strip()
    detail = f"PostgreSQL refused the merge into {table['name']}: {text} (SQLSTATE {state}); nothing was written"
    by_state = {"21000": "duplicate", "23502": "not_null", "22001": "length", "40001": "conflict", "40P01": "conflict"}
    code = codes()[by_state.get(state, "target_refused")]
    error: Any = error_for(code, detail)
    error.sqlstate = state  # TargetRefused's, and the conflict's the state maps to
    return error


def history(target: PostgresTarget, table: str, limit: int = 20) -> list[dict]:
    schema, _ = split_name(table.split("."))
    with target.connect() as conn:
        if conn.execute("SELECT to_regclass(%s)", (pg_merge.ident(schema, HISTORY_TABLE),)).fetchone()[0] is None:
            return []
        rows = conn.execute(pg_merge.select_history(pg_merge.ident(schema, HISTORY_TABLE)), (table, limit)).fetchall()
    return [r[0] if isinstance(r[0], dict) else json.loads(r[0]) for r in rows]
