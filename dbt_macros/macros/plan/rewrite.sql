{#-
  Step 5 of the plan (overview in plan/changes.sql): what is written. The rewrite of the touched
  files or partitions (fused with the join, or rows kept by an anti-join plus new rows) into a
  staging table under <root>/_merge_<id>, an insert-only merge's append, the file statistics, and
  the repoints the commit applies.
-#}

{#- The rows of the data files `files` (_metadata.file_path, as the plan's row ids name them); none: false. -#}
{% macro spark_merge__file_filter(files) -%}
{%- if files -%}_metadata.file_path IN ({% for f in files %}{{ spark_merge.spark_merge__literal(f) }}{{ ', ' if not loop.last }}{% endfor %})
{%- else -%}false{%- endif -%}
{%- endmacro %}

{#- The rows a rewrite reads of the touched `partitions` (all rows of an unpartitioned table): with
    `files` (a rewrite that carries the others over), only the rows of those data files, by a filter
    on a file's constant metadata, which Spark's file index applies before reading anything. With
    `fold` (fold_plan: the table's auto compaction), also every file under fold.below bytes of the
    partitions fold.partitions names. That is `files OR (small AND in fold's partitions)`, written as
    the equal `files OR small` AND `files OR in fold's partitions`, conjuncts of one level after the
    partitions' own: Spark's file index skips files only by a conjunct that names nothing but file
    metadata (and simplifies the two conjuncts back into the first form when they stand alone). So
    the scan reads the small files of every touched partition and the changed files; the second
    conjunct drops the rows of the small files it does not fold. Empty: every row. -#}
{% macro spark_merge__rewrite_filter(table, partitions, files=none, fold=none) -%}
{%- set conjuncts = [] -%}
{%- if table.partition_columns -%}{%- do conjuncts.append(spark_merge.spark_merge__partition_filter(table, partitions) | trim) -%}{%- endif -%}
{%- if files is not none -%}
  {%- set named = spark_merge.spark_merge__file_filter(files) | trim -%}
  {%- if not fold -%}
    {%- do conjuncts.append(named) -%}
  {%- else -%}
    {%- do conjuncts.append(named ~ ' OR _metadata.file_size < ' ~ fold.below) -%}
    {%- if table.partition_columns -%}
      {%- do conjuncts.append(named ~ ' OR (' ~ spark_merge.spark_merge__partition_filter(table, fold.partitions) | trim ~ ')') -%}
    {%- endif -%}
  {%- endif -%}
{%- endif -%}
{%- if conjuncts | length == 1 -%}{{ conjuncts[0] }}
{%- else -%}{%- for c in conjuncts -%}({{ c }}){{ ' AND ' if not loop.last }}{%- endfor -%}
{%- endif -%}
{%- endmacro %}

{#- The table's auto compaction policy, from its properties: out gets {'min_files', 'below'} when
    spark_merge.auto_compact.min_files is set (below: spark_merge.auto_compact.small_file_bytes, default
    64 MiB), {'error'} when a value is bad, nothing when the policy is unset. -#}
{% macro spark_merge__fold_policy(table, out) -%}
{%- set props = table.get('properties') or {} -%}
{%- set raw_min, raw_below = props.get('spark_merge.auto_compact.min_files'), props.get('spark_merge.auto_compact.small_file_bytes') -%}
{%- set min_text = '' if raw_min is none else raw_min | string | trim -%}
{%- set below_text = '67108864' if raw_below is none else raw_below | string | trim -%}
{%- if min_text -%}
  {%- if not min_text.isdigit() or min_text | int < 2 or not below_text.isdigit() or below_text | int < 1 -%}
    {%- do out.update({'error': "table property spark_merge.auto_compact.min_files must be a whole number of at least 2 and "
        ~ "spark_merge.auto_compact.small_file_bytes a positive number of bytes (found '" ~ raw_min ~ "' and '" ~ raw_below ~ "'); "
        ~ "fix them with ALTER TABLE " ~ table.name ~ " SET TBLPROPERTIES, or UNSET them to turn auto compaction off"}) -%}
  {%- else -%}
    {%- do out.update({'min_files': min_text | int, 'below': below_text | int}) -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- The table's auto compaction, decided for the partitions a file-granular rewrite replaces (`old`:
    their file statistics, with each file's size): a partition holding at least
    spark_merge.auto_compact.min_files files smaller than spark_merge.auto_compact.small_file_bytes
    (fold_policy) has all of those rewritten with its changed files, into the new files of its new
    version, instead of carried; larger files are carried as always. Unset: out stays empty. The same
    commit, the same checks: the folded rows are the partition's own, counted as copied. out: {'below',
    'partitions', 'dirs', 'files', 'bytes', 'min_files'}, or an error message ({'error'}). -#}
{% macro spark_merge__fold_plan(table, old, out) -%}
{%- set policy = {} -%}
{%- do spark_merge.spark_merge__fold_policy(table, policy) -%}
{%- if policy.get('error') -%}
  {%- do out.update(policy) -%}
{%- elif policy -%}
  {%- set chosen = {'min_files': policy.min_files, 'below': policy.below, 'partitions': [], 'dirs': [], 'files': 0, 'bytes': 0} -%}
  {%- for r in old if r.get('sizes') is not none -%}
    {%- set small = r.sizes | select('lt', policy.below) | list -%}
    {%- if small | length >= policy.min_files -%}
      {%- do chosen.partitions.append(r.partition) -%}{%- do chosen.dirs.append(r.dir) -%}
      {%- do chosen.update({'files': chosen.files + small | length, 'bytes': chosen.bytes + small | sum}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if chosen.dirs -%}{%- do out.update(chosen) -%}{%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- The staged rows spread over tasks by partition (Spark's REBALANCE: about one file per partition,
    of its advisory size), unless `ctx.rebalance` is false (lifecycle_rewrite): a fused write whose
    join broadcasts the source, or has none, keeps each target row in the scan task that read it,
    which writes it to its partition; a shuffle would only move the rows. Nor when a larger source's
    join writes an unpartitioned table: the join has shuffled every row already. -#}
{% macro spark_merge__rebalance_hint(table, ctx) -%}
{%- if ctx.get('rebalance', true) -%}
/*+ REBALANCE{% if table.partition_columns %}({{ spark_merge.spark_merge__column_list(table.partition_columns) }}){% endif %} */
{%- endif -%}
{%- endmacro %}

{#- New content of the touched partitions (or of the whole unpartitioned table); with
    ctx.rewrite_files, only of those files (the others are carried over). No file to rewrite (a plan
    that only inserts, and no small files to fold in): no target rows to keep, and no scan of them
    (Spark fails to analyze an anti-join whose scan is filtered by a literal false:
    ASSIGNMENT_ARITY_MISMATCH). -#}
{% macro spark_merge__rewrite_select(table, ctx, partitions) -%}
{%- set names = table.columns | map(attribute='name') | list -%}
{%- set where = spark_merge.spark_merge__rewrite_filter(table, partitions, ctx.get('rewrite_files'), ctx.get('fold')) | trim or none -%}
SELECT {{ spark_merge.spark_merge__rebalance_hint(table, ctx) }} * FROM (
{%- if ctx.get('rewrite_files') != [] or ctx.get('fold') %}
  SELECT {{ spark_merge.spark_merge__column_list(names, '__sm_t.') }}
  FROM {{ spark_merge.spark_merge__target_scan(table, where) }} AS __sm_t
  LEFT ANTI JOIN (SELECT {% if ctx.get('broadcast_changed') %}/*+ BROADCAST */ {% endif %}__sm_file, __sm_row FROM {{ ctx.changes
      }} WHERE __sm_op IN ({{ spark_merge.spark_merge__op('delete', 'update') }})) AS __sm_d
    ON __sm_t.__sm_file = __sm_d.__sm_file AND __sm_t.__sm_row = __sm_d.__sm_row
  UNION ALL
{%- endif %}
  SELECT {% for c in table.columns %}__sm_c{{ loop.index0 }} AS {{ spark_merge.spark_merge__quote(c.name) }}{{ ", " if not loop.last }}{% endfor %}
  FROM {{ ctx.changes }} WHERE __sm_op IN ({{ spark_merge.spark_merge__op('insert', 'update') }})
) AS __sm_new
{%- endmacro %}

{#- New content of the touched partitions in one join (the fused write): changes_sql over those
    partitions, each row written as its clause makes it (inserted, updated) or copied as it is
    (no clause changed it, and it is in a touched partition); deleted rows and rows outside are
    not written. A CHAR(n) value is padded to n, as Spark stores it (the staging table's columns
    are plain strings). Only for a plan whose summary found no target row joined with several source
    rows that not all delete it (multi = 0): such a row would be copied once per source row.
    A source the write broadcasts (ctx.broadcast_source), without WHEN NOT MATCHED BY SOURCE clauses,
    splits the write in two: the touched files' rows LEFT JOIN the source under the MATCHED clauses,
    each row written by the scan task that read it (no shuffle, ctx.rebalance), and, when the plan
    inserts rows (ctx.inserts), the source rows no target row matches (unmatched_source_sql) under
    the NOT MATCHED clauses. One FULL join, which cannot broadcast, would shuffle every row ON can
    match at full width to tell the inserted source rows from the matched ones; with a large source
    the join shuffles anyway, and that one join costs less than two.
    `observed` (the one-pass write, lifecycle_rewrite_observed): every joined row, with its operation
    (__sm_op), whether it is written (__sm_write) and whether it is a target row (__sm_target: a FULL
    join's source-only rows are not), for the host to count before it drops those columns and the rows
    not written (host.stage_observed). -#}
{% macro spark_merge__fused_rewrite_select(spec, table, resolved, ctx, partitions, observed=false) -%}
{%- set split = ctx.get('broadcast_source') and resolved.clauses | selectattr('by_source') | list | length == 0 -%}
{%- set kept, inserted = {}, {} -%}
{%- do kept.update(resolved) -%}{%- do inserted.update(resolved) -%}
{%- do kept.update({'clauses': resolved.clauses | selectattr('matched') | list}) -%}
{%- do inserted.update({'clauses': resolved.clauses | rejectattr('matched') | list}) -%}
{%- set only_new = {} -%}{%- do only_new.update(ctx) -%}
{%- do only_new.update({'source': spark_merge.spark_merge__unmatched_source_sql(spec, table, resolved, ctx), 'match_filter': 'false'}) -%}
{%- set written = '__sm_op IN (' ~ spark_merge.spark_merge__op('insert', 'update') ~ ') OR (__sm_op = ' ~ spark_merge.spark_merge__op('none')
    ~ ' AND __sm_touched)' -%}
{#- the one-pass write of an upsert whose keys no file holds: no target row to read -#}
{%- set reads = not (observed and split and not ctx.get('rewrite_files')) -%}
SELECT * FROM (
{%- if reads %}
  SELECT {{ spark_merge.spark_merge__rebalance_hint(table, ctx) }} {{ spark_merge.spark_merge__fused_columns(table) }}
  {%- if observed %}, __sm_op, {{ written }} AS __sm_write, {{ 'true' if split else '__sm_file IS NOT NULL' }} AS __sm_target{% endif %}
  FROM (
{{ spark_merge.spark_merge__changes_sql(spec, table, kept if split else resolved, ctx, partitions) }}
  ) AS __sm_j
  {%- if not observed %}
  WHERE {{ written }}
  {%- endif %}
{%- endif %}
{%- if split and ctx.get('inserts', true) %}
  {%- if reads %}
  UNION ALL
  {%- endif %}
  SELECT {{ spark_merge.spark_merge__rebalance_hint(table, {}) }} {{ spark_merge.spark_merge__fused_columns(table, new_only=true) }}
  {%- if observed %}, __sm_op, true AS __sm_write, false AS __sm_target{% endif %}
  FROM (
{{ spark_merge.spark_merge__changes_sql(spec, table, inserted, only_new) }}
  ) AS __sm_i
  WHERE __sm_op = {{ spark_merge.spark_merge__op('insert') }}
{%- endif %}
) AS __sm_new
{%- endmacro %}

{#- The source rows no target row matches: those the join of the rows ON can match (read at the ON
    columns only; of the files the summary found holding a matched row, ctx.matched_files, where it
    names them) leaves out, by row number (the one-pass plan's found pairs hold those row numbers
    already: ctx.found, no target row read); the whole source when no file holds one. Only for a source
    the write broadcasts (at most source_broadcast_rows()), so the source is broadcast here too and the
    target's rows are not shuffled. A target the plan broadcasts (ctx.broadcast_target, a few rows) is broadcast to the
    anti-join itself instead: one broadcast, not two. When no target row can match (match_filter
    'false': every source key is NULL, say), the whole source, and no join: Spark 4.2 fails to
    analyze an anti-join with a target scan filtered by a literal false (ASSIGNMENT_ARITY_MISMATCH). -#}
{% macro spark_merge__unmatched_source_sql(spec, table, resolved, ctx) -%}
{%- if ctx.get('match_filter') == 'false' or ctx.get('matched_files') == [] -%}{{ ctx.source }}{%- else -%}
{%- set s, t = spark_merge.spark_merge__quote(spec.source_alias), spark_merge.spark_merge__quote(spec.target_alias) -%}
{%- set where = spark_merge.spark_merge__matched_files_filter(spark_merge.spark_merge__changes_filter(spec, resolved, ctx) | trim, ctx) | trim -%}
{%- set target = '(SELECT * FROM ' ~ table.relation ~ ' WHERE ' ~ where ~ ')' if where else table.relation -%}
{%- if ctx.get('found') -%}
(SELECT /*+ BROADCAST(__sm_m) */ __sm_u.* FROM {{ ctx.source }} AS __sm_u
 LEFT ANTI JOIN (SELECT __sm_srow FROM {{ ctx.found }}) AS __sm_m ON __sm_u.__sm_srow = __sm_m.__sm_srow)
{%- elif ctx.get('broadcast_target') -%}
(SELECT /*+ BROADCAST({{ t }}) */ {{ s }}.* FROM {{ ctx.source }} AS {{ s }}
 LEFT ANTI JOIN {{ target }} AS {{ t }} ON ({{ spec.on }}))
{%- else -%}
(SELECT /*+ BROADCAST(__sm_m) */ __sm_u.* FROM {{ ctx.source }} AS __sm_u
 LEFT ANTI JOIN (SELECT /*+ BROADCAST({{ s }}) */ {{ s }}.__sm_srow
   FROM {{ target }} AS {{ t }}
   JOIN {{ ctx.source }} AS {{ s }} ON ({{ spec.on }})) AS __sm_m
 ON __sm_u.__sm_srow = __sm_m.__sm_srow)
{%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- The fused write's output columns: a row's new values where a clause inserts or updates it, else its own
    (`new_only`: rows that all have new values, the inserted ones). -#}
{% macro spark_merge__fused_columns(table, new_only=false) -%}
{% for c in table.columns %}{{ 'rpad(' if c.get('char_pad') }}{% if new_only %}__sm_c{{ loop.index0 }}{% else %}CASE WHEN __sm_op IN ({{
    spark_merge.spark_merge__op('insert', 'update') }}) THEN __sm_c{{ loop.index0 }} ELSE __sm_t{{ loop.index0 }} END{% endif %}{{
        ', ' ~ c.char_pad ~ ')' if c.get('char_pad') }} AS {{ spark_merge.spark_merge__quote(c.name) }}{{ ", " if not loop.last }}{% endfor %}
{%- endmacro %}

{% macro spark_merge__stage_sql(table, ctx, partitions) -%}
{{ spark_merge.spark_merge__stage_select_sql(table, ctx, spark_merge.spark_merge__rewrite_select(table, ctx, partitions)) }}
{%- endmacro %}

{#- The fused write's staging statement (fused_rewrite_select). -#}
{% macro spark_merge__fused_stage_sql(spec, table, resolved, ctx, partitions) -%}
{{ spark_merge.spark_merge__stage_select_sql(table, ctx, spark_merge.spark_merge__fused_rewrite_select(spec, table, resolved, ctx, partitions)) }}
{%- endmacro %}

{#- Stage any new content for the table (a merge's rewrite, or a compaction). -#}
{% macro spark_merge__stage_select_sql(table, ctx, select) -%}
CREATE TABLE {{ ctx.stage }}
USING {{ table.provider }}
{% if table.partition_columns -%}
PARTITIONED BY ({{ spark_merge.spark_merge__column_list(table.partition_columns) }})
{% endif -%}
LOCATION {{ spark_merge.spark_merge__literal(ctx.stage_location) }}
AS {{ select }}
{%- endmacro %}

{#- An insert-only merge's append: Spark's own INSERT of the inserted rows. A partitioned table's rows
    are rebalanced by its partition columns (one file per partition they go to, where they fit in one);
    an unpartitioned table takes the rows of a source read in at most append_slices() partitions as
    they are read (as many files at most, and no shuffle), a wider source's rebalanced. -#}
{% macro spark_merge__append_sql(table, ctx) -%}
INSERT INTO {{ table.relation }}
SELECT {% if table.partition_columns %}/*+ REBALANCE({{ spark_merge.spark_merge__column_list(table.partition_columns | map('lower') | list)
    }}) */{% elif ctx.get('source_slices') is none or ctx.source_slices | int > spark_merge.spark_merge__append_slices() | int
    %}/*+ REBALANCE */{% endif %} {% for c in table.columns %}__sm_c{{ loop.index0 }} AS {{
        spark_merge.spark_merge__quote(c.name) }}{{ ", " if not loop.last }}{% endfor %}
FROM {{ ctx.changes }} WHERE __sm_op = {{ spark_merge.spark_merge__op('insert') }}
{%- endmacro %}

{#- Files, bytes, rows and directory per partition (__sm_part, as partition_json) of `relation`,
    from its metadata columns only: rows counted per file, then per directory. (A parquet file's
    first row, _metadata.row_index = 0, would count files in one level, but generating a row index
    for every row costs 4x the per-file grouping at 5M rows.) decode_partitions reads the
    partitions. Files without rows are not seen. -#}
{% macro spark_merge__file_stats_sql(table, relation, where=none) -%}
{%- set pcols = spark_merge.spark_merge__column_list(table.partition_columns) if table.partition_columns else '' -%}
SELECT __sm_part, dir, count(*) AS files, sum(__sm_size) AS bytes, sum(__sm_rows) AS rows
FROM (
  SELECT {{ spark_merge.spark_merge__partition_json(table) }} AS __sm_part,
         url_decode(replace(regexp_extract(__sm_f, '^(.*)/[^/]*$', 1), '+', '%2B')) AS dir, __sm_size, __sm_rows
  FROM (
    SELECT __sm_f, {% if pcols %}{{ pcols }}, {% endif %}max(__sm_size) AS __sm_size, count(*) AS __sm_rows
    FROM (SELECT _metadata.file_path AS __sm_f, _metadata.file_size AS __sm_size{% if pcols %}, {{ pcols }}{% endif %}
          FROM {{ relation }}{% if where %} WHERE {{ where }}{% endif %})
    GROUP BY __sm_f{% if pcols %}, {{ pcols }}{% endif %}
  )
)
GROUP BY __sm_part, dir
{%- endmacro %}

{#- An empty directory for a touched partition that ends up with no rows. -#}
{% macro spark_merge__empty_partition_sql(table, location) -%}
{%- set data = table.columns | rejectattr('name', 'in', table.partition_columns) | map(attribute='name') | list -%}
INSERT OVERWRITE DIRECTORY {{ spark_merge.spark_merge__literal(location) }} USING {{ table.provider }}
SELECT {{ spark_merge.spark_merge__column_list(data) }} FROM {{ table.relation }} WHERE false
{%- endmacro %}

{#- Drop what this merge made (ctx.<kind>_made is set before the statement that makes it runs): a
    cached view (dropping a temporary view uncaches it too), or the table a read-once fallback wrote
    instead (materialize_statements dropped the view then). -#}
{% macro spark_merge__cleanup_statements(ctx, out) -%}
{%- for kind in ['changes', 'source', 'found'] if ctx.get(kind ~ '_made') -%}
{%- if ctx[kind] == ctx.get(kind ~ '_table') -%}
{%- do out.append('DROP TABLE IF EXISTS ' ~ ctx[kind ~ '_table']) -%}
{%- else -%}
{%- do out.append('DROP VIEW IF EXISTS ' ~ ctx[kind ~ '_view']) -%}
{%- endif -%}
{%- endfor -%}
{%- if ctx.get('stage') and not ctx.get('stage_dropped') -%}{%- do out.append('DROP TABLE IF EXISTS ' ~ ctx.stage) -%}{%- endif -%}
{%- endmacro %}

{#-
  Where each rewritten partition goes, from file stats (rows of file_stats_sql,
  decoded by decode_partitions) of the partitions before (`old`) and of the staging table (`new`).
  Fills `out`: repoints (see commit/commit.sql), empty (directories to create
  with empty_partition_sql first: partitions left with no rows) and metrics.
-#}
{% macro spark_merge__repoints(table, ctx, partitions, old, new, out) -%}
{%- set pcols = table.partition_columns -%}
{%- set old_by, new_by = {}, {} -%}
{%- for r in old -%}{%- do old_by.update({spark_merge.spark_merge__partition_key(pcols, r.partition): r}) -%}{%- endfor -%}
{%- for r in new -%}{%- do new_by.update({spark_merge.spark_merge__partition_key(pcols, r.partition): r}) -%}{%- endfor -%}
{%- set repoints, empty = [], [] -%}
{%- for part in partitions -%}
  {%- set k = spark_merge.spark_merge__partition_key(pcols, part) -%}
  {%- if k in new_by -%}
    {%- set location = new_by[k].dir -%}
  {%- elif pcols -%}
    {%- set location = ctx.stage_location ~ '/empty-' ~ loop.index0 -%}
    {%- do empty.append(location) -%}
  {%- else -%}
    {%- set location = ctx.stage_location -%}
  {%- endif -%}
  {%- set values = {} -%}
  {%- for c in pcols -%}{%- do values.update({c: part[c]}) -%}{%- endfor -%}
  {%- do repoints.append({
    'partition': values if pcols else none,
    'location': location,
    'old_location': old_by[k].dir if k in old_by else (none if pcols else table.location),
    'exists': k in old_by,
  }) -%}
{%- endfor -%}
{%- set ns = namespace(rows=0, files=0, bytes=0, old_files=0, old_bytes=0) -%}
{%- for r in new -%}
  {%- set ns.rows = ns.rows + r.rows | int -%}{%- set ns.files = ns.files + r.files | int -%}{%- set ns.bytes = ns.bytes + r.bytes | int -%}
{%- endfor -%}
{%- for r in old -%}
  {%- set ns.old_files = ns.old_files + r.files | int -%}{%- set ns.old_bytes = ns.old_bytes + r.bytes | int -%}
{%- endfor -%}
{%- do out.update({'repoints': repoints, 'empty': empty, 'metrics': {
  'numOutputRows': ns.rows, 'numTargetFilesAdded': ns.files, 'numTargetBytesAdded': ns.bytes,
  'numTargetFilesRemoved': ns.old_files, 'numTargetBytesRemoved': ns.old_bytes,
  'numTargetPartitionsRewritten': partitions | length,
}}) -%}
{%- endmacro %}
