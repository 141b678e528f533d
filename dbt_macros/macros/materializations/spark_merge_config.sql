{#-
  dbt-only: the model's config as a merge spec (the same dict merge_core's
  MergeSpec.to_dict() gives), for the pure macros in ../ to plan and commit.
  Aliases are dbt's own: DBT_INTERNAL_DEST (target) and DBT_INTERNAL_SOURCE.
-#}

{#- What runs: the model (`this`), or in an operation its target table. -#}
{% macro spark_merge__dbt_who() -%}
{{ return(this if this is defined else 'operation') }}
{%- endmacro %}

{% macro spark_merge__dbt_fail(message) -%}
{{ exceptions.raise_compiler_error("spark_merge (" ~ spark_merge.spark_merge__dbt_who() ~ "): " ~ message) }}
{%- endmacro %}

{#- A failure while the model runs (a conflict, a duplicate match, rows that do not fit the table):
    dbt labels it a Database Error; a wrong config stays a Compilation Error (spark_merge__dbt_fail). -#}
{% macro spark_merge__dbt_runtime_fail(message) -%}
{{ exceptions.raise_database_error("spark_merge (" ~ spark_merge.spark_merge__dbt_who() ~ "): " ~ message) }}
{%- endmacro %}

{#- Config keys that name columns must name columns of `columns` (the model's, on every run; the
    first run's CTAS too), or the error names the key instead of a generated column reference. -#}
{% macro spark_merge__dbt_check_columns(cfg, columns, what) -%}
{%- set known = columns | map('lower') | list -%}
{%- set errors = [] -%}
{%- for key, names in [('unique_key', cfg.get('unique_key')), ('partition_by', cfg.partition_by), ('watermark_key', cfg.get('watermark_key')),
                       ('tombstone_key', cfg.get('tombstone_key')), ('merge_update_columns', cfg.get('update_columns')),
                       ('merge_exclude_columns', cfg.get('exclude_columns'))] -%}
  {%- for n in ([names] if names is string else (names or [])) if (n | lower) not in known -%}
    {%- do errors.append(key ~ " names column '" ~ n ~ "', which " ~ what ~ " does not have (its columns: " ~ columns | join(', ') ~ ")") -%}
  {%- endfor -%}
{%- endfor -%}
{%- if errors -%}{{ spark_merge.spark_merge__dbt_fail(errors | join('; ')) }}{%- endif -%}
{%- endmacro %}

{% macro spark_merge__dbt_as_list(value, name) -%}
{%- if value is none -%}{{ return([]) }}
{%- elif value is string -%}{{ return([value]) }}
{%- elif value is sequence and value is not mapping -%}{{ return(value | list) }}
{%- else -%}{{ spark_merge.spark_merge__dbt_fail(name ~ " must be a string or a list, got " ~ value) }}
{%- endif -%}
{%- endmacro %}

{#- The config keys dbt or dbt-spark define, read as configs only. -#}
{% macro spark_merge__dbt_standard_keys() -%}
{{ return(['unique_key', 'partition_by', 'file_format', 'on_schema_change', 'incremental_predicates', 'merge_update_columns',
           'merge_exclude_columns']) }}
{%- endmacro %}

{#- A config key of spark_merge's own (merge_on, merge_clauses, the declared options that are not
    dbt's): given as a config or, as dbt 1.10 asks of keys it does not know, under `meta`. Given in
    both places with different values, the model fails rather than pick one. -#}
{% macro spark_merge__dbt_own_config(key) -%}
{%- set direct = config.get(key) -%}
{%- set meta = config.get('meta') or {} -%}
{%- set in_meta = meta.get(key) if meta is mapping else none -%}
{%- if direct is not none and in_meta is not none and direct != in_meta -%}
  {{ spark_merge.spark_merge__dbt_fail(key ~ " is set twice, to " ~ direct ~ " and under meta to " ~ in_meta ~ ": set it once") }}
{%- endif -%}
{{ return(in_meta if direct is none else direct) }}
{%- endmacro %}

{#- Checked config: file_format, partition_by, unique_key, merge_on, clauses, ... An empty unique_key ('' or
    []) is no key, as dbt-spark reads it (every row inserted); `predicates`, the older name of
    incremental_predicates, is read first, as dbt-spark reads it. -#}
{% macro spark_merge__dbt_config() -%}
{%- set cfg = {
  'partition_by': spark_merge.spark_merge__dbt_as_list(config.get('partition_by'), 'partition_by'),
  'unique_key': spark_merge.spark_merge__dbt_as_list(config.get('unique_key') or none, 'unique_key'),
  'merge_on': spark_merge.spark_merge__dbt_own_config('merge_on'),
  'merge_clauses': spark_merge.spark_merge__dbt_own_config('merge_clauses'),
  'update_columns': spark_merge.spark_merge__dbt_as_list(config.get('merge_update_columns'), 'merge_update_columns'),
  'exclude_columns': spark_merge.spark_merge__dbt_as_list(config.get('merge_exclude_columns'), 'merge_exclude_columns'),
  'predicates': spark_merge.spark_merge__dbt_as_list(config.get('predicates') or config.get('incremental_predicates'), 'incremental_predicates'),
  'engine_options': {},
} -%}
{%- do spark_merge.spark_merge__dbt_declared_options(cfg) -%}
{#- a microbatch batch (microbatch.sql): its merge replaces the batch's window -#}
{%- set window = spark_merge.spark_merge__dbt_microbatch() -%}
{%- do cfg.update({'microbatch': window}) -%}
{%- if window -%}{%- do spark_merge.spark_merge__dbt_microbatch_config(cfg, window) -%}{%- endif -%}
{%- if cfg.merge_engine and (not cfg.unique_key or cfg.merge_on or cfg.merge_clauses is not none) -%}
  {{ spark_merge.spark_merge__dbt_fail("a merge engine needs unique_key (the primary key) and generates its own ON and clauses: "
      ~ "drop merge_on and merge_clauses") }}
{%- endif -%}
{%- if cfg.watermark_key and (not cfg.unique_key or cfg.merge_on or cfg.merge_clauses is not none) -%}
  {{ spark_merge.spark_merge__dbt_fail("a watermark upsert needs unique_key (the primary key) and generates its own ON and clauses: "
      ~ "drop merge_on and merge_clauses") }}
{%- endif -%}
{%- set strategy = spark_merge.spark_merge__dbt_strategy() -%}
{%- if not cfg.unique_key and not cfg.merge_on and strategy == 'merge' and config.get('materialized') == 'incremental' -%}
  {#- dbt-spark's merge without a unique_key: ON FALSE, every row inserted -#}
  {%- do cfg.update({'merge_on': 'FALSE'}) -%}
{%- endif -%}
{%- if not cfg.unique_key and not cfg.merge_on -%}
  {{ spark_merge.spark_merge__dbt_fail("set unique_key (a column or a list) or merge_on (an ON condition over DBT_INTERNAL_DEST and DBT_INTERNAL_SOURCE)") }}
{%- endif -%}
{%- if cfg.merge_on is not none and cfg.merge_on is not string -%}
  {{ spark_merge.spark_merge__dbt_fail("merge_on must be a SQL condition string, got " ~ cfg.merge_on) }}
{%- endif -%}
{%- if cfg.update_columns and cfg.exclude_columns -%}
  {{ spark_merge.spark_merge__dbt_fail("set merge_update_columns or merge_exclude_columns, not both") }}
{%- endif -%}
{%- if cfg.retention_hours is not none and (cfg.retention_hours is not number or cfg.retention_hours < 0) -%}
  {{ spark_merge.spark_merge__dbt_fail("retention_hours must be a number of hours, zero or more, got " ~ cfg.retention_hours) }}
{%- endif -%}
{%- if cfg.merge_clauses is not none -%}{%- do spark_merge.spark_merge__dbt_check_clauses(cfg.merge_clauses) -%}{%- endif -%}
{{ return(cfg) }}
{%- endmacro %}

{#- The options core/options.sql declares, as the model's config gives them, into `cfg`: a choice is
    checked here, except merge_engine, which the engine macro checks with Paimon's spellings; a merge
    engine's own options go to cfg.engine_options as they are (the engine macro checks them against
    the table). An option given where nothing reads it is refused, as merge_core refuses it
    (option_errors). -#}
{% macro spark_merge__dbt_declared_options(cfg) -%}
{%- set declared = [] -%}
{%- do spark_merge.spark_merge__option_table(declared) -%}
{%- for o in declared if o.dbt and o.name != 'primary_key' -%}
  {%- set value = config.get(o.dbt) if o.dbt in spark_merge.spark_merge__dbt_standard_keys() else spark_merge.spark_merge__dbt_own_config(o.dbt) -%}
  {%- if value is none -%}{%- set value = o.default -%}{%- endif -%}
  {%- if o.kind == 'choice' and value is string -%}{%- set value = value | lower -%}{%- endif -%}
  {%- if o.kind == 'choice' and o.name != 'merge_engine' and value is not none and value not in o.choices -%}
    {{ spark_merge.spark_merge__dbt_fail(o.dbt ~ " must be " ~ spark_merge.spark_merge__choices_text(o.name) ~ " (" ~ o.help ~ "), got " ~ value) }}
  {%- endif -%}
  {%- if o.group == 'engine' -%}
    {%- if value is not none -%}{%- do cfg.engine_options.update({o.name: value}) -%}{%- endif -%}
  {%- elif o.kind == 'list' -%}
    {%- do cfg.update({o.name: spark_merge.spark_merge__dbt_as_list(value, o.dbt)}) -%}
  {%- else -%}
    {%- do cfg.update({o.name: value}) -%}
  {%- endif -%}
{%- endfor -%}
{#- an option given where nothing reads it is refused, as merge_core refuses it (option_errors) -#}
{%- set given, option_errors = {}, [] -%}
{%- do given.update(cfg) -%}{%- do given.update(cfg.engine_options) -%}
{%- do spark_merge.spark_merge__option_errors(given, option_errors) -%}
{%- if option_errors -%}{{ spark_merge.spark_merge__dbt_fail(option_errors | join('; ')) }}{%- endif -%}
{%- endmacro %}

{#- merge_clauses' shape: a non-empty list of mappings with known keys, a known `when` and `action`. -#}
{% macro spark_merge__dbt_check_clauses(clauses) -%}
{%- if clauses is string or clauses is mapping or clauses is not sequence or clauses | length == 0 -%}
  {{ spark_merge.spark_merge__dbt_fail("merge_clauses must be a non-empty list of {when, condition, action, set, columns, values}") }}
{%- endif -%}
{%- for cl in clauses -%}
  {%- set where = "merge_clauses[" ~ loop.index0 ~ "]" -%}
  {%- if cl is not mapping -%}{{ spark_merge.spark_merge__dbt_fail(where ~ " must be a mapping, got " ~ cl) }}{%- endif -%}
  {%- set unknown = cl.keys() | reject('in', ['when', 'condition', 'action', 'set', 'columns', 'values']) | list -%}
  {%- if unknown -%}{{ spark_merge.spark_merge__dbt_fail(where ~ " has unknown key(s) " ~ unknown | join(', ')) }}{%- endif -%}
  {%- set codes = {} -%}{%- do spark_merge.spark_merge__codes(codes) -%}
  {%- if cl.get('when') not in codes.when -%}{{ spark_merge.spark_merge__dbt_fail(where ~ ".when must be one of " ~ codes.when |
      join(', ') ~ ", got " ~ cl.get('when')) }}{%- endif -%}
  {%- if cl.get('when') == 'not_matched_by_source' and cl.get('action') == 'update' and not cl.get('set') -%}{{
      spark_merge.spark_merge__dbt_fail(where ~ ": a not_matched_by_source update needs set (the target row has no source row to copy from)") }}{%- endif -%}
  {%- if cl.get('action') not in ['update', 'delete', 'insert'] -%}{{ spark_merge.spark_merge__dbt_fail(where ~
      ".action must be update, delete or insert, got " ~ cl.get('action')) }}{%- endif -%}
  {%- if cl.get('set') is not none and cl.get('set') is not mapping -%}{{ spark_merge.spark_merge__dbt_fail(where ~
      ".set must map column to expression") }}{%- endif -%}
{%- endfor -%}
{%- endmacro %}

{#- The upsert options of the config (the declared upsert and engine options), unique_key as the primary key. -#}
{% macro spark_merge__dbt_upsert_options(cfg) -%}
{%- set upsert, keys = {'primary_key': cfg.unique_key}, [] -%}
{%- do spark_merge.spark_merge__option_names('upsert', keys) -%}
{%- for k in keys if k != 'primary_key' -%}{%- do upsert.update({k: cfg.get(k)}) -%}{%- endfor -%}
{%- do upsert.update(cfg.engine_options) -%}
{{ return(upsert) }}
{%- endmacro %}

{#-
  The spec: ON from unique_key (or merge_on) plus incremental_predicates; the
  clauses from merge_clauses, or dbt's merge default (update every column, insert
  every column). "Every column" is the target's columns the source has, less
  merge_exclude_columns (or just merge_update_columns) for updates.
-#}
{% macro spark_merge__dbt_spec(cfg, target, source_view, source_columns) -%}
{%- set t, s = 'DBT_INTERNAL_DEST', 'DBT_INTERNAL_SOURCE' -%}
{%- set on = [] -%}
{%- if cfg.merge_on -%}
  {%- do on.append('(' ~ cfg.merge_on ~ ')') -%}
{%- else -%}
  {%- for k in cfg.unique_key -%}
    {%- do on.append(t ~ '.' ~ spark_merge.spark_merge__quote(k) ~ ' = ' ~ s ~ '.' ~ spark_merge.spark_merge__quote(k)) -%}
  {%- endfor -%}
{%- endif -%}
{%- for p in cfg.predicates -%}{%- do on.append('(' ~ p ~ ')') -%}{%- endfor -%}
{%- set shared = [] -%}
{%- set lower_source = source_columns | map('lower') | list -%}
{%- for c in target.columns if (c.name | lower) in lower_source -%}{%- do shared.append(c.name) -%}{%- endfor -%}
{%- set exclude = cfg.exclude_columns | map('lower') | list -%}
{%- set update_cols = (cfg.update_columns | list) if cfg.update_columns else [] -%}
{%- if not cfg.update_columns -%}
  {%- for c in shared if (c | lower) not in exclude -%}{%- do update_cols.append(c) -%}{%- endfor -%}
{%- endif -%}
{%- set clauses = [] -%}
{%- for cl in cfg.merge_clauses or [{'when': 'matched', 'action': 'update'}, {'when': 'not_matched', 'action': 'insert'}] -%}
  {%- set assignments, columns, values = [], [], [] -%}
  {%- if cl.action == 'update' -%}
    {%- if cl.get('set') -%}
      {%- for col, expr in cl.set.items() -%}{%- do assignments.append([col, expr | string]) -%}{%- endfor -%}
    {%- else -%}
      {%- for col in update_cols -%}{%- do assignments.append([col, s ~ '.' ~ spark_merge.spark_merge__quote(col)]) -%}{%- endfor -%}
    {%- endif -%}
  {%- elif cl.action == 'insert' -%}
    {%- if cl.get('columns') or cl.get('values') -%}
      {%- do columns.extend(spark_merge.spark_merge__dbt_as_list(cl.get('columns'), 'columns')) -%}
      {%- for v in spark_merge.spark_merge__dbt_as_list(cl.get('values'), 'values') -%}{%- do values.append(v | string) -%}{%- endfor -%}
    {%- else -%}
      {%- for col in shared -%}{%- do columns.append(col) -%}{%- do values.append(s ~ '.' ~ spark_merge.spark_merge__quote(col)) -%}{%- endfor -%}
    {%- endif -%}
  {%- endif -%}
  {%- do clauses.append({'matched': cl.when == 'matched', 'by_source': cl.when == 'not_matched_by_source', 'action': cl.action, 'condition':
      cl.get('condition'),
                         'assignments': assignments, 'insert_columns': columns, 'insert_values': values, 'star': false}) -%}
{%- endfor -%}
{%- set upsert = none -%}
{%- if cfg.watermark_key or cfg.merge_engine -%}
  {%- set upsert = spark_merge.spark_merge__dbt_upsert_options(cfg) -%}
{%- endif -%}
{{ return({
  'upsert': upsert,
  'target': [target.database, target.table_name], 'target_alias': t, 'source_alias': s,
  'source': source_view, 'source_kind': 'table', 'on': on | join(' AND '), 'clauses': clauses,
  'kind': 'merge', 'duplicate_rule': cfg.duplicate_rule, 'partition_filter': none, 'lossy_assignments': cfg.lossy_assignments,
      'schema_evolution': cfg.schema_evolution,
  'key_columns': cfg.unique_key, 'sql': none,
}) }}
{%- endmacro %}
