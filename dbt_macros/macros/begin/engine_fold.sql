{#-
  The fold of a primary-key merge engine (overview in begin/engines.sql): each field's step,
  the reduction of the source per key, the engine's MERGE, and the input order the fold may
  rely on.
-#}

{#-
  One step of function `f` for column c: mode 'agg' (a newer record),
  'old' (partial-update: a record older than its sequence group's), or
  'retract' (-U/-D). A is the accumulator, X the record's value.
-#}
{% macro spark_merge__engine_step(f, mode, c, i, e) -%}
{%- set A = '__sm_a.__sm_c' ~ i -%}
{%- set X = '__sm_r.__sm_c' ~ i -%}
{%- set T = c.type -%}
{%- if mode == 'retract' and not e.functions[f].retract -%}{{ A }}
{%- elif f == 'sum' -%}
  {%- if mode == 'retract' -%}CASE WHEN {{ A }} IS NULL THEN CAST(-{{ X }} AS {{ T }}) WHEN {{ X }} IS NULL THEN {{ A }} ELSE CAST({{ A
      }} - {{ X }} AS {{ T }}) END
  {%- else -%}CASE WHEN {{ A }} IS NULL THEN {{ X }} WHEN {{ X }} IS NULL THEN {{ A }} ELSE CAST({{ A }} + {{ X }} AS {{ T }}) END
  {%- endif -%}
{%- elif f == 'product' -%}
  {%- if mode == 'retract' -%}
    {%- set divide = ' div ' if T | lower in ['tinyint', 'smallint', 'int', 'bigint'] else ' / ' -%}
    CASE WHEN {{ A }} IS NULL THEN NULL WHEN {{ X }} IS NULL THEN {{ A }} ELSE CAST({{ A }}{{ divide }}{{ X }} AS {{ T }}) END
  {%- else -%}CASE WHEN {{ A }} IS NULL THEN {{ X }} WHEN {{ X }} IS NULL THEN {{ A }} ELSE CAST({{ A }} * {{ X }} AS {{ T }}) END
  {%- endif -%}
{%- elif f == 'count' -%}
  {#- the stored row carries its count; a source record counts 1 when its value is not NULL -#}
  {%- if mode == 'retract' -%}CASE WHEN {{ X }} IS NULL THEN {{ A }} ELSE coalesce({{ A }}, 0) - 1 END
  {%- else -%}coalesce({{ A }}, 0) + CASE WHEN __sm_r.__sm_o = 0 THEN coalesce({{ X }}, 0) WHEN {{ X }} IS NULL THEN 0 ELSE 1 END
  {%- endif -%}
{%- elif f == 'max' -%}greatest({{ A }}, {{ X }})
{%- elif f == 'min' -%}least({{ A }}, {{ X }})
{%- elif f == 'last_value' -%}
  {%- if mode == 'retract' -%}NULL{%- elif mode == 'old' -%}{{ A }}{%- else -%}{{ X }}{%- endif -%}
{%- elif f == 'last_non_null_value' -%}
  {%- if mode == 'retract' -%}CASE WHEN {{ X }} IS NULL THEN {{ A }} END
  {%- elif mode == 'old' -%}coalesce({{ A }}, {{ X }})
  {%- else -%}coalesce({{ X }}, {{ A }})
  {%- endif -%}
{%- elif f == 'first_value' -%}
  {%- if mode == 'old' -%}{{ X }}{%- else -%}CASE WHEN __sm_a.__sm_f{{ i }} THEN {{ A }} ELSE {{ X }} END{%- endif -%}
{%- elif f == 'first_non_null_value' -%}
  {%- if mode == 'old' -%}coalesce({{ X }}, {{ A }}){%- else -%}coalesce({{ A }}, {{ X }}){%- endif -%}
{%- elif f == 'bool_and' -%}CASE WHEN {{ A }} IS NULL THEN {{ X }} WHEN {{ X }} IS NULL THEN {{ A }} ELSE {{ A }} AND {{ X }} END
{%- elif f == 'bool_or' -%}CASE WHEN {{ A }} IS NULL THEN {{ X }} WHEN {{ X }} IS NULL THEN {{ A }} ELSE {{ A }} OR {{ X }} END
{%- elif f == 'listagg' -%}{{ spark_merge.spark_merge__engine_step_listagg(c, i, e, A, X) }}
{%- elif f == 'collect' -%}{{ spark_merge.spark_merge__engine_step_collect(mode, c, i, e, A, X) }}
{%- elif f == 'merge_map' -%}
  {%- set rest = 'map_filter(' ~ A ~ ', (__sm_k' ~ i ~ ', __sm_v' ~ i ~ ') -> NOT array_contains(map_keys(' ~ X ~ '), __sm_k' ~ i ~ '))' -%}
  {%- if mode == 'retract' -%}CASE WHEN {{ A }} IS NULL THEN NULL WHEN {{ X }} IS NULL THEN {{ A }} ELSE {{ rest }} END
  {%- else -%}CASE WHEN {{ A }} IS NULL THEN {{ X }} WHEN {{ X }} IS NULL THEN {{ A }} ELSE map_concat({{ rest }}, {{ X }}) END
  {%- endif -%}
{%- elif f == 'nested_update' -%}{{ spark_merge.spark_merge__engine_step_nested_update(mode, c, i, e, A, X) }}
{%- endif -%}
{%- endmacro %}

{#- engine_step of listagg: the record's text appended to the accumulator's with the column's delimiter
    (distinct: each element once); listagg cannot retract. -#}
{% macro spark_merge__engine_step_listagg(c, i, e, A, X) -%}
{%- set lname = c.name | lower -%}
  {%- set d = e.delimiter.get(lname, ',') -%}
  {%- set blank_x = X ~ " IS NULL OR trim(" ~ X ~ ") = ''" -%}
  {%- set blank_a = A ~ " IS NULL OR trim(" ~ A ~ ") = ''" -%}
  {%- if lname in e.distinct -%}
    {%- set pattern = spark_merge.spark_merge__literal('\\Q' ~ d ~ '\\E') -%}
    CASE WHEN {{ blank_x }} THEN {{ A }} WHEN {{ blank_a }} THEN array_join(array_distinct(filter(split({{ X }}, {{ pattern }}), __sm_t{{ i
        }} -> trim(__sm_t{{ i }}) != '')), {{ spark_merge.spark_merge__literal(d) }})
    ELSE concat_ws({{ spark_merge.spark_merge__literal(d) }}, {{ A }}, array_join(filter(array_distinct(split({{ X }}, {{ pattern
        }})), __sm_t{{ i }} -> trim(__sm_t{{ i }}) != '' AND NOT array_contains(split({{ A }}, {{ pattern }}), __sm_t{{ i }})), {{
            spark_merge.spark_merge__literal(d) }})) END
  {%- else -%}
    CASE WHEN {{ blank_x }} THEN {{ A }} WHEN {{ blank_a }} THEN {{ X }} ELSE concat({{ A }}, {{ spark_merge.spark_merge__literal(d) }}, {{ X }}) END
  {%- endif -%}
{%- endmacro %}

{#- engine_step of collect: the record's elements appended (distinct: each once), or removed once each (retract). -#}
{% macro spark_merge__engine_step_collect(mode, c, i, e, A, X) -%}
{%- set T = c.type -%}
{%- set lname = c.name | lower -%}
  {%- if mode == 'retract' -%}
    {#- remove each retracted element once (a multiset difference) -#}
    CASE WHEN {{ A }} IS NULL THEN NULL WHEN {{ X }} IS NULL THEN {{ A }} ELSE aggregate({{ X }}, {{ A }}, (__sm_l{{ i }}, __sm_x{{ i
        }}) -> CASE WHEN array_position(__sm_l{{ i }}, __sm_x{{ i }}) > 0 THEN concat(slice(__sm_l{{ i }}, 1, CAST(array_position(__sm_l{{ i
            }}, __sm_x{{ i }}) AS INT) - 1), slice(__sm_l{{ i }}, CAST(array_position(__sm_l{{ i }}, __sm_x{{ i
                }}) AS INT) + 1, size(__sm_l{{ i }}))) ELSE __sm_l{{ i }} END) END
  {%- elif lname in e.distinct -%}
    CASE WHEN {{ A }} IS NULL AND {{ X }} IS NULL THEN NULL ELSE array_distinct(concat(coalesce({{ A }}, CAST(array() AS {{ T
        }})), coalesce({{ X }}, CAST(array() AS {{ T }})))) END
  {%- else -%}
    CASE WHEN {{ A }} IS NULL THEN {{ X }} WHEN {{ X }} IS NULL THEN {{ A }} ELSE concat({{ A }}, {{ X }}) END
  {%- endif -%}
{%- endmacro %}

{#- engine_step of nested_update: the record's rows replace the accumulator's rows of the same nested key
    (without keys: appended), or are removed (retract). -#}
{% macro spark_merge__engine_step_nested_update(mode, c, i, e, A, X) -%}
{%- set T = c.type -%}
{%- set keys = e.nested_key.get(c.name | lower, []) -%}
  {%- set same = [] -%}
  {%- for k in keys -%}{%- do same.append('__sm_x' ~ i ~ '.' ~ spark_merge.spark_merge__quote(k) ~ ' <=> __sm_y' ~ i ~ '.' ~
      spark_merge.spark_merge__quote(k)) -%}{%- endfor -%}
  {%- set same = same | join(' AND ') if keys else '__sm_x' ~ i ~ ' <=> __sm_y' ~ i -%}
  {%- set input = 'filter(' ~ X ~ ', __sm_x' ~ i ~ ' -> __sm_x' ~ i ~ ' IS NOT NULL)' -%}
  {%- if mode == 'retract' -%}
    CASE WHEN {{ A }} IS NULL OR {{ X }} IS NULL THEN {{ A }} ELSE filter({{ A }}, __sm_y{{ i }} -> NOT exists({{ X }}, __sm_x{{ i }} -> {{ same }})) END
  {%- elif keys -%}
    {#- rows of the accumulator whose key the record does not have, then the record's rows, the last of each key -#}
    CASE WHEN {{ X }} IS NULL THEN {{ A }} ELSE concat(
      filter(coalesce({{ A }}, CAST(array() AS {{ T }})), __sm_y{{ i }} -> __sm_y{{ i }} IS NOT NULL AND NOT exists({{ input }}, __sm_x{{ i }} -> {{ same }})),
      filter({{ input }}, (__sm_y{{ i }}, __sm_j{{ i }}) -> NOT exists(slice({{ input }}, __sm_j{{ i }} + 2, size({{ X }})), __sm_x{{ i }} -> {{ same }}))) END
  {%- else -%}
    CASE WHEN {{ X }} IS NULL THEN {{ A }} ELSE concat(coalesce({{ A }}, CAST(array() AS {{ T }})), {{ input }}) END
  {%- endif -%}
{%- endmacro %}

{#- The accumulator's new value of column c (index i) after record __sm_r: the engine's rule, or, when
    a -D record removes the row (remove_on_delete), NULL: the key starts afresh. -#}
{% macro spark_merge__engine_field(c, i, e) -%}
{%- set rule = spark_merge.spark_merge__engine_field_rule(c, i, e) | trim -%}
{%- if e.remove_on_delete and (c.name | lower) not in e.pk | map('lower') | list -%}
CASE WHEN {{ spark_merge.spark_merge__engine_removes() }} THEN NULL ELSE {{ rule }} END
{%- else -%}{{ rule }}
{%- endif -%}
{%- endmacro %}

{#- Record __sm_r removes its key's row (remove_on_delete): a -D. -#}
{% macro spark_merge__engine_removes() -%}
coalesce(__sm_r.__sm_kind = '-D', false)
{%- endmacro %}

{% macro spark_merge__engine_field_rule(c, i, e) -%}
{%- set lname = c.name | lower -%}
{%- set A = '__sm_a.__sm_c' ~ i -%}
{%- set X = '__sm_r.__sm_c' ~ i -%}
{%- set f = e.fn.get(lname) -%}
{%- if lname in e.pk | map('lower') | list -%}{{ X }}
{%- elif e.engine == 'aggregation' -%}
CASE WHEN __sm_r.__sm_d THEN {{ spark_merge.spark_merge__engine_step(f, 'retract', c, i, e) }} ELSE {{
    spark_merge.spark_merge__engine_step(f, 'agg', c, i, e) }} END
{%- else -%}
  {#- partial-update -#}
  {%- set group = [] -%}
  {%- for g in e.groups if lname in g.fields or lname in g.seq | map('lower') | list -%}{%- do group.append(g) -%}{%- endfor -%}
  {%- if not group -%}
CASE WHEN __sm_r.__sm_d THEN {{ A }} ELSE {{ spark_merge.spark_merge__engine_step(f, 'agg', c, i, e) if f else 'coalesce(' ~ X ~ ', ' ~ A ~ ')' }} END
  {%- else -%}
    {%- set g = group[0] -%}
    {%- set accepted = spark_merge.spark_merge__engine_group_accepts(g, e) -%}
    {%- if lname in g.seq | map('lower') | list -%}
CASE WHEN {{ accepted }} THEN {{ X }} ELSE {{ A }} END
    {%- else -%}
CASE WHEN {{ spark_merge.spark_merge__engine_group_null(g, e) }} THEN {{ A }}
  WHEN __sm_r.__sm_d THEN CASE WHEN {{ accepted }} THEN {{ spark_merge.spark_merge__engine_step(f, 'retract', c, i, e) if f else 'NULL'
      }} ELSE {{ spark_merge.spark_merge__engine_step(f, 'retract', c, i, e) if f else A }} END
  ELSE CASE WHEN {{ accepted }} THEN {{ spark_merge.spark_merge__engine_step(f, 'agg', c, i, e) if f else X }} ELSE {{
      spark_merge.spark_merge__engine_step(f, 'old', c, i, e) if f else A }} END END
    {%- endif -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- Did record __sm_r reach column c's function (first_value remembers that it has its value)? -#}
{% macro spark_merge__engine_applied(c, e) -%}
{%- set group = [] -%}
{%- for g in e.groups if (c.name | lower) in g.fields -%}{%- do group.append(g) -%}{%- endfor -%}
(NOT __sm_r.__sm_d{% if group %} AND NOT {{ spark_merge.spark_merge__engine_group_null(group[0], e) }}{% endif %})
{%- endmacro %}

{#- The record's sequence group values are all NULL: the group is left alone. -#}
{% macro spark_merge__engine_group_null(g, e) -%}
({% for s in g.seq %}__sm_r.__sm_c{{ e.index[s | lower] }} IS NULL{{ ' AND ' if not loop.last }}{% endfor %})
{%- endmacro %}

{#- The group takes the record: its sequence is set and not smaller than the stored one (NULLs first). -#}
{% macro spark_merge__engine_group_accepts(g, e) -%}
(NOT {{ spark_merge.spark_merge__engine_group_null(g, e) }} AND named_struct({% for s in g.seq %}'q{{ loop.index0 }}', __sm_r.__sm_c{{
    e.index[s | lower] }}{{ ', ' if not loop.last }}{% endfor %}) >= named_struct({% for s in g.seq %}'q{{ loop.index0 }}', __sm_a.__sm_c{{
        e.index[s | lower] }}{{ ', ' if not loop.last }}{% endfor %}))
{%- endmacro %}

{#- The row a key ends with, as a struct: __sm_c<i> per column, __sm_n (a row exists), __sm_t (the target had one). -#}
{% macro spark_merge__engine_result(e, table) -%}
{%- set present = "exists(__sm_rs, __sm_z -> __sm_z.__sm_o = 0)" -%}
{%- if e.engine in ['deduplicate', 'first-row'] -%}
  {%- set pick = 'element_at(__sm_rs, ' ~ ('-1' if e.engine == 'deduplicate' else '1') ~ ')' -%}
named_struct({% for c in table.columns %}'__sm_c{{ loop.index0 }}', {{ pick }}.__sm_c{{ loop.index0 }}, {% endfor %}'__sm_n', NOT {{ pick
    }}.__sm_d, '__sm_t', {{ present }})
{%- else -%}
aggregate(__sm_rs,
  named_struct({% for c in table.columns %}'__sm_c{{ loop.index0 }}', CAST(NULL AS {{ c.type }}), {% if e.fn.get(c.name | lower) ==
      'first_value' %}'__sm_f{{ loop.index0 }}', false, {% endif %}{% endfor %}'__sm_n', false, '__sm_t', false),
  (__sm_a, __sm_r) -> named_struct(
{%- for c in table.columns %}
    '__sm_c{{ loop.index0 }}', CAST({{ spark_merge.spark_merge__engine_field(c, loop.index0, e) }} AS {{ c.type }}),
{%- if e.fn.get(c.name | lower) == 'first_value' %}
    '__sm_f{{ loop.index0 }}', {% if e.remove_on_delete %}NOT {{ spark_merge.spark_merge__engine_removes() }} AND ({% endif
        %}__sm_a.__sm_f{{ loop.index0 }} OR {{ spark_merge.spark_merge__engine_applied(c, e) }}{% if e.remove_on_delete %}){% endif %},
{%- endif %}
{%- endfor %}
    '__sm_n', {% if e.remove_on_delete %}NOT {{ spark_merge.spark_merge__engine_removes() }} AND ({% endif %}__sm_a.__sm_n OR {{ 'true' if
        e.engine == 'aggregation' else 'NOT __sm_r.__sm_d' }}{% if e.remove_on_delete %}){% endif %},
    '__sm_t', __sm_a.__sm_t OR __sm_r.__sm_o = 0))
{%- endif -%}
{%- endmacro %}

{#- Errors the engine raises at run time (before anything is written): [condition, message] pairs. -#}
{% macro spark_merge__engine_checks(e, out) -%}
{%- set retracts = 'exists(__sm_rs, __sm_z -> __sm_z.__sm_d)' -%}
{%- if not e.input_order -%}
  {#- No input order to fold by (input_order): the fold takes records of equal sequence in the order
      of their content, the same each run, and refuses a key whose result that order would decide:
      records of equal sequence that differ in a column folded by an order-sensitive rule (every
      column for deduplicate and first-row; for partial-update and aggregation, a column whose
      function is not sum, product, count, max, min, bool_and, bool_or or collect) or in delete. -#}
  {%- set insensitive = ['sum', 'product', 'count', 'max', 'min', 'bool_and', 'bool_or', 'collect'] -%}
  {%- set records = 'filter(__sm_rs, __sm_z -> __sm_z.__sm_o = 1)' -%}
  {%- set differs = ['size(array_distinct(transform(' ~ records ~ ', __sm_z -> __sm_z.__sm_d))) > 1'] -%}
  {%- for name, i in e.index.items() if name not in e.pk | map('lower') | list -%}
    {%- if e.engine in ['deduplicate', 'first-row'] or (e.engine == 'partial-update' and name not in e.fn)
          or e.fn.get(name, 'last_non_null_value') not in insensitive -%}
      {%- do differs.append('size(array_distinct(transform(filter(transform(' ~ records ~ ', __sm_z -> __sm_z.__sm_c' ~ i ~
          '), __sm_x -> __sm_x IS NOT NULL), __sm_x -> to_json(named_struct(' ~ "'v'" ~ ', __sm_x))))) > 1') -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set seq = [] -%}{%- for s in e.seq -%}{%- do seq.append("'q" ~ loop.index0 ~ "', __sm_z.__sm_s.q" ~ loop.index0) -%}{%- endfor -%}
  {%- set tied = 'size(' ~ records ~ ') > ' ~ ('size(array_distinct(transform(' ~ records ~ ', __sm_z -> named_struct(' ~ seq | join(', ') ~ '))))' if
      seq else '1') -%}
  {%- do out.append([tied ~ ' AND (' ~ differs | join(' OR ') ~ ')',
                     'a key repeats in this batch with records that differ, and ' ~ ('they have the same ' ~ e.seq | join(', ') if e.seq
                         else 'no sequence_field orders them')
                     ~
                         ': the source is a query, whose row order Spark does not keep from one run to the next, so which record wins would ' ~
                             'depend on the run; give a sequence_field that tells them apart, or read the batch from a parquet table (its ' ~
                                 'files and row positions) or a VALUES list']) -%}
{%- endif -%}
{%- if e.kind_field -%}
  {%- do out.append(["exists(__sm_rs, __sm_z -> __sm_z.__sm_kind IS NULL OR __sm_z.__sm_kind NOT IN ('+I', '-U', '+U', '-D'))",
                     'row_kind_field ' ~ e.kind_field ~ ' must be one of +I, -U, +U, -D']) -%}
  {%- if e.remove_on_delete -%}
    {#- a -D removes the row; partial-update drops a -U (as Paimon), aggregation retracts it -#}
    {%- set retracts = "exists(__sm_rs, __sm_z -> __sm_z.__sm_kind = '-U')" -%}
  {%- endif -%}
  {%- if not e.ignore_delete and not (e.remove_on_delete and e.engine == 'partial-update') -%}
    {%- if e.engine == 'first-row' or (e.engine == 'partial-update' and not e.groups) -%}
      {%- do out.append([retracts, 'merge_engine ' ~ e.engine ~
          ' does not accept DELETE (-D) or UPDATE_BEFORE (-U) records; set ignore_delete to drop them' ~
          (', or use sequence groups to retract their fields' if e.engine == 'partial-update' else '')]) -%}
    {%- else -%}
      {%- set stuck = [] -%}
      {%- for name, f in e.fn.items() if not e.functions[f].retract and name not in e.ignore_retract -%}
        {%- set in_group = [] -%}
        {%- for g in e.groups if name in g.fields -%}{%- do in_group.append(g) -%}{%- endfor -%}
        {%- if e.engine == 'aggregation' or in_group -%}{%- do stuck.append(name ~ ' (' ~ f ~ ')') -%}{%- endif -%}
      {%- endfor -%}
      {%- if stuck -%}
        {%- do out.append([retracts, 'a retraction (-U/-D) reached aggregate function(s) that cannot retract: ' ~ stuck | sort | join(', ') ~
            '; set ignore_retract for them']) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- The source reduced to one row per key: every target column, plus __sm_del. -#}
{% macro spark_merge__engine_reduce_sql(spec, table, e) -%}
{%- set kind = 'CAST(__sm_src.' ~ spark_merge.spark_merge__quote(e.kind_field) ~ ' AS STRING)' if e.kind_field else "'+I'" -%}
{%- set retract = "coalesce(" ~ kind ~ " IN ('-U', '-D'), false)" -%}
{%- set seq_of = [] -%}
{%- for s in e.seq -%}{%- do seq_of.append("'q" ~ loop.index0 ~ "', CAST({p}" ~ spark_merge.spark_merge__quote(s) ~ " AS " ~
    table.columns_by_name[s | lower].type ~ ")") -%}{%- endfor -%}
{%- set checks = [] -%}
{%- do spark_merge.spark_merge__engine_checks(e, checks) -%}
{#- input order: a table's files and row positions, a VALUES list's own order (see input_order) -#}
{%- set order = {'source': "named_struct('f', __sm_u._metadata.file_path, 'r', __sm_u._metadata.row_index)", 'target':
    "named_struct('f', '', 'r', CAST(0 AS BIGINT))"}
    if e.input_order == 'files' else {'source': 'monotonically_increasing_id()', 'target': 'CAST(0 AS BIGINT)'} if e.input_order == 'values'
    else {'source': 'to_json(struct(__sm_u.*))', 'target': "''"} -%}
{%- set keys = [] -%}
{%- for k in e.pk -%}{%- do keys.append("'" ~ k | replace("'", "") ~ "', __sm_p" ~ loop.index0) -%}{%- endfor -%}
WITH __sm_in AS (
  SELECT {% for k in e.pk %}CAST(__sm_src.{{ spark_merge.spark_merge__quote(k) }} AS {{ table.columns_by_name[k | lower].type
      }}) AS __sm_p{{ loop.index0 }}, {% endfor %}named_struct(
    '__sm_s', named_struct({{ (seq_of | join(', ')).replace('{p}', '__sm_src.') ~ ', ' if seq_of }}'o', 1, 'i', __sm_src.__sm_i),
    '__sm_o', 1, '__sm_kind', {{ kind }}, '__sm_d', {{ retract }}
{%- for c in table.columns %},
    '__sm_c{{ loop.index0 }}', CAST(__sm_src.{{ spark_merge.spark_merge__quote(c.name) }} AS {{ c.type }})
{%- endfor %}) AS __sm_r
  FROM (SELECT *, {{ order.source }} AS __sm_i FROM {{ spark_merge.spark_merge__source_relation(spec) }} AS __sm_u) AS __sm_src
{%- if e.ignore_delete and e.kind_field %}
  WHERE NOT {{ retract }}
{%- endif %}
), __sm_old AS (
  SELECT {% for k in e.pk %}__sm_t.{{ spark_merge.spark_merge__quote(k) }} AS __sm_p{{ loop.index0 }}, {% endfor %}named_struct(
    '__sm_s', named_struct({{ (seq_of | join(', ')).replace('{p}', '__sm_t.') ~ ', ' if seq_of }}'o', 0, 'i', {{ order.target }}),
    '__sm_o', 0, '__sm_kind', '+I', '__sm_d', false
{%- for c in table.columns %},
    '__sm_c{{ loop.index0 }}', __sm_t.{{ spark_merge.spark_merge__quote(c.name) }}
{%- endfor %}) AS __sm_r
  FROM {{ table.relation }} AS __sm_t
  LEFT SEMI JOIN (SELECT DISTINCT {% for k in e.pk %}__sm_p{{ loop.index0 }}{{ ', ' if not loop.last }}{% endfor %} FROM __sm_in) AS __sm_k
    ON {% for k in e.pk %}__sm_t.{{ spark_merge.spark_merge__quote(k) }} <=> __sm_k.__sm_p{{ loop.index0 }}{{ ' AND ' if not loop.last }}{% endfor %}
{%- if spec.partition_filter %}
  WHERE ({{ spec.partition_filter }})
{%- endif %}
), __sm_keys AS (
  SELECT {% for k in e.pk %}__sm_p{{ loop.index0 }}, {% endfor %}array_sort(collect_list(__sm_r), (__sm_x, __sm_y) ->
    CASE WHEN __sm_x.__sm_s < __sm_y.__sm_s THEN -1 WHEN __sm_x.__sm_s > __sm_y.__sm_s THEN 1 ELSE 0 END) AS __sm_rs
  FROM (SELECT * FROM __sm_in UNION ALL SELECT * FROM __sm_old) AS __sm_all
  GROUP BY {% for k in e.pk %}__sm_p{{ loop.index0 }}{{ ', ' if not loop.last }}{% endfor %}
)
{{ spark_merge.spark_merge__engine_rows_sql(table, e, checks, keys) }}
{%- endmacro %}

{#- The folded rows of __sm_keys (engine_reduce_sql's last CTE): each key's row and whether it is
    deleted, a check the engine refuses raised with the key (`keys`: its named_struct fields). -#}
{% macro spark_merge__engine_rows_sql(table, e, checks, keys) -%}
SELECT {% for c in table.columns %}__sm_v.__sm_c{{ loop.index0 }} AS {{ spark_merge.spark_merge__quote(c.name) }}, {% endfor %}NOT __sm_v.__sm_n AS __sm_del
FROM (SELECT {% for k in e.pk %}__sm_p{{ loop.index0 }}, {% endfor %}{{ spark_merge.spark_merge__engine_result(e, table) }} AS __sm_v
{%- for chk in checks %},
  {{ chk[0] }} AS __sm_bad{{ loop.index0 }}
{%- endfor %}
  FROM __sm_keys) AS __sm_f
WHERE
{%- if checks %} CASE
{%- for chk in checks %}
  WHEN __sm_bad{{ loop.index0 }} THEN raise_error(concat({{
      spark_merge.spark_merge__literal(spark_merge.spark_merge__error_code('engine_rejected') ~ ': ' ~ chk[1] ~ ' (key ')
          }}, to_json(named_struct({{ keys | join(', ') }})), ')'))
{%- endfor %}
  ELSE {% endif %}(__sm_v.__sm_n OR __sm_v.__sm_t){% if checks %} END{% endif %}
{%- endmacro %}

{#- The engine as a MERGE spec (fills `out`; errors in out.errors). -#}
{% macro spark_merge__engine_spec(spec, table, out) -%}
{%- set e = {} -%}
{%- do spark_merge.spark_merge__engine_options(spec.upsert, table, e) -%}
{%- if e.errors -%}
  {%- do out.update({'errors': e.errors}) -%}
{%- else -%}
  {%- set index = {} -%}
  {%- for c in table.columns -%}{%- do index.update({c.name | lower: loop.index0}) -%}{%- endfor -%}
  {%- do e.update({'index': index, 'input_order': spec.get('input_order')}) -%}
  {%- set t = spark_merge.spark_merge__quote(spec.target_alias) ~ '.' -%}
  {%- set s = spark_merge.spark_merge__quote(spec.source_alias) ~ '.' -%}
  {%- set on, same = [], [] -%}
  {%- for k in e.pk -%}{%- do on.append(t ~ spark_merge.spark_merge__quote(k) ~ ' <=> ' ~ s ~ spark_merge.spark_merge__quote(k)) -%}{%- endfor -%}
  {%- for c in table.columns if (c.name | lower) not in e.pk | map('lower') | list -%}
    {%- set q = spark_merge.spark_merge__quote(c.name) -%}
    {%- if 'map<' in c.type | lower -%}{%- do same.append('to_json(' ~ t ~ q ~ ') <=> to_json(' ~ s ~ q ~ ')') -%}
    {%- else -%}{%- do same.append(t ~ q ~ ' <=> ' ~ s ~ q) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set clauses = [] -%}
  {%- if (e.engine == 'deduplicate' and e.kind_field and not e.ignore_delete) or e.remove_on_delete -%}
    {%- do clauses.append({'matched': true, 'action': 'delete', 'condition': s ~ '__sm_del', 'assignments': [], 'insert_columns': [], 'insert_values':
        [], 'star': false}) -%}
  {%- endif -%}
  {%- do clauses.append({'matched': true, 'action': 'update', 'condition': ('NOT (' ~ same | join(' AND ') ~ ')') if same else 'false',
                         'assignments': [], 'insert_columns': [], 'insert_values': [], 'star': true}) -%}
  {%- do clauses.append({'matched': false, 'action': 'insert', 'condition': 'NOT ' ~ s ~ '__sm_del', 'assignments': [], 'insert_columns': [],
      'insert_values': [], 'star': true}) -%}
  {%- do out.update(spec) -%}
  {%- do out.update({'source': spark_merge.spark_merge__engine_reduce_sql(spec, table, e) | trim, 'source_kind': 'query',
                     'on': on | join(' AND '), 'clauses': clauses, 'key_columns': e.pk, 'errors': []}) -%}
{%- endif -%}
{%- endmacro %}

{#-
  The input order a merge engine folds one key's records in, when no sequence field tells them
  apart. Spark keeps no row order for a query: a scan of several files reads them in an order that
  depends on their sizes and the cluster, so "input order" must be named. It is, when the plan of
  `SELECT * FROM <source>` (input_order_probe_sql) reads:
    'files':  one parquet table named as the source: its files' paths, then each row's position;
    'values': only a VALUES list (LocalTableScan, no shuffle): its own order;
  and nothing else (none): then a key repeated in a batch with equal sequence fields is refused
  (engine_checks), naming the key. Fills out.order.
-#}
{% macro spark_merge__input_order_probe_sql(spec) -%}
EXPLAIN SELECT * FROM {{ spark_merge.spark_merge__source_relation(spec) }} AS __sm_src
{%- endmacro %}

{% macro spark_merge__input_order(spec, plan_text, out) -%}
{%- set physical = plan_text.split('== Physical Plan ==')[-1] -%}
{%- set shuffled = 'Exchange' in physical or 'Sort' in physical or 'Union' in physical or 'Join' in physical -%}
{%- set scans = physical.count('Scan ') - physical.count('LocalTableScan') -%}
{%- set name = (spec.source or '') | replace('`', '') | lower -%}
{%- if not shuffled and scans == 0 and 'LocalTableScan' in physical -%}
  {%- do out.update({'order': 'values'}) -%}
{%- elif not shuffled and scans == 1 and spec.source_kind == 'table' and physical.count('FileScan parquet') == 1
      and ('filescan parquet spark_catalog.' ~ name ~ '[' in physical | lower or 'filescan parquet ' ~ name ~ '[' in physical | lower) -%}
  {%- do out.update({'order': 'files'}) -%}
{%- else -%}
  {%- do out.update({'order': none}) -%}
{%- endif -%}
{%- endmacro %}
