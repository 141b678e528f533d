{#-
  Small building blocks shared by every spark_merge macro.

  All spark_merge macros are pure: they take plain data (dicts, lists, strings)
  and return SQL text, or fill an `out` dict/list passed in (with `do`), so the
  same files render under dbt and under plain jinja2 (merge_core/common/macros.py).
-#}

{% macro spark_merge__quote(name) -%}
`{{ name | replace('`', '``') }}`
{%- endmacro %}

{% macro spark_merge__literal(value) -%}
{%- if value is none -%}NULL
{%- else -%}'{{ value | string | replace('\\', '\\\\') | replace("'", "\\'") }}'
{%- endif -%}
{%- endmacro %}

{#- A typed literal from the string form a query returned (CAST(x AS STRING)). -#}
{% macro spark_merge__typed_literal(value, type) -%}
{%- if value is none -%}CAST(NULL AS {{ type }})
{%- else -%}CAST({{ spark_merge.spark_merge__literal(value) }} AS {{ type }})
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__column_list(names, prefix='') -%}
{%- for n in names -%}{{ prefix }}{{ spark_merge.spark_merge__quote(n) }}{{ ", " if not loop.last }}{%- endfor -%}
{%- endmacro %}

{#- PARTITION (a = 'x', b = '1') for ALTER TABLE. -#}
{% macro spark_merge__partition_spec(table, values) -%}
PARTITION ({% for c in table.partition_columns -%}
{{ spark_merge.spark_merge__quote(c) }} = {{ spark_merge.spark_merge__literal(values[c]) }}{{ ", " if not loop.last }}
{%- endfor %})
{%- endmacro %}

{#- Predicate selecting the given partitions (list of {column: string value}). With one partition
    column it is `col IN (...)` (Spark evaluates a long IN list as a hash set, and prunes partitions
    by it), with `OR col IS NULL` for the NULL partition; an OR of one equality per partition costs
    each row the whole list, which grows with rows x partitions on a backfill. With several columns,
    an OR of one conjunction per partition (a NULL never equals in a tuple IN). -#}
{% macro spark_merge__partition_filter(table, partitions, qualifier='') -%}
{%- if partitions | length == 0 -%}false
{%- elif table.partition_columns | length == 1 -%}
{%- set c = table.partition_columns[0] -%}
{%- set col = qualifier ~ spark_merge.spark_merge__quote(c) -%}
{%- set values = [] -%}
{%- for part in partitions if part[c] is not none -%}{%- do values.append(part[c]) -%}{%- endfor -%}
{%- set any_null = values | length < partitions | length -%}
{%- if values and any_null %}({% endif -%}
{%- set type = table.columns_by_name[c | lower].type -%}
{%- if values | length == 1 -%}{{ col }} = {{ spark_merge.spark_merge__typed_literal(values[0], type) }}
{%- elif values -%}{{ col }} IN ({% for v in values -%}
{{ spark_merge.spark_merge__typed_literal(v, type) }}{{ ", " if not loop.last }}
{%- endfor %}){%- endif -%}
{%- if any_null %}{{ " OR " if values }}{{ col }} IS NULL{% endif -%}
{%- if values and any_null %}){% endif -%}
{%- else -%}
{%- for part in partitions -%}
({% for c in table.partition_columns -%}
{%- set col = table.columns_by_name[c | lower] -%}
{{ qualifier }}{{ spark_merge.spark_merge__quote(c) }}{% if part[c] is none %} IS NULL{% else %} = {{
    spark_merge.spark_merge__typed_literal(part[c], col.type) }}{% endif %}{{ " AND " if not loop.last }}
{%- endfor %}){{ " OR " if not loop.last }}
{%- endfor -%}
{%- endif -%}
{%- endmacro %}

{#-
  Can a value of type `src` be stored in a column of type `dst`?
  Spark's ANSI store-assignment rules (what INSERT INTO accepts): same type,
  NULL, numeric to numeric, any atomic type to string, date/timestamp between
  themselves, arrays element-wise. Renders "true" or "false".
-#}
{#-
  What storing a value of type `src` in a column of type `dst` silently loses, as words ("drops the
  fraction"), or nothing. Only what Spark's store assignment does without a word: a fraction into
  an integer truncates, a smaller decimal scale rounds, double into float or decimal rounds.
  (An overflow, or a string longer than a VARCHAR, is an error in Spark's ANSI mode, not a loss.)
-#}
{% macro spark_merge__narrowing(src, dst) -%}
{%- set s = src | lower | trim -%}
{%- set d = dst | lower | trim -%}
{%- set integral = ['tinyint', 'smallint', 'int', 'bigint', 'byte', 'short', 'long', 'integer'] -%}
{%- set s_scale = (s[8:-1].split(',')[1] | int) if s.startswith('decimal(') else 0 -%}
{%- set d_scale = (d[8:-1].split(',')[1] | int) if d.startswith('decimal(') else 0 -%}
{%- set s_fraction = s in ['float', 'double', 'real'] or s_scale > 0 -%}
{%- if d in integral and s_fraction -%}drops the fraction
{%- elif d.startswith('decimal') and s.startswith('decimal') and d_scale < s_scale -%}rounds it to {{ d_scale }} decimal place(s)
{%- elif d.startswith('decimal') and s in ['float', 'double', 'real'] -%}rounds it to {{ d_scale }} decimal place(s)
{%- elif d in ['float', 'real'] and (s == 'double' or s.startswith('decimal')) -%}rounds it to a float's precision
{%- endif -%}
{%- endmacro %}

{#- The top-level comma-separated parts of a type's arguments (`a:int,b:map<string,int>`,
    `string,decimal(10,2)`), appended to `out`. -#}
{% macro spark_merge__type_args(inner, out) -%}
{%- set ns = namespace(depth=0, start=0) -%}
{%- for ch in inner -%}
  {%- if ch in '<(' -%}{%- set ns.depth = ns.depth + 1 -%}
  {%- elif ch in '>)' -%}{%- set ns.depth = ns.depth - 1 -%}
  {%- elif ch == ',' and ns.depth == 0 -%}{%- do out.append(inner[ns.start:loop.index0] | trim) -%}{%- set ns.start = loop.index -%}
  {%- endif -%}
{%- endfor -%}
{%- do out.append(inner[ns.start:] | trim) -%}
{%- endmacro %}

{% macro spark_merge__can_assign(src, dst) -%}
{%- set s = src | lower | trim -%}
{%- set d = dst | lower | trim -%}
{%- set numeric = ['tinyint', 'smallint', 'int', 'bigint', 'float', 'double', 'byte', 'short', 'long', 'integer', 'real'] -%}
{%- set datetimes = ['date', 'timestamp', 'timestamp_ntz', 'timestamp_ltz'] -%}
{%- set s_num = s in numeric or s.startswith('decimal') -%}
{%- set d_num = d in numeric or d.startswith('decimal') -%}
{%- set s_complex = s.startswith('array<') or s.startswith('map<') or s.startswith('struct<') -%}
{%- if s == d or s == 'void' -%}true
{%- elif s_num and d_num -%}true
{%- elif d.startswith('string') and s.startswith('string') -%}true
{%- elif (d.startswith('string') or d.startswith('varchar') or d.startswith('char')) and not s_complex -%}true
{%- elif s in datetimes and d in datetimes -%}true
{%- elif s.startswith('array<') and d.startswith('array<') -%}{{ spark_merge.spark_merge__can_assign(s[6:-1], d[6:-1]) }}
{%- elif (s.startswith('map<') and d.startswith('map<')) or (s.startswith('struct<') and d.startswith('struct<')) -%}
  {#- field by field, by position (names need not agree), as Spark's store assignment -#}
  {%- set struct = s.startswith('struct<') -%}
  {%- set sa = [] -%}{%- set da = [] -%}
  {%- do spark_merge.spark_merge__type_args(s[(7 if struct else 4):-1], sa) -%}
  {%- do spark_merge.spark_merge__type_args(d[(7 if struct else 4):-1], da) -%}
  {%- set ns = namespace(ok=(sa | length == da | length)) -%}
  {%- for a in sa if ns.ok -%}
    {%- set ta = a.split(':', 1)[-1] if struct else a -%}
    {%- set tb = da[loop.index0].split(':', 1)[-1] if struct else da[loop.index0] -%}
    {%- set ns.ok = spark_merge.spark_merge__can_assign(ta, tb) | trim == 'true' -%}
  {%- endfor -%}
  {{- 'true' if ns.ok else 'false' -}}
{%- else -%}false
{%- endif -%}
{%- endmacro %}

{#- " (did you mean x?)" for a `name` the user spelled that is not among `candidates`: the closest
    candidate by edit distance, when it is at most a third of the name's length away (at least 1);
    nothing when none is that close. -#}
{% macro spark_merge__did_you_mean(name, candidates) -%}
{%- set ns = namespace(best=none, distance=1000) -%}
{%- for c in candidates -%}
  {%- set d = spark_merge.spark_merge__edit_distance(name | lower, c | lower) | int -%}
  {%- if d < ns.distance -%}{%- set ns.best = c -%}{%- set ns.distance = d -%}{%- endif -%}
{%- endfor -%}
{%- if ns.best is not none and ns.distance <= [1, (name | length) // 3] | max %} (did you mean {{ ns.best }}?){%- endif -%}
{%- endmacro %}

{#- Levenshtein's distance between two strings: insertions, deletions and substitutions. -#}
{% macro spark_merge__edit_distance(a, b) -%}
{%- set ns = namespace(previous=range(b | length + 1) | list) -%}
{%- for i in range(1, a | length + 1) -%}
  {%- set row = [i] -%}
  {%- for j in range(1, b | length + 1) -%}
    {%- do row.append([ns.previous[j] + 1, row[j - 1] + 1, ns.previous[j - 1] + (0 if a[i - 1] == b[j - 1] else 1)] | min) -%}
  {%- endfor -%}
  {%- set ns.previous = row -%}
{%- endfor -%}
{{ ns.previous[b | length] }}
{%- endmacro %}
