{#-
  Begin, written once for both hosts (overview and host primitives in lifecycle/phases.sql):
  read the target, let a live commit end and finish an interrupted one, read the source's
  columns, shape the request into the spec for this table (the host's part: Python qualifies
  one-sided names with sqlglot; dbt turns the model's config into a spec and applies
  on_schema_change), schema evolution's columns, generate an upsert's MERGE, validate once (against
  the table as schema evolution will leave it), add the columns, and name the plan's relations.
  Touches no data but schema evolution's columns. Fills `s`: table, spec, resolved, ctx, paradigm,
  insert_only, plan_hash, added_columns.

  Begin's host primitives (besides run, rows, step, warn, fail, catalog, lock_handle, ...), each
  given the statements it runs, none rendering a macro of its own:
    own_target(parts)               a target of the host's own kind (Python: a PostgreSQL table),
                                    or none: a catalog table, described here (catalog)
    check_files(table, listing_sql) refuse a table whose files are another format's (Python lists
                                    them; dbt: cannot); the dead merges' staging tables to drop
    source_types(spec, sql)         [name, type] of each source column (sql: describe_source_sql)
    prepare(s, table, source_types) {spec, table}: the request as a spec for this table
    evolve_spec(spec, table, source_types)
                                    schema evolution's part of the spec ({direct, errors}): the
                                    columns assigned directly, a struct given in part filled in
    part_types(sql, singles)        {types, errors}: the type of each part (sql: describe_parts_sql
                                    of all; Python asks part by part, singles' [label, sql], when
                                    Spark refuses the batch)
    on_keys(s, spec)                ON's equalities of a target and a source column
    target_begin(table)             the row-change paradigm's name (a PostgreSQL target's own)
-#}
{% macro spark_merge__lifecycle_begin(host, s) -%}
{%- do host.step('begin: describe and validate') -%}
{%- set table = host.own_target(s.spec.target) -%}
{%- if table is none -%}
  {%- set target = {} -%}
  {%- do spark_merge.spark_merge__lifecycle_settled_target(host, s.spec.target, target) -%}
  {%- set table = target.table -%}
{%- endif -%}
{%- set source_types = host.source_types(s.spec, spark_merge.spark_merge__describe_source_sql(s.spec)) if s.spec.source_kind != 'none' else [] -%}
{%- set prepared = host.prepare(s, table, source_types) -%}
{%- set spec, table = prepared.spec, prepared.table -%}
{%- set evolution = {'columns': [], 'validated': table} -%}
{%- if spec.schema_evolution -%}{%- do spark_merge.spark_merge__lifecycle_evolution(host, spec, table, source_types, evolution) -%}{%- endif -%}
{%- if spec.upsert -%}
  {%- set compiled = {} -%}
  {%- do spark_merge.spark_merge__lifecycle_upsert_spec(host, spec, table, source_types, compiled) -%}
  {%- set spec = compiled -%}
{%- endif -%}
{%- set resolved = {} -%}
{%- do spark_merge.spark_merge__lifecycle_validate(host, spec, evolution.validated, source_types, resolved) -%}
{%- if evolution.columns -%}
  {%- set added = {} -%}
  {%- do spark_merge.spark_merge__lifecycle_add_columns(host, s, table, evolution, added) -%}
  {%- set table = added.table -%}
{%- endif -%}
{%- set ctx = {} -%}
{%- do spark_merge.spark_merge__context(spec, table, s.merge_id, ctx) -%}
{%- if spec.source_kind != 'none' -%}{%- do ctx.update({'on_keys': host.on_keys(s, spec)}) -%}{%- endif -%}
{%- do s.update({'spec': spec, 'table': table, 'resolved': resolved, 'ctx': ctx, 'paradigm': host.target_begin(table),
                 'insert_only': resolved.insert_only, 'added_columns': evolution.columns}) -%}
{%- do spark_merge.spark_merge__lifecycle_plan_hash(host, s) -%}
{%- endmacro %}

{#- An upsert's generated MERGE (watermark or merge engine), now that the column types are known,
    into `out`; a merge engine first learns the input order its fold may rely on (input_order). -#}
{% macro spark_merge__lifecycle_upsert_spec(host, spec, table, source_types, out) -%}
{%- if spec.upsert.get('merge_engine') -%}
  {%- set order = {} -%}
  {%- do spark_merge.spark_merge__input_order(spec, host.rows(spark_merge.spark_merge__input_order_probe_sql(spec))[0]['plan'], order) -%}
  {%- do spec.update({'input_order': order.order}) -%}
{%- endif -%}
{%- set compiled = {} -%}
{%- do spark_merge.spark_merge__upsert_spec(spec, table, source_types | map(attribute=0) | list, compiled) -%}
{%- if compiled.errors -%}
  {%- do host.fail(spark_merge.spark_merge__error_code('validation'), compiled.errors | join('; '), none, {'errors': compiled.errors}) -%}
{%- endif -%}
{%- for k, v in compiled.items() if k != 'errors' -%}{%- do out.update({k: v}) -%}{%- endfor -%}
{%- endmacro %}

{#- MERGE WITH SCHEMA EVOLUTION: the source columns the merge assigns directly (UPDATE SET * /
    INSERT *, SET c = s.c, INSERT (c) VALUES (s.c)) that the table lacks, into out.columns, and the
    table as it will be, into out.preview (the columns added, nullable, no default) and
    out.validated (the same, read through a relation that has them: the statement is validated
    before anything is added, so an invalid one changes nothing). -#}
{% macro spark_merge__lifecycle_evolution(host, spec, table, source_types, out) -%}
{%- set evolution = host.evolve_spec(spec, table, source_types) -%}
{%- set evolved = {} -%}
{%- do spark_merge.spark_merge__evolved_columns(spec, table, source_types, evolution.direct, evolved) -%}
{%- set errors = evolved.errors + evolution.errors -%}
{%- if errors -%}
  {%- do host.fail(spark_merge.spark_merge__error_code('validation'), errors | join('; '), none, {'errors': errors}) -%}
{%- endif -%}
{%- if evolved.columns -%}
  {%- set preview = {} -%}
  {%- do spark_merge.spark_merge__evolved_table(table, evolved.columns, preview) -%}
  {%- set validated = {} -%}{%- do validated.update(preview) -%}
  {%- do validated.update({'relation': spark_merge.spark_merge__evolved_relation(table, evolved.columns)}) -%}
  {%- do out.update({'columns': evolved.columns, 'preview': preview, 'validated': validated}) -%}
{%- endif -%}
{%- endmacro %}

{#- Schema evolution's columns, once the statement is valid: added (ALTER TABLE ... ADD COLUMNS, then
    the table described again), or shown by explain without adding them (s.schema_changes
    'preview'), or refused (a dry run: its plan reads them from the table). They stay (NULL in every
    existing row) if the merge then fails: a parquet table's schema lives in the metastore, apart
    from the commit. The table as it now is into out.table. -#}
{% macro spark_merge__lifecycle_add_columns(host, s, table, evolution, out) -%}
{%- set names = evolution.columns | map(attribute=0) | join(', ') -%}
{%- set mode = s.get('schema_changes') or 'apply' -%}
{%- if mode == 'refuse' -%}
  {%- set error = 'schema evolution would add column(s) ' ~ names ~ ' to ' ~ table.name ~ ", and a dry run's plan reads them from the "
      ~ 'table; explain shows the plan, a run adds them' -%}
  {%- do host.fail(spark_merge.spark_merge__error_code('validation'), error, none, {'errors': [error]}) -%}
{%- elif mode == 'preview' -%}
  {%- do out.update({'table': evolution.preview}) -%}
{%- else -%}
  {%- do host.step('schema evolution: adding column(s) ' ~ names ~ ' to ' ~ table.name) -%}
  {%- do host.run(spark_merge.spark_merge__add_columns_sql(table, evolution.columns)) -%}
  {%- set fresh = {} -%}
  {%- do spark_merge.spark_merge__lifecycle_redescribe(host, table, fresh) -%}
  {%- do out.update({'table': fresh}) -%}
{%- endif -%}
{%- endmacro %}

{#- Validate the spec against the real target and source before anything is read or written
    (begin/validate.sql has the checks): the clauses' structure, names the plan keeps for itself,
    the type of every expression part (analysis only), then Spark's own rules on the conditions.
    Every problem found is reported at once, as MERGE_VALIDATION_ERROR; a lossy assignment is a
    warning (or, with lossy_assignments=refuse, an error). Fills `out` as resolve does. -#}
{% macro spark_merge__lifecycle_validate(host, spec, table, source_types, out) -%}
{%- do spark_merge.spark_merge__resolve(spec, table, out) -%}
{%- set errors = out.errors -%}
{%- do spark_merge.spark_merge__reserved_column_errors(table, source_types | map(attribute=0) | list, errors) -%}
{%- set typed_parts, types = [], [] -%}
{%- for scope in ['both', 'source', 'target'] -%}
  {%- set batch = out.parts | selectattr('scope', 'equalto', scope) | list -%}
  {%- if batch -%}
    {%- set singles = [] -%}
    {%- for p in batch -%}{%- do singles.append([p.label, spark_merge.spark_merge__describe_parts_sql(spec, table, [p])]) -%}{%- endfor -%}
    {%- set typed = host.part_types(spark_merge.spark_merge__describe_parts_sql(spec, table, batch), singles) -%}
    {%- do errors.extend(typed.errors) -%}
    {%- for p in batch if typed.types[loop.index0] is not none -%}
      {%- do typed_parts.append(p) -%}{%- do types.append(typed.types[loop.index0]) -%}
    {%- endfor -%}
  {%- endif -%}
{%- endfor -%}
{%- set warnings = [] -%}
{%- do spark_merge.spark_merge__check_types(typed_parts, types, errors, warnings, spec.get('lossy_assignments') or 'warn') -%}
{%- if errors -%}
  {%- do host.fail(spark_merge.spark_merge__error_code('validation'), errors | join('; '), none, {'errors': errors}) -%}
{%- endif -%}
{%- for w in warnings -%}{%- do host.warn('lossy assignment: ' ~ w) -%}{%- endfor -%}
{%- do out.update({'warnings': warnings}) -%}
{#- one probe per scope asks of the conditions and the assigned values at once; only when it is
    refused are the conditions probed alone (then one each, to name the culprits). Every probe
    planned: every part of the statement is deterministic as Spark's analyzer judges it
    (out.deterministic), which the plan's fused write relies on -#}
{%- set refused = [] -%}
{%- for scope in ['both', 'source', 'target'] -%}
  {%- set conditions, values = [], [] -%}
  {%- do spark_merge.spark_merge__conditions(out.parts, scope, conditions) -%}
  {%- do spark_merge.spark_merge__value_probe_parts(out.parts, scope, values) -%}
  {%- set plan = host.rows(spark_merge.spark_merge__determinism_probe_sql(spec, table, conditions + values))[0]['plan']
      if conditions or values else '== ' -%}
  {%- if not plan.startswith('== ') -%}
    {%- do refused.append(scope) -%}
    {%- set found = (spark_merge.spark_merge__probe_error(plan, none) | trim) if not values
        else spark_merge.spark_merge__lifecycle_probe(host, spec, table, conditions) if conditions else '' -%}
    {%- for part in conditions if found -%}{#- name the culprits, one probe each -#}
      {%- set error = spark_merge.spark_merge__lifecycle_probe(host, spec, table, [part], part) -%}
      {%- if error -%}{%- do errors.append(error) -%}{%- endif -%}
    {%- endfor -%}
  {%- endif -%}
{%- endfor -%}
{%- do out.update({'deterministic': refused | length == 0}) -%}
{%- if errors -%}
  {%- do host.fail(spark_merge.spark_merge__error_code('validation'), errors | join('; '), none, {'errors': errors}) -%}
{%- endif -%}
{%- endmacro %}

{#- Spark's own rules on the conditions (non-deterministic; constants that fail to fold), asked by
    planning them as a join: empty when fine, else the error for `part` (see probe_error). -#}
{% macro spark_merge__lifecycle_probe(host, spec, table, conditions, part=none) -%}
{{ spark_merge.spark_merge__probe_error(host.rows(spark_merge.spark_merge__determinism_probe_sql(spec, table, conditions))[0]['plan'], part) | trim }}
{%- endmacro %}

{#- A merge's id: the time it began (to the second, UTC, from an ISO-8601 `now`) and 8 characters
    of `entropy` (a hex digest the host draws), usable in identifiers; ids sort by the second they
    began in, and ids of one second by their random part (finished_at orders merges). -#}
{% macro spark_merge__new_merge_id(now, entropy) -%}
{{ now[:19] | replace('-', '') | replace(':', '') | replace('T', '') | replace(' ', '') }}_{{ entropy[:8] }}
{%- endmacro %}

{#- A merge-on-read upsert's begin, for both hosts: the view `s.target` ([database, name]) reads
    the log `<name>__sm_log`. A plain table of that name is converted on the first upsert (renamed
    to the log; the write creates the view), once the upsert is checked against it, so a refused
    upsert leaves it as it was. Then a live commit ends and an interrupted one is finished, and the
    upsert is checked against the log. Fills `s`: table (the log), view, log_plan, paradigm.
    Host primitive besides run, rows, warn, fail, describe, wait_free: analyze(sql, label), which
    runs an analysis-only statement and fails a validation naming `label` when Spark refuses it. -#}
{% macro spark_merge__lifecycle_begin_log(host, s) -%}
{%- do host.step('begin: describe and validate (merge-on-read)') -%}
{%- set db, name = s.target[-2], s.target[-1] -%}
{%- set log_name = name ~ '__sm_log' -%}
{%- set kinds = {} -%}
{%- do spark_merge.spark_merge__relation_kind(host, db, name, kinds) -%}
{%- if not kinds[name] -%}
  {%- do host.fail(spark_merge.spark_merge__error_code('target'), 'target table ' ~ db ~ '.' ~ name ~ ' not found') -%}
{%- elif kinds[name] != 'VIEW' -%}
  {%- do spark_merge.spark_merge__relation_kind(host, db, log_name, kinds) -%}
  {%- if kinds[log_name] -%}
    {%- do host.fail(spark_merge.spark_merge__error_code('target'), db ~ '.' ~ name ~ ' is a table but ' ~ db ~ '.' ~ log_name ~
        ' exists too; drop one') -%}
  {%- endif -%}
  {%- set plain = {} -%}
  {%- do spark_merge.spark_merge__lifecycle_describe(host, [db, name], plain) -%}
  {%- do spark_merge.spark_merge__lifecycle_check_log(host, s, plain, {}) -%}
  {%- do host.warn('converting ' ~ db ~ '.' ~ name ~ ' to merge-on-read: the table becomes ' ~ db ~ '.' ~ log_name ~
      ', read through the view ' ~ db ~ '.' ~ name) -%}
  {%- do host.run(spark_merge.spark_merge__rename_table_sql(spark_merge.spark_merge__relation(db, name),
      spark_merge.spark_merge__relation(db, log_name))) -%}
{%- endif -%}
{%- set described = {} -%}
{%- do spark_merge.spark_merge__lifecycle_describe(host, [db, log_name], described) -%}
{%- set settled, fresh = {}, {} -%}
{%- do spark_merge.spark_merge__lifecycle_settle(host, described, settled) -%}
{%- if settled.recovered -%}{%- do spark_merge.spark_merge__lifecycle_redescribe(host, described, fresh) -%}{%- endif -%}
{%- set table = fresh or described -%}
{%- set plan = {} -%}
{%- do spark_merge.spark_merge__lifecycle_check_log(host, s, table, plan) -%}
{%- do s.update({'table': table, 'view': spark_merge.spark_merge__relation(db, name), 'log_plan': plan,
                 'paradigm': 'MERGE_ON_READ'}) -%}
{%- endmacro %}

{#- The upsert options checked against the log (or the table about to become it), and the source
    given every column with a type the table can store (analysis only); the plan into `out`. -#}
{% macro spark_merge__lifecycle_check_log(host, s, table, out) -%}
{%- do spark_merge.spark_merge__upsert_plan(s.upsert, table, out) -%}
{%- if out.errors -%}
  {%- do host.fail(spark_merge.spark_merge__error_code('validation'), out.errors | join('; '), none, {'errors': out.errors}) -%}
{%- endif -%}
{%- do host.analyze(spark_merge.spark_merge__describe_query_sql(spark_merge.spark_merge__mor_rows_sql(table, s.spec)),
    'source for ' ~ table.name) -%}
{%- endmacro %}

{#- Whether `database`.`name` is a 'VIEW' or a 'TABLE' ('' when nothing has that name), into
    out[name]: listed first, so a missing name is not an error either host must catch. -#}
{% macro spark_merge__relation_kind(host, database, name, out) -%}
{%- if host.rows(spark_merge.spark_merge__show_tables_sql(database, name)) | length == 0 -%}
  {%- do out.update({name: ''}) -%}
{%- else -%}
  {%- set desc = host.rows(spark_merge.spark_merge__describe_json_sql(spark_merge.spark_merge__relation(database, name)))[0] -%}
  {%- do out.update({name: (fromjson(desc.values() | list | first).get('type') or '') | upper}) -%}
{%- endif -%}
{%- endmacro %}
