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
    {%- do errors.append(label ~ ': unreachable, because ' ~ catch_all[when] ~
        ' before it has no condition; give that clause an AND condition or move it last') -%}
  {%- elif not cl.condition -%}
    {%- do catch_all.update({when: spark_merge.spark_merge__clause_label(cl, loop.index0)}) -%}
  {%- endif -%}
  {%- set scope = {'matched': 'both', 'not_matched': 'source', 'not_matched_by_source': 'target'}[when] -%}
  {%- set outputs = {} -%}
  {%- set op = spark_merge.spark_merge__op(cl.action) | int -%}
  {%- do spark_merge.spark_merge__clause_errors(cl, when, label, has_source, errors) -%}
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
    {%- do spark_merge.spark_merge__update_outputs(spec, table, cl, label, outputs, errors) -%}
  {%- elif cl.action == 'insert' -%}
    {%- do spark_merge.spark_merge__insert_outputs(table, cl, label, outputs, errors) -%}
  {%- endif -%}
  {%- for c in table.columns if (c.name | lower) in outputs -%}
    {%- do parts.append({'label': label ~ ' value for column ' ~ c.name, 'expr': outputs[c.name | lower], 'scope': scope, 'expect': 'column', 'column': c}) -%}
  {%- endfor -%}
  {%- do clauses.append({'index': loop.index0, 'label': label, 'matched': cl.matched, 'by_source': when == 'not_matched_by_source', 'action':
      cl.action, 'op': op, 'condition': cl.condition, 'outputs': outputs}) -%}
{%- endfor -%}
{%- do out.update({'errors': errors, 'clauses': clauses, 'parts': parts,
                   'insert_only': not spec.get('upsert') and clauses | length > 0 and clauses | rejectattr('matched') |
                       rejectattr('by_source') | list | length == clauses | length}) -%}
{%- endmacro %}

{#- What a clause's action may not do under its WHEN (`when`), appended to `errors`. -#}
{% macro spark_merge__clause_errors(cl, when, label, has_source, errors) -%}
{%- if cl.action in ['update', 'delete'] and when == 'not_matched' -%}
  {%- do errors.append(label ~ ': ' ~ cl.action | upper ~ ' is only allowed in WHEN MATCHED and WHEN NOT MATCHED BY SOURCE clauses') -%}
{%- elif cl.action == 'insert' and when != 'not_matched' -%}
  {%- do errors.append(label ~ ': INSERT is only allowed in WHEN NOT MATCHED clauses') -%}
{%- elif when == 'not_matched_by_source' and cl.star -%}
  {%- do errors.append(label ~
      ': UPDATE SET * needs a source row, and a NOT MATCHED BY SOURCE row has none; assign the columns (SET col = an expression over the target columns)')
      -%}
{%- elif when == 'not_matched_by_source' and not has_source -%}
  {%- do errors.append(label ~ ': WHEN NOT MATCHED BY SOURCE needs a MERGE with a source') -%}
{%- endif -%}
{%- endmacro %}

{#- An UPDATE clause's SET list: each column's value into `outputs` (a struct's fields folded into one value
    for it), each refusal into `errors`. -#}
{% macro spark_merge__update_outputs(spec, table, cl, label, outputs, errors) -%}
{%- set cols_text = table.columns | map(attribute='name') | join(', ') -%}
{%- if cl.assignments | length == 0 -%}
  {%- do errors.append(label ~ ': UPDATE SET needs at least one assignment') -%}
{%- endif -%}
{#- SET s.c1 = ...: a struct field's path, folded into one value for column s below -#}
{%- set fields = {} -%}
{%- for pair in cl.assignments -%}
  {%- set lname = pair[0] | lower -%}
  {%- set top = lname.split('.')[0] -%}
  {%- if lname not in table.columns_by_name and (top == lname or top not in table.columns_by_name) -%}
    {%- do errors.append(label ~ ': SET assigns unknown column ' ~ pair[0] ~ spark_merge.spark_merge__did_you_mean(pair[0], table.columns |
        map(attribute='name')) ~ ' (target ' ~ table.name ~ ' has: ' ~ cols_text ~
        '; a qualifier must be the target alias ' ~ spec.target_alias ~ ')') -%}
  {%- elif lname not in table.columns_by_name -%}
    {%- if top in outputs -%}
      {%- do errors.append(label ~ ': column ' ~ top ~ ' is assigned whole and by field (' ~ pair[0] ~ '); assign one or the other') -%}
    {%- else -%}
      {%- do fields.setdefault(top, []).append([pair[0].split('.')[1:], pair[1]]) -%}
    {%- endif -%}
  {%- elif lname in outputs or lname in fields -%}
    {%- do errors.append(label ~ ': column ' ~ pair[0] ~ (' is assigned whole and by field; assign one or the other' if lname in fields else
        ' is assigned more than once')) -%}
  {%- else -%}
    {%- do outputs.update({lname: spark_merge.spark_merge__default_or(pair[1], table.columns_by_name[lname]) | trim}) -%}
  {%- endif -%}
{%- endfor -%}
{%- for top, assigned in fields.items() -%}
  {%- set column = table.columns_by_name[top] -%}
  {%- if not column.struct -%}
    {%- do errors.append(label ~ ': SET ' ~ column.name ~ '.' ~ assigned[0][0] | join('.') ~ ': only struct fields can be assigned, and ' ~
        column.name ~ ' has type ' ~ column.type) -%}
  {%- else -%}
    {%- set prefix = spark_merge.spark_merge__quote(spec.target_alias) ~ '.' ~ spark_merge.spark_merge__quote(column.name) -%}
    {%- do outputs.update({top: spark_merge.spark_merge__struct_value(prefix, column.struct, assigned, label, column.name, errors) | trim}) -%}
  {%- endif -%}
{%- endfor -%}
{%- endmacro %}

{#- An INSERT clause's column and value lists: each column's value into `outputs` (a column left out takes
    its default), each refusal into `errors`. -#}
{% macro spark_merge__insert_outputs(table, cl, label, outputs, errors) -%}
{%- set cols_text = table.columns | map(attribute='name') | join(', ') -%}
{%- set names = cl.insert_columns if cl.insert_columns else (table.columns | map(attribute='name') | list) -%}
{%- if names | length != cl.insert_values | length -%}
  {%- do errors.append(label ~ ': INSERT lists ' ~ names | length ~ ' column(s) but ' ~ cl.insert_values | length ~ ' value(s)') -%}
{%- else -%}
  {%- for name in names -%}
    {%- set lname = name | lower -%}
    {%- if lname not in table.columns_by_name -%}
      {%- do errors.append(label ~ ': INSERT names unknown column ' ~ name ~ spark_merge.spark_merge__did_you_mean(name, table.columns |
          map(attribute='name')) ~ ' (target ' ~ table.name ~ ' has: ' ~ cols_text ~ ')') -%}
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
{%- endmacro %}

{#- FROM clause giving expressions of a scope the names they see in the plan. -#}
{% macro spark_merge__scope_from(spec, table, scope) -%}
{%- set t = spark_merge.spark_merge__quote(spec.target_alias) -%}
{%- set s = spark_merge.spark_merge__quote(spec.source_alias) -%}
{%- if scope == 'source' -%}
{{ spark_merge.spark_merge__source_relation(spec) }} AS {{ s }}
{%- elif scope == 'target' or spec.source_kind == 'none' -%}
{{ spark_merge.spark_merge__probed_target(table) }} AS {{ t }}
{%- else -%}
{{ spark_merge.spark_merge__probed_target(table) }} AS {{ t }} CROSS JOIN {{ spark_merge.spark_merge__source_relation(spec) }} AS {{ s }}
{%- endif -%}
{%- endmacro %}

{#- The target as a probe reads it: planning a query of a partitioned table lists the files of every
    partition it may read (one LIST request per partition on an object store), and a filter on the
    partition columns is first a metastore call, which for a filter the metastore cannot evaluate
    (IS NULL) fetches every partition (9 s for 10,000 on embedded Derby). LIMIT 0 asks for no
    partition and no call: Spark plans it as an empty relation, yet folds the join conditions'
    constants first (the probe's second refusal, probe_error). -#}
{% macro spark_merge__probed_target(table) -%}
{%- if table.partition_columns -%}
(SELECT * FROM {{ table.relation }} LIMIT 0)
{%- else -%}
{{ table.relation }}
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

{#- The parts of `scope` whose determinism validation's probe asks about besides the conditions:
    the values the clauses assign (resolved.parts of expect 'column'), each as a condition that
    holds whatever its value, appended to `out`. A probe's text is a plan (it starts '== ') when
    every part is deterministic, else Spark's refusal (INVALID_NON_DETERMINISTIC_EXPRESSIONS) or
    another analysis error, read alike as "not known to be deterministic" (resolved.deterministic
    false: the plan does not fuse). -#}
{% macro spark_merge__value_probe_parts(parts, scope, out) -%}
{%- for p in parts if p.expect == 'column' and p.scope == scope -%}
  {%- do out.append({'expr': '(' ~ p.expr ~ ') IS NULL OR true', 'scope': scope}) -%}
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
  {%- if part is none -%}unplannable{%- else -%}{{ part.label ~ ' fails when Spark folds its constants: a literal in it cannot be '
      ~ 'converted to the type it is compared with (a string that is not a number or a date, for a number or date column), or a '
      ~ 'constant expression fails (1/0): ' ~ part.expr ~ ". Write the value in the column's type (42, DATE'2026-11-23'), or compare "
      ~ 'with try_cast(...)' }}{%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- The conditions to probe: ON (WHERE) and every WHEN and partition_filter condition. -#}
{% macro spark_merge__conditions(parts, scope, out) -%}
{%- for p in parts if p.expect == 'boolean' and p.scope == scope -%}{%- do out.append(p) -%}{%- endfor -%}
{%- endmacro %}

{% macro spark_merge__nondeterministic_error(part) -%}
{{ part.label ~ ' is not deterministic: ' ~ part.expr ~ ". As in Spark's own MERGE, ON and WHEN conditions must give the same "
    ~ 'answer every time they are evaluated; draw the value once per source row in the source instead (USING (SELECT *, rand() '
    ~ 'AS r FROM ...) and test s.r)' }}
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
      {%- do errors.append(p.label ~ ': cannot store a value of type ' ~ ty ~ ' in column ' ~ p.column.name ~ ' of type ' ~ p.column.type ~
          ' (expression: ' ~ p.expr ~ '); add an explicit CAST if you mean it') -%}
    {%- elif lossy != 'allow' -%}
      {%- set loss = spark_merge.spark_merge__narrowing(ty, p.column.type) | trim -%}
      {%- if loss -%}
        {%- do (errors if lossy == 'refuse' else warnings).append(p.label ~ ': storing a value of type ' ~ ty ~ ' in column ' ~ p.column.name ~
            ' of type ' ~ p.column.type ~ ' ' ~ loss ~ ' (expression: ' ~ p.expr ~
            '); CAST it explicitly to say you mean it (option lossy_assignments: warn, refuse, allow)') -%}
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
    {%- do out.append('column ' ~ n ~ ' of ' ~ side ~ ': spark-merge names a column of its plan so (' ~ reserved.target | join(', ') ~
        ' beside a target, ' ~ reserved.source | join(', ') ~ ' beside a source); rename it or select it under another name') -%}
  {%- endfor -%}
{%- endfor -%}
{%- endmacro %}
