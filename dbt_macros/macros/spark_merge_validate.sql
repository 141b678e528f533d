{#-
  Validation of a merge spec against the real target: everything is checked
  before any data is read or written, and every error names the statement part.

  Flow (the host runs the SQL, these macros decide):
    1. host runs `DESCRIBE TABLE EXTENDED <target> AS JSON` and `DESCRIBE TABLE <target>`
       (the only one that keeps CHAR(n)/VARCHAR(n)); spark_merge__table_info turns them
       into the `table` dict every other macro takes;
    2. spark_merge__resolve checks the clauses structurally (columns, counts,
       duplicates, NOT NULL) and lists the expression `parts` to type-check;
    3. host runs spark_merge__describe_parts_sql per scope; when Spark's analyzer
       refuses it, the host retries part by part to name the failing part;
    4. spark_merge__check_types compares the described types with the columns.
-#}

{% macro spark_merge__table_info(desc, column_types, out) -%}
{%- set errors = [] -%}
{%- set name = (desc.get('namespace', []) | join('.')) ~ '.' ~ desc.get('table_name', '') -%}
{%- set props = desc.get('table_properties') or {} -%}
{%- set provider = (desc.get('provider') or '') | lower -%}
{%- if (desc.get('type') or '') | upper == 'VIEW' -%}
  {%- do errors.append('target ' ~ name ~ ' is a view; MERGE, UPDATE and DELETE need a table') -%}
{%- elif provider == 'hive' -%}
  {%- do errors.append('target ' ~ name ~ ' is a Hive-format table (STORED AS); spark-merge rewrites datasource tables created with USING parquet or USING orc') -%}
{%- elif provider not in ['parquet', 'orc'] -%}
  {%- do errors.append('target ' ~ name ~ ' uses format ' ~ (provider or 'unknown') ~ '; spark-merge rewrites USING parquet or USING orc tables (delta, iceberg and hudi have their own MERGE)') -%}
{%- endif -%}
{%- set not_null = [] -%}
{%- for n in (props.get('spark_merge.not_null') or '').split(',') if n | trim -%}
  {%- do not_null.append(n | trim | lower) -%}
{%- endfor -%}
{%- set nullable_by_name = {} -%}
{%- set default_by_name = {} -%}
{%- set struct_by_name = {} -%}
{%- for c in desc.get('columns') or [] -%}
  {%- do nullable_by_name.update({c.name | lower: c.get('nullable', true)}) -%}
  {%- if c.type is mapping and c.type.get('name') == 'struct' -%}{%- do struct_by_name.update({c.name | lower: c.type}) -%}{%- endif -%}
  {%- if c.get('default') is not none -%}{%- do default_by_name.update({c.name | lower: c.default}) -%}{%- endif -%}
{%- endfor -%}
{%- set columns = [] -%}
{%- set by_name = {} -%}
{%- set described = {'done': false} -%}
{%- for row in column_types -%}
  {#- DESCRIBE TABLE's rows: the columns, then '# Partition Information' and other sections -#}
  {%- if not row[0] or row[0].startswith('#') -%}{%- do described.update({'done': true}) -%}{%- endif -%}
  {%- if not described.done -%}
  {%- set lname = row[0] | lower -%}
  {%- set fields = [] -%}
  {%- for n in not_null if n.startswith(lname ~ '.') -%}{%- do fields.append(n[lname | length + 1:]) -%}{%- endfor -%}
  {%- set col = {} -%}
  {%- do spark_merge.spark_merge__column_record(row[0], row[1], {'nullable': nullable_by_name.get(lname, true) and lname not in not_null,
        'default': default_by_name.get(lname), 'struct': struct_by_name.get(lname), 'not_null_fields': fields}, col) -%}
  {%- do columns.append(col) -%}
  {%- do by_name.update({lname: col}) -%}
  {%- endif -%}
{%- endfor -%}
{%- set location = desc.get('location') or '' -%}
{%- set identity = {} -%}
{%- do spark_merge.spark_merge__identity(props, desc.get('namespace', [''])[-1] ~ '.' ~ desc.get('table_name', ''), location, identity) -%}
{%- for n in not_null if n.split('.')[0] not in by_name -%}
  {%- do identity.trust_errors.append('table property spark_merge.not_null of ' ~ name ~ ' names ' ~ n | tojson ~ ', which is not a column of it (its columns: ' ~ columns | map(attribute='name') | join(', ') ~ '); correct it with ALTER TABLE ' ~ name ~ ' SET TBLPROPERTIES (' ~ "'spark_merge.not_null'" ~ ' = ' ~ "'<column>,...'" ~ ')') -%}
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
  'properties': props,
  'errors': errors,
  'trust_errors': identity.trust_errors,
}) -%}
{%- do out.update({'relation': spark_merge.spark_merge__quote(out.database) ~ '.' ~ spark_merge.spark_merge__quote(out.table_name)}) -%}
{%- endmacro %}

{#- The one builder of a column record, from its name, its type as DESCRIBE TABLE spells it, and
    `facts` (nullable, default, struct: its type as DESCRIBE ... AS JSON gives it, not_null_fields:
    struct fields listed in spark_merge.not_null; has_default: a PostgreSQL target's column the
    database fills when an INSERT does not name it); the table's columns (table_info), the columns
    schema evolution adds (merge_core/engine.py) and a PostgreSQL target's (merge_core/postgres.py)
    are made by it. type: as Spark computes the column
    (char_as_string); char_type, char_length: a CHAR(n)/VARCHAR(n) declaration (checked where a
    value is written, char_checked); char_pad: n for a CHAR(n), whose values are stored and read
    padded to n with spaces (a VARCHAR's are not); nested_chars: the declared type of a struct, array
    or map column with CHAR/VARCHAR inside (checked and padded where written, nested_char_checked). -#}
{% macro spark_merge__column_record(name, type, facts, out) -%}
{%- set text = spark_merge.spark_merge__char_type(type) -%}
{%- set n = (text.split('(')[1].rstrip(')') | int) if text else none -%}
{%- do out.update({'name': name, 'type': spark_merge.spark_merge__char_as_string(type), 'nullable': facts.get('nullable', true),
                   'default': facts.get('default'), 'has_default': facts.get('has_default', false), 'struct': facts.get('struct'), 'not_null_fields': facts.get('not_null_fields') or [],
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

{#- Add `columns` ([name, type] pairs) to the table: dbt's on_schema_change and schema evolution. -#}
{% macro spark_merge__add_columns_sql(table, columns) -%}
ALTER TABLE {{ table.relation }} ADD COLUMNS ({% for c in columns %}{{ spark_merge.spark_merge__quote(c[0]) }} {{ c[1] }}{{ ', ' if not loop.last }}{% endfor %})
{%- endmacro %}

{#- The table as it will be once schema evolution adds `columns` ([name, type] pairs), as a
    relation: so a statement that reads a new column (WHEN MATCHED AND t.c IS NULL) is validated
    before anything is added. Every existing row holds NULL in a new column. -#}
{% macro spark_merge__evolved_relation(table, columns) -%}
(SELECT *{% for c in columns %}, CAST(NULL AS {{ c[1] }}) AS {{ spark_merge.spark_merge__quote(c[0]) }}{% endfor %} FROM {{ table.relation }})
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
  {%- do errors.append(label ~ ': SET ' ~ path ~ '.' ~ a[0] | join('.') ~ ': struct ' ~ path ~ ' has no field ' ~ a[0][0] ~ ' (it has: ' ~ stype.fields | map(attribute='name') | join(', ') ~ ')') -%}
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
    {%- do errors.append(label ~ ': SET ' ~ path ~ '.' ~ f.name ~ '.' ~ deeper[0][0] | join('.') ~ ': only struct fields can be assigned, and ' ~ path ~ '.' ~ f.name ~ ' has type ' ~ f.type.get('name')) -%}{{ field }}
  {%- elif deeper -%}{{ spark_merge.spark_merge__struct_value(field, f.type, deeper, label, path ~ '.' ~ f.name, errors) | trim }}
  {%- else -%}{{ field }}
  {%- endif -%}
{%- endfor -%})
{%- endmacro %}

{#- matched, not_matched or not_matched_by_source: which rows a clause is for. -#}
{% macro spark_merge__when(clause) -%}
{{ 'matched' if clause.matched else ('not_matched_by_source' if clause.get('by_source') else 'not_matched') }}
{%- endmacro %}

{% macro spark_merge__clause_label(clause, index) -%}
WHEN {{ spark_merge.spark_merge__when(clause) | trim | replace('_', ' ') | upper }} clause {{ index + 1 }} ({{ clause.action | upper }})
{%- endmacro %}

{#-
  Structural checks and normalisation. Fills `out` with:
    errors   - list of messages (empty when fine)
    clauses  - [{index, label, matched, by_source, action, op, condition, outputs: {lower col: expr}}]
    parts    - expressions to type-check: {label, expr, scope, expect, column}
    insert_only - every clause is WHEN NOT MATCHED (INSERT): the merge appends, rewrites nothing
  A WHEN NOT MATCHED BY SOURCE clause sees only the target's columns (scope 'target'), as in Spark.
  op codes: INSERT=1, DELETE=2, UPDATE=3 (as in Trino).
-#}
{% macro spark_merge__resolve(spec, table, out) -%}
{%- set errors = [] -%}
{%- set clauses = [] -%}
{%- set parts = [] -%}
{%- set s = spark_merge.spark_merge__quote(spec.source_alias) -%}
{%- set has_source = spec.source_kind != 'none' -%}
{%- set cols_text = table.columns | map(attribute='name') | join(', ') -%}
{%- do parts.append({'label': ('WHERE condition' if not has_source else 'ON condition'), 'expr': spec.on, 'scope': 'both', 'expect': 'boolean'}) -%}
{%- if spec.partition_filter -%}
  {%- do parts.append({'label': 'option partition_filter', 'expr': spec.partition_filter, 'scope': 'target', 'expect': 'boolean'}) -%}
{%- endif -%}
{%- set catch_all = {} -%}
{%- for cl in spec.clauses -%}
  {%- set label = spark_merge.spark_merge__clause_label(cl, loop.index0) -%}
  {%- set when = spark_merge.spark_merge__when(cl) | trim -%}
  {%- if when in catch_all -%}
    {%- do errors.append(label ~ ': unreachable, because ' ~ catch_all[when] ~ ' before it has no condition; give that clause an AND condition or move it last') -%}
  {%- elif not cl.condition -%}
    {%- do catch_all.update({when: spark_merge.spark_merge__clause_label(cl, loop.index0)}) -%}
  {%- endif -%}
  {%- set scope = {'matched': 'both', 'not_matched': 'source', 'not_matched_by_source': 'target'}[when] -%}
  {%- set outputs = {} -%}
  {%- set op = spark_merge.spark_merge__op(cl.action) | int -%}
  {%- if cl.action in ['update', 'delete'] and when == 'not_matched' -%}
    {%- do errors.append(label ~ ': ' ~ cl.action | upper ~ ' is only allowed in WHEN MATCHED and WHEN NOT MATCHED BY SOURCE clauses') -%}
  {%- elif cl.action == 'insert' and when != 'not_matched' -%}
    {%- do errors.append(label ~ ': INSERT is only allowed in WHEN NOT MATCHED clauses') -%}
  {%- elif when == 'not_matched_by_source' and cl.star -%}
    {%- do errors.append(label ~ ': UPDATE SET * needs a source row, and a NOT MATCHED BY SOURCE row has none; assign the columns (SET col = an expression over the target columns)') -%}
  {%- elif when == 'not_matched_by_source' and not has_source -%}
    {%- do errors.append(label ~ ': WHEN NOT MATCHED BY SOURCE needs a MERGE with a source') -%}
  {%- endif -%}
  {%- if cl.condition -%}
    {%- do parts.append({'label': label ~ ' condition', 'expr': cl.condition, 'scope': scope, 'expect': 'boolean'}) -%}
  {%- endif -%}
  {%- if cl.star and when == 'not_matched_by_source' -%}
  {%- elif cl.star and not has_source -%}
    {%- do errors.append(label ~ ': SET * / INSERT * need a source') -%}
  {%- elif cl.star -%}
    {#- schema evolution (spec.star_columns: the source's columns): a target column the source lacks is
        left as it is by UPDATE SET * and NULL (its default) after INSERT *, as in Spark -#}
    {#- spec.evolved_values[action]: a source struct with fewer fields than its column, as an INSERT
        or an UPDATE stores it (evolution.py) -#}
    {%- set evolved = (spec.get('evolved_values') or {}).get(cl.action) or {} -%}
    {%- for c in table.columns if spec.get('star_columns') is none or (c.name | lower) in spec.star_columns -%}
      {%- do outputs.update({c.name | lower: evolved.get(c.name | lower) or s ~ '.' ~ spark_merge.spark_merge__quote(c.name)}) -%}
    {%- endfor -%}
  {%- elif cl.action == 'update' -%}
    {%- if cl.assignments | length == 0 -%}
      {%- do errors.append(label ~ ': UPDATE SET needs at least one assignment') -%}
    {%- endif -%}
    {#- SET s.c1 = ...: a struct field's path, folded into one value for column s below -#}
    {%- set fields = {} -%}
    {%- for pair in cl.assignments -%}
      {%- set lname = pair[0] | lower -%}
      {%- set top = lname.split('.')[0] -%}
      {%- if lname not in table.columns_by_name and (top == lname or top not in table.columns_by_name) -%}
        {%- do errors.append(label ~ ': SET assigns unknown column ' ~ pair[0] ~ ' (target ' ~ table.name ~ ' has: ' ~ cols_text ~ '; a qualifier must be the target alias ' ~ spec.target_alias ~ ')') -%}
      {%- elif lname not in table.columns_by_name -%}
        {%- if top in outputs -%}
          {%- do errors.append(label ~ ': column ' ~ top ~ ' is assigned whole and by field (' ~ pair[0] ~ '); assign one or the other') -%}
        {%- else -%}
          {%- do fields.setdefault(top, []).append([pair[0].split('.')[1:], pair[1]]) -%}
        {%- endif -%}
      {%- elif lname in outputs or lname in fields -%}
        {%- do errors.append(label ~ ': column ' ~ pair[0] ~ (' is assigned whole and by field; assign one or the other' if lname in fields else ' is assigned more than once')) -%}
      {%- else -%}
        {%- do outputs.update({lname: spark_merge.spark_merge__default_or(pair[1], table.columns_by_name[lname]) | trim}) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- for top, assigned in fields.items() -%}
      {%- set column = table.columns_by_name[top] -%}
      {%- if not column.struct -%}
        {%- do errors.append(label ~ ': SET ' ~ column.name ~ '.' ~ assigned[0][0] | join('.') ~ ': only struct fields can be assigned, and ' ~ column.name ~ ' has type ' ~ column.type) -%}
      {%- else -%}
        {%- set prefix = spark_merge.spark_merge__quote(spec.target_alias) ~ '.' ~ spark_merge.spark_merge__quote(column.name) -%}
        {%- do outputs.update({top: spark_merge.spark_merge__struct_value(prefix, column.struct, assigned, label, column.name, errors) | trim}) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- elif cl.action == 'insert' -%}
    {%- set names = cl.insert_columns if cl.insert_columns else (table.columns | map(attribute='name') | list) -%}
    {%- if names | length != cl.insert_values | length -%}
      {%- do errors.append(label ~ ': INSERT lists ' ~ names | length ~ ' column(s) but ' ~ cl.insert_values | length ~ ' value(s)') -%}
    {%- else -%}
      {%- for name in names -%}
        {%- set lname = name | lower -%}
        {%- if lname not in table.columns_by_name -%}
          {%- do errors.append(label ~ ': INSERT names unknown column ' ~ name ~ ' (target ' ~ table.name ~ ' has: ' ~ cols_text ~ ')') -%}
        {%- elif lname in outputs -%}
          {%- do errors.append(label ~ ': column ' ~ name ~ ' is listed more than once in INSERT') -%}
        {%- else -%}
          {%- do outputs.update({lname: spark_merge.spark_merge__default_or(cl.insert_values[loop.index0], table.columns_by_name[lname]) | trim}) -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endif -%}
    {#- a column the INSERT list leaves out takes its default (DEFAULT in CREATE or ADD COLUMN), else NULL -#}
    {%- for c in table.columns if c.get('default') is not none and (c.name | lower) not in outputs -%}
      {%- do outputs.update({c.name | lower: '(' ~ c.default ~ ')'}) -%}
    {%- endfor -%}
    {%- for c in table.columns if not c.nullable and not c.get('has_default') and (c.name | lower) not in outputs -%}
      {%- do errors.append(label ~ ': INSERT gives no value for NOT NULL column ' ~ c.name) -%}
    {%- endfor -%}
  {%- endif -%}
  {%- for c in table.columns if (c.name | lower) in outputs -%}
    {%- do parts.append({'label': label ~ ' value for column ' ~ c.name, 'expr': outputs[c.name | lower], 'scope': scope, 'expect': 'column', 'column': c}) -%}
  {%- endfor -%}
  {%- do clauses.append({'index': loop.index0, 'label': label, 'matched': cl.matched, 'by_source': when == 'not_matched_by_source', 'action': cl.action, 'op': op, 'condition': cl.condition, 'outputs': outputs}) -%}
{%- endfor -%}
{%- do out.update({'errors': errors, 'clauses': clauses, 'parts': parts,
                   'insert_only': not spec.get('upsert') and clauses | length > 0 and clauses | rejectattr('matched') | rejectattr('by_source') | list | length == clauses | length}) -%}
{%- endmacro %}

{#- FROM clause giving expressions of a scope the names they see in the plan. -#}
{% macro spark_merge__scope_from(spec, table, scope) -%}
{%- set t = spark_merge.spark_merge__quote(spec.target_alias) -%}
{%- set s = spark_merge.spark_merge__quote(spec.source_alias) -%}
{%- if scope == 'source' -%}
{{ spark_merge.spark_merge__source_relation(spec) }} AS {{ s }}
{%- elif scope == 'target' or spec.source_kind == 'none' -%}
{{ table.relation }} AS {{ t }}
{%- else -%}
{{ table.relation }} AS {{ t }} CROSS JOIN {{ spark_merge.spark_merge__source_relation(spec) }} AS {{ s }}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__source_relation(spec) -%}
{%- if spec.source_kind == 'query' -%}({{ spec.source }}){% else %}{{ spec.source }}{% endif -%}
{%- endmacro %}

{#- Analysis only (Spark runs no job): the type of each part, or an analyzer error. -#}
{% macro spark_merge__describe_parts_sql(spec, table, parts) -%}
DESCRIBE QUERY SELECT {% for p in parts -%}
({{ p.expr }}) AS `__sm_part_{{ loop.index0 }}`{{ ", " if not loop.last }}
{%- endfor %} FROM {{ spark_merge.spark_merge__scope_from(spec, table, parts[0].scope) }}
{%- endmacro %}

{#- Analysis only: Spark refuses a non-deterministic join condition (INVALID_NON_DETERMINISTIC_EXPRESSIONS),
    so joining with one row ON the conditions asks Spark's own rule, UDFs included. EXPLAIN COST
    returns the analyzer's refusal as its text instead of failing (dbt cannot catch a failure);
    probe_error reads it. -#}
{% macro spark_merge__determinism_probe_sql(spec, table, parts) -%}
EXPLAIN COST SELECT 1 FROM {{ spark_merge.spark_merge__scope_from(spec, table, parts[0].scope) }}
JOIN (SELECT 1 AS __sm_one) AS __sm_det ON {% for p in parts %}({{ p.expr }}){{ " AND " if not loop.last }}{% endfor %}
{%- endmacro %}

{#- The determinism probes of the values the clauses assign (resolved.parts of expect 'column'),
    one statement per scope, appended to `out`: a probe's text is a plan (it starts '== ') when
    every value is deterministic, else Spark's refusal (INVALID_NON_DETERMINISTIC_EXPRESSIONS) or
    another analysis error, read alike as "not known to be deterministic". -#}
{% macro spark_merge__value_determinism_probes(spec, table, resolved, out) -%}
{%- for scope in ['both', 'source', 'target'] -%}
  {%- set probes = [] -%}
  {%- for p in resolved.parts if p.expect == 'column' and p.scope == scope -%}{%- do probes.append({'expr': '(' ~ p.expr ~ ') IS NULL OR true', 'scope': scope}) -%}{%- endfor -%}
  {%- if probes -%}{%- do out.append(spark_merge.spark_merge__determinism_probe_sql(spec, table, probes) | trim) -%}{%- endif -%}
{%- endfor -%}
{%- endmacro %}

{#- What the probe's text says of its conditions: empty when fine, else the error for `part` (or,
    with part none, a word saying the batch holds a culprit). Two refusals count: Spark's analyzer
    refusing a non-deterministic join condition, and its optimizer failing while folding constants
    ('Error occurred during query planning': WHERE id IN (1, 'x') against an INT, dt = 'someday'
    against a DATE, 1/0), which would otherwise surface as a raw CAST_INVALID_INPUT in the plan's
    first job. Any other refusal (a subquery Spark allows in a filter but not in a join) says
    nothing about either. -#}
{% macro spark_merge__probe_error(plan_text, part) -%}
{%- if 'INVALID_NON_DETERMINISTIC_EXPRESSIONS' in plan_text -%}
  {%- if part is none -%}nondeterministic{%- else -%}{{ spark_merge.spark_merge__nondeterministic_error(part) }}{%- endif -%}
{%- elif plan_text.startswith('Error occurred during query planning') -%}
  {%- if part is none -%}unplannable{%- else -%}{{ part.label }} fails when Spark folds its constants: a literal in it cannot be converted to the type it is compared with (a string that is not a number or a date, for a number or date column), or a constant expression fails (1/0): {{ part.expr }}. Write the value in the column's type (42, DATE'2026-11-23'), or compare with try_cast(...){%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- The conditions to probe: ON (WHERE) and every WHEN and partition_filter condition. -#}
{% macro spark_merge__conditions(parts, scope, out) -%}
{%- for p in parts if p.expect == 'boolean' and p.scope == scope -%}{%- do out.append(p) -%}{%- endfor -%}
{%- endmacro %}

{% macro spark_merge__nondeterministic_error(part) -%}
{{ part.label }} is not deterministic: {{ part.expr }}. As in Spark's own MERGE, ON and WHEN conditions must give the same answer every time they are evaluated; draw the value once per source row in the source instead (USING (SELECT *, rand() AS r FROM ...) and test s.r)
{%- endmacro %}

{% macro spark_merge__describe_source_sql(spec) -%}
DESCRIBE QUERY SELECT * FROM {{ spark_merge.spark_merge__source_relation(spec) }} AS {{ spark_merge.spark_merge__quote(spec.source_alias) }}
{%- endmacro %}

{#- `types`: the described type of each part, in order. Appends to `errors`, and a lossy assignment
    (see spark_merge__narrowing) to `warnings` or, with lossy_assignments=refuse, to `errors`. -#}
{% macro spark_merge__check_types(parts, types, errors, warnings, lossy='warn') -%}
{%- for p in parts -%}
  {%- set ty = types[loop.index0] | lower -%}
  {%- if p.expect == 'boolean' and ty not in ['boolean', 'void'] -%}
    {%- do errors.append(p.label ~ ': must be a boolean condition, got ' ~ ty ~ ': ' ~ p.expr) -%}
  {%- elif p.expect == 'column' -%}
    {%- if ty == 'void' and not p.column.nullable -%}
      {%- do errors.append(p.label ~ ': assigns NULL to NOT NULL column ' ~ p.column.name) -%}
    {%- elif spark_merge.spark_merge__can_assign(ty, p.column.type) | trim != 'true' -%}
      {%- do errors.append(p.label ~ ': cannot store a value of type ' ~ ty ~ ' in column ' ~ p.column.name ~ ' of type ' ~ p.column.type ~ ' (expression: ' ~ p.expr ~ '); add an explicit CAST if you mean it') -%}
    {%- elif lossy != 'allow' -%}
      {%- set loss = spark_merge.spark_merge__narrowing(ty, p.column.type) | trim -%}
      {%- if loss -%}
        {%- do (errors if lossy == 'refuse' else warnings).append(p.label ~ ': storing a value of type ' ~ ty ~ ' in column ' ~ p.column.name ~ ' of type ' ~ p.column.type ~ ' ' ~ loss ~ ' (expression: ' ~ p.expr ~ '); CAST it explicitly to say you mean it (option lossy_assignments: warn, refuse, allow)') -%}
      {%- endif -%}
    {%- endif -%}
  {%- endif -%}
{%- endfor -%}
{%- endmacro %}

{#- The few names the plan gives the columns it adds beside the user's (the target's row id, the
    source's row number): a user column of the same name would meet them in one relation. Every
    other name of the plan lives in its own query level (changes_sql). Errors appended to `out`. -#}
{% macro spark_merge__reserved_column_errors(table, source_columns, out) -%}
{%- set reserved = {'target': ['__sm_file', '__sm_row', '__sm_j', '__sm_touched'], 'source': ['__sm_srow', '__sm_merge', '__sm_i']} -%}
{%- for side, names in [('target ' ~ table.name, table.columns | map(attribute='name') | list), ('the source', source_columns or [])] -%}
  {%- for n in names if (n | lower) in reserved[side.split(' ')[0] if side.startswith('target') else 'source'] -%}
    {%- do out.append('column ' ~ n ~ ' of ' ~ side ~ ': spark-merge names a column of its plan so (' ~ reserved.target | join(', ') ~ ' beside a target, ' ~ reserved.source | join(', ') ~ ' beside a source); rename it or select it under another name') -%}
  {%- endfor -%}
{%- endfor -%}
{%- endmacro %}
