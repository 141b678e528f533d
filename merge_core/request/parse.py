"""SQL text -> MergeSpec, with sqlglot.

Spark's dialect first; Trino-style text is accepted too (its expressions are
transpiled to Spark SQL). UPDATE and DELETE become source-less merge specs: their
WHERE becomes ON and their single clause is an unconditional WHEN MATCHED.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from merge_core.common.errors import ParseError, UnsupportedError
from merge_core.request.spec import MergeSpec, WhenClause

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
DIALECTS = ("spark", "trino")


def parse(sql: str, dialect: str | None = None) -> MergeSpec:
    """Parse one MERGE, UPDATE or DELETE statement."""
    if not sql or not sql.strip().rstrip(";").strip():
        raise ParseError("empty statement: expected MERGE INTO, UPDATE or DELETE FROM")
    if dialect is not None and dialect not in DIALECTS:
        raise ParseError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    original = sql
    sql, evolve = _SCHEMA_EVOLUTION.subn("MERGE INTO", sql, count=1)
    tree, used, first_error = None, None, None
    for d in [dialect] if dialect else DIALECTS:
        try:
            statements = [s for s in sqlglot.parse(sql, read=d) if s is not None]
        except sqlglot.errors.SqlglotError as e:
            first_error = first_error or e
            continue
        if len(statements) != 1:
            raise ParseError(f"expected exactly one statement, got {len(statements)}")
        tree, used = statements[0], d
        break
    if tree is None or used is None:
        raise ParseError(syntax_error(sql, first_error))

    if isinstance(tree, (exp.Merge, exp.Update, exp.Delete)):
        tree = _inline_ctes(tree)
    if isinstance(tree, exp.Merge):
        _require_then(sql, used)
        spec = _merge(tree, used)
    elif isinstance(tree, exp.Update):
        spec = _update(tree, used)
    elif isinstance(tree, exp.Delete):
        spec = _delete(tree, used)
    else:
        raise UnsupportedError(f"expected MERGE INTO, UPDATE or DELETE FROM, got {tree.key.upper()} statement")
    spec.sql = original.strip()
    spec.schema_evolution = bool(evolve)
    return spec


STATEMENTS = ("MERGE", "UPDATE", "DELETE", "WITH")
_KEYWORDS = (
    "UPDATE",
    "DELETE",
    "INSERT",
    "SET",
    "VALUES",
    "MATCHED",
    "THEN",
    "WHEN",
    "USING",
    "INTO",
    "WHERE",
    "SOURCE",
)
# the expressions sqlglot names when one lacks an operand, as the user wrote their operator
_OPERATORS = {
    "EQ": "=", "NEQ": "<>", "NullSafeEQ": "<=>", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "And": "AND",
    "Or": "OR", "Not": "NOT", "Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%", "In": "IN",
    "Like": "LIKE", "Between": "BETWEEN", "Is": "IS", "DPipe": "||", "Alias": "AS",
}  # fmt: skip


def syntax_error(sql: str, error: Exception | None) -> str:
    """The parser's complaint in the user's words, one line: where (line, column, the text around it)
    and what was expected; no parser class names. A statement that does not start with MERGE, UPDATE,
    DELETE or WITH is told which it may have meant."""
    first = (sql.split() or [""])[0].upper()
    if first not in STATEMENTS:
        close = difflib.get_close_matches(first, STATEMENTS, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"expected MERGE INTO, UPDATE or DELETE FROM, got {first or 'nothing'!r}{hint}"
    found = (getattr(error, "errors", None) or [{}])[0]
    if not found:
        return f"cannot read the statement: {_ANSI.sub('', str(error)).splitlines()[0]}"
    before = _ANSI.sub("", found.get("start_context") or "").strip()
    at = _ANSI.sub("", found.get("highlight") or "").strip()
    if not (found.get("end_context") or "").strip():  # the parser ran out of statement: say so
        before, at = f"{before} {at}".strip(), ""
    where = f"line {found.get('line')}, column {found.get('col')}"
    around = f" after `{before[-40:]}`" if before else ""
    return f"syntax error at {where}{around}: {_expected(found.get('description') or '', at)}"


def _expected(description: str, at: str) -> str:
    """sqlglot's description of a syntax error, as what the statement lacks at ``at``."""
    missing = re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]+\.(\w+)'>", description)
    if missing:
        side, node = missing.groups()
        op = _OPERATORS.get(node)
        if op:
            where = f" (found `{at}`)" if at else " at the end of the statement"
            return f"a value is missing {'after' if side == 'expression' else 'before'} {op}{where}"
        return f"the {node.lower()} is incomplete" + (f" at `{at}`" if at else "")
    expecting = re.match(r"Expecting (.+)", description)
    if expecting:
        return f"expected {expecting.group(1)}" + (f", found `{at}`" if at else " at the end of the statement")
    unknown = re.match(r"Unknown option (\S+)", description)
    if unknown:
        word = unknown.group(1)
        close = difflib.get_close_matches(word.upper(), _KEYWORDS, n=1, cutoff=0.7)
        return f"unexpected word `{word}`" + (f"; did you mean {close[0]}?" if close else "")
    if description.startswith("Invalid expression"):
        return f"unexpected `{at}`" if at else "unexpected end of the statement"
    got = re.match(r"Expected (.+?) but got <Token token_type: TokenType\.(\w+), text: ([^,]*),", description)
    if got:
        what, kind, text = got.groups()
        keyword = " (a keyword: quote a name that is one with backticks)" if kind.upper() == text.upper() else ""
        return f"expected {what}, found `{text}`{keyword}"
    description = re.sub(r"<Token token_type: [\w.]+, text: ([^,]*),[^>]*>", r"`\1`", description)
    return re.sub(r"<class '[\w.]+\.(\w+)'>", r"\1", description).replace("Expected ", "expected ") + (
        f" at `{at}`" if at else ""
    )


# Spark 4's `MERGE WITH SCHEMA EVOLUTION INTO t ...` (sqlglot does not read it): the option schema_evolution
_SCHEMA_EVOLUTION = re.compile(r"\bMERGE\s+WITH\s+SCHEMA\s+EVOLUTION\s+INTO\b", re.I)


_ACTIONS: dict[TokenType, set[TokenType | None]] = {
    # an action keyword only when followed by what its action needs (a column may be named `update`)
    TokenType.UPDATE: {TokenType.SET},
    TokenType.INSERT: {TokenType.STAR, TokenType.L_PAREN, TokenType.VALUES},
    TokenType.DELETE: {TokenType.WHEN, TokenType.SEMICOLON, None},
}


def _require_then(sql: str, dialect: str) -> None:
    """Refuse a MERGE clause without THEN before its action, as Spark's and Trino's grammars do.

    sqlglot reads `WHEN MATCHED UPDATE SET ...` as if THEN were there, so this looks at the tokens:
    after each clause's WHEN [NOT] MATCHED, outside any CASE ... END in its condition, the first
    THEN or action keyword must be THEN.
    """
    tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(sql)
    clause = 0
    for i, tok in enumerate(tokens):
        if tok.token_type != TokenType.WHEN:
            continue
        nxt = tokens[i + 1 : i + 3]
        words = [t.text.upper() for t in nxt]
        if not (words[:1] == ["MATCHED"] or words[:2] == ["NOT", "MATCHED"]):
            continue  # a CASE WHEN
        clause += 1
        depth = 0
        for j in range(i + 1, len(tokens)):
            t = tokens[j].token_type
            depth += (t == TokenType.CASE) - (t == TokenType.END)
            if depth:
                continue
            if t == TokenType.THEN:
                break
            follows = tokens[j + 1].token_type if j + 1 < len(tokens) else None
            if t in _ACTIONS and follows in _ACTIONS[t]:
                raise ParseError(
                    f"WHEN clause {clause}: THEN is missing before {tokens[j].text.upper()}; "
                    f"write WHEN {' '.join(words[: 2 if words[0] == 'NOT' else 1])} ... "
                    f"THEN {tokens[j].text.upper()} ..."
                )


def _inline_ctes(tree: exp.Expression) -> exp.Expression:
    """A leading WITH (`WITH c AS (...) MERGE INTO t USING c ...`, or before UPDATE/DELETE) becomes
    its queries, inlined where the statement names them: the source, and subqueries in ON, WHERE,
    conditions and values. Each step of the plan then reads a self-contained source query, as
    Spark's own MERGE would read the CTE."""
    with_ = tree.args.get("with_")
    if with_ is None:
        return tree
    if with_.args.get("recursive"):
        raise UnsupportedError(
            "WITH RECURSIVE before MERGE, UPDATE or DELETE is not supported; materialize the recursive query first"
        )
    ctes: dict[str, tuple[exp.Expression, list[Any]]] = {}

    def inline(node: exp.Expression) -> exp.Expression:
        def swap(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Table) and not n.args.get("db") and n.name.lower() in ctes:
                body, columns = ctes[n.name.lower()]
                alias = exp.TableAlias(this=exp.to_identifier(n.alias or n.name), columns=[c.copy() for c in columns])
                return exp.Subquery(this=body.copy(), alias=alias)
            return n

        return node.transform(swap)

    for cte in with_.expressions:
        alias = cte.args.get("alias")
        ctes[cte.alias_or_name.lower()] = (inline(cte.this), list(alias.columns) if alias is not None else [])
    tree = tree.copy()
    target = tree.this
    tree.set("with_", None)
    tree = inline(tree)
    tree.set("this", target)  # the target is a table, even if a CTE shares its name
    return tree


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="spark")


def _table_parts(table: exp.Expression, what: str) -> list[str]:
    if not isinstance(table, exp.Table) or not table.name:
        raise UnsupportedError(f"{what} must be a table name, got: {_sql(table)}")
    parts = [p.name for p in table.parts]
    return parts


def _alias(node: exp.Expression) -> str | None:
    alias = node.args.get("alias")
    return alias.name if alias is not None and alias.name else None


def _key_columns(on: exp.Expression | None, target_alias: str, target_parts: list[str]) -> list[str]:
    """Target columns named in ON: shown with a duplicate-match error."""
    if on is None:
        return []
    names = {target_alias.lower(), target_parts[-1].lower()}
    keys: list[str] = []
    for col in on.find_all(exp.Column):
        if (not col.table or col.table.lower() in names) and col.name not in keys:
            keys.append(col.name)
    return keys


def _assignment_column(target: exp.Expression, target_alias: str, where: str, nested: bool = True) -> str:
    """The assigned column, or a struct field's path ``col.field.sub`` (Spark's ``SET s.c1 = ...``).

    A leading part equal to the target alias qualifies; any other dotted name is a field path
    into a target column, resolved against the table's schema by spark_merge__resolve."""
    if not isinstance(target, (exp.Column, exp.Dot)):
        raise UnsupportedError(f"{where}: assignment target must be a column, got {_sql(target)}")
    parts = [p.name for p in target.parts]
    if len(parts) > 1 and parts[0].lower() == target_alias.lower():
        parts = parts[1:]
    if len(parts) > 1 and not nested:
        raise UnsupportedError(
            f"{where}: an INSERT column cannot be a nested field ({_sql(target)}); "
            f"insert the whole struct, e.g. named_struct(...)"
        )
    return ".".join(parts)


def _merge(tree: exp.Merge, dialect: str) -> MergeSpec:
    target = tree.this
    target_parts = _table_parts(target, "MERGE INTO target")
    target_alias = _alias(target) or target_parts[-1]

    using = tree.args.get("using")
    alias_node = using.args.get("alias") if using is not None else None
    if isinstance(using, (exp.Table, exp.Subquery)) and alias_node is not None and alias_node.columns:
        # USING ... AS s(a, b): the column names live in the alias, so keep it with the relation
        source, kind = f"SELECT * FROM {_sql(using)}", "query"
        source_alias = _alias(using) or ""
    elif isinstance(using, exp.Table):
        source, kind = ".".join(p.name for p in using.parts), "table"
        source_alias = _alias(using) or using.name
    elif isinstance(using, exp.Subquery):
        source, kind = _sql(using.this), "query"
        source_alias = _alias(using) or ""
        if not source_alias:
            raise ParseError("USING (subquery) needs an alias, e.g. USING (SELECT ...) AS s")
    elif isinstance(using, exp.Values):
        source_alias = _alias(using) or ""
        if not source_alias:
            raise ParseError("USING (VALUES ...) needs an alias, e.g. AS s(id, v)")
        source, kind = f"SELECT * FROM {_sql(using)}", "query"
    else:
        raise UnsupportedError(f"USING must be a table, view or subquery, got {_sql(using) if using else 'nothing'}")
    if source_alias.lower() == target_alias.lower():
        raise ParseError(f"target and source share the alias {target_alias!r}; give them different aliases")

    on = tree.args.get("on")
    if not isinstance(on, exp.Expression):
        if tree.args.get("using_cond"):
            raise UnsupportedError("MERGE ... USING (columns) is not supported; write ON t.col = s.col")
        raise ParseError("MERGE needs an ON condition after USING")

    whens = tree.args.get("whens")
    clauses: list[WhenClause] = []
    for i, when in enumerate(whens.expressions if whens else [], start=1):
        clauses.append(_when(when, i, target_alias))
    if not clauses:
        raise ParseError("MERGE needs at least one WHEN clause")
    return MergeSpec(
        target=target_parts,
        target_alias=target_alias,
        source=source,
        source_kind=kind,
        source_alias=source_alias,
        on=_sql(on),
        clauses=clauses,
        kind="merge",
        key_columns=_key_columns(on, target_alias, target_parts),
    )


def _when(when: exp.When, i: int, target_alias: str) -> WhenClause:
    matched = bool(when.args.get("matched"))
    by_source = not matched and bool(when.args.get("source"))
    label = f"WHEN {'MATCHED' if matched else 'NOT MATCHED BY SOURCE' if by_source else 'NOT MATCHED'} clause {i}"
    cond = when.args.get("condition")
    condition = _sql(cond) if cond is not None else None
    then = when.args.get("then")
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
        return WhenClause(matched=matched, by_source=by_source, action="delete", condition=condition)
    if isinstance(then, exp.Update):
        items = then.expressions
        if len(items) == 1 and isinstance(items[0], exp.Star):
            return WhenClause(matched=matched, by_source=by_source, action="update", condition=condition, star=True)
        pairs = []
        for item in items:
            if not isinstance(item, exp.EQ):
                raise UnsupportedError(f"{label}: cannot read assignment {_sql(item)}")
            pairs.append((_assignment_column(item.this, target_alias, label), _sql(item.expression)))
        return WhenClause(matched=matched, by_source=by_source, action="update", condition=condition, assignments=pairs)
    if isinstance(then, exp.Insert):
        if isinstance(then.this, exp.Star):
            return WhenClause(matched=matched, by_source=by_source, action="insert", condition=condition, star=True)
        cols = []
        if isinstance(then.this, exp.Tuple):
            cols = [_assignment_column(c, target_alias, label, nested=False) for c in then.this.expressions]
        values = then.expression
        if not isinstance(values, exp.Tuple):
            raise UnsupportedError(f"{label}: INSERT needs VALUES (...)")
        return WhenClause(
            matched=matched,
            by_source=by_source,
            action="insert",
            condition=condition,
            insert_columns=cols,
            insert_values=[_sql(v) for v in values.expressions],
        )
    raise UnsupportedError(f"{label}: unsupported action {_sql(then) if then is not None else 'nothing'}")


def _update(tree: exp.Update, dialect: str) -> MergeSpec:
    target = tree.this
    parts = _table_parts(target, "UPDATE target")
    alias = _alias(target) or parts[-1]
    if tree.args.get("from_") or tree.args.get("from"):
        raise UnsupportedError("UPDATE ... FROM is not supported; write it as MERGE INTO ... USING")
    pairs = []
    for item in tree.expressions:
        if not isinstance(item, exp.EQ):
            raise UnsupportedError(f"UPDATE SET: cannot read assignment {_sql(item)}")
        pairs.append((_assignment_column(item.this, alias, "UPDATE SET"), _sql(item.expression)))
    where = tree.args.get("where")
    return MergeSpec(
        target=parts,
        target_alias=alias,
        on=_sql(where.this) if where is not None else "true",
        clauses=[WhenClause(matched=True, action="update", assignments=pairs)],
        kind="update",
    )


def _delete(tree: exp.Delete, dialect: str) -> MergeSpec:
    target = tree.this
    parts = _table_parts(target, "DELETE FROM target")
    alias = _alias(target) or parts[-1]
    if tree.args.get("using"):
        raise UnsupportedError("DELETE ... USING is not supported; write it as MERGE ... WHEN MATCHED THEN DELETE")
    where = tree.args.get("where")
    return MergeSpec(
        target=parts,
        target_alias=alias,
        on=_sql(where.this) if where is not None else "true",
        clauses=[WhenClause(matched=True, action="delete")],
        kind="delete",
    )


def source_tables(spec: MergeSpec) -> list[str]:
    """Tables a spec reads besides its target: the source (a table, or those of its query) and those
    of subqueries in ON, conditions and values. For lineage (OpenLineage inputs); names as written."""
    found = [spec.source] if spec.source_kind == "table" and spec.source else []
    texts = [spec.source] if spec.source_kind == "query" and spec.source else []
    texts += [
        f"SELECT {e}"
        for e in [spec.on]
        + [c.condition for c in spec.clauses]
        + [v for c in spec.clauses for _, v in c.assignments]
        + [v for c in spec.clauses for v in c.insert_values]
        if e
    ]
    for text in texts:
        try:
            tree = sqlglot.parse_one(text, read="spark")
        except sqlglot.errors.SqlglotError:
            continue
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            name = ".".join(p.name for p in table.parts)
            if name and name.lower() not in ctes and name not in found:
                found.append(name)
    target = spec.target_name.lower()
    return [n for n in found if n.lower() != target]


def on_equalities(on: str, target_alias: str, source_alias: str) -> list[dict]:
    """Conjuncts of ON of the form ``target.col = source.col`` (or ``<=>``).

    Any target row a source row matches satisfies each of them, so the plan may narrow the
    target scans by the source's values of those columns (their range, or for a partition
    column their list) without changing a result. Anything else in ON is ignored here.
    """
    try:
        tree = sqlglot.parse_one(on, read="spark")
    except sqlglot.errors.SqlglotError:
        return []
    conjuncts, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, exp.Paren):
            todo.append(node.this)
        elif isinstance(node, exp.And):
            todo += [node.right, node.left]
        else:
            conjuncts.append(node)
    t, s = target_alias.lower(), source_alias.lower()
    found: list[dict] = []
    for node in conjuncts:
        if not isinstance(node, (exp.EQ, exp.NullSafeEQ)):
            continue
        sides = {
            (side.table or "").lower(): side.name for side in (node.left, node.right) if isinstance(side, exp.Column)
        }
        if len(sides) == 2 and t in sides and s in sides:
            pair = {"target": sides[t], "source": sides[s], "null_safe": isinstance(node, exp.NullSafeEQ)}
            if pair not in found:
                found.append(pair)
    return found


def is_direct_assignment(column: str, value: str, source_alias: str) -> bool:
    """``value`` is the source column named like the target column ``column`` (``s.c`` for ``c``),
    qualified by the source alias: what Spark 4's ``MERGE WITH SCHEMA EVOLUTION`` calls a direct
    assignment, the only kind that evolves the target (never ``s.c + 1`` or ``s.other``)."""
    if "." in column:
        return False
    try:
        node = sqlglot.parse_one(value, read="spark")
    except sqlglot.errors.SqlglotError:
        return False
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Column) or node.name.lower() != column.lower():
        return False
    return ".".join(p.name for p in node.parts[:-1]).lower() == source_alias.lower()


def direct_assignments(spec: dict):
    """(clause, "assignments" or "insert", position, column) of each direct assignment of an explicit
    clause (``SET c = s.c``, ``INSERT (c) VALUES (s.c)``); ``UPDATE SET *`` and ``INSERT *`` assign
    every source column directly and are handled with the star."""
    for clause in spec["clauses"]:
        if clause.get("star") or clause.get("by_source"):
            continue
        for i, (column, value) in enumerate(clause.get("assignments") or []):
            if is_direct_assignment(column, value, spec["source_alias"]):
                yield clause, "assignments", i, column
        for i, (column, value) in enumerate(
            zip(clause.get("insert_columns") or [], clause.get("insert_values") or [], strict=False)
        ):
            if is_direct_assignment(column, value, spec["source_alias"]):
                yield clause, "insert", i, column


def direct_source_columns(spec: dict) -> list[str]:
    """The target columns explicit clauses assign directly (see direct_assignments), lower-cased,
    in order of appearance: the ones schema evolution adds when the table lacks them."""
    found: list[str] = []
    for _, _, _, column in direct_assignments(spec):
        if column.lower() not in found:
            found.append(column.lower())
    return found


def nested_field_paths(type_text: str) -> set[str]:
    """Every struct field inside a Spark type (``struct<a:int,b:array<struct<c:int>>>`` gives
    ``a``, ``b``, ``b.element.c``), lower-cased, reached through arrays (``element``) and maps
    (``key``, ``value``); empty for an atomic type or text sqlglot cannot read."""
    try:
        root = exp.DataType.build(type_text, dialect="spark")
    except (sqlglot.errors.SqlglotError, ValueError):
        return set()
    paths: set[str] = set()

    def walk(node: exp.DataType, prefix: str) -> None:
        if node.this == exp.DataType.Type.STRUCT:
            for field in node.expressions:
                if isinstance(field, exp.ColumnDef) and isinstance(field.args.get("kind"), exp.DataType):
                    path = prefix + field.name.lower()
                    paths.add(path)
                    walk(field.args["kind"], path + ".")
        elif node.this == exp.DataType.Type.ARRAY and node.expressions:
            walk(node.expressions[0], prefix + "element.")
        elif node.this == exp.DataType.Type.MAP and len(node.expressions) == 2:
            walk(node.expressions[0], prefix + "key.")
            walk(node.expressions[1], prefix + "value.")

    walk(root, "")
    return paths


def _unqualified_columns(tree: Any, alias: str) -> list[exp.Column]:
    """The column references of ``tree`` not qualified by ``alias``, outside subqueries (inside one
    a name is first its own FROM's: Spark's rule, left to Spark)."""
    return [
        c
        for c in tree.find_all(exp.Column)
        if c.parts and c.parts[0].name.lower() != alias.lower() and not c.find_ancestor(exp.Select)
    ]


def _qualified(text: str, alias: str, columns: set[str]) -> str:
    """``text`` with each unqualified reference to one of ``columns`` (lower-cased names; a struct
    field path counts by its column) qualified by ``alias``; ``text`` itself when none is."""
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.SqlglotError:
        return text
    changed = False
    for column in _unqualified_columns(tree, alias):
        parts = [p.name for p in column.parts]
        if parts[0].lower() in columns:
            quoted = ".".join(exp.to_identifier(p, quoted=True).sql(dialect="spark") for p in [alias] + parts)
            replacement = sqlglot.parse_one(quoted, read="spark")
            if column is tree:
                tree = replacement
            else:
                column.replace(replacement)
            changed = True
    return tree.sql(dialect="spark") if changed else text


def qualify_one_sided(spec: dict, source_columns, target_columns: list[str]) -> None:
    """Qualify the names a one-sided clause leaves unqualified, in place.

    Spark resolves a WHEN NOT MATCHED clause's condition and INSERT values against the source
    only, and a WHEN NOT MATCHED BY SOURCE clause's condition and SET values against the target
    only, so ``INSERT (id) VALUES (id)`` means ``s.id`` even when the target has an ``id`` too.
    The plan evaluates every clause over the join of both sides, where such a name would be
    ambiguous: so it is qualified with that side's alias here. ``source_columns`` is called (one
    DESCRIBE) only when some NOT MATCHED clause has an unqualified name."""
    known: dict[str, set[str]] = {"target": {c.lower() for c in target_columns}}

    def names(side: str) -> set[str]:
        if side not in known:
            known[side] = {c.lower() for c in source_columns()}
        return known[side]

    def unqualified(text: str | None, alias: str) -> bool:
        try:
            tree = sqlglot.parse_one(text, read="spark") if text else None
        except sqlglot.errors.SqlglotError:
            return False
        return tree is not None and bool(_unqualified_columns(tree, alias))

    for clause in spec["clauses"]:
        if clause.get("matched"):
            continue
        side = "target" if clause.get("by_source") else "source"
        alias = spec["target_alias"] if side == "target" else spec["source_alias"]
        texts = (
            [clause.get("condition")]
            + [v for _, v in clause.get("assignments") or []]
            + list(clause.get("insert_values") or [])
        )
        if not any(unqualified(t, alias) for t in texts):
            continue
        columns = names(side)
        if clause.get("condition"):
            clause["condition"] = _qualified(clause["condition"], alias, columns)
        clause["assignments"] = [[c, _qualified(v, alias, columns)] for c, v in clause.get("assignments") or []]
        clause["insert_values"] = [_qualified(v, alias, columns) for v in clause.get("insert_values") or []]
