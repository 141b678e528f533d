{#-
  The `table` dict every macro takes, from the catalog's description (DESCRIBE TABLE EXTENDED
  ... AS JSON and DESCRIBE TABLE, the one that keeps CHAR(n)/VARCHAR(n)), and each column's record.
-#}

{% macro spark_merge__table_info(desc, column_types, out) -%}
{%- set errors = [] -%}
{%- set name = (desc.get('namespace', []) | join('.')) ~ '.' ~ desc.get('table_name', '') -%}
{%- set props = desc.get('table_properties') or {} -%}
{%- set provider = (desc.get('provider') or '') | lower -%}
{%- if (desc.get('type') or '') | upper == 'VIEW' -%}
  {%- do errors.append('target ' ~ name ~ ' is a view; MERGE, UPDATE and DELETE need a table') -%}
{%- elif provider == 'hive' -%}
  {%- do errors.append('target ' ~ name ~
      ' is a Hive-format table (STORED AS); spark-merge rewrites datasource tables created with USING parquet or USING orc') -%}
{%- elif provider not in ['parquet', 'orc'] -%}
  {%- do errors.append('target ' ~ name ~ ' uses format ' ~ (provider or 'unknown') ~
      '; spark-merge rewrites USING parquet or USING orc tables (delta, iceberg and hudi have their own MERGE)') -%}
{%- endif -%}
{%- set newer = spark_merge.spark_merge__format_error(props, name) | trim -%}
{%- if newer -%}{%- do errors.append(newer) -%}{%- endif -%}
{%- set not_null = [] -%}
{%- for n in (props.get('spark_merge.not_null') or '').split(',') if n | trim -%}
  {%- do not_null.append(n | trim | lower) -%}
{%- endfor -%}
{%- set columns = [] -%}
{%- do spark_merge.spark_merge__described_columns(desc, column_types, not_null, columns) -%}
{%- set by_name = {} -%}
{%- for col in columns -%}{%- do by_name.update({col.name | lower: col}) -%}{%- endfor -%}
{%- set location = desc.get('location') or '' -%}
{%- set identity = {} -%}
{%- do spark_merge.spark_merge__identity(props, desc.get('namespace', [''])[-1] ~ '.' ~ desc.get('table_name', ''), location, identity,
    desc.get('created_time')) -%}
{%- for n in not_null if n.split('.')[0] not in by_name -%}
  {%- do identity.trust_errors.append('table property spark_merge.not_null of ' ~ name ~ ' names ' ~ n | tojson ~
      ', which is not a column of it (its columns: ' ~ columns | map(attribute='name') | join(', ') ~ '); correct it with ALTER TABLE ' ~ name ~
      ' SET TBLPROPERTIES (' ~ "'spark_merge.not_null'" ~ ' = ' ~ "'<column>,...'" ~ ')') -%}
{%- endfor -%}
{%- do out.update({
  'name': name,
  'database': desc.get('namespace', [''])[-1],
  'table_name': desc.get('table_name', ''),
  'columns': columns,
  'columns_by_name': by_name,
  'partition_columns': desc.get('partition_columns') or [],
  'provider': provider,
  'location': location,
  'root': identity.root,
  'table_id': identity.table_id,
  'version': identity.version,
  'managed': (desc.get('type') or '') | upper == 'MANAGED',
  'created': desc.get('created_time'),
  'former_roots': fromjson(props.get('spark_merge.former_roots') or '[]', []),
  'properties': props,
  'errors': errors,
  'trust_errors': identity.trust_errors,
}) -%}
{%- do out.update({'relation': spark_merge.spark_merge__quote(out.database) ~ '.' ~ spark_merge.spark_merge__quote(out.table_name)}) -%}
{%- endmacro %}

{#- The table's column records, in order, appended to `out`: the names and types from DESCRIBE TABLE's
    rows (`column_types`: the columns, then '# Partition Information' and other sections), nullability,
    defaults and struct types from DESCRIBE's JSON (`desc`), NOT NULL from `not_null` too. -#}
{% macro spark_merge__described_columns(desc, column_types, not_null, out) -%}
{%- set nullable_by_name = {} -%}
{%- set default_by_name = {} -%}
{%- set struct_by_name = {} -%}
{%- for c in desc.get('columns') or [] -%}
  {%- do nullable_by_name.update({c.name | lower: c.get('nullable', true)}) -%}
  {%- if c.type is mapping and c.type.get('name') == 'struct' -%}{%- do struct_by_name.update({c.name | lower: c.type}) -%}{%- endif -%}
  {%- if c.get('default') is not none -%}{%- do default_by_name.update({c.name | lower: c.default}) -%}{%- endif -%}
{%- endfor -%}
{%- set described = {'done': false} -%}
{%- for row in column_types -%}
  {%- if not row[0] or row[0].startswith('#') -%}{%- do described.update({'done': true}) -%}{%- endif -%}
  {%- if not described.done -%}
  {%- set lname = row[0] | lower -%}
  {%- set fields = [] -%}
  {%- for n in not_null if n.startswith(lname ~ '.') -%}{%- do fields.append(n[lname | length + 1:]) -%}{%- endfor -%}
  {%- set col = {} -%}
  {%- do spark_merge.spark_merge__column_record(row[0], row[1], {'nullable': nullable_by_name.get(lname, true) and lname not in not_null,
        'default': default_by_name.get(lname), 'struct': struct_by_name.get(lname), 'not_null_fields': fields}, col) -%}
  {%- do out.append(col) -%}
  {%- endif -%}
{%- endfor -%}
{%- endmacro %}

{#- The one builder of a column record, from its name, its type as DESCRIBE TABLE spells it, and
    `facts` (nullable, default, struct: its type as DESCRIBE ... AS JSON gives it, not_null_fields:
    struct fields listed in spark_merge.not_null; has_default: a PostgreSQL target's column the
    database fills when an INSERT does not name it); the table's columns (table_info), the columns
    schema evolution adds (merge_core/lifecycle/merge_run.py) and a PostgreSQL target's
    (merge_core/targets/postgres.py) are made by it. type: as Spark computes the column
    (char_as_string); char_type, char_length: a CHAR(n)/VARCHAR(n) declaration (checked where a
    value is written, char_checked); char_pad: n for a CHAR(n), whose values are stored and read
    padded to n with spaces (a VARCHAR's are not); nested_chars: the declared type of a struct, array
    or map column with CHAR/VARCHAR inside (checked and padded where written, nested_char_checked). -#}
{% macro spark_merge__column_record(name, type, facts, out) -%}
{%- set text = spark_merge.spark_merge__char_type(type) -%}
{%- set n = (text.split('(')[1].rstrip(')') | int) if text else none -%}
{%- do out.update({'name': name, 'type': spark_merge.spark_merge__char_as_string(type), 'nullable': facts.get('nullable', true),
                   'default': facts.get('default'), 'has_default': facts.get('has_default', false), 'struct': facts.get('struct'),
                       'not_null_fields': facts.get('not_null_fields') or [],
                   'char_length': n, 'char_type': text or none, 'char_pad': n if text.startswith('char(') else none,
                   'nested_chars': type if not text and 'char(' in type | lower else none}) -%}
{%- endmacro %}

{#- A column declared CHAR(n) or VARCHAR(n): its type as DESCRIBE TABLE spells it ('varchar(3)'), else ''.
    Spark reads and computes such a column as a STRING and checks the length where it writes
    (EXCEED_LIMIT_LENGTH); changes_sql does the same check (spark_merge__char_checked). -#}
{% macro spark_merge__char_type(ty) -%}
{%- set t = ty | lower | trim -%}
{%- if (t.startswith('char(') or t.startswith('varchar(')) and t.endswith(')') -%}{{ t }}{%- endif -%}
{%- endmacro %}

{#- The type Spark computes a column of type `ty` as: every char(n)/varchar(n), nested ones too, is a
    string (what DESCRIBE QUERY shows). -#}
{% macro spark_merge__char_as_string(ty) -%}
{%- set parts = ty.split('char(') -%}
{%- set out = [parts[0]] -%}
{%- for p in parts[1:] -%}
  {%- if (out[-1] | lower).endswith('var') -%}{%- do out.append(out.pop()[:-3]) -%}{%- endif -%}
  {%- do out.append('string' ~ p[p.index(')') + 1:]) -%}
{%- endfor -%}
{{- out | join('') -}}
{%- endmacro %}
