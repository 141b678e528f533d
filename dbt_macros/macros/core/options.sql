{#-
  Every option, declared once. Python (merge_core/request/options.py: the spec, merge()'s keywords, the
  CLI's flags, the Airflow operator's docs) and dbt (the materialization's config check) read
  this table; tests/unit/test_options.py holds each host to it.

  name     merge()'s keyword and the spec's key
  kind     string | list (a string is a list of one) | choice | bool | number | fields (per-field
           engine option: {column: value}; on the CLI --field COLUMN.<cli>=VALUE)
  group    merge (any statement) | upsert (watermark upserts and merge engines) | engine (merge
           engines only) | table (kept in the table's properties) | dbt (the materialization only)
  choices  allowed values (kind choice)    default  when not given
  cli      the command line's flag (none: not on the CLI)
  dbt      the dbt config name (none: not a dbt config)
  help     one line for the CLI, the operator's docs and the README
  needs    (optional) the options of which one must be set for this one to do anything: given
           without them it is refused (option_errors), never ignored
-#}
{% macro spark_merge__option_table(out) -%}
{%- do spark_merge.spark_merge__statement_options(out) -%}
{%- do spark_merge.spark_merge__engine_and_table_options(out) -%}
{%- endmacro %}

{#- The options of a statement and of an upsert (groups merge, upsert). -#}
{% macro spark_merge__statement_options(out) -%}
{%- do out.extend([
  {'name': 'duplicate_rule', 'kind': 'choice', 'group': 'merge', 'choices': ['trino', 'postgres', 'strict'], 'default': 'trino',
   'cli': '--duplicate-rule', 'dbt': 'duplicate_rule',
   'help': 'when two source rows meet one target row: trino (same clause), postgres (two modifications), strict (any second match)'},
  {'name': 'lossy_assignments', 'kind': 'choice', 'group': 'merge', 'choices': ['warn', 'refuse', 'allow'], 'default': 'warn',
   'cli': '--lossy-assignments', 'dbt': 'lossy_assignments',
   'help': 'a value whose type says storing it loses information (27.5 into a BIGINT, a double into a decimal(10,2)): warn, refuse, or allow silently'},
  {'name': 'schema_evolution', 'kind': 'bool', 'group': 'merge', 'choices': none, 'default': false,
   'cli': '--schema-evolution', 'dbt': 'schema_evolution',
   'help':
       'add the source columns the target lacks that the merge assigns directly (UPDATE SET *, INSERT *, SET c = s.c; ALTER TABLE ... ADD ' ~
           'COLUMNS), as MERGE WITH SCHEMA EVOLUTION'},
  {'name': 'partition_filter', 'kind': 'string', 'group': 'merge', 'choices': none, 'default': none,
   'cli': '--partition-filter', 'dbt': none, 'help': 'a predicate on target columns promising where matching target rows live'},
  {'name': 'key_columns', 'kind': 'list', 'group': 'merge', 'choices': none, 'default': none,
   'cli': none, 'dbt': none, 'help': 'target columns a duplicate-match error shows (default: those in ON)'},
  {'name': 'primary_key', 'kind': 'list', 'group': 'upsert', 'choices': none, 'default': none,
   'cli': '--primary-key', 'dbt': 'unique_key', 'help': 'the key an upsert or a merge engine combines rows by'},
  {'name': 'watermark_key', 'kind': 'list', 'group': 'upsert', 'choices': none, 'default': none,
   'cli': '--watermark-key', 'dbt': 'watermark_key', 'help': 'a row replaces the stored one only when its watermark is newer'},
  {'name': 'tombstone_key', 'kind': 'string', 'group': 'upsert', 'choices': none, 'default': none,
   'cli': '--tombstone-key', 'dbt': 'tombstone_key', 'needs': ['watermark_key'], 'help': 'a true (or matching) value marks a delete'},
  {'name': 'tombstone_string_key_value', 'kind': 'string', 'group': 'upsert', 'choices': none, 'default': none,
   'cli': '--tombstone-string-key-value', 'dbt': 'tombstone_string_key_value', 'needs': ['watermark_key'], 'help':
       'for a string tombstone key: the value meaning delete'},
  {'name': 'upsert_mode', 'kind': 'choice', 'group': 'upsert', 'choices': ['copy-on-write', 'merge-on-read'], 'default': none,
   'cli': '--upsert-mode', 'dbt': 'upsert_mode', 'needs': ['watermark_key', 'merge_engine'], 'help':
       'copy-on-write (the default: rewrite touched partitions now) or merge-on-read (append to a log that a view and compaction reduce)'},
  {'name': 'merge_engine', 'kind': 'choice', 'group': 'upsert', 'choices': ['deduplicate', 'partial-update', 'aggregation', 'first-row'], 'default': none,
   'cli': '--merge-engine', 'dbt': 'merge_engine', 'help': 'how records of one key combine (Paimon merge engines)'},
]) -%}
{%- endmacro %}

{#- The options of a merge engine, of the table and of dbt (groups engine, table, dbt). -#}
{% macro spark_merge__engine_and_table_options(out) -%}
{%- do out.extend([
  {'name': 'sequence_field', 'kind': 'list', 'group': 'engine', 'needs': ['merge_engine'], 'choices': none, 'default': none,
   'cli': '--sequence-field', 'dbt': 'sequence_field', 'help': 'orders records of a key'},
  {'name': 'row_kind_field', 'kind': 'string', 'group': 'engine', 'needs': ['merge_engine'], 'choices': none, 'default': none,
   'cli': '--row-kind-field', 'dbt': 'row_kind_field', 'help': 'column holding +I, -U, +U or -D'},
  {'name': 'ignore_delete', 'kind': 'bool', 'group': 'engine', 'needs': ['merge_engine'], 'choices': none, 'default': none,
   'cli': '--ignore-delete', 'dbt': 'ignore_delete', 'help': 'drop -U/-D records instead of failing'},
  {'name': 'remove_record_on_delete', 'kind': 'bool', 'group': 'engine', 'needs': ['row_kind_field'], 'choices': none, 'default': none,
   'cli': '--remove-record-on-delete', 'dbt': 'remove_record_on_delete',
   'help': 'partial-update and aggregation engines: a -D record removes the whole row (a later record of the key starts a new one)'},
  {'name': 'default_aggregate_function', 'kind': 'string', 'group': 'engine', 'needs': ['merge_engine'], 'choices': none, 'default': none,
   'cli': '--default-aggregate-function', 'dbt': 'default_aggregate_function', 'help': 'aggregation engine: the function of columns without their own'},
  {'name': 'aggregate_function', 'kind': 'fields', 'group': 'engine', 'needs': ['merge_engine'], 'choices': none, 'default': none,
   'cli': 'aggregate-function', 'dbt': 'aggregate_function', 'help': 'aggregation engine: a column\'s function (sum, max, last_value, ...)'},
  {'name': 'sequence_group', 'kind': 'fields', 'group': 'engine', 'needs': ['merge_engine'], 'choices': none, 'default': none,
   'cli': 'sequence-group', 'dbt': 'sequence_group', 'help': 'partial-update engine: columns a sequence column orders'},
  {'name': 'ignore_retract', 'kind': 'fields', 'group': 'engine', 'needs': ['merge_engine'], 'choices': none, 'default': none,
   'cli': 'ignore-retract', 'dbt': 'ignore_retract', 'help': 'aggregation engine: a column ignores retractions'},
  {'name': 'distinct', 'kind': 'fields', 'group': 'engine', 'needs': ['merge_engine'], 'choices': none, 'default': none,
   'cli': 'distinct', 'dbt': 'distinct', 'help': 'collect/listagg: distinct values'},
  {'name': 'nested_key', 'kind': 'fields', 'group': 'engine', 'needs': ['merge_engine'], 'choices': none, 'default': none,
   'cli': 'nested-key', 'dbt': 'nested_key', 'help': 'nested_update: the key of the nested rows'},
  {'name': 'listagg_delimiter', 'kind': 'fields', 'group': 'engine', 'needs': ['merge_engine'], 'choices': none, 'default': none,
   'cli': 'list-agg-delimiter', 'dbt': 'listagg_delimiter', 'help': 'listagg: the delimiter'},
  {'name': 'retention_hours', 'kind': 'number', 'group': 'table', 'choices': none, 'default': none,
   'cli': none, 'dbt': 'retention_hours', 'help': 'how long old versions stay for readers and rollback (table property; default 168, 7 days)'},
  {'name': 'change_feed', 'kind': 'bool', 'group': 'table', 'choices': none, 'default': none,
   'cli': none, 'dbt': 'change_feed', 'help': 'record each commit\'s row changes, read by table_changes (table property spark_merge.change_feed)'},
  {'name': 'file_format', 'kind': 'choice', 'group': 'dbt', 'choices': ['parquet', 'orc'], 'default': 'parquet',
   'cli': none, 'dbt': 'file_format', 'help': 'the table\'s format (delta, iceberg and hudi have their own merge)'},
  {'name': 'on_schema_change', 'kind': 'choice', 'group': 'dbt', 'choices': ['ignore', 'fail', 'append_new_columns', 'sync_all_columns'], 'default': 'ignore',
   'cli': none, 'dbt': 'on_schema_change', 'help': 'when the model\'s columns differ from the table\'s (dbt\'s meaning)'},
]) -%}
{%- endmacro %}

{#- The names of the options of `group`, in declaration order, appended to `out`. -#}
{% macro spark_merge__option_names(group, out) -%}
{%- set table = [] -%}
{%- do spark_merge.spark_merge__option_table(table) -%}
{%- for o in table if o.group == group -%}{%- do out.append(o.name) -%}{%- endfor -%}
{%- endmacro %}

{#- One option's declaration, into `out`. -#}
{% macro spark_merge__option(name, out) -%}
{%- set table = [] -%}
{%- do spark_merge.spark_merge__option_table(table) -%}
{%- for o in table if o.name == name -%}{%- do out.update(o) -%}{%- endfor -%}
{%- endmacro %}

{#- "a, b or c": an option's choices, for messages. -#}
{% macro spark_merge__choices_text(name) -%}
{%- set o = {} -%}
{%- do spark_merge.spark_merge__option(name, o) -%}
{{ o.choices[:-1] | join(', ') }} or {{ o.choices[-1] }}
{%- endmacro %}

{#- The options in `values` ({name: value}) given where nothing would read them (see `needs`):
    one error per missing option, naming the options it would make apply. -#}
{% macro spark_merge__option_errors(values, out) -%}
{%- set declared = [] -%}
{%- do spark_merge.spark_merge__option_table(declared) -%}
{%- set unmet = {} -%}
{%- for o in declared if o.get('needs') and values.get(o.name) not in [none, false, '', [], {}] -%}
  {%- set met = [] -%}{%- for n in o.needs if values.get(n) -%}{%- do met.append(n) -%}{%- endfor -%}
  {%- if not met -%}{%- do unmet.update({o.needs | join(' or '): unmet.get(o.needs | join(' or '), []) + [o.name]}) -%}{%- endif -%}
{%- endfor -%}
{%- for needs, names in unmet.items() -%}
  {%- set what = {'merge_engine': 'merge engines (merge_engine: ' ~ spark_merge.spark_merge__choices_text('merge_engine') ~ ')',
                  'watermark_key': 'watermark upserts (watermark_key)',
                  'watermark_key or merge_engine': 'watermark upserts and merge engines (watermark_key or merge_engine)',
                  'row_kind_field': 'change records marked +I, -U, +U or -D (row_kind_field)'}.get(needs, needs) -%}
  {%- do out.append(names | join(', ') ~ (' apply' if names | length > 1 else ' applies') ~ ' only to ' ~ what ~ ', and nothing here sets ' ~ needs ~
      ': set it, or leave ' ~ names | join(', ') ~ ' out') -%}
{%- endfor -%}
{%- endmacro %}
