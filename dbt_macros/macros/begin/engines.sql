{#-
  Primary-key merge engines (Apache Paimon's deduplicate, partial-update,
  aggregation, first-row), compiled to source reduction + an ordinary MERGE.

  For every key of the source, the existing target row (if any) and all source
  rows of that key are put in one array, sorted by (sequence_field, target row
  first, input order), and folded left to right with Spark's `aggregate`
  higher-order function, one accumulator field per column. The fold is a
  literal transcription of the engine's per-record rule, so the result does not
  depend on how records were batched: one batch of everything gives what
  successive merges give. The reduced source has one row per key and a
  `__sm_del` flag; the MERGE deletes, updates (only rows that changed) or
  inserts. Rules the engine rejects at run time (a DELETE record where the
  engine accepts none, a retraction of a function that cannot retract, a bad
  row kind) raise MERGE_ENGINE_REJECTED while the plan is built, before writes.

  Options (spec.upsert): merge_engine, primary_key, sequence_field,
  row_kind_field (+I, -U, +U, -D), ignore_delete, remove_record_on_delete, aggregate_function
  {field: fn}, default_aggregate_function, sequence_group {"g1[,g2]": "a,b"}, ignore_retract [fields],
  distinct [fields], nested_key {field: "k1,k2"}, listagg_delimiter {field: d}.
-#}

{#- names: a list, or a comma-separated string, appended to `out` (stripped). -#}
{% macro spark_merge__engine_names(value, out) -%}
{%- if value is none -%}
{%- elif value is string -%}
  {%- for v in value.split(',') if v.strip() -%}{%- do out.append(v.strip()) -%}{%- endfor -%}
{%- else -%}
  {%- for v in value -%}{%- do spark_merge.spark_merge__engine_names(v, out) -%}{%- endfor -%}
{%- endif -%}
{%- endmacro %}

{#- field flags: a list / comma string of names, or {name: bool}; lower-cased names to `out`. -#}
{% macro spark_merge__engine_flags(value, out) -%}
{%- if value is mapping -%}
  {%- for k, v in value.items() if v in [true, 'true', 'True', 1] -%}{%- do out.append(k | lower) -%}{%- endfor -%}
{%- else -%}
  {%- set names = [] -%}
  {%- do spark_merge.spark_merge__engine_names(value, names) -%}
  {%- for n in names -%}{%- do out.append(n | lower) -%}{%- endfor -%}
{%- endif -%}
{%- endmacro %}

{#- The Paimon functions: which types each takes, and whether it can retract. -#}
{% macro spark_merge__engine_functions(out) -%}
{%- do out.update({
  'sum': {'types': 'numeric', 'retract': true}, 'product': {'types': 'numeric', 'retract': true},
  'count': {'types': 'integer', 'retract': true},
  'max': {'types': 'comparable', 'retract': false}, 'min': {'types': 'comparable', 'retract': false},
  'last_value': {'types': 'any', 'retract': true}, 'last_non_null_value': {'types': 'any', 'retract': true},
  'listagg': {'types': 'string', 'retract': false},
  'bool_and': {'types': 'boolean', 'retract': false}, 'bool_or': {'types': 'boolean', 'retract': false},
  'first_value': {'types': 'any', 'retract': false}, 'first_non_null_value': {'types': 'any', 'retract': false},
  'nested_update': {'types': 'array<struct', 'retract': true}, 'collect': {'types': 'array', 'retract': true},
  'merge_map': {'types': 'map', 'retract': true},
}) -%}
{%- endmacro %}

{% macro spark_merge__engine_type_ok(kind, ty) -%}
{%- set numeric = ty in ['tinyint', 'smallint', 'int', 'bigint', 'float', 'double'] or ty.startswith('decimal') -%}
{%- set stringy = ty == 'string' or ty.startswith('varchar') or ty.startswith('char') -%}
{%- if kind == 'any' -%}true
{%- elif kind == 'numeric' -%}{{ numeric }}
{%- elif kind == 'integer' -%}{{ ty in ['int', 'bigint'] }}
{%- elif kind == 'comparable' -%}{{ numeric or stringy or ty in ['date', 'timestamp', 'timestamp_ntz'] }}
{%- elif kind == 'string' -%}{{ stringy }}
{%- elif kind == 'boolean' -%}{{ ty == 'boolean' }}
{%- elif kind == 'array<struct' -%}{{ ty.startswith('array<struct<') }}
{%- elif kind == 'array' -%}{{ ty.startswith('array<') }}
{%- elif kind == 'map' -%}{{ ty.startswith('map<') }}
{%- else -%}false
{%- endif -%}
{%- endmacro %}

{#-
  Checks the options against the table; fills `out` with errors and the
  normalized engine: engine, pk, seq, kind_field, ignore_delete, remove_on_delete, fn {lname: fn},
  groups [{seq: [names], fields: [lnames]}], ignore_retract, distinct,
  nested_key {lname: [names]}, delimiter {lname: text}.
-#}
{% macro spark_merge__engine_options(raw, table, out) -%}
{%- set errors = [] -%}
{%- set cols_text = table.columns | map(attribute='name') | join(', ') -%}
{%- set declared = {} -%}
{%- do spark_merge.spark_merge__option('merge_engine', declared) -%}
{%- set engines = declared.choices -%}
{%- set engine = (raw.get('merge_engine') or 'deduplicate') | lower | replace('_', '-') -%}
{%- if engine not in engines -%}
  {%- do errors.append('merge_engine: unknown engine ' ~ raw.get('merge_engine') ~ ' (expected one of ' ~ engines | join(', ') ~ ')') -%}
{%- endif -%}
{%- set pk, seq = [], [] -%}
{%- do spark_merge.spark_merge__engine_names(raw.get('primary_key'), pk) -%}
{%- do spark_merge.spark_merge__engine_names(raw.get('sequence_field'), seq) -%}
{%- if not pk -%}{%- do errors.append('merge_engine: primary_key (one or more columns) is required') -%}{%- endif -%}
{%- for name in pk + seq if (name | lower) not in table.columns_by_name -%}
  {%- do errors.append('merge_engine: unknown column ' ~ name ~ spark_merge.spark_merge__did_you_mean(name, table.columns | map(attribute='name')) ~
      ' (target ' ~ table.name ~ ' has: ' ~ cols_text ~ ')') -%}
{%- endfor -%}
{%- set pk_l = pk | map('lower') | list -%}
{%- for name in seq if (name | lower) in table.columns_by_name -%}
  {%- set ty = table.columns_by_name[name | lower].type | lower -%}
  {%- if ty.startswith('array') or ty.startswith('map') or ty.startswith('struct') -%}
    {%- do errors.append('sequence_field ' ~ name ~ ' must have a comparable primitive type, not ' ~ ty) -%}
  {%- endif -%}
{%- endfor -%}
{%- if engine == 'first-row' and seq -%}
  {%- do errors.append('merge_engine first-row keeps the first row in input order: sequence_field is not allowed') -%}
{%- endif -%}
{%- if raw.get('upsert_mode') not in [none, 'copy-on-write'] -%}
  {%- do errors.append('merge_engine works with upsert_mode copy-on-write only, got ' ~ raw.get('upsert_mode')) -%}
{%- endif -%}
{%- if raw.get('watermark_key') or raw.get('tombstone_key') -%}
  {%- do errors.append('merge_engine and watermark_key/tombstone_key are two kinds of upsert: choose one (a sequence_field orders records in an engine)') -%}
{%- endif -%}
{%- set kind_field = raw.get('row_kind_field') -%}
{%- set ignore_delete = raw.get('ignore_delete') in [true, 'true', 'True', 1] -%}
{#- per-field options -#}
{%- set functions = {} -%}
{%- do spark_merge.spark_merge__engine_functions(functions) -%}
{%- set fn = {} -%}
{%- do spark_merge.spark_merge__engine_aggregate_functions(raw, table, engine, pk_l, functions, fn, errors) -%}
{%- set groups = [] -%}
{%- do spark_merge.spark_merge__engine_sequence_groups(raw, table, engine, pk_l, groups, errors) -%}
{#- Paimon's partial-update.remove-record-on-delete and aggregation.remove-record-on-delete -#}
{%- set remove_on_delete = raw.get('remove_record_on_delete') in [true, 'true', 'True', 1] -%}
{%- if remove_on_delete and engine not in ['partial-update', 'aggregation'] -%}
  {%- do errors.append('remove_record_on_delete applies to the partial-update and aggregation engines, not ' ~ engine ~
      (' (a -D record already deletes its row)' if engine == 'deduplicate' else ' (it accepts no -D record)')) -%}
{%- elif remove_on_delete and ignore_delete -%}
  {%- do errors.append('remove_record_on_delete and ignore_delete contradict each other (a -D record removes the row, or is dropped): set one') -%}
{%- elif remove_on_delete and groups -%}
  {%- do errors.append('remove_record_on_delete and sequence_group contradict each other (with sequence groups a -D record retracts its group): set one') -%}
{%- endif -%}
{%- do spark_merge.spark_merge__engine_default_functions(raw, table, engine, pk_l, groups, functions, fn, errors) -%}
{%- set fields = {} -%}
{%- do spark_merge.spark_merge__engine_field_flags(raw, table, fn, fields, errors) -%}
{%- do out.update({'errors': errors, 'engine': engine, 'pk': pk, 'seq': seq, 'kind_field': kind_field, 'ignore_delete': ignore_delete,
                   'remove_on_delete': remove_on_delete, 'fn': fn, 'groups': groups, 'functions': functions}) -%}
{%- do out.update(fields) -%}
{%- endmacro %}

{#- merge engine options: default_aggregate_function, the function of the fields `fn` gives none (the
    aggregation engine's default: last_non_null_value), into `fn`; and partial-update's rule that a
    function other than last_non_null_value needs a sequence group. Refusals into `errors`. -#}
{% macro spark_merge__engine_default_functions(raw, table, engine, pk_l, groups, functions, fn, errors) -%}
{#- fields without a function: the default one (aggregation: last_non_null_value) -#}
{%- set default_fn = (raw.get('default_aggregate_function') or ('last_non_null_value' if engine == 'aggregation' else '')) | lower -%}
{%- if default_fn and default_fn not in functions -%}
  {%- do errors.append('default_aggregate_function: unknown function ' ~ default_fn ~ ' (known: ' ~ functions.keys() | sort | join(', ') ~ ')') -%}
{%- elif default_fn and engine not in ['partial-update', 'aggregation'] -%}
  {%- do errors.append('default_aggregate_function applies to the partial-update and aggregation engines, not ' ~ engine) -%}
{%- elif default_fn -%}
  {%- set sequence_fields = [] -%}
  {%- for g in groups -%}{%- do sequence_fields.extend(g.seq | map('lower')) -%}{%- endfor -%}
  {%- for c in table.columns if (c.name | lower) not in pk_l + sequence_fields and (c.name | lower) not in fn -%}
    {%- if spark_merge.spark_merge__engine_type_ok(functions[default_fn].types, c.type | lower) | trim | lower != 'true' -%}
      {%- do errors.append('default_aggregate_function ' ~ default_fn ~ ' does not take column ' ~ c.name ~ ' of type ' ~ c.type | lower ~
          ' (it takes ' ~ functions[default_fn].types ~ ' types)') -%}
    {%- endif -%}
    {%- do fn.update({c.name | lower: default_fn}) -%}
  {%- endfor -%}
{%- endif -%}
{#- partial-update: only a sequence group says whether a record is older, so (as in Paimon) a
    function other than last_non_null_value needs its field in a group -#}
{%- if engine == 'partial-update' -%}
  {%- set protected = [] -%}
  {%- for g in groups -%}{%- do protected.extend(g.fields) -%}{%- endfor -%}
  {%- for name, f in fn.items() | sort if f != 'last_non_null_value' and name not in protected -%}
    {%- do errors.append('aggregate_function ' ~ f ~ ' on ' ~ name ~
        ': a partial-update field with a function other than last_non_null_value must be in a sequence_group') -%}
  {%- endfor -%}
{%- endif -%}
{%- endmacro %}

{#- merge engine options: aggregate_function, checked against the table and the engine; each field's
    function into `fn` (lower-case name -> function), refusals into `errors`. -#}
{% macro spark_merge__engine_aggregate_functions(raw, table, engine, pk_l, functions, fn, errors) -%}
{%- set cols_text = table.columns | map(attribute='name') | join(', ') -%}
{%- set agg_raw = raw.get('aggregate_function') or {} -%}
{%- if agg_raw is not mapping -%}
  {%- do errors.append('aggregate_function must map field to function, got ' ~ agg_raw) -%}{%- set agg_raw = {} -%}
{%- endif -%}
{%- if agg_raw and engine not in ['partial-update', 'aggregation'] -%}
  {%- do errors.append('aggregate_function applies to the partial-update and aggregation engines, not ' ~ engine) -%}
{%- endif -%}
{%- for name, f in agg_raw.items() -%}
  {%- set lname = name | lower -%}
  {%- set f = f | lower -%}
  {%- if lname not in table.columns_by_name -%}
    {%- do errors.append('aggregate_function: unknown column ' ~ name ~ spark_merge.spark_merge__did_you_mean(name, table.columns |
        map(attribute='name')) ~ ' (target ' ~ table.name ~ ' has: ' ~ cols_text ~ ')') -%}
  {%- elif lname in pk_l -%}
    {%- do errors.append('aggregate_function: ' ~ name ~ ' is a primary key column and cannot be aggregated') -%}
  {%- elif f not in functions -%}
    {%- do errors.append('aggregate_function: unknown function ' ~ f ~ ' for ' ~ name ~ ' (known: ' ~ functions.keys() | sort | join(', ') ~ ')') -%}
  {%- else -%}
    {%- set ty = table.columns_by_name[lname].type | lower -%}
    {%- if spark_merge.spark_merge__engine_type_ok(functions[f].types, ty) | trim | lower != 'true' -%}
      {%- do errors.append('aggregate_function ' ~ f ~ ' does not take column ' ~ name ~ ' of type ' ~ ty ~ ' (it takes ' ~ functions[f].types ~ ' types)') -%}
    {%- endif -%}
    {%- do fn.update({lname: f}) -%}
  {%- endif -%}
{%- endfor -%}
{%- endmacro %}

{#- merge engine options: sequence_group (partial-update), each group {seq, fields, name} appended to
    `groups`, refusals into `errors`. -#}
{% macro spark_merge__engine_sequence_groups(raw, table, engine, pk_l, groups, errors) -%}
{%- set cols_text = table.columns | map(attribute='name') | join(', ') -%}
{%- set grouped = {} -%}
{%- set groups_raw = raw.get('sequence_group') or {} -%}
{%- if groups_raw is not mapping -%}
  {%- do errors.append('sequence_group must map sequence field(s) to the fields of the group, got ' ~ groups_raw) -%}{%- set groups_raw = {} -%}
{%- endif -%}
{%- if groups_raw and engine != 'partial-update' -%}
  {%- do errors.append('sequence_group applies to the partial-update engine only') -%}
{%- endif -%}
{%- for key, members in groups_raw.items() -%}
  {%- set gseq, gfields = [], [] -%}
  {%- do spark_merge.spark_merge__engine_names(key, gseq) -%}
  {%- do spark_merge.spark_merge__engine_names(members, gfields) -%}
  {%- for name in gseq + gfields -%}
    {%- if (name | lower) not in table.columns_by_name -%}
      {%- do errors.append('sequence_group ' ~ key ~ ': unknown column ' ~ name ~ spark_merge.spark_merge__did_you_mean(name, table.columns |
          map(attribute='name')) ~ ' (target ' ~ table.name ~ ' has: ' ~ cols_text ~ ')') -%}
    {%- elif (name | lower) in pk_l -%}
      {%- do errors.append('sequence_group ' ~ key ~ ': ' ~ name ~ ' is a primary key column') -%}
    {%- elif (name | lower) in grouped -%}
      {%- do errors.append('sequence_group ' ~ key ~ ': column ' ~ name ~ ' is already in sequence group ' ~ grouped[name | lower]) -%}
    {%- else -%}
      {%- do grouped.update({name | lower: key}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for name in gseq if (name | lower) in table.columns_by_name -%}
    {%- set ty = table.columns_by_name[name | lower].type | lower -%}
    {%- if ty.startswith('array') or ty.startswith('map') or ty.startswith('struct') or ty in ['boolean', 'binary', 'string'] -%}
      {%- do errors.append('sequence_group ' ~ key ~ ': sequence field ' ~ name ~ ' must be numeric, a date or a timestamp, not ' ~ ty) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if not gfields -%}{%- do errors.append('sequence_group ' ~ key ~ ': the group has no fields') -%}{%- endif -%}
  {%- do groups.append({'seq': gseq, 'fields': gfields | map('lower') | list, 'name': key}) -%}
{%- endfor -%}
{%- endmacro %}

{#- merge engine options: the per-field flags ignore_retract and distinct, nested_key and
    listagg_delimiter, checked against the fields' functions `fn`, into `out`; refusals into `errors`. -#}
{% macro spark_merge__engine_field_flags(raw, table, fn, out, errors) -%}
{%- set ignore_retract, distinct = [], [] -%}
{%- do spark_merge.spark_merge__engine_flags(raw.get('ignore_retract'), ignore_retract) -%}
{%- do spark_merge.spark_merge__engine_flags(raw.get('distinct'), distinct) -%}
{%- for name in ignore_retract if name not in fn -%}
  {%- do errors.append('ignore_retract: column ' ~ name ~ ' has no aggregate function') -%}
{%- endfor -%}
{%- for name in distinct if fn.get(name) not in ['collect', 'listagg'] -%}
  {%- do errors.append('distinct: column ' ~ name ~ ' is not aggregated with collect or listagg') -%}
{%- endfor -%}
{%- set nested_key, delimiter = {}, {} -%}
{%- for name, keys in (raw.get('nested_key') or {}).items() -%}
  {%- set names = [] -%}
  {%- do spark_merge.spark_merge__engine_names(keys, names) -%}
  {%- if fn.get(name | lower) != 'nested_update' -%}
    {%- do errors.append('nested_key: column ' ~ name ~ ' is not aggregated with nested_update') -%}
  {%- else -%}
    {%- set ty = table.columns_by_name[name | lower].type | lower -%}
    {%- for k in names if ('<' ~ k | lower ~ ':') not in ty and (',' ~ k | lower ~ ':') not in ty -%}
      {%- do errors.append('nested_key: ' ~ k ~ ' is not a field of ' ~ name ~ ' (' ~ ty ~ ')') -%}
    {%- endfor -%}
    {%- do nested_key.update({name | lower: names}) -%}
  {%- endif -%}
{%- endfor -%}
{%- for name, d in (raw.get('listagg_delimiter') or {}).items() -%}
  {%- if fn.get(name | lower) != 'listagg' -%}
    {%- do errors.append('listagg_delimiter: column ' ~ name ~ ' is not aggregated with listagg') -%}
  {%- else -%}
    {%- do delimiter.update({name | lower: d}) -%}
  {%- endif -%}
{%- endfor -%}
{%- do out.update({'ignore_retract': ignore_retract, 'distinct': distinct, 'nested_key': nested_key, 'delimiter': delimiter}) -%}
{%- endmacro %}
