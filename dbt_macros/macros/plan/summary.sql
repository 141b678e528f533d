{#-
  Step 4 of the plan (overview in plan/changes.sql): one aggregation of the changes gives the
  counts per operation, the partitions (and files) touched and where output rows go.
-#}

{#-
  The plan's one aggregation over the changes: per operation, old partition and new
  partition (__sm_old / __sm_new, as partition_json) the rows changed (n), and in
  `dups` the target rows that break the duplicate rule (duplicate_rule). Two levels
  in one query: the joined rows grouped per target row id (an inserting source row,
  or a target row no source row matched, is a group of its own), which gives the
  duplicate verdict and the row's one action (a valid plan gives a target row at
  most one modifying action; several source rows deleting it, where the rule lets
  them, delete it once; an ORC row id stands for all identical rows of a file, counted
  as many: `targets`); then per (op, bys, old, new). bys is 1 for a target row no
  source row matched (WHEN NOT MATCHED BY SOURCE). Rows of op none carry only
  verdicts. A small result, one statement.
  Also `multi`, the target rows joined with more than one source row where not all
  of them delete it (the trino and postgres rules allow some): the fused write would
  copy such a row once per source row, so then the rewrite anti-joins the changed row
  ids instead. With ctx.name_matched_files, `matched_files`: the data files holding a target row ON
  matched, changed or not (the fused write reads them where it must tell an inserted source row
  from a matched one: matched_files_filter). And `checked`, a count over every value a check guards (NOT NULL,
  CHAR/VARCHAR length, see changes_sql): it makes the summary run the checks, so a
  failing one stops the merge before anything is staged.
  Spark aggregates by hash only over fixed-width values, and sorts otherwise (at 5M
  target rows, 3x slower): so the first level keeps text out of its aggregates. The
  old partition values, the same for every joined row of a target row, are grouping
  keys, as are an unmatched row's new values; a matched row's new values are its old
  ones unless a MATCHED UPDATE assigns a partition column (`moves`), and only then
  aggregated (max: the one modifying row's values; the others' are NULL).
-#}
{% macro spark_merge__change_summary_sql(spec, table, resolved, ctx) -%}
{%- set idx = [] -%}
{%- for p in table.partition_columns -%}
  {%- for c in table.columns -%}{%- if (c.name | lower) == (p | lower) -%}{%- do idx.append(loop.index0) -%}{%- endif -%}{%- endfor -%}
{%- endfor -%}
{%- set pcols = table.partition_columns | map('lower') | list -%}
{%- set moves = [] -%}
{%- for cl in resolved.clauses if cl.matched and cl.action == 'update' -%}
  {%- for p in pcols if p in cl.outputs -%}{%- do moves.append(p) -%}{%- endfor -%}
{%- endfor -%}
{%- set old, new, new_names, keys = [], [], [], [] -%}
{%- for p in table.partition_columns -%}
  {%- set i = loop.index0 -%}
  {%- do old.append('__sm_old' ~ i) -%}{%- do keys.append('__sm_old' ~ i) -%}{%- do keys.append('__sm_un' ~ i) -%}
  {%- set col = table.columns_by_name[p | lower] -%}
  {#- a CHAR(n) value is stored (and its partition named) padded to n, as Spark reads it back -#}
  {%- do new_names.append('rpad(__sm_new' ~ i ~ ', ' ~ col.char_pad ~ ')' if col.get('char_pad') else '__sm_new' ~ i) -%}
  {%- do new.append('CASE WHEN __sm_matched THEN ' ~ ('max(__sm_c' ~ idx[i] ~ ')' if moves else '__sm_old' ~ i) ~ ' ELSE __sm_un' ~ i ~ ' END') -%}
{%- endfor -%}
{%- set rule = {} -%}
{%- do spark_merge.spark_merge__duplicate_rule(spec, table, resolved, rule) -%}
{%- set none_op = spark_merge.spark_merge__op('none') -%}
SELECT op, bys, {{ spark_merge.spark_merge__json_of(old) }} AS __sm_old, {{ spark_merge.spark_merge__json_of(new_names) }} AS __sm_new,
       CAST(sum(__sm_targets) AS BIGINT) AS n, CAST(sum(__sm_dup) AS BIGINT) AS dups, CAST(sum(__sm_multi) AS BIGINT) AS multi,
       CAST(sum(__sm_checked) AS BIGINT) AS checked, to_json(collect_set(__sm_rf)) AS files
       {%- if ctx.get('name_matched_files') %}, to_json(collect_set(__sm_mf)) AS matched_files{% endif %}
FROM (
  SELECT {% if rule.row_test %}CASE WHEN __sm_matched AND ({{ rule.row_test }}) THEN 1 ELSE 0 END{% else %}0{% endif %} AS __sm_dup,
         CASE WHEN coalesce(max(CASE WHEN __sm_op <> {{ none_op }} THEN __sm_op END), {{ none_op }}) IN ({{
             spark_merge.spark_merge__op('delete', 'update') }}) THEN __sm_file END AS __sm_rf,
         CASE WHEN __sm_matched AND min(__sm_srow) < max(__sm_srow) AND count_if(__sm_op <> {{ spark_merge.spark_merge__op('delete')
             }}) > 0 THEN 1 ELSE 0 END AS __sm_multi,
         {{ spark_merge.spark_merge__checked_count(table) }} AS __sm_checked,
         {{ rule.targets }} AS __sm_targets,
         {%- if ctx.get('name_matched_files') %}
         CASE WHEN __sm_matched THEN __sm_file END AS __sm_mf,
         {%- endif %}
         coalesce(max(CASE WHEN __sm_op <> {{ none_op }} THEN __sm_op END), {{ none_op }}) AS op,
         CAST(__sm_file IS NOT NULL AND NOT __sm_matched AS INT) AS bys
         {%- for o in old %}, {{ o }}{% endfor %}
         {%- for n in new %}, {{ n }} AS __sm_new{{ loop.index0 }}{% endfor %}
  FROM (
    SELECT *, CASE WHEN NOT __sm_matched THEN __sm_srow END AS __sm_us
           {%- for i in idx %}, CASE WHEN NOT __sm_matched THEN __sm_c{{ i }} END AS __sm_un{{ loop.index0 }}{% endfor %}
    FROM {{ ctx.changes }}
    WHERE __sm_matched OR __sm_op <> {{ none_op }}
  )
  GROUP BY __sm_file, __sm_row, __sm_us, __sm_matched{% for k in keys %}, {{ k }}{% endfor %}
)
GROUP BY op, bys, {{ spark_merge.spark_merge__json_of(old) }}, {{ spark_merge.spark_merge__json_of(new_names) }}
{%- endmacro %}

{#- change_summary_sql's rows for an append no target row takes part in (ctx.unjoined: no target
    file's key range holds a source key): every row of the changes is an inserted source row, a group of
    its own in change_summary_sql's first level, so one level per new partition gives the same rows (no
    verdict to reach, no file touched), and Spark shuffles one partial count per partition, not the rows. -#}
{% macro spark_merge__append_summary_sql(table, ctx) -%}
{%- set old, new = [], [] -%}
{%- for p in table.partition_columns -%}
  {%- set col = table.columns_by_name[p | lower] -%}
  {%- do old.append('__sm_old' ~ loop.index0) -%}
  {%- for c in table.columns -%}{%- if (c.name | lower) == (p | lower) -%}
    {%- do new.append('rpad(__sm_c' ~ loop.index0 ~ ', ' ~ col.char_pad ~ ')' if col.get('char_pad') else '__sm_c' ~ loop.index0) -%}
  {%- endif -%}{%- endfor -%}
{%- endfor -%}
SELECT __sm_op AS op, 0 AS bys, {{ spark_merge.spark_merge__json_of(old) }} AS __sm_old, {{ spark_merge.spark_merge__json_of(new) }} AS __sm_new,
       CAST(count(*) AS BIGINT) AS n, CAST(0 AS BIGINT) AS dups, CAST(0 AS BIGINT) AS multi,
       CAST({{ spark_merge.spark_merge__checked_count(table) }} AS BIGINT) AS checked, '[]' AS files
FROM {{ ctx.changes }}
WHERE __sm_op <> {{ spark_merge.spark_merge__op('none') }}
GROUP BY __sm_op, {{ spark_merge.spark_merge__json_of(old) }}, {{ spark_merge.spark_merge__json_of(new) }}
{%- endmacro %}

{#- How many values a check guards (NOT NULL, CHAR/VARCHAR length: value_checks) among the rows
    aggregated: counting them makes Spark evaluate the checks. -#}
{% macro spark_merge__checked_count(table) -%}
{%- set checked = [] -%}
{%- for c in table.columns -%}
  {%- set vc = {} -%}{%- do spark_merge.spark_merge__value_checks(c, vc) -%}
  {%- if vc.any -%}{%- do checked.append('count(__sm_c' ~ loop.index0 ~ ')') -%}{%- endif -%}
{%- endfor -%}
{{ (checked or ['0']) | join(' + ') }}
{%- endmacro %}

{#- A JSON array of the given columns as strings: partition values as text that keeps NULL apart
    from every string ('None', 'null', '' included), in both hosts (dbt's agate would read the
    strings 'null' and '' of a plain column as NULL). -#}
{% macro spark_merge__json_of(columns) -%}
{%- if columns -%}to_json(array({% for c in columns %}CAST({{ c }} AS STRING){{ ", " if not loop.last }}{% endfor %})){%- else -%}'[]'{%- endif -%}
{%- endmacro %}

{% macro spark_merge__partition_json(table, qualifier='') -%}
{%- set cols = [] -%}
{%- for p in table.partition_columns -%}{%- do cols.append(qualifier ~ spark_merge.spark_merge__quote(p)) -%}{%- endfor -%}
{{ spark_merge.spark_merge__json_of(cols) }}
{%- endmacro %}

{#- Rows with a partition_json column (`column`, default __sm_part), each copied into `out` with
    'partition': {partition column: string value or none}. -#}
{% macro spark_merge__decode_partitions(table, rows, out, column='__sm_part') -%}
{%- for r in rows -%}
  {%- set values = fromjson(r[column]) -%}
  {%- set part = {} -%}
  {%- for c in table.partition_columns -%}{%- do part.update({c: values[loop.index0]}) -%}{%- endfor -%}
  {%- set row = {} -%}
  {%- do row.update(r) -%}
  {%- do row.update({'partition': part}) -%}
  {%- do out.append(row) -%}
{%- endfor -%}
{%- endmacro %}

{#-
  From change_summary_sql's rows: out.metrics (rows inserted, updated, deleted; of
  the updated and deleted, those by WHEN NOT MATCHED BY SOURCE, as Delta counts them),
  out.partitions, the touched partitions ({column: string or none}), sorted by
  partition_key: where a deleted or updated row was, and where an inserted or
  updated row goes (an UPDATE that changes a partition column touches both);
  out.deltas, per partition_key, how many rows the rewrite adds to the partition
  (negative: removes), which the write must match (output_errors); out.files, the data files
  (_metadata.file_path) holding a row the merge updates or deletes: the only files a rewrite that
  carries the others over needs to rewrite; out.matched_files, those holding a target row ON matched
  (empty unless the summary names them: ctx.name_matched_files); out.dups and
  out.multi (see change_summary_sql); out.matched, the partitions holding a target row
  that ON matched ({'partition': ...}, as scan_filter takes them).
-#}
{% macro spark_merge__summarize_changes(table, rows, out) -%}
{%- set m = {'numTargetRowsInserted': 0, 'numTargetRowsDeleted': 0, 'numTargetRowsUpdated': 0,
               'numTargetRowsNotMatchedBySourceUpdated': 0, 'numTargetRowsNotMatchedBySourceDeleted': 0} -%}
{%- set codes = {} -%}{%- do spark_merge.spark_merge__codes(codes) -%}
{%- set op = codes.op -%}
{%- set names = {op['insert']: 'numTargetRowsInserted', op['delete']: 'numTargetRowsDeleted', op['update']: 'numTargetRowsUpdated'} -%}
{%- set seen, deltas, partitions, matched_by_key = {}, {}, [], {} -%}
{%- set ns = namespace(dups=0, multi=0) -%}
{%- for r in rows -%}{%- set ns.dups = ns.dups + (r.get('dups') or 0) | int -%}{%- set ns.multi = ns.multi + (r.get('multi') or 0) | int -%}{%- endfor -%}
{#- the partitions holding a matched target row: any row of op other than INSERT, bys 0 -#}
{%- for r in rows if (r.op | int) != op['insert'] and (r.get('bys') or 0) | int == 0 -%}
  {%- set values = fromjson(r['__sm_old']) -%}
  {%- set part = {} -%}
  {%- for p in table.partition_columns -%}{%- do part.update({p: values[loop.index0]}) -%}{%- endfor -%}
  {%- do matched_by_key.update({spark_merge.spark_merge__partition_key(table.partition_columns, part): {'partition': part}}) -%}
{%- endfor -%}
{%- for r in rows if (r.op | int) in names -%}
  {%- set n = r.n | int -%}
  {%- do m.update({names[r.op | int]: m[names[r.op | int]] + n}) -%}
  {%- if (r.get('bys') or 0) | int == 1 -%}
    {%- set bys_name = names[r.op | int] | replace('numTargetRows', 'numTargetRowsNotMatchedBySource') -%}
    {%- do m.update({bys_name: m[bys_name] + n}) -%}
  {%- endif -%}
  {%- for side in ['old', 'new'] if (r.op | int) in ({'old': [op['delete'], op['update']], 'new': [op['insert'], op['update']]}[side]) -%}
    {%- set values = fromjson(r['__sm_' ~ side]) -%}
    {%- set part = {} -%}
    {%- for p in table.partition_columns -%}{%- do part.update({p: values[loop.index0]}) -%}{%- endfor -%}
    {%- set k = spark_merge.spark_merge__partition_key(table.partition_columns, part) -%}
    {%- do seen.update({k: part}) -%}
    {%- do deltas.update({k: deltas.get(k, 0) + (n if side == 'new' else -n)}) -%}
  {%- endfor -%}
{%- endfor -%}
{%- for k in seen.keys() | sort -%}{%- do partitions.append(seen[k]) -%}{%- endfor -%}
{%- set matched = [] -%}
{%- for k in matched_by_key.keys() | sort -%}{%- do matched.append(matched_by_key[k]) -%}{%- endfor -%}
{%- set rewritten, holding = {}, {} -%}
{%- for r in rows -%}{%- for f in fromjson(r.get('files') or '[]') or [] -%}{%- do rewritten.update({f: true}) -%}{%- endfor -%}{%- endfor -%}
{%- for r in rows -%}{%- for f in fromjson(r.get('matched_files') or '[]') or [] -%}{%- do holding.update({f: true}) -%}{%- endfor -%}{%- endfor -%}
{%- do out.update({'metrics': m, 'partitions': partitions, 'deltas': deltas, 'dups': ns.dups, 'multi': ns.multi, 'matched': matched,
                   'files': rewritten.keys() | sort, 'matched_files': holding.keys() | sort}) -%}
{%- endmacro %}

{#- One text per partition, NULL apart from every string (the string 'None' included). -#}
{% macro spark_merge__partition_key(pcols, row) -%}
{%- for c in pcols %}{% if row[c] is none %}null{% else %}{{ row[c] | string | tojson }}{% endif %}/{% endfor -%}
{%- endmacro %}

{#- Partitions (by key) whose files differ between two decoded file_stats_sql results: another writer's commit. -#}
{% macro spark_merge__changed_partitions(table, before, now, out) -%}
{%- set a, b = {}, {} -%}
{%- for r in before -%}{%- do a.update({spark_merge.spark_merge__partition_key(table.partition_columns, r.partition): [r.dir, r.files | int,
    r.bytes | int, r.rows | int]}) -%}{%- endfor -%}
{%- for r in now -%}{%- do b.update({spark_merge.spark_merge__partition_key(table.partition_columns, r.partition): [r.dir, r.files | int,
    r.bytes | int, r.rows | int]}) -%}{%- endfor -%}
{%- for k in (a.keys() | list) + (b.keys() | list) if a.get(k) != b.get(k) and k not in out -%}
  {%- do out.append(k) -%}
{%- endfor -%}
{%- endmacro %}

{#- The target's rows the source can match (target_filter), with their data file (__sm_file), as the
    target alias: what the one-pass plan joins with the broadcast source to find the files. -#}
{% macro spark_merge__matchable_files_scan(spec, table, ctx) -%}
{%- set where = spark_merge.spark_merge__target_filter(spec, ctx) | trim -%}
(SELECT *, _metadata.file_path AS __sm_file FROM {{ table.relation }}{% if where %} WHERE {{ where }}{% endif %}) AS {{
    spark_merge.spark_merge__quote(spec.target_alias) }}
{%- endmacro %}

{#- The one-pass plan's join (lifecycle/phases.sql: plan_files), kept in a lazy cache (ctx.found_view):
    each pair of a target row ON matches (its partition, __sm_part, and data file) and a source row
    matching it (__sm_srow), from the target's rows the source can match (target_filter) joined with the
    broadcast source, reading only the columns ON names and the partition columns. matched_files_sql
    fills it; the write's rows to insert are the source rows it does not hold (unmatched_source_sql),
    so the write reads no target row for them. -#}
{% macro spark_merge__cache_found_sql(spec, table, ctx) -%}
{%- set t, s = spark_merge.spark_merge__quote(spec.target_alias), spark_merge.spark_merge__quote(spec.source_alias) -%}
CACHE LAZY TABLE {{ ctx.found_view }} OPTIONS ('storageLevel' 'MEMORY_AND_DISK') AS
SELECT /*+ BROADCAST({{ s }}) */ {{ spark_merge.spark_merge__partition_json(table, t ~ '.') | trim }} AS __sm_part, {{ t }}.__sm_file,
       {{ s }}.__sm_srow
FROM {{ spark_merge.spark_merge__matchable_files_scan(spec, table, ctx) }}
JOIN {{ ctx.source }} AS {{ s }} ON ({{ spec.on }})
{%- endmacro %}

{#- Per partition (__sm_part), the data files (files: a JSON list of _metadata.file_path) holding a
    target row ON matches: from the found pairs (ctx.found, cache_found_sql) of a merge that inserts,
    else from the target's rows the source can match semi-joined with the broadcast source (a merge
    without rows to insert needs no pairs). Either way one row per partition is shuffled. -#}
{% macro spark_merge__matched_files_sql(spec, table, ctx) -%}
{%- if ctx.get('found') -%}
SELECT __sm_part, to_json(collect_set(__sm_file)) AS files FROM {{ ctx.found }} GROUP BY __sm_part
{%- else -%}
{%- set t, s = spark_merge.spark_merge__quote(spec.target_alias), spark_merge.spark_merge__quote(spec.source_alias) -%}
{%- set part = spark_merge.spark_merge__partition_json(table, t ~ '.') | trim -%}
SELECT /*+ BROADCAST({{ s }}) */ {{ part }} AS __sm_part, to_json(collect_set({{ t }}.__sm_file)) AS files
FROM {{ spark_merge.spark_merge__matchable_files_scan(spec, table, ctx) }}
LEFT SEMI JOIN {{ ctx.source }} AS {{ s }} ON ({{ spec.on }})
GROUP BY {{ part }}
{%- endif -%}
{%- endmacro %}
