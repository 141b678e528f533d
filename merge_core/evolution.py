"""Schema evolution's rules about struct columns (``MERGE WITH SCHEMA EVOLUTION``), beside the
columns it adds (``spark_merge__evolved_columns``).

Spark 4 evolves a MERGE's target through its catalog from the columns and fields the merge
assigns directly (``UPDATE SET *``, ``INSERT *``, ``SET c = s.c``), and leaves out the changes
the table does not support. A parquet table in Spark's catalog supports new top-level columns
only: Spark itself refuses ``ALTER TABLE ... ADD COLUMNS (s.f ...)`` (UNSUPPORTED_FEATURE) and
``ALTER COLUMN ... TYPE`` (NOT_SUPPORTED_CHANGE_COLUMN) on it. So here:

- a directly assigned struct with a field the column lacks is refused before anything changes
  (Spark's write would refuse the extra field once the change is left out);
- a directly assigned struct that lacks some of the column's fields is stored with those fields
  NULL (Spark fills them under schema evolution), a NULL struct staying NULL;
- any other type difference is stored under store assignment, as Spark does once the type
  change is left out (a value that does not fit fails, nothing written).
"""
from __future__ import annotations

import sqlglot
from sqlglot import exp

from .parse import nested_field_paths


def _type(text: str) -> exp.DataType | None:
    try:
        return exp.DataType.build(text, dialect="spark")
    except (sqlglot.errors.SqlglotError, ValueError):
        return None


def _fields(struct: exp.DataType) -> dict[str, tuple[str, exp.DataType]]:
    """{lower name: (name, type)} of a struct type's fields."""
    return {f.name.lower(): (f.name, f.args["kind"]) for f in struct.expressions
            if isinstance(f, exp.ColumnDef) and isinstance(f.args.get("kind"), exp.DataType)}


def _is_struct(t: exp.DataType | None) -> bool:
    return t is not None and t.this == exp.DataType.Type.STRUCT


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
            errors.append(f"schema evolution: source column {name} has field(s) {fields} that column {column['name']} "
                          f"({column['type']}) of {table['name']} lacks; a parquet table in Spark's catalog takes new "
                          f"top-level columns only (Spark refuses ALTER TABLE ... ADD COLUMNS ({fields.split(', ')[0]} ...) "
                          f"on it), so a new field inside a struct cannot be added: assign the fields the column has "
                          f"(SET {column['name']}.<field> = ...), or recreate the table with the wider struct")
    return errors


def _filled(ref: exp.Expression, target: exp.DataType, source: exp.DataType) -> exp.Expression:
    """`ref` (of struct type `source`) as a value of struct type `target`: the fields it has, NULL
    for the others, by name, struct fields inside structs likewise; NULL where `ref` is NULL."""
    have = _fields(source)
    values: list[exp.Expression] = []
    for key, (name, field_type) in _fields(target).items():
        values.append(exp.Literal.string(name))
        if key not in have:
            values.append(exp.Cast(this=exp.Null(), to=field_type.copy()))
            continue
        inner = exp.Dot(this=ref.copy(), expression=exp.to_identifier(have[key][0], quoted=True))
        if _is_struct(field_type) and _is_struct(have[key][1]) and field_type != have[key][1]:
            inner = _filled(inner, field_type, have[key][1])
        values.append(inner)
    struct = exp.Anonymous(this="named_struct", expressions=values)
    return exp.If(this=exp.Is(this=ref.copy(), expression=exp.Null()), true=exp.Null(), false=struct)


def missing_field_values(table: dict, assigned: list[list[str]], source_alias: str) -> dict[str, str]:
    """{lower column name: value} for each directly assigned source struct column that lacks some of
    the table's column's fields: the source's struct with the missing fields NULL. Only structs
    nested in structs are filled; a struct inside an array or map keeps Spark's store assignment."""
    values = {}
    for name, source_type in assigned:
        column = table["columns_by_name"].get(name.lower())
        source, target = _type(source_type), _type(column["type"]) if column else None
        if not (_is_struct(source) and _is_struct(target)) or source == target:
            continue
        if not nested_field_paths(column["type"]) - nested_field_paths(source_type):
            continue
        ref = exp.Column(this=exp.to_identifier(name, quoted=True), table=exp.to_identifier(source_alias, quoted=True))
        values[name.lower()] = _filled(ref, target, source).sql(dialect="spark")
    return values
