"""Schema evolution's rules about struct columns (``MERGE WITH SCHEMA EVOLUTION``), beside the
columns it adds (``spark_merge__evolved_columns``).

Spark 4 evolves a MERGE's target through its catalog from the columns and fields the merge
assigns directly (``UPDATE SET *``, ``INSERT *``, ``SET c = s.c``), and leaves out the changes
the table does not support. A parquet table in Spark's catalog supports new top-level columns
only: Spark itself refuses ``ALTER TABLE ... ADD COLUMNS (s.f ...)`` (UNSUPPORTED_FEATURE) and
``ALTER COLUMN ... TYPE`` (NOT_SUPPORTED_CHANGE_COLUMN) on it. So here:

- a directly assigned struct with a field the column lacks is refused before anything changes
  (Spark's write would refuse the extra field once the change is left out);
- a directly assigned struct that lacks some of the column's fields (at any depth, inside arrays
  and maps too) is stored as Spark stores it under schema evolution: an INSERT stores the missing
  fields NULL (a NULL struct stays NULL); an UPDATE assigns the fields the source has and keeps the
  target's value of the others, as if each field were assigned (SET st.a = s.st.a);
- any other type difference is stored under store assignment, as Spark does once the type
  change is left out (a value that does not fit fails, nothing written).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from merge_core.request.parse import direct_assignments, direct_source_columns, nested_field_paths


def _type(text: str) -> exp.DataType | None:
    try:
        return exp.DataType.build(text, dialect="spark")
    except (sqlglot.errors.SqlglotError, ValueError):
        return None


def _fields(struct: exp.DataType) -> dict[str, tuple[str, exp.DataType]]:
    """{lower name: (name, type)} of a struct type's fields."""
    return {
        f.name.lower(): (f.name, f.args["kind"])
        for f in struct.expressions
        if isinstance(f, exp.ColumnDef) and isinstance(f.args.get("kind"), exp.DataType)
    }


def extra_field_errors(table: dict, assigned: list[list[str]]) -> list[str]:
    """For each directly assigned source column ([name, type]) whose struct has fields the table's
    column lacks, the error saying why they cannot be added."""
    errors = []
    for name, source_type in assigned:
        column = table["columns_by_name"].get(name.lower())
        if column is None:
            continue
        extra = sorted(nested_field_paths(source_type) - nested_field_paths(column["type"]))
        if extra:
            fields = ", ".join(f"{column['name']}.{path}" for path in extra)
            errors.append(
                f"schema evolution: source column {name} has field(s) {fields} that column {column['name']} "
                f"({column['type']}) of {table['name']} lacks; a parquet table in Spark's catalog takes new "
                f"top-level columns only (Spark refuses ALTER TABLE ... ADD COLUMNS ({fields.split(', ')[0]} ...) "
                f"on it), so a new field inside a struct cannot be added: assign the fields the column has "
                f"(SET {column['name']}.<field> = ...), or recreate the table with the wider struct"
            )
    return errors


def _field(ref: exp.Expression, name: str) -> exp.Expression:
    return exp.Dot(this=ref.copy(), expression=exp.to_identifier(name, quoted=True))


def _is(t: exp.DataType | None, kind) -> bool:
    return t is not None and t.this == kind


def _lambda(body: exp.Expression, *names: str) -> exp.Lambda:
    return exp.Lambda(this=body, expressions=[exp.to_identifier(n) for n in names])


def _inserted(ref: exp.Expression, target: exp.DataType, source: exp.DataType, depth: int = 0) -> exp.Expression | None:
    """`ref` (of type `source`) as a new value of type `target`: each struct field the source lacks
    NULL, matched by name, at any depth, through arrays (``transform``) and maps (``transform_keys``,
    ``transform_values``); a NULL struct stays NULL. None when nothing is missing."""
    T = exp.DataType.Type
    if _is(target, T.STRUCT) and _is(source, T.STRUCT):
        have, fields = _fields(source), _fields(target)
        if set(fields) <= set(have) and all(
            _inserted(_field(ref, have[k][0]), t, have[k][1], depth) is None for k, (_, t) in fields.items()
        ):
            return None
        values: list[exp.Expression] = []
        for key, (name, field_type) in fields.items():
            values.append(exp.Literal.string(name))
            if key not in have:
                values.append(exp.Cast(this=exp.Null(), to=field_type.copy()))
            else:
                inner = _field(ref, have[key][0])
                values.append(_inserted(inner, field_type, have[key][1], depth) or inner)
        struct = exp.Anonymous(this="named_struct", expressions=values)
        return exp.If(this=exp.Is(this=ref.copy(), expression=exp.Null()), true=exp.Null(), false=struct)
    if _is(target, T.ARRAY) and _is(source, T.ARRAY) and target.expressions and source.expressions:
        x = f"__sm_x{depth}"
        element = _inserted(exp.column(x), target.expressions[0], source.expressions[0], depth + 1)
        return (
            None if element is None else exp.Anonymous(this="transform", expressions=[ref.copy(), _lambda(element, x)])
        )
    if _is(target, T.MAP) and _is(source, T.MAP) and len(target.expressions) == 2 == len(source.expressions):
        k, v = f"__sm_k{depth}", f"__sm_v{depth}"
        keys = _inserted(exp.column(k), target.expressions[0], source.expressions[0], depth + 1)
        values_ = _inserted(exp.column(v), target.expressions[1], source.expressions[1], depth + 1)
        out = ref.copy()
        if keys is not None:
            out = exp.Anonymous(this="transform_keys", expressions=[out, _lambda(keys, k, v)])
        if values_ is not None:
            out = exp.Anonymous(this="transform_values", expressions=[out, _lambda(values_, k, v)])
        return None if keys is None and values_ is None else out
    return None


def _updated(
    ref: exp.Expression, old: exp.Expression, target: exp.DataType, source: exp.DataType
) -> exp.Expression | None:
    """`ref` (of type `source`) assigned over the target's value `old` by UPDATE: as Spark assigns a
    struct with fewer fields, field by field (applyFieldAssignments): each field the source has
    takes its value (a NULL source struct giving NULL fields), each field it lacks keeps the
    target's; inside arrays and maps there is no old element to keep, so those are filled as an
    INSERT fills them. None when nothing is missing."""
    if not (_is(target, exp.DataType.Type.STRUCT) and _is(source, exp.DataType.Type.STRUCT)):
        return _inserted(ref, target, source)
    if _inserted(ref, target, source) is None:
        return None
    have = _fields(source)
    values: list[exp.Expression] = []
    for key, (name, field_type) in _fields(target).items():
        values.append(exp.Literal.string(name))
        if key not in have:
            values.append(_field(old, name))
        else:
            inner = _field(ref, have[key][0])
            values.append(_updated(inner, _field(old, name), field_type, have[key][1]) or inner)
    return exp.Anonymous(this="named_struct", expressions=values)


def missing_field_values(
    table: dict, assigned: list[list[str]], source_alias: str, target_alias: str
) -> dict[str, dict[str, str]]:
    """{"insert": {lower column: value}, "update": {...}} for each directly assigned source column
    whose type lacks some struct fields of the column's (at any depth, through arrays and maps):
    INSERT stores the missing fields NULL; UPDATE keeps the target's value of a missing field of a
    struct (not of one inside an array or map), as Spark does under schema evolution."""
    values: dict[str, dict[str, str]] = {"insert": {}, "update": {}}
    for name, source_type in assigned:
        column = table["columns_by_name"].get(name.lower())
        source, target = _type(source_type), _type(column["type"]) if column else None
        if source is None or target is None or not nested_field_paths(column["type"]) - nested_field_paths(source_type):
            continue
        ref = exp.Column(this=exp.to_identifier(name, quoted=True), table=exp.to_identifier(source_alias, quoted=True))
        old = exp.Column(
            this=exp.to_identifier(column["name"], quoted=True), table=exp.to_identifier(target_alias, quoted=True)
        )
        inserted, updated = _inserted(ref, target, source), _updated(ref, old, target, source)
        if inserted is not None:
            values["insert"][name.lower()] = inserted.sql(dialect="spark")
        if updated is not None:
            values["update"][name.lower()] = updated.sql(dialect="spark")
    return values


def evolve_spec(spec: dict, table: dict, types: list[list[str]]) -> dict:
    """Schema evolution's part of ``spec``, in place, for a source of columns ``types`` ([name,
    type]): ``star_columns`` (what UPDATE SET * and INSERT * assign) and, for a struct the source
    gives with fewer fields than the column, the values stored instead (``evolved_values``, and in
    the direct assignments themselves). Returns ``{'direct', 'errors'}``: the target columns the
    explicit clauses assign directly, and why a struct with fields the column lacks cannot be stored.
    The columns the table lacks are the macros' (spark_merge__evolved_columns)."""
    spec["star_columns"] = [name.lower() for name, _ in types]
    direct = direct_source_columns(spec)
    star = any(c["star"] for c in spec["clauses"])
    assigned = [t for t in types if star or t[0].lower() in direct]
    filled = missing_field_values(table, assigned, spec["source_alias"], spec["target_alias"])
    spec["evolved_values"] = filled
    for clause, kind, i, column in list(direct_assignments(spec)):
        if kind == "assignments" and column.lower() in filled["update"]:
            clause["assignments"][i] = [column, filled["update"][column.lower()]]
        elif kind == "insert" and column.lower() in filled["insert"]:
            clause["insert_values"][i] = filled["insert"][column.lower()]
    return {"direct": direct, "errors": extra_field_errors(table, assigned)}
