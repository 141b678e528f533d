{#-
  What spark-merge keeps about a table, and the one check of each record against its declared shape.

  It all lives where a user can copy or edit it: table properties (the identity, the version, the
  commit journal) and JSON files under the table's root (history entries). So nothing of it is used
  before it is checked: a record of the wrong shape, or one that belongs to another table, is refused
  with one line naming the object, the field and the command that repairs it.

  The identity: `spark_merge.table_id` (the id of the table's first spark-merge commit) and
  `spark_merge.table` (the table's name), written by every commit beside `spark_merge.root` (the
  directory that holds the table's versions, its history and its lock) and `spark_merge.identity`,
  which binds the id to the catalog's creation time of the table (which no ALTER TABLE changes): an
  edited id, or a table made from another's DDL, no longer matches it. A table's metadata is its
  own when its name is the one recorded and its location lies inside the recorded root (the root
  itself, or a version directory `<root>/_merge_<id>` of an unpartitioned table). A table created
  from another's `SHOW CREATE TABLE` carries the other's properties: its name differs, or its
  location lies outside that root, and `spark-merge adopt` gives it an identity of its own.
-#}

{#- Shapes: a record is {field: shape}; a shape is a record's (or a named list's) name, [shape] (a list of it), a kind
    (text, id, path, bool, int, counts, partition), any of them followed by '?' (may be null or
    absent). Fields not declared are allowed (a newer writer may add some). -#}
{% macro spark_merge__metadata_shapes(out) -%}
{%- do out.update({
  'repoint': {'partition': 'partition?', 'location': 'path', 'old_location': 'path?', 'exists': 'bool'},
  'journal': {'merge_id': 'id', 'table_id': 'id?', 'repoints': ['repoint'], 'entry': 'entry?', 'append': 'append?'},
  'append': {'partitions': ['appended']},
  'appended': {'partition': 'partition', 'before': 'int', 'after': 'int'},
  'counted': {'partition': 'partition', 'rows': 'int'},
  'partition_rows': ['counted'],
  'entry': {'merge_id': 'id', 'target': 'text', 'kind': 'text', 'paradigm': 'text', 'status': 'text?',
            'metrics': 'counts', 'partitions': ['partition'], 'repoints': ['repoint'], 'version_before': 'int',
            'version_after': 'int?', 'finished_at': 'text?', 'table_id': 'id?', 'run_key': 'text?', 'change_feed': 'bool?',
            'partition_rows': 'partition_rows?'},
}) -%}
{%- endmacro %}

{#- Appends to `out` one text per way `value` deviates from `shape`, each naming `path`. -#}
{% macro spark_merge__shape_errors(value, shape, path, out) -%}
{%- set shapes = {} -%}{%- do spark_merge.spark_merge__metadata_shapes(shapes) -%}
{%- if shape is string and shape.endswith('?') -%}
  {%- if value is not none -%}{%- do spark_merge.spark_merge__shape_errors(value, shape[:-1], path, out) -%}{%- endif -%}
{%- elif shape is not string -%}
  {%- if value is string or value is mapping or value is not iterable -%}
    {%- do out.append(path ~ ' is not a list') -%}
  {%- else -%}
    {%- for v in value -%}{%- do spark_merge.spark_merge__shape_errors(v, shape[0], path ~ '[' ~ loop.index0 ~ ']', out) -%}{%- endfor -%}
  {%- endif -%}
{%- elif shape in shapes and shapes[shape] is not mapping -%}
  {%- do spark_merge.spark_merge__shape_errors(value, shapes[shape], path, out) -%}
{%- elif shape in shapes -%}
  {%- if value is not mapping -%}
    {%- do out.append(path ~ ' is not an object') -%}
  {%- else -%}
    {%- for field, s in shapes[shape].items() -%}
      {%- if field not in value and not (s is string and s.endswith('?')) -%}
        {%- do out.append(path ~ '.' ~ field ~ ' is missing') -%}
      {%- else -%}
        {%- do spark_merge.spark_merge__shape_errors(value.get(field), s, path ~ '.' ~ field, out) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
{%- elif shape == 'text' and value is not string -%}{%- do out.append(path ~ ' is not a string') -%}
{%- elif shape == 'path' and not (value is string and value) -%}{%- do out.append(path ~ ' is not a path') -%}
{%- elif shape == 'id' and not spark_merge.spark_merge__is_id(value) -%}{%- do out.append(path ~ ' is not an id') -%}
{%- elif shape == 'bool' and not (value is sameas true or value is sameas false) -%}{%- do out.append(path ~ ' is not true or false') -%}
{%- elif shape == 'int' and not (value is integer and value is not boolean) -%}{%- do out.append(path ~ ' is not an integer') -%}
{%- elif shape == 'counts' -%}
  {%- if value is not mapping -%}{%- do out.append(path ~ ' is not an object') -%}
  {%- else -%}
    {%- for k, v in value.items() if not (v is number and v is not boolean) -%}{%- do out.append(path ~ '.' ~ k ~ ' is not a number') -%}{%- endfor -%}
  {%- endif -%}
{%- elif shape == 'partition' -%}
  {%- if value is not mapping -%}{%- do out.append(path ~ ' is not an object') -%}
  {%- else -%}
    {%- for k, v in value.items() if not (v is none or v is string) -%}{%- do out.append(path ~ '.' ~ k ~ ' is not a string or null') -%}{%- endfor -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- An id spark-merge writes (a merge id, a table id): letters, digits and underscores. Renders
    'True' or nothing, so `not is_id(x)` reads as it says. -#}
{% macro spark_merge__is_id(value) -%}
{%- if value is string and value and value | length <= 64 -%}
  {%- set ns = namespace(ok=true) -%}
  {%- for ch in value if not (ch.isalnum() and ch.isascii()) and ch != '_' -%}{%- set ns.ok = false -%}{%- endfor -%}
  {%- if ns.ok -%}True{%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- One spelling of a location, for comparing: file:///x/ and file:/x are the same directory. -#}
{% macro spark_merge__location_key(location) -%}
{%- set l = (location or '') | string -%}
{%- if l.startswith('file:///') -%}{%- set l = 'file:/' ~ l[8:] -%}{%- elif l.startswith('/') -%}{%- set l = 'file:' ~ l -%}{%- endif -%}
{{- l.rstrip('/') -}}
{%- endmacro %}

{#- Whether `location` is `parent` or lies below it. -#}
{% macro spark_merge__is_inside(location, parent) -%}
{%- set a, b = spark_merge.spark_merge__location_key(location) | trim, spark_merge.spark_merge__location_key(parent) | trim -%}
{{- (a == b or a.startswith(b ~ '/')) and b != '' -}}
{%- endmacro %}

{#-
  The identity and version of a table from its properties `props` (DESCRIBE ... AS JSON's
  table_properties), its name and location: fills `out` with table_id (none before the first
  commit), root, version, and trust_errors (why its metadata cannot be trusted, each naming the
  property and the repair; empty when it can).
-#}
{% macro spark_merge__identity(props, name, location, out, created=none) -%}
{%- set errors = [] -%}
{%- set root = props.get('spark_merge.root') or location -%}
{%- set recorded = props.get('spark_merge.table') -%}
{%- set table_id = props.get('spark_merge.table_id') -%}
{%- set fix = '`spark-merge adopt ' ~ name ~ '` makes them its own' -%}
{%- set version_text = props.get('spark_merge.version') or '0' -%}
{%- set version = version_text | int(-1) if version_text is string and version_text.isdigit() else -1 -%}
{%- if table_id is not none and not spark_merge.spark_merge__is_id(table_id) -%}
  {%- do errors.append('table property spark_merge.table_id of ' ~ name ~ ' is ' ~ table_id | tojson ~ ', not an id spark-merge wrote; ' ~ fix) -%}
{%- endif -%}
{%- if recorded is not none and recorded | lower != name | lower -%}
  {%- do errors.append('the spark-merge properties of ' ~ name ~ ' belong to table ' ~ recorded | tojson ~
      ' (spark_merge.table): copied from its DDL, or the table was renamed; ' ~ fix) -%}
{%- endif -%}
{%- set under = location | trim and spark_merge.spark_merge__is_inside(location, root) | trim == 'True' -%}
{%- set key = spark_merge.spark_merge__location_key(location) | trim -%}
{%- set rkey = spark_merge.spark_merge__location_key(root) | trim -%}
{%- if location and not (key == rkey or (under and key[rkey | length + 1:].startswith('_merge_'))) -%}
  {%- do errors.append('table property spark_merge.root of ' ~ name ~ ' is ' ~ root | tojson ~ ', which does not hold its location ' ~ location |
      tojson ~ ': the properties were copied from another table, or the table was moved; ' ~ fix) -%}
{%- endif -%}
{%- set signed = props.get('spark_merge.identity') -%}
{%- if not errors and table_id is not none and signed is not none and signed != spark_merge.spark_merge__identity_sign(table_id, created) | trim -%}
  {%- do errors.append('table property spark_merge.table_id of ' ~ name ~ ' is ' ~ table_id | tojson ~ ', which is not the id its commits ' ~
      'recorded (spark_merge.identity): the property was edited, or the table was made from another one\'s DDL; ' ~ fix) -%}
{%- endif -%}
{%- if version < 0 -%}
  {%- do errors.append('table property spark_merge.version of ' ~ name ~ ' is ' ~ version_text | tojson ~
      ', not a version number; `spark-merge adopt ' ~ name ~ '` sets it from the history') -%}
{%- endif -%}
{%- do out.update({'table_id': table_id, 'root': root, 'version': [version, 0] | max, 'trust_errors': errors}) -%}
{%- endmacro %}

{#- The format of the metadata this release writes (spark_merge.format_version): 1, the first release's
    (no property); 2 adds the identity's signature, the change feed and former roots. A release reads
    every format up to its own and refuses a newer one. -#}
{% macro spark_merge__format_version() -%}2{%- endmacro %}

{#- Why this release cannot read the table's metadata (a newer format), or nothing. -#}
{% macro spark_merge__format_error(props, name) -%}
{%- set text = props.get('spark_merge.format_version') or '1' -%}
{%- set mine = spark_merge.spark_merge__format_version() | int -%}
{%- if not (text is string and text.isdigit()) or text | int > mine -%}
{{ 'table ' ~ name ~ ' was written by a newer spark-merge (table format ' ~ text ~ '; this release reads formats 1 to ' ~ mine ~
    '): install the release that wrote it, or a later one (pip install -U spark-merge); nothing was changed' }}
{%- endif -%}
{%- endmacro %}

{#- The signature of a table id: bound to the table's creation time in the catalog. -#}
{% macro spark_merge__identity_sign(table_id, created) -%}
{{ local_md5(table_id ~ '|' ~ (created or '')) }}
{%- endmacro %}

{#- The properties every commit writes: the identity (this table's, or, at its first commit, the
    commit's own id as the table's, with its signature) and the version after it. -#}
{% macro spark_merge__identity_properties(table, merge_id) -%}
'spark_merge.root' = {{ spark_merge.spark_merge__literal(table.root) }},
 'spark_merge.table_id' = {{ spark_merge.spark_merge__literal(table.table_id or merge_id) }},
 'spark_merge.identity' = {{ spark_merge.spark_merge__literal(spark_merge.spark_merge__identity_sign(table.table_id or merge_id,
     table.get('created')) | trim) }},
 'spark_merge.format_version' = '{{ spark_merge.spark_merge__format_version() }}',
 'spark_merge.table' = {{ spark_merge.spark_merge__literal(table.database ~ '.' ~ table.table_name) }},
 'spark_merge.version' = '{{ table.version + 1 }}'
{%- endmacro %}

{#- An entry written before the table's root moved (a rename that moved it: adopt records the roots
    it had in the property spark_merge.former_roots), with its paths under a former root spelled as
    they are now, under the root. Changes `entry` in place. -#}
{% macro spark_merge__rebase_entry(table, entry) -%}
{%- set root = spark_merge.spark_merge__location_key(table.root) | trim -%}
{%- for former in table.get('former_roots') or [] -%}
  {%- set f = spark_merge.spark_merge__location_key(former) | trim -%}
  {%- for r in entry.get('repoints') or [] -%}
    {%- for k in ['location', 'old_location'] if r.get(k) -%}
      {%- set key = spark_merge.spark_merge__location_key(r[k]) | trim -%}
      {%- if key == f or key.startswith(f ~ '/') -%}{%- do r.update({k: root ~ key[f | length:]}) -%}{%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- set moved = [] -%}
  {%- for p in entry.get('discarded') or [] -%}
    {%- set key = spark_merge.spark_merge__location_key(p) | trim -%}
    {%- do moved.append(root ~ key[f | length:] if key.startswith(f ~ '/') else p) -%}
  {%- endfor -%}
  {%- if entry.get('discarded') -%}{%- do entry.update({'discarded': moved}) -%}{%- endif -%}
{%- endfor -%}
{%- endmacro %}

{#- Whether a history entry `entry` (parsed JSON) is one of `table`'s: its errors appended to `out`
    (its shape, then whose it is). An entry written before identities existed names the table. -#}
{% macro spark_merge__entry_errors(table, entry, path, out) -%}
{%- do spark_merge.spark_merge__shape_errors(entry, 'entry', path, out) -%}
{%- if not out and table.table_id and entry.get('table_id') and entry.table_id != table.table_id -%}
  {%- do out.append(path ~ ' belongs to another table (table_id ' ~ entry.table_id ~ ', ' ~ entry.target ~ '), not to ' ~ table.name ~ ' (' ~
      table.table_id ~ ')') -%}
{%- elif not out and not entry.get('table_id') and entry.target | lower != table.name | lower and entry.target | lower != (table.database ~ '.' ~
    table.table_name) | lower -%}
  {%- do out.append(path ~ ' is an entry of table ' ~ entry.target ~ ', not of ' ~ table.name) -%}
{%- endif -%}
{%- endmacro %}
