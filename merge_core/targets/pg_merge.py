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
merge can touch are locked, so the metrics are PostgreSQL's. Every PostgreSQL statement spark-merge
issues is built here, as sqlglot expressions rendered in PostgreSQL's dialect: names are quoted and
the user's expressions transpiled by sqlglot, none is pasted into a string.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from merge_core.common.errors import ValidationError

PG = "postgres"
BY_SOURCE = "__sm_by_source"  # the NOT MATCHED BY SOURCE rows, captured in the transaction


def name(text: str) -> exp.Identifier:
    return exp.to_identifier(text, quoted=True)


def pg_table(*parts: str, alias: str | None = None) -> exp.Table:
    """schema.table (or one name) as a PostgreSQL table, quoted; ``alias`` as its AS."""
    *db, this = parts
    return exp.Table(
        this=name(this),
        db=name(db[0]) if db else None,
        alias=exp.TableAlias(this=name(alias)) if alias else None,
    )


def ident(*parts: str) -> str:
    """A PostgreSQL identifier (schema.table, or one name), quoted: for the JDBC writer and to_regclass."""
    return pg_table(*parts).sql(dialect=PG)


# Spark's type of a staged source column -> (PostgreSQL column type of the staging table, the Spark
# expression that produces the value, the PostgreSQL type the value is read back as; "" = as staged).
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
        return simple[t], "{}", ""
    if t.startswith(("varchar", "char")):
        return "text", "{}", ""
    if t.startswith("decimal"):
        return "numeric", "{}", ""
    if t == "date":
        return "text", "CAST({} AS STRING)", "date"
    if t in ("timestamp", "timestamp_ltz"):
        return "text", "date_format({}, 'yyyy-MM-dd HH:mm:ss.SSSSSSxxx')", "timestamptz"
    if t == "timestamp_ntz":
        return "text", "date_format({}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')", "timestamp"
    if t.startswith("array<") and t[6:-1] in simple and t[6:-1] not in ("binary", "void"):
        return simple[t[6:-1]] + "[]", "{}", ""
    return "text", "to_json({})", "jsonb"  # structs, maps, nested arrays: as JSON


def _type(pg_type: str) -> exp.DataType:
    """A PostgreSQL type as PostgreSQL's catalog spells it (format_type): an enum's or a domain's name
    passes through as it is."""
    return exp.DataType.build(pg_type, dialect=PG, udt=True)


@dataclass
class Staged:
    """The staged source: its PostgreSQL table (quoted), and per column (name, staging type, read-back type)."""

    table: str
    columns: list[tuple[str, str, str]] = field(default_factory=list)

    def select(self) -> exp.Select:
        if not self.columns:
            return exp.select(exp.alias_(exp.Literal.number(1), "__sm_one"))
        reads = []
        for column, _, read in self.columns:
            value: exp.Expr = exp.column(name(column))
            reads.append(exp.alias_(exp.cast(value, _type(read)) if read else value, name(column)))
        return exp.select(*reads).from_(exp.to_table(self.table, dialect=PG))


def create_table(qualified: str, columns: list[tuple[str, str]]) -> str:
    """CREATE TABLE of the staging table: (name, PostgreSQL type) per column."""
    schema = exp.Schema(
        this=exp.to_table(qualified, dialect=PG),
        expressions=[exp.ColumnDef(this=name(c), kind=_type(t)) for c, t in columns],
    )
    return exp.Create(this=schema, kind="TABLE").sql(dialect=PG)


def drop_table(qualified: str) -> str:
    return exp.Drop(tables=[exp.to_table(qualified, dialect=PG)], kind="TABLE", exists=True).sql(dialect=PG)


HISTORY_COLUMNS = [("merge_id", "text", "PRIMARY KEY"), ("target", "text", "NOT NULL"),
                   ("finished_at", "timestamptz", "NOT NULL"), ("entry", "jsonb", "NOT NULL")]  # fmt: skip


def create_history(qualified: str) -> str:
    """The history table of a schema's merges, if it is not there yet."""
    constraint = {"PRIMARY KEY": exp.PrimaryKeyColumnConstraint(), "NOT NULL": exp.NotNullColumnConstraint()}
    columns = [
        exp.ColumnDef(this=name(c), kind=_type(t), constraints=[exp.ColumnConstraint(kind=constraint[k])])
        for c, t, k in HISTORY_COLUMNS
    ]
    schema = exp.Schema(this=exp.to_table(qualified, dialect=PG), expressions=columns)
    return exp.Create(this=schema, kind="TABLE", exists=True).sql(dialect=PG)


def insert_history(qualified: str) -> str:
    """One history row: parameters merge_id, target, entry (JSON); finished at the transaction's time."""
    values = exp.Tuple(expressions=[exp.Placeholder(), exp.Placeholder(), exp.CurrentTimestamp(), exp.Placeholder()])
    columns = exp.Schema(this=exp.to_table(qualified, dialect=PG), expressions=[name(c) for c, _, _ in HISTORY_COLUMNS])
    return exp.Insert(this=columns, expression=exp.Values(expressions=[values])).sql(dialect=PG)


def select_history(qualified: str) -> str:
    """The entries of one target, newest first: parameters target, limit."""
    query = (
        exp.select(name("entry"))
        .from_(exp.to_table(qualified, dialect=PG))
        .where(exp.EQ(this=exp.column(name("target")), expression=exp.Placeholder()))
        .order_by(exp.Ordered(this=exp.column(name("finished_at")), desc=True))
    )
    return query.limit(exp.Placeholder()).sql(dialect=PG)


class Transpiler:
    """Spark SQL expressions of a spec as PostgreSQL's, every column named as its table spells it."""

    def __init__(self, target_alias: str, source_alias: str, target_columns: list[str], source_columns: list[str]):
        self.t, self.s = target_alias, source_alias
        self.names = {
            target_alias.lower(): {c.lower(): c for c in target_columns},
            source_alias.lower(): {c.lower(): c for c in source_columns},
        }

    def __call__(self, expression: str, what: str) -> exp.Expr:
        try:
            tree = sqlglot.parse_one(expression, read="spark")
        except sqlglot.errors.ParseError as e:
            raise ValidationError([f"{what}: {expression!r} cannot be read as Spark SQL ({e})"]) from None
        for column in list(tree.find_all(exp.Column)):
            side = column.table.lower()
            lowered = column.name.lower()
            if not side:  # unqualified: the side that has it (a name both have is for PostgreSQL to refuse)
                owners = [a for a, cols in self.names.items() if lowered in cols]
                side = owners[0] if len(owners) == 1 else ""
            if side in self.names and lowered in self.names[side]:
                alias = self.t if side == self.t.lower() else self.s
                column.set("this", name(self.names[side][lowered]))
                column.set("table", name(alias))
        for node in tree.find_all(exp.Struct, exp.JSONFormat):  # Spark's structs and to_json have no PostgreSQL twin
            raise ValidationError(
                [
                    f"{what}: {expression!r} uses {node.key} values, which PostgreSQL compares "
                    f"otherwise; write the condition column by column"
                ]
            )
        return tree


@dataclass
class Plan:
    """The statements of the commit transaction, in order (see module doc)."""

    lock: list[str]
    count: str
    capture: str | None
    merge: str | None
    by_source: list[tuple[str, int, str]]  # (statement, clause index, what)
    merge_clauses: list[int]
    release: str | None = None  # the capture's table, dropped before the commit


def build(spec: dict, table: dict, resolved: dict, staged: Staged, schema: str, name: str) -> Plan:
    """The commit's statements for the resolved clauses of ``spec`` against ``schema.name``."""
    q = _Statements(spec, table, staged, schema, name)
    clauses = resolved["clauses"]
    matched = [cl for cl in clauses if cl["matched"]]
    inserting = [cl for cl in clauses if not cl["matched"] and not cl["by_source"]]
    by_source = [cl for cl in clauses if cl["by_source"]]
    lock = [q.lock_rows(exp.select("1").from_(q.aliased()).join(q.using(), on=q.on()))]
    if by_source:
        lock.append(q.lock_rows(exp.select("1").from_(q.aliased()).where(q.unmatched_target())))
    whens = [q.when(True, cl) for cl in matched] + [q.when(False, cl) for cl in inserting]
    merge = exp.Merge(this=q.aliased(), using=q.using(), on=q.on(), whens=exp.Whens(expressions=whens))
    return Plan(
        lock=lock,
        count=q.count(matched, inserting, by_source),
        capture=q.capture(by_source) if by_source else None,
        merge=merge.sql(dialect=PG) if whens else None,
        by_source=[(q.by_source(cl), cl["index"], cl["label"]) for cl in by_source],
        merge_clauses=[cl["index"] for cl in matched + inserting],
        release=exp.Drop(tables=[pg_table(BY_SOURCE)], kind="TABLE").sql(dialect=PG) if by_source else None,
    )


class _Statements:
    """The pieces every statement of the commit shares: the target, the staged source as USING, the ON
    condition, and each clause's condition and action in PostgreSQL's SQL. Each piece is a new tree
    (sqlglot's builders change the trees they are given)."""

    def __init__(self, spec: dict, table: dict, staged: Staged, schema: str, name: str):
        self.table = table
        self.schema, self.name = schema, name
        self.columns = {c["name"].lower(): c["name"] for c in table["columns"]}
        self.tr = Transpiler(
            spec["target_alias"], spec["source_alias"], list(self.columns.values()), [c for c, _, _ in staged.columns]
        )
        self.t, self.s = spec["target_alias"], spec["source_alias"]
        self.staged = staged
        self._on = self.tr(spec["on"], "ON condition")

    def aliased(self) -> exp.Table:
        return pg_table(self.schema, self.name, alias=self.t)

    def using(self) -> exp.Subquery:
        return exp.Subquery(this=self.staged.select(), alias=exp.TableAlias(this=name(self.s)))

    def on(self) -> exp.Expr:
        return self._on.copy()

    def unmatched_target(self) -> exp.Expr:
        return exp.not_(exp.Exists(this=exp.select("1").from_(self.using()).where(self.on())))

    def lock_rows(self, query: exp.Select) -> str:
        query.set("locks", [exp.Lock(update=True, expressions=[pg_table(self.t)])])
        return query.sql(dialect=PG)

    def cond(self, cl: dict) -> exp.Expr:
        return self.tr(cl["condition"], f"{cl['label']} condition") if cl["condition"] else exp.true()

    def assignments(self, cl: dict) -> list[tuple[exp.Column, exp.Expr]]:
        """(column, value) of an UPDATE or INSERT, each value cast to the column's base type where the
        staged value's type would not be assigned as it is."""
        casts = self.table.get("pg_casts") or {}
        out = []
        for c, column in self.columns.items():
            if c in cl["outputs"]:
                v = self.tr(cl["outputs"][c], f"{cl['label']} value for column {column}")
                out.append((exp.column(name(column)), exp.cast(exp.paren(v), _type(casts[c])) if casts.get(c) else v))
        return out

    def sets(self, cl: dict) -> list[exp.Expr]:
        return [exp.EQ(this=c, expression=v) for c, v in self.assignments(cl)]

    def when(self, matched: bool, cl: dict) -> exp.When:
        if cl["action"] == "delete":
            then: exp.Expr = exp.var("DELETE")
        elif cl["action"] == "update":
            then = exp.Update(expressions=self.sets(cl))
        else:
            pairs = self.assignments(cl)
            then = exp.Insert(
                this=exp.Tuple(expressions=[c for c, _ in pairs]),
                expression=exp.Tuple(expressions=[v for _, v in pairs]),
            )
        return exp.When(matched=matched, source=False, condition=exp.paren(self.cond(cl)), then=then)

    def chosen(self, group: list[dict]) -> exp.Expr:
        """The index of the clause each row takes (the first whose condition holds), -1 for none."""
        if not group:
            return exp.Literal.number(-1)
        ifs = [exp.If(this=self.cond(cl), true=exp.Literal.number(cl["index"])) for cl in group]
        return exp.Case(ifs=ifs, default=exp.Literal.number(-1))

    def count(self, matched: list[dict], inserting: list[dict], by_source: list[dict]) -> str:
        parts = [
            exp.select(exp.alias_(self.chosen(matched), "k")).from_(self.aliased()).join(self.using(), on=self.on())
        ]
        if inserting:
            target_row = exp.select("1").from_(self.aliased()).where(self.on())
            parts.append(
                exp.select(exp.alias_(self.chosen(inserting), "k"))
                .from_(self.using())
                .where(exp.not_(exp.Exists(this=target_row)))
            )
        if by_source:
            parts.append(exp.select(exp.alias_(exp.column("__sm_k"), "k")).from_(pg_table(BY_SOURCE)))
        union: exp.Query = parts[0]
        for part in parts[1:]:
            union = exp.union(union, part, distinct=False)
        counted = exp.Subquery(this=union, alias=exp.TableAlias(this=exp.to_identifier("__sm_c")))
        query = exp.select("k", exp.alias_(exp.Count(this=exp.Star()), "n")).from_(counted)
        return query.where("k >= 0").group_by("k").sql(dialect=PG)

    def capture(self, by_source: list[dict]) -> str:
        """The target rows no source row matches, with the BY SOURCE clause each takes, into a
        temporary table (dropped by the plan's release, before the commit)."""
        rows = (
            exp.select(
                exp.alias_(exp.column("ctid", table=name(self.t)), "__sm_row"),
                exp.alias_(self.chosen(by_source), "__sm_k"),
            )
            .from_(self.aliased())
            .where(self.unmatched_target())
        )
        temporary = exp.Properties(expressions=[exp.TemporaryProperty()])
        return exp.Create(this=pg_table(BY_SOURCE), kind="TABLE", expression=rows, properties=temporary).sql(dialect=PG)

    def by_source(self, cl: dict) -> str:
        captured = pg_table(BY_SOURCE, alias="__sm_b")
        where = exp.and_(
            exp.EQ(this=exp.column("ctid", table=name(self.t)), expression=exp.column("__sm_row", table="__sm_b")),
            exp.EQ(this=exp.column("__sm_k", table="__sm_b"), expression=exp.Literal.number(cl["index"])),
        )
        if cl["action"] == "delete":
            return exp.Delete(this=self.aliased(), using=[captured], where=exp.Where(this=where)).sql(dialect=PG)
        update = exp.Update(this=self.aliased(), expressions=self.sets(cl), from_=exp.From(this=captured))
        return update.where(where).sql(dialect=PG)
