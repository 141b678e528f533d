"""The commit of a merge into a PostgreSQL table: PostgreSQL's own MERGE, from the staged source.

Spark plans the merge as for any target (validation, the source read once, the duplicate rule); what
reaches the table is decided by PostgreSQL, so it stores exactly what its own MERGE of the same
statement stores: the source's rows are staged as Spark produced them (exact decimals, date-times as
text, so nothing is shifted or rounded on the way), the ON and WHEN conditions and the assigned
values are transpiled from Spark's SQL to PostgreSQL's (sqlglot), and PostgreSQL evaluates them in
one transaction against each row as it is then: its assignment rules (a too-long string or an
overflow is an error, not truncated), its time zone rules (the transaction runs in Spark's session
time zone), and its concurrency rules (a row another session changed after Spark read it is judged
as it is at the commit).

PostgreSQL 15 and 16 have no WHEN NOT MATCHED BY SOURCE: those clauses run as UPDATE / DELETE
statements in the same transaction, on the target rows no source row matches, captured (and locked)
before the MERGE. The rows each clause changes are counted in the transaction, after the rows the
merge can touch are locked, so the metrics are PostgreSQL's. Nothing here builds SQL from user input
except through sqlglot's quoting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from merge_core.common.errors import ValidationError


def ident(*parts: str) -> str:
    """A PostgreSQL identifier (schema.table, or one name), quoted."""
    return ".".join(exp.to_identifier(p, quoted=True).sql(dialect="postgres") for p in parts)


# Spark's type of a staged source column -> (PostgreSQL column type of the staging table, the Spark
# expression that produces the value, the PostgreSQL expression that reads it back; {} = the column).
# Date-times travel as text: a JDBC timestamp is an instant in the JVM's zone, a DATE a midnight in it.
def transport(spark_type: str) -> tuple[str, str, str]:
    t = spark_type.lower().strip()
    simple = {
        "boolean": "boolean",
        "tinyint": "smallint",
        "smallint": "smallint",
        "int": "integer",
        "bigint": "bigint",
        "float": "real",
        "double": "double precision",
        "string": "text",
        "binary": "bytea",
        "void": "text",
    }
    if t in simple:
        return simple[t], "{}", "{}"
    if t.startswith(("varchar", "char")):
        return "text", "{}", "{}"
    if t.startswith("decimal"):
        return "numeric", "{}", "{}"
    if t == "date":
        return "text", "CAST({} AS STRING)", "CAST({} AS date)"
    if t in ("timestamp", "timestamp_ltz"):
        return "text", "date_format({}, 'yyyy-MM-dd HH:mm:ss.SSSSSSxxx')", "CAST({} AS timestamptz)"
    if t == "timestamp_ntz":
        return "text", "date_format({}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')", "CAST({} AS timestamp)"
    if t.startswith("array<") and t[6:-1] in simple and t[6:-1] not in ("binary", "void"):
        return simple[t[6:-1]] + "[]", "{}", "{}"
    return "text", "to_json({})", "CAST({} AS jsonb)"  # structs, maps, nested arrays: as JSON


@dataclass
class Staged:
    """The staged source: its PostgreSQL table, and per column (name, staging type, read expression)."""

    table: str
    columns: list[tuple[str, str, str]] = field(default_factory=list)

    def select(self) -> str:
        if not self.columns:
            return "SELECT 1 AS __sm_one"
        reads = ", ".join(f"{read.format(ident(name))} AS {ident(name)}" for name, _, read in self.columns)
        return f"SELECT {reads} FROM {self.table}"


class Transpiler:
    """Spark SQL expressions of a spec as PostgreSQL's, every column named as its table spells it."""

    def __init__(self, target_alias: str, source_alias: str, target_columns: list[str], source_columns: list[str]):
        self.t, self.s = target_alias, source_alias
        self.names = {
            target_alias.lower(): {c.lower(): c for c in target_columns},
            source_alias.lower(): {c.lower(): c for c in source_columns},
        }

    def __call__(self, expression: str, what: str) -> str:
        try:
            tree = sqlglot.parse_one(expression, read="spark")
        except sqlglot.errors.ParseError as e:
            raise ValidationError([f"{what}: {expression!r} cannot be read as Spark SQL ({e})"]) from None
        for column in list(tree.find_all(exp.Column)):
            side = column.table.lower()
            name = column.name.lower()
            if not side:  # unqualified: the side that has it (a name both have is for PostgreSQL to refuse)
                owners = [a for a, cols in self.names.items() if name in cols]
                side = owners[0] if len(owners) == 1 else ""
            if side in self.names and name in self.names[side]:
                alias = self.t if side == self.t.lower() else self.s
                column.set("this", exp.to_identifier(self.names[side][name], quoted=True))
                column.set("table", exp.to_identifier(alias, quoted=True))
        for node in tree.find_all(exp.Struct, exp.JSONFormat):  # Spark's structs and to_json have no PostgreSQL twin
            raise ValidationError(
                [
                    f"{what}: {expression!r} uses {node.key} values, which PostgreSQL compares "
                    f"otherwise; write the condition column by column"
                ]
            )
        return tree.sql(dialect="postgres")


@dataclass
class Plan:
    """The statements of the commit transaction, in order (see module doc)."""

    lock: list[str]
    count: str
    capture: str | None
    merge: str | None
    by_source: list[tuple[str, int, str]]  # (statement, clause index, what)
    merge_clauses: list[int]


def build(spec: dict, table: dict, resolved: dict, staged: Staged, schema: str, name: str) -> Plan:
    """The commit's statements for the resolved clauses of ``spec`` against ``schema.name``."""
    q = _Statements(spec, table, staged, schema, name)
    clauses = resolved["clauses"]
    matched = [cl for cl in clauses if cl["matched"]]
    inserting = [cl for cl in clauses if not cl["matched"] and not cl["by_source"]]
    by_source = [cl for cl in clauses if cl["by_source"]]
    lock = [f"SELECT 1 FROM {q.target} AS {q.t} JOIN {q.using} ON {q.on} FOR UPDATE OF {q.t}"]
    if by_source:
        lock.append(f"SELECT 1 FROM {q.target} AS {q.t} WHERE {q.unmatched_target} FOR UPDATE OF {q.t}")
    whens = [f"WHEN MATCHED AND ({q.cond(cl)}) THEN {q.action(cl)}" for cl in matched]
    whens += [f"WHEN NOT MATCHED AND ({q.cond(cl)}) THEN {q.action(cl)}" for cl in inserting]
    merge = f"MERGE INTO {q.target} AS {q.t} USING {q.using} ON {q.on} {' '.join(whens)}" if whens else None
    return Plan(
        lock=lock,
        count=q.count(matched, inserting, by_source),
        capture=q.capture(by_source) if by_source else None,
        merge=merge,
        by_source=[(q.by_source(cl), cl["index"], cl["label"]) for cl in by_source],
        merge_clauses=[cl["index"] for cl in matched + inserting],
    )


class _Statements:
    """The pieces every statement of the commit shares: the target, the staged source as USING, the ON
    condition, and each clause's condition and action in PostgreSQL's SQL."""

    def __init__(self, spec: dict, table: dict, staged: Staged, schema: str, name: str):
        self.table = table
        self.target = ident(schema, name)
        self.columns = {c["name"].lower(): c["name"] for c in table["columns"]}
        self.tr = Transpiler(
            spec["target_alias"], spec["source_alias"], list(self.columns.values()), [c for c, _, _ in staged.columns]
        )
        self.t, s = ident(spec["target_alias"]), ident(spec["source_alias"])
        self.using = f"({staged.select()}) AS {s}"
        self.on = self.tr(spec["on"], "ON condition")
        self.unmatched_target = f"NOT EXISTS (SELECT 1 FROM {self.using} WHERE {self.on})"

    def cond(self, cl: dict) -> str:
        return self.tr(cl["condition"], f"{cl['label']} condition") if cl["condition"] else "true"

    def assignments(self, cl: dict) -> list[tuple[str, str]]:
        """(quoted column, value) of an UPDATE or INSERT, each value cast to the column's base type
        where the staged value's type would not be assigned as it is."""
        casts = self.table.get("pg_casts") or {}
        out = []
        for c, column in self.columns.items():
            if c in cl["outputs"]:
                v = self.tr(cl["outputs"][c], f"{cl['label']} value for column {column}")
                out.append((ident(column), f"CAST(({v}) AS {casts[c]})" if casts.get(c) else v))
        return out

    def action(self, cl: dict) -> str:
        if cl["action"] == "delete":
            return "DELETE"
        pairs = self.assignments(cl)
        if cl["action"] == "update":
            return "UPDATE SET " + ", ".join(f"{c} = {v}" for c, v in pairs)
        return f"INSERT ({', '.join(c for c, _ in pairs)}) VALUES ({', '.join(v for _, v in pairs)})"

    def chosen(self, group: list[dict]) -> str:
        """The index of the clause each row takes (the first whose condition holds), -1 for none."""
        whens = " ".join(f"WHEN {self.cond(cl)} THEN {cl['index']}" for cl in group)
        return f"CASE {whens} ELSE -1 END" if group else "-1"

    def count(self, matched: list[dict], inserting: list[dict], by_source: list[dict]) -> str:
        parts = [f"SELECT {self.chosen(matched)} AS k FROM {self.target} AS {self.t} JOIN {self.using} ON {self.on}"]
        if inserting:
            parts.append(
                f"SELECT {self.chosen(inserting)} AS k FROM {self.using} "
                f"WHERE NOT EXISTS (SELECT 1 FROM {self.target} AS {self.t} WHERE {self.on})"
            )
        if by_source:
            parts.append("SELECT __sm_k AS k FROM __sm_by_source")
        return f"SELECT k, count(*) AS n FROM ({' UNION ALL '.join(parts)}) AS __sm_c WHERE k >= 0 GROUP BY k"

    def capture(self, by_source: list[dict]) -> str:
        """The target rows no source row matches, with the BY SOURCE clause each takes."""
        return (
            f"CREATE TEMPORARY TABLE __sm_by_source ON COMMIT DROP AS SELECT {self.t}.ctid AS __sm_row, "
            f"{self.chosen(by_source)} AS __sm_k FROM {self.target} AS {self.t} WHERE {self.unmatched_target}"
        )

    def by_source(self, cl: dict) -> str:
        where = f"{self.t}.ctid = __sm_b.__sm_row AND __sm_b.__sm_k = {cl['index']}"
        if cl["action"] == "delete":
            return f"DELETE FROM {self.target} AS {self.t} USING __sm_by_source AS __sm_b WHERE {where}"
        sets = self.action(cl).removeprefix("UPDATE SET ")
        return f"UPDATE {self.target} AS {self.t} SET {sets} FROM __sm_by_source AS __sm_b WHERE {where}"
