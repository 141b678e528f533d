{#-
  Schema evolution (MERGE WITH SCHEMA EVOLUTION, dbt's on_schema_change): the columns a merge
  adds, the table as it will be, and the values of struct columns the source gives in part.
-#}

{#- Add `columns` ([name, type] pairs) to the table: dbt's on_schema_change and schema evolution. -#}
{% macro spark_merge__add_columns_sql(table, columns) -%}
ALTER TABLE {{ table.relation }} ADD COLUMNS ({% for c in columns %}{{ spark_merge.spark_merge__quote(c[0]) }} {{ c[1] }}{{ ', ' if not
    loop.last }}{% endfor %})
{%- endmacro %}

{#- The table as it will be once schema evolution adds `columns` ([name, type] pairs), as a
    relation: so a statement that reads a new column (WHEN MATCHED AND t.c IS NULL) is validated
    before anything is added. Every existing row holds NULL in a new column. -#}
{% macro spark_merge__evolved_relation(table, columns) -%}
(SELECT *{% for c in columns %}, CAST(NULL AS {{ c[1] }}) AS {{ spark_merge.spark_merge__quote(c[0]) }}{% endfor %} FROM {{ table.relation }})
{%- endmacro %}

{#- The table record as it will be once `columns` ([name, type] pairs) are added, into `out`: each
    new column nullable, without a default. -#}
{% macro spark_merge__evolved_table(table, columns, out) -%}
{%- set all, by_name = [], {} -%}
{%- do all.extend(table.columns) -%}{%- do by_name.update(table.columns_by_name) -%}
{%- for c in columns -%}
  {%- set record = {} -%}
  {%- do spark_merge.spark_merge__column_record(c[0], c[1], {}, record) -%}
  {%- do all.append(record) -%}{%- do by_name.update({c[0] | lower: record}) -%}
{%- endfor -%}
{%- do out.update(table) -%}
{%- do out.update({'columns': all, 'columns_by_name': by_name}) -%}
{%- endmacro %}

{#- The source columns the table lacks that the merge assigns directly ([name, type] pairs of
    `source_types`): all of them with an UPDATE SET * / INSERT * clause, else those in `direct`
    (SET c = s.c, INSERT (c) VALUES (s.c): parse.direct_source_columns); a column without a type
    (a bare NULL) is an error. As Spark 4's MERGE WITH SCHEMA EVOLUTION, a column that only an
    expression reads (SET c = s.c + 1, SET x = s.c) is not added. -#}
{% macro spark_merge__evolved_columns(spec, table, source_types, direct, out) -%}
{%- set added, errors = [], [] -%}
{%- set star = spec.clauses | selectattr('star') | list | length > 0 -%}
{%- for c in source_types if (c[0] | lower) not in table.columns_by_name and not c[0].startswith('__sm_') and (star or (c[0] | lower) in direct) -%}
  {%- if c[1] | lower == 'void' -%}
    {%- do errors.append('schema evolution: source column ' ~ c[0] ~ ' has no type (a bare NULL); CAST it to the type the new column should have') -%}
  {%- else -%}{%- do added.append([c[0], c[1]]) -%}{%- endif -%}
{%- endfor -%}
{%- do out.update({'columns': added, 'errors': errors}) -%}
{%- endmacro %}

{#- A value as written, except the keyword DEFAULT: the column's default expression, else NULL (as Spark). -#}
{% macro spark_merge__default_or(expr, column) -%}
{%- if expr | trim | upper == 'DEFAULT' -%}{{ '(' ~ column.default ~ ')' if column.get('default') is not none else 'NULL' }}
{%- else -%}{{ expr }}{%- endif -%}
{%- endmacro %}

{#- The struct `prefix` (of JSON type `stype`) with some fields assigned: `assigned` holds
    [field path, value] pairs. As Spark (AssignmentUtils.applyFieldAssignments): every field is
    rebuilt with named_struct, from its value or the old field, so assigning a field of a NULL
    struct gives a struct whose other fields are NULL; only struct fields can be assigned. -#}
{% macro spark_merge__struct_value(prefix, stype, assigned, label, path, errors) -%}
{%- set names = stype.fields | map(attribute='name') | map('lower') | list -%}
{%- for a in assigned if (a[0][0] | lower) not in names -%}
  {%- do errors.append(label ~ ': SET ' ~ path ~ '.' ~ a[0] | join('.') ~ ': struct ' ~ path ~ ' has no field ' ~ a[0][0] ~ ' (it has: ' ~
      stype.fields | map(attribute='name') | join(', ') ~ ')') -%}
{%- endfor -%}
named_struct(
{%- for f in stype.fields -%}
  {%- set whole = [] -%}{%- set deeper = [] -%}
  {%- for a in assigned if (a[0][0] | lower) == (f.name | lower) -%}
    {%- do (whole if a[0] | length == 1 else deeper).append([a[0][1:], a[1]]) -%}
  {%- endfor -%}
  {%- set field = prefix ~ '.' ~ spark_merge.spark_merge__quote(f.name) -%}
  {{- ', ' if not loop.first }}{{ spark_merge.spark_merge__literal(f.name) }}, {# -#}
  {%- if whole | length > 1 or (whole and deeper) -%}
    {%- do errors.append(label ~ ': field ' ~ path ~ '.' ~ f.name ~ ' is assigned more than once') -%}{{ field }}
  {%- elif whole -%}({{ whole[0][1] }})
  {%- elif deeper and f.type.get('name') != 'struct' -%}
    {%- do errors.append(label ~ ': SET ' ~ path ~ '.' ~ f.name ~ '.' ~ deeper[0][0] | join('.') ~
        ': only struct fields can be assigned, and ' ~ path ~ '.' ~ f.name ~ ' has type ' ~ f.type.get('name')) -%}{{ field }}
  {%- elif deeper -%}{{ spark_merge.spark_merge__struct_value(field, f.type, deeper, label, path ~ '.' ~ f.name, errors) | trim }}
  {%- else -%}{{ field }}
  {%- endif -%}
{%- endfor -%})
{%- endmacro %}
