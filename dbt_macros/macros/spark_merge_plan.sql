{#-
  The merge plan (DELETE_ROW_AND_INSERT_ROW, copy-on-write).

  0. source:    the source is read once and cached with a row number
                (__sm_srow), so every later step sees the same rows; the job
                that fills the cache also returns numSourceRows and the range
                (or list) of the source's values of each ON equality, which
                narrows every target scan below (match_filter).
  1. matched:   (partitioned targets, with a source) the partitions holding a
                target row that ON matches: named by step 0's lists, or from a
                scan of a dense key range, or from a join that reads only the
                columns ON names and the partition columns; step 2 scans only
                those partitions, so the full-width read follows the change.
  2. changes:   target (with a row id) RIGHT JOIN source ON ... (a FULL join when
                WHEN NOT MATCHED BY SOURCE clauses need the unmatched target
                rows: see by_source_reads); a searched CASE
                picks the first WHEN clause that holds (case number, -1 = none)
                and its operation (INSERT=1, DELETE=2, UPDATE=3); the new values
                are computed per target column as __sm_c<i>, each with its checks
                (NOT NULL, CHAR/VARCHAR length). Declared as a lazy cache; dropped
                again before anything reads it when Spark computes it the same at
                every read (the fused write, step 5), else cached (the first step
                reading it fills it) or written once to a table.
  3. checks:    duplicate matches per the duplicate rule; NOT NULL and length
                violations raise in the summary. Both before any write.
  4. summary:   one aggregation gives the counts per operation and the
                partitions touched: where a changed row was, and where an
                output row goes; for the fused write also the partitions
                holding matched rows (then step 1 is skipped).
  5. rewrite:   the fused write: the touched partitions joined with the source
                once more, each row written as its clause makes it or copied
                (fused_rewrite_select); else untouched target rows (anti-join on
                row id) + new rows. A staging table under <root>/_merge_<id>.
  6. commit:    see spark_merge_commit.sql.
  Insert-only merges skip the rewrite: their rows are appended.
  Joins whose build side holds at most broadcast_rows() rows are broadcast
  (no shuffle of the large side).
-#}

{% macro spark_merge__broadcast_rows() -%}1000000{%- endmacro %}

{#- Whether the rewrite broadcasts the row ids of updated and deleted rows to its anti-join
    (out.broadcast), from the plan's counts `m`. -#}
{% macro spark_merge__broadcast_changed(m, out) -%}
{%- do out.update({'broadcast': m.numTargetRowsUpdated + m.numTargetRowsDeleted <= spark_merge.spark_merge__broadcast_rows() | int}) -%}
{%- endmacro %}

{#- Names of the merge's relations. The read-once fallbacks (changes_table, source_table) are managed
    tables of the merge in the target's database (for a database target, Spark's current one). -#}
{% macro spark_merge__context(spec, table, merge_id, out) -%}
{%- set root = table.root.rstrip('/') -%}
{%- do out.update({
  'merge_id': merge_id,
  'changes': '`__sm_changes_' ~ merge_id ~ '`',
  'source': '`__sm_source_' ~ merge_id ~ '`',
  'changes_view': '`__sm_changes_' ~ merge_id ~ '`',
  'source_view': '`__sm_source_' ~ merge_id ~ '`',
  'changes_table': ('' if table.provider == 'jdbc' else spark_merge.spark_merge__quote(table.database) ~ '.') ~ spark_merge.spark_merge__quote('__sm_chg_' ~ merge_id),
  'source_table': ('' if table.provider == 'jdbc' else spark_merge.spark_merge__quote(table.database) ~ '.') ~ spark_merge.spark_merge__quote('__sm_src_' ~ merge_id),
  'stage': none if table.provider == 'jdbc' else spark_merge.spark_merge__quote(table.database) ~ '.' ~ spark_merge.spark_merge__quote('__sm_stage_' ~ merge_id),
  'stage_name': '__sm_stage_' ~ merge_id,
  'stage_location': root ~ '/_merge_' ~ merge_id,
  'history_location': root ~ '/_spark_merge/history/' ~ merge_id,
  'history_glob': root ~ '/_spark_merge/history/*',
  'on_keys': [],
}) -%}
{%- endmacro %}

{#- Row id: file and position for parquet; ORC has no row_index, so file and the
    row's own values (identical rows in one file share every fate, so the
    coarser id never changes a result). -#}
{% macro spark_merge__row_id(table) -%}
{%- if table.provider == 'jdbc' -%}
'jdbc' AS __sm_file, to_json(struct({{ spark_merge.spark_merge__column_list(table.primary_key) }})) AS __sm_row
{%- else -%}
_metadata.file_path AS __sm_file, {% if table.provider == 'parquet' -%}
_metadata.row_index AS __sm_row
{%- else -%}
to_json(struct({{ spark_merge.spark_merge__column_list(table.columns | map(attribute='name') | list) }})) AS __sm_row
{%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- `alias`: the name the filter `where` may qualify columns with (a NOT MATCHED BY SOURCE condition's t.col). -#}
{% macro spark_merge__target_scan(table, where=none, alias=none) -%}
(SELECT *, {{ spark_merge.spark_merge__row_id(table) }} FROM {{ table.relation }}{% if alias %} AS {{ alias }}{% endif %}{% if where %} WHERE ({{ where }}){% endif %})
{%- endmacro %}

{#- The value clause `cl` gives column `c` (index i). -#}
{% macro spark_merge__output_value(spec, cl, c) -%}
{%- set lname = c.name | lower -%}
{%- if lname in cl.outputs -%}CAST(({{ cl.outputs[lname] }}) AS {{ c.type }})
{%- elif cl.action == 'update' -%}{{ spark_merge.spark_merge__quote(spec.target_alias) }}.{{ spark_merge.spark_merge__quote(c.name) }}
{%- else -%}CAST(NULL AS {{ c.type }})
{%- endif -%}
{%- endmacro %}

{#- Which checks guard the value column `c` is given (__sm_c<i>): NOT NULL, the struct fields
    listed in spark_merge.not_null, a CHAR/VARCHAR length, CHAR/VARCHAR inside a struct, array or
    map. The one definition: changes_sql builds the checks from it, change_summary_sql counts the
    checked values by it (so every check runs in the plan, before anything is staged). -#}
{% macro spark_merge__value_checks(c, out) -%}
{%- do out.update({'not_null': not c.nullable, 'fields': c.get('not_null_fields') or [],
                   'length': c.get('char_length'), 'nested': c.get('nested_chars')}) -%}
{%- if c.get('computed_by_target') -%}{#- a PostgreSQL target computes and checks its values itself -#}
  {%- do out.update({'not_null': false, 'fields': [], 'length': none, 'nested': none}) -%}
{%- endif -%}
{%- do out.update({'any': true if out.not_null or out.fields or out.length or out.nested else false}) -%}
{%- endmacro %}

{#- The value Spark stores for `v` in a CHAR(n)/VARCHAR(n) column (CharVarcharCodegenUtils): a
    string of at most n characters as it is; a longer one without its trailing spaces beyond n when
    that is enough; else EXCEED_LIMIT_LENGTH, raised here while planning (before any write).
    `v` names a column of the same SELECT (a lateral alias), so a non-deterministic value is
    computed once. CHAR values are padded when read, as Spark reads them. -#}
{% macro spark_merge__char_checked(spec, table, c, v) -%}
{%- set n = c.char_length -%}
CASE WHEN {{ v }} IS NULL OR char_length({{ v }}) <= {{ n }} THEN {{ v }} WHEN char_length(rtrim({{ v }})) <= {{ n }} THEN substr({{ v }}, 1, {{ n }}) ELSE raise_error({{ spark_merge.spark_merge__literal(spark_merge.spark_merge__error_code('length') ~ ': a ' ~ spec.kind | upper ~ ' would write a string longer than ' ~ n ~ ' characters into column ' ~ c.name ~ ' ' ~ c.char_type | upper ~ ' of ' ~ table.name ~ ' (Spark: EXCEED_LIMIT_LENGTH)') }}) END
{%- endmacro %}

{#- Split a type's text at `sep` where it is outside <>, () and backticks (struct fields, map types). -#}
{% macro spark_merge__split_type(text, sep, out) -%}
{%- set state = {'depth': 0, 'tick': false, 'start': 0} -%}
{%- for ch in text -%}
  {%- if ch == '`' -%}{%- do state.update({'tick': not state.tick}) -%}
  {%- elif not state.tick and ch in '<(' -%}{%- do state.update({'depth': state.depth + 1}) -%}
  {%- elif not state.tick and ch in '>)' -%}{%- do state.update({'depth': state.depth - 1}) -%}
  {%- elif not state.tick and state.depth == 0 and ch == sep -%}
    {%- do out.append(text[state.start:loop.index0]) -%}{%- do state.update({'start': loop.index}) -%}
  {%- endif -%}
{%- endfor -%}
{%- do out.append(text[state.start:]) -%}
{%- endmacro %}

{#- The value Spark stores for `v` of a type `ty` (as DESCRIBE TABLE spells it) that holds CHAR(n) or
    VARCHAR(n) inside a struct, array or map: each such string checked as char_checked checks a
    column's (EXCEED_LIMIT_LENGTH, raised while planning), a CHAR padded to n as Spark's INSERT
    stores it; the rest as it is. `path` names the field in the error. -#}
{% macro spark_merge__nested_char_checked(spec, table, path, v, ty, depth=0) -%}
{%- set t = ty | trim -%}{%- set lt = t | lower -%}
{%- if 'char(' not in lt -%}{{ v }}
{%- elif lt.startswith('char(') or lt.startswith('varchar(') -%}
  {%- set n = lt.split('(')[1].rstrip(')') | int -%}
  {{- 'rpad(' if lt.startswith('char(') }}CASE WHEN {{ v }} IS NULL OR char_length({{ v }}) <= {{ n }} THEN {{ v }} WHEN char_length(rtrim({{ v }})) <= {{ n }} THEN substr({{ v }}, 1, {{ n }}) ELSE raise_error({{ spark_merge.spark_merge__literal(spark_merge.spark_merge__error_code('length') ~ ': a ' ~ spec.kind | upper ~ ' would write a string longer than ' ~ n ~ ' characters into ' ~ path ~ ' ' ~ lt | upper ~ ' of ' ~ table.name ~ ' (Spark: EXCEED_LIMIT_LENGTH)') }}) END{{ ', ' ~ n ~ ')' if lt.startswith('char(') }}
{%- elif lt.startswith('array<') -%}
  {%- set e = '__sm_e' ~ depth -%}
transform({{ v }}, {{ e }} -> {{ spark_merge.spark_merge__nested_char_checked(spec, table, path ~ '[]', e, t[6:-1], depth + 1) }})
{%- elif lt.startswith('map<') -%}
  {%- set kv = [] -%}{%- do spark_merge.spark_merge__split_type(t[4:-1], ',', kv) -%}
  {%- set k, x = '__sm_k' ~ depth, '__sm_e' ~ depth -%}
  {%- set keys = 'transform_keys(' ~ v ~ ', (' ~ k ~ ', ' ~ x ~ ') -> ' ~ spark_merge.spark_merge__nested_char_checked(spec, table, path ~ ' key', k, kv[0], depth + 1) ~ ')' if 'char(' in kv[0] | lower else v -%}
  {%- if 'char(' in kv[1] | lower -%}transform_values({{ keys }}, ({{ k }}, {{ x }}) -> {{ spark_merge.spark_merge__nested_char_checked(spec, table, path ~ ' value', x, kv[1], depth + 1) }}){%- else -%}{{ keys }}{%- endif -%}
{%- elif lt.startswith('struct<') -%}
  {%- set fields = [] -%}{%- do spark_merge.spark_merge__split_type(t[7:-1], ',', fields) -%}
IF({{ v }} IS NULL, NULL, named_struct(
  {%- for f in fields -%}
    {%- set nt = [] -%}{%- do spark_merge.spark_merge__split_type(f, ':', nt) -%}
    {%- set name = nt[0] | trim -%}
    {%- set name = name[1:-1] | replace('``', '`') if name.startswith('`') else name -%}
    {{- ', ' if not loop.first }}{{ spark_merge.spark_merge__literal(name) }}, {{ spark_merge.spark_merge__nested_char_checked(spec, table, path ~ '.' ~ name, v ~ '.' ~ spark_merge.spark_merge__quote(name), nt[1:] | join(':'), depth) }}
  {%- endfor -%}))
{%- else -%}{{ v }}
{%- endif -%}
{%- endmacro %}

{#- The source, read once: every later step reads this cache (LAZY: source_stats_sql fills it).
    The merge id is part of the cached plan: Spark's cache manager matches cached data by plan,
    not by name, so without it a merge could read another (dead) merge's cache of the same query. -#}
{% macro spark_merge__source_select(spec, ctx) -%}
SELECT *, monotonically_increasing_id() AS __sm_srow, {{ spark_merge.spark_merge__literal(ctx.merge_id) }} AS __sm_merge FROM {{ spark_merge.spark_merge__source_relation(spec) }} AS __sm_src
{%- endmacro %}

{% macro spark_merge__cache_source_sql(spec, ctx) -%}
CACHE LAZY TABLE {{ ctx.source_view }} OPTIONS ('storageLevel' 'MEMORY_AND_DISK') AS
{{ spark_merge.spark_merge__source_select(spec, ctx) }}
{%- endmacro %}

{#-
  Read once, really. Spark serves a cached query only to plans equal to the one
  it cached, and a query with a seedless non-deterministic function (rand(),
  uuid(), shuffle(), ...) gets a new seed each time its view is read: such a
  cache is never used and every step would evaluate the query anew (other rows,
  other values). The host asks Spark how it plans a read of the cache
  (read_once_probe_sql); when the plan does not read the cache, the query is
  written once to a managed table of the merge (materialize_sql) and every step
  reads that instead. `kind`: 'source' or 'changes'.
-#}
{% macro spark_merge__read_once_probe_sql(ctx, kind) -%}
EXPLAIN SELECT * FROM {{ ctx[kind ~ '_view'] }}
{%- endmacro %}

{#- From the probe's plan text: out.served (the cache serves reads). -#}
{% macro spark_merge__read_once_served(plan_text, out) -%}
{%- do out.update({'served': 'InMemoryRelation' in plan_text or 'InMemoryTableScan' in plan_text}) -%}
{%- endmacro %}

{#- The fallback: drop the unusable cache, write the query once, read the table from now on. -#}
{% macro spark_merge__materialize_statements(ctx, kind, select, out) -%}
{%- do out.append('UNCACHE TABLE IF EXISTS ' ~ ctx[kind ~ '_view']) -%}
{%- do out.append('DROP VIEW IF EXISTS ' ~ ctx[kind ~ '_view']) -%}
{%- do out.append('CREATE TABLE ' ~ ctx[kind ~ '_table'] ~ ' USING parquet AS ' ~ select) -%}
{%- do ctx.update({kind: ctx[kind ~ '_table']}) -%}
{%- endmacro %}

{#- numSourceRows, and for each ON equality target.col = source.col (ctx.on_keys) a JSON object
    (text survives dbt's agate type guessing): the source column's type, min and max as strings,
    and for a partition column its distinct values. match_filter turns them into a filter. -#}
{% macro spark_merge__source_stats_sql(table, ctx) -%}
SELECT count(*) AS numSourceRows
{%- for k in ctx.on_keys %}{% set c = spark_merge.spark_merge__quote(k.source) %},
  to_json(named_struct('type', typeof(min({{ c }})), 'lo', CAST(min({{ c }}) AS STRING), 'hi', CAST(max({{ c }}) AS STRING)
  {%- if (k.target | lower) in table.partition_columns | map('lower') | list %}, 'values', collect_set(CAST({{ c }} AS STRING)){% endif %})) AS __sm_key{{ loop.index0 }}
{%- endfor %}
FROM {{ ctx.source }}
{%- endmacro %}

{#-
  A predicate on the target's columns that every target row ON can match
  satisfies, from source_stats_sql's row `stats`: per ON equality, the source's
  values (a partition column with at most 1000 of them) or their range. Only
  where the source column has the target column's type, and text casts the
  values back exactly (integers, decimals, dates, timestamp_ntz, strings
  without a collation; not a TIMESTAMP, whose text in a time zone with
  daylight saving can name two instants). Fills out.filter (empty: no narrowing) and out.matched_by, how
  step 1 finds the partitions holding matched rows:
    'filter': every partition column has its list (or nothing can match):
              the filter names them, step 1 is skipped;
    'range':  an integer key's source values span at most 4 x the source's
              rows, so (for a key unique in the target) at most that many target
              rows are in range: the partitions holding any of them, from a
              scan of the key and partition columns with the filter, no join;
    'join':   otherwise, the key-only join with the source (filtered too).
-#}
{% macro spark_merge__match_filter(table, ctx, stats, out) -%}
{%- set parts, listed, dense = [], [], [] -%}
{%- set pcols = table.partition_columns | map('lower') | list -%}
{%- for k in ctx.on_keys -%}
  {%- set key = fromjson(stats['__sm_key' ~ loop.index0]) -%}
  {%- set col = table.columns_by_name.get(k.target | lower) -%}
  {%- set type = (col.type | lower) if col else '' -%}
  {%- set orderable = type in ['tinyint', 'smallint', 'int', 'bigint', 'date', 'timestamp_ntz', 'string'] or type.startswith('decimal(') -%}
  {%- if col and orderable and (key.type | lower) == type -%}
    {%- set name = spark_merge.spark_merge__quote(col.name) -%}
    {%- if key.get('lo') is none -%}
      {%- set p = 'false' -%}
    {%- elif key.get('values') is not none and key['values'] | length <= 1000 -%}
      {%- set lits = [] -%}
      {%- for v in key['values'] | sort -%}{%- do lits.append(spark_merge.spark_merge__typed_literal(v, col.type)) -%}{%- endfor -%}
      {%- set p = name ~ ' IN (' ~ lits | join(', ') ~ ')' -%}
      {%- do listed.append(col.name | lower) -%}
    {%- else -%}
      {%- if type in ['tinyint', 'smallint', 'int', 'bigint'] and (key.hi | int) - (key.lo | int) < 4 * (stats.numSourceRows | int) -%}{%- do dense.append(col.name) -%}{%- endif -%}
      {%- set p = name ~ ' BETWEEN ' ~ spark_merge.spark_merge__typed_literal(key.lo, col.type) ~ ' AND ' ~ spark_merge.spark_merge__typed_literal(key.hi, col.type) -%}
    {%- endif -%}
    {%- do parts.append(p if p == 'false' and not k.null_safe else '(' ~ p ~ (' OR ' ~ name ~ ' IS NULL' if k.null_safe else '') ~ ')') -%}
  {%- endif -%}
{%- endfor -%}
{%- set all_listed = pcols | length > 0 and pcols | reject('in', listed) | list | length == 0 -%}
{%- do out.update({'filter': parts | join(' AND '),
                   'matched_by': 'filter' if all_listed or 'false' in parts else ('range' if dense else 'join')}) -%}
{%- endmacro %}

{#- Partitions (__sm_part, see partition_json) holding a target row that ON matches: a key-only join, no row ids.
    `source_rows`: the source's size; a small source is broadcast. With `by_range`, no join: the
    partitions holding a row that ctx.match_filter keeps (a superset). -#}
{% macro spark_merge__matched_partitions_sql(spec, table, ctx, source_rows=none, by_range=false) -%}
{%- set s = spark_merge.spark_merge__quote(spec.source_alias) -%}
{%- set where = spark_merge.spark_merge__target_filter(spec, ctx) -%}
SELECT {% if not by_range and source_rows is not none and source_rows | int <= spark_merge.spark_merge__broadcast_rows() | int %}/*+ BROADCAST({{ s }}) */ {% endif %}DISTINCT {{ spark_merge.spark_merge__partition_json(table, spark_merge.spark_merge__quote(spec.target_alias) ~ '.') }} AS __sm_part
FROM {% if where %}(SELECT * FROM {{ table.relation }} WHERE {{ where }}){% else %}{{ table.relation }}{% endif %} AS {{ spark_merge.spark_merge__quote(spec.target_alias) }}
{%- if not by_range %}
LEFT SEMI JOIN {{ ctx.source }} AS {{ s }}
  ON ({{ spec.on }})
{%- endif %}
{%- endmacro %}

{#- The target rows the joins with the source read: the user's partition_filter (or the matched
    partitions, once known), and ctx.match_filter. Empty text: all. -#}
{% macro spark_merge__target_filter(spec, ctx) -%}
{%- set parts = [] -%}
{%- for f in [ctx.get('scan_filter') or spec.partition_filter, ctx.get('match_filter')] if f -%}{%- do parts.append('(' ~ f ~ ')') -%}{%- endfor -%}
{{ parts | join(' AND ') }}
{%- endmacro %}

{#-
  WHEN NOT MATCHED BY SOURCE: the target rows no source row matches, which the
  narrowing by matches cannot find. Their cost rule: step 2 also reads every
  target row where some such clause's condition holds (`filter`, the conditions
  OR-ed; Spark prunes the partitions by its partition-column part, so a clause
  restricted to partitions reads only those), and every row (every partition a
  candidate) when a clause has no condition (`all`). Rows outside both can be
  neither matched nor chosen by such a clause. Fills `out`: clauses, all, filter,
  note (what explain and the run's progress say).
-#}
{% macro spark_merge__by_source_reads(spec, resolved, out) -%}
{%- set clauses = resolved.clauses | selectattr('by_source') | list -%}
{%- set reads_all = clauses | rejectattr('condition') | list | length > 0 -%}
{%- set conds = [] -%}
{%- for cl in clauses if cl.condition -%}{%- do conds.append('(' ~ cl.condition ~ ')') -%}{%- endfor -%}
{%- set where = ' within partition_filter' if spec.partition_filter else '' -%}
{%- do out.update({'clauses': clauses, 'all': reads_all, 'filter': '' if reads_all else conds | join(' OR '),
  'note': '' if not clauses else (
    'WHEN NOT MATCHED BY SOURCE without a condition: every target row' ~ where ~ ' is read (every partition is a candidate)' if reads_all else
    'WHEN NOT MATCHED BY SOURCE: besides the rows ON can match, the target rows' ~ where ~ ' where ' ~ conds | join(' OR ') ~ ' are read (Spark prunes partitions by the partition columns it names; without them every partition is a candidate)')}) -%}
{%- endmacro %}

{#- The target rows step 2 (changes) joins: those ON can match (target_filter), and with WHEN NOT
    MATCHED BY SOURCE clauses those by_source_reads names. Empty text: all. -#}
{% macro spark_merge__changes_filter(spec, resolved, ctx) -%}
{%- set matchable = spark_merge.spark_merge__target_filter(spec, ctx) | trim -%}
{%- set bys = {} -%}
{%- do spark_merge.spark_merge__by_source_reads(spec, resolved, bys) -%}
{%- if not bys.clauses or spec.source_kind == 'none' -%}{{ matchable }}
{%- elif bys.all or not matchable -%}{{ spec.partition_filter or '' }}
{%- else -%}{% if spec.partition_filter %}({{ spec.partition_filter }}) AND {% endif %}(({{ matchable }}) OR {{ bys.filter }})
{%- endif -%}
{%- endmacro %}

{#- What step 2 (changes) scans of the target: the user's partition_filter, and the matched partitions once known
    (rows of matched_partitions_sql, decoded by decode_partitions). -#}
{% macro spark_merge__scan_filter(spec, table, matched=none) -%}
{%- set parts = [] -%}
{%- if spec.partition_filter -%}{%- do parts.append('(' ~ spec.partition_filter ~ ')') -%}{%- endif -%}
{%- if matched is not none -%}{%- do parts.append('(' ~ spark_merge.spark_merge__partition_filter(table, matched | map(attribute='partition') | list) ~ ')') -%}{%- endif -%}
{{ parts | join(' AND ') }}
{%- endmacro %}

{#- With `write_partitions` (the touched partitions, from the summary), the same join for the fused
    write (fused_rewrite_select): every row of those partitions joins, with its own values (__sm_t<i>)
    and whether it is in them (__sm_touched), plus the rows ON can match elsewhere (changes_filter:
    __sm_j), so a source row matched by a row no clause changes is not taken for unmatched. A row
    outside changes_filter joins no source row and no clause applies to it, as in the plan, where
    it is absent. No row ids: the write needs none. -#}
{% macro spark_merge__changes_sql(spec, table, resolved, ctx, write_partitions=none) -%}
{%- set t = spark_merge.spark_merge__quote(spec.target_alias) -%}
{%- set s = spark_merge.spark_merge__quote(spec.source_alias) -%}
{%- set has_source = spec.source_kind != 'none' -%}
{%- set fused = write_partitions is not none -%}
{%- set writers = resolved.clauses | rejectattr('action', 'equalto', 'delete') | list -%}
{%- set inserts = resolved.clauses | rejectattr('matched') | rejectattr('by_source') | list | length > 0 -%}
{#- with WHEN NOT MATCHED BY SOURCE, a FULL join: a target row without a source row is one of its rows;
    the fused write keeps every target row (copied or changed), so LEFT, FULL with inserts -#}
{%- set full = has_source and (resolved.clauses | selectattr('by_source') | list | length > 0 or (fused and inserts)) -%}
{%- set join = 'FULL' if full else ('LEFT' if fused else 'RIGHT') -%}
{%- set is_matched = ('coalesce(' ~ t ~ '.__sm_j AND (' ~ spec.on ~ '), false)') if fused and not has_source
    else t ~ '.__sm_file IS NOT NULL' ~ (' AND ' ~ s ~ '.__sm_srow IS NOT NULL' if full or fused else '') -%}
{%- set by_source = s ~ '.__sm_srow IS NULL' ~ (' AND ' ~ t ~ '.__sm_j' if fused else '') -%}
{%- set changes_filter = spark_merge.spark_merge__changes_filter(spec, resolved, ctx) | trim -%}
{#- Two levels, so no name of the user's can meet a name of the plan's: the inner query reads the
    target and the source (user columns, only through their aliases) and gives plan columns only,
    the first matching clause found by one searched CASE for each of __sm_case, __sm_op and each
    column's value __sm_x<i> (the same WHENs in the same order, so the same clause: no lateral alias
    a user column could shadow); the outer query checks each value (NOT NULL, CHAR/VARCHAR length)
    into __sm_c<i>, reading only the inner query's columns. -#}
{%- set whens = [] -%}
{%- for cl in resolved.clauses -%}
  {%- do whens.append('WHEN ' ~ (is_matched if cl.matched else (by_source if cl.by_source else t ~ '.__sm_file IS NULL')) ~ (' AND (' ~ cl.condition ~ ')' if cl.condition else '') ~ ' THEN ') -%}
{%- endfor -%}
{%- set plain = ['__sm_merge', '__sm_file', '__sm_row', '__sm_matched', '__sm_srow'] -%}
{%- if fused -%}{%- do plain.append('__sm_touched') -%}{%- for c in table.columns -%}{%- do plain.append('__sm_t' ~ loop.index0) -%}{%- endfor -%}{%- endif -%}
{%- for k in spec.key_columns if (k | lower) in table.columns_by_name -%}{%- do plain.append('__sm_key' ~ loop.index0) -%}{%- endfor -%}
{%- for p in table.partition_columns -%}{%- do plain.append('__sm_old' ~ loop.index0) -%}{%- endfor -%}
{%- for k in table.get('primary_key') or [] -%}{%- do plain.append('__sm_pk' ~ loop.index0) -%}{%- endfor -%}
{%- do plain.extend(['__sm_case', '__sm_op']) -%}
SELECT {{ plain | join(', ') }}
{%- for c in table.columns %}
{%- set i = loop.index0 -%}
{#- the checks of what the column is given (NOT NULL, a struct field listed in spark_merge.not_null,
    CHAR/VARCHAR length) are part of its value __sm_c<i>, so every statement reading the value checks it -#}
{%- set checks, vc = [], {} -%}
{%- do spark_merge.spark_merge__value_checks(c, vc) -%}
{%- if vc.not_null -%}
  {#- a column with a database default is written only by the clauses that name it (jdbc targets) -#}
  {%- set writers_of_c = [] -%}
  {%- for cl in writers if (c.name | lower) in cl.outputs or cl.action == 'update' -%}{%- do writers_of_c.append(cl.index) -%}{%- endfor -%}
  {%- do checks.append(('__sm_case IN (' ~ (writers_of_c or [-2]) | join(', ') ~ ')' if c.get('has_default') else '__sm_op IN (' ~ spark_merge.spark_merge__op('insert', 'update') ~ ')')
                       ~ ' AND __sm_x' ~ i ~ ' IS NULL THEN raise_error(' ~ spark_merge.spark_merge__literal(spark_merge.spark_merge__error_code('not_null') ~ ': a ' ~ spec.kind | upper ~ ' would write NULL into NOT NULL column ' ~ c.name ~ ' of ' ~ table.name) ~ ')') -%}
{%- endif -%}
{%- for path in vc.fields -%}
  {%- set parts = [] -%}{%- for p in path.split('.') -%}{%- do parts.append(spark_merge.spark_merge__quote(p) | trim) -%}{%- endfor -%}
  {%- set outer = [] -%}{%- for n in range(1, parts | length) -%}{%- do outer.append(' AND __sm_x' ~ i ~ '.' ~ parts[:n] | join('.') ~ ' IS NOT NULL') -%}{%- endfor -%}
  {%- do checks.append('__sm_op IN (' ~ spark_merge.spark_merge__op('insert', 'update') ~ ') AND __sm_x' ~ i ~ ' IS NOT NULL' ~ outer | join('')
                       ~ ' AND __sm_x' ~ i ~ '.' ~ parts | join('.') ~ ' IS NULL THEN raise_error(' ~ spark_merge.spark_merge__literal(spark_merge.spark_merge__error_code('not_null') ~ ': a ' ~ spec.kind | upper ~ ' would write NULL into NOT NULL field ' ~ c.name ~ '.' ~ path ~ ' of ' ~ table.name) ~ ')') -%}
{%- endfor -%}
{%- set value = spark_merge.spark_merge__char_checked(spec, table, c, '__sm_x' ~ i) if vc.length
    else spark_merge.spark_merge__nested_char_checked(spec, table, 'field ' ~ c.name, '__sm_x' ~ i, c.nested_chars) if vc.nested
    else '__sm_x' ~ i -%},
  {% if checks %}CASE{% for check in checks %} WHEN {{ check }}{% endfor %} ELSE {{ value }} END{% else %}{{ value }}{% endif %} AS __sm_c{{ i }}
{%- endfor %}
FROM (
SELECT
  {{ spark_merge.spark_merge__literal(ctx.merge_id) }} AS __sm_merge,
  {{ t }}.__sm_file AS __sm_file,
  {{ t }}.__sm_row AS __sm_row,
  {{ is_matched }} AS __sm_matched,
  {{ s ~ '.__sm_srow' if has_source else 'CAST(NULL AS BIGINT)' }} AS __sm_srow,
{%- if fused %}
  {{ t }}.__sm_touched AS __sm_touched,
{%- for c in table.columns %}
  {{ t }}.{{ spark_merge.spark_merge__quote(c.name) }} AS __sm_t{{ loop.index0 }},
{%- endfor %}
{%- endif %}
{%- for k in spec.key_columns if (k | lower) in table.columns_by_name %}
  {{ t }}.{{ spark_merge.spark_merge__quote(k) }} AS __sm_key{{ loop.index0 }},
{%- endfor %}
{%- for p in table.partition_columns %}
  {{ t }}.{{ spark_merge.spark_merge__quote(p) }} AS __sm_old{{ loop.index0 }},
{%- endfor %}
{%- for k in table.get('primary_key') or [] %}
  {{ t }}.{{ spark_merge.spark_merge__quote(k) }} AS __sm_pk{{ loop.index0 }},
{%- endfor %}
  CASE{% for cl in resolved.clauses %} {{ whens[loop.index0] }}{{ cl.index }}{% endfor %} ELSE -1 END AS __sm_case,
  CASE{% for cl in resolved.clauses %} {{ whens[loop.index0] }}{{ cl.op }}{% endfor %} ELSE {{ spark_merge.spark_merge__op('none') }} END AS __sm_op
{%- for c in table.columns %},
  {% if writers | length == 0 or c.get('computed_by_target') -%}
  CAST(NULL AS {{ c.type }})
  {%- else -%}
  CASE{% for cl in resolved.clauses %} {{ whens[loop.index0] }}{{ spark_merge.spark_merge__output_value(spec, cl, c) if cl.action != 'delete' else 'NULL' }}{% endfor %} END
  {%- endif %} AS __sm_x{{ loop.index0 }}
{%- endfor %}
{% if has_source -%}
FROM {% if fused %}{{ spark_merge.spark_merge__fused_target_scan(table, changes_filter, write_partitions, t, inserts, ctx.get('rewrite_files')) }}{% else %}{{ spark_merge.spark_merge__target_scan(table, changes_filter, t if full else none) }}{% endif %} AS {{ t }}
{{ join }} JOIN {{ ctx.source }} AS {{ s }}
  ON ({% if fused and changes_filter %}{{ t }}.__sm_j AND {% endif %}({{ spec.on }}))
{%- elif fused -%}
FROM {{ spark_merge.spark_merge__fused_target_scan(table, spec.partition_filter or '', write_partitions, t, false, ctx.get('rewrite_files')) }} AS {{ t }}
{%- else -%}
FROM {{ spark_merge.spark_merge__target_scan(table, spec.partition_filter) }} AS {{ t }}
WHERE ({{ spec.on }})
{%- endif %}
) AS __sm_j0
{%- endmacro %}

{#- The fused write's target side: every row of the touched partitions (`partitions`; all rows of
    an unpartitioned table), flagged __sm_touched, and __sm_j where `matchable` holds. With `widen`
    (the merge inserts), also the rows `matchable` keeps elsewhere: they only mark the source rows
    they match as matched (not inserted); without inserts an unmatched source row writes nothing. -#}
{% macro spark_merge__fused_target_scan(table, matchable, partitions, alias, widen=false, only_files=none) -%}
{#- with `only_files`, the rows of those files only, inside the touched partitions (a predicate on the
    partition columns too, so Spark still prunes partitions when the scan ORs it with `matchable`) -#}
{%- set in_partitions = spark_merge.spark_merge__partition_filter(table, partitions) | trim if table.partition_columns else '' -%}
{%- set touched = ('(' ~ in_partitions ~ ') AND ' if in_partitions else '') ~ '(' ~ spark_merge.spark_merge__file_filter(only_files) | trim ~ ')' if only_files is not none
    else in_partitions -%}
(SELECT *, '' AS __sm_file, 0L AS __sm_row, {{ 'coalesce((' ~ matchable ~ '), false)' if matchable else 'true' }} AS __sm_j, {{ 'coalesce((' ~ touched ~ '), false)' if touched else 'true' }} AS __sm_touched
 FROM {{ table.relation }} AS {{ alias }}{% if touched and not (widen and not matchable) %} WHERE ({{ touched }}){% if widen %} OR ({{ matchable }}){% endif %}{% endif %})
{%- endmacro %}

{#- LAZY: the first step that reads it (the duplicate check, else the summary) runs the join and fills it. -#}
{% macro spark_merge__cache_changes_sql(spec, table, resolved, ctx) -%}
CACHE LAZY TABLE {{ ctx.changes_view }} OPTIONS ('storageLevel' 'MEMORY_AND_DISK') AS
{{ spark_merge.spark_merge__changes_sql(spec, table, resolved, ctx) }}
{%- endmacro %}

{#-
  The duplicate rule. Every rule refuses a target row that receives more than one
  modifying action (two source rows choosing UPDATE or DELETE for it, through the
  same clause or different ones): the rewrite would emit two versions of the row,
  or update a row it also deletes. The rules differ in what else they refuse:
    trino:    also two source rows choosing the same clause, "no clause" (-1) included
    postgres: nothing else (PostgreSQL's and DuckDB's rule)
    strict:   any target row matched by two source rows (Spark, Delta, Iceberg), except
              when the only MATCHED clause is an unconditional DELETE (deleting a row
              twice deletes it once), or there is no MATCHED clause (no target row changes)
  Fills `out`: tests, the conditions on one row id's groups (__sm_n: source rows of one
  clause, __sm_mods: of them choosing UPDATE or DELETE) that break the rule, none when
  nothing can break it; row_test, the same as one aggregation over a row id's joined
  rows (under strict, a lone unconditional DELETE lets several source rows delete one
  target row); n and mods, the aggregates; targets, how many target rows one row id's
  group holds (its joined rows over its source rows). A parquet row id is unique per target
  row and __sm_srow per source row, so each pair is one joined row; an ORC row id is
  shared by identical rows, so there source rows are counted as distinct __sm_srow.
-#}
{% macro spark_merge__duplicate_rule(spec, table, resolved, out) -%}
{%- set matched = resolved.clauses | selectattr('matched') | list -%}
{%- set lone_delete = spec.duplicate_rule == 'strict' and matched | length == 1 and matched[0].action == 'delete' and not matched[0].condition -%}
{%- set parquet = table.provider in ['parquet', 'jdbc'] -%}
{%- set modifying = spark_merge.spark_merge__op('delete', 'update') -%}
{%- set tests, row_tests = [], [] -%}
{%- set sources = 'count(*)' if parquet else 'size(collect_set(__sm_srow))' -%}
{%- if not lone_delete -%}
  {%- do tests.append('sum(__sm_mods) > 1') -%}
  {%- do row_tests.append(('count_if(__sm_op IN (' ~ modifying ~ '))' if parquet else 'size(collect_set(CASE WHEN __sm_op IN (' ~ modifying ~ ') THEN __sm_srow END))') ~ ' > 1') -%}
{%- endif -%}
{%- if spec.duplicate_rule == 'trino' -%}
  {%- do tests.append('max(__sm_n) > 1') -%}
  {#- some clause chosen by two source rows: more (clause, source row) pairs than clauses -#}
  {#- the clauses chosen, counted as the bits set in a mask of case numbers (-1 = none: bit 0); a
      fixed-width aggregate, so Spark aggregates by hash rather than by sorting -#}
  {%- set chosen = 'bit_count(bit_or(shiftleft(1L, __sm_case + 1)))' if resolved.clauses | length <= 62 else 'size(collect_set(__sm_case))' -%}
  {%- do row_tests.append(('count(*)' if parquet else "size(collect_set(named_struct('c', __sm_case, 's', __sm_srow)))") ~ ' > ' ~ chosen) -%}
{%- elif spec.duplicate_rule == 'strict' and matched and not lone_delete -%}
  {%- do tests.append('sum(__sm_n) > 1') -%}
  {%- do row_tests.append(sources ~ ' > 1') -%}
{%- endif -%}
{%- set source_kind_none = spec.source_kind == 'none' -%}
{%- do out.update({
  'tests': [] if source_kind_none else tests,
  'row_test': '' if source_kind_none else row_tests | join(' OR '),
  'n': 'count(*)' if parquet else 'count(DISTINCT __sm_srow)',
  'targets': '1' if parquet else 'count(*) div greatest(' ~ sources ~ ', 1)',
  'mods': ('count_if(__sm_op IN (' ~ modifying ~ '))') if parquet else ('count(DISTINCT CASE WHEN __sm_op IN (' ~ modifying ~ ') THEN __sm_srow END)'),
}) -%}
{%- endmacro %}

{#- The failure path only: up to `limit` target rows that break the duplicate rule, with their
    key values (or row ids) and how many source rows matched them. Empty text when nothing can
    break the rule. -#}
{% macro spark_merge__duplicates_sql(spec, table, resolved, ctx, limit=5) -%}
{%- set rule = {} -%}
{%- do spark_merge.spark_merge__duplicate_rule(spec, table, resolved, rule) -%}
{%- set keys = [] -%}
{%- for k in spec.key_columns if (k | lower) in table.columns_by_name -%}{%- do keys.append(k) -%}{%- endfor -%}
{%- if rule.tests -%}
SELECT {% for k in keys %}CAST(first(__sm_key{{ loop.index0 }}) AS STRING) AS {{ spark_merge.spark_merge__quote(k) }}, {% endfor -%}
{% if keys | length == 0 %}first(__sm_file) AS file, first(__sm_row) AS row, {% endif -%}
sum(__sm_n) AS source_rows
FROM (
  SELECT __sm_file, __sm_row, {% for k in keys %}first(__sm_key{{ loop.index0 }}) AS __sm_key{{ loop.index0 }}, {% endfor %}{{ rule.n }} AS __sm_n, {{ rule.mods }} AS __sm_mods
  FROM {{ ctx.changes }}
  WHERE __sm_matched
  GROUP BY __sm_file, __sm_row, __sm_case
)
GROUP BY __sm_file, __sm_row
HAVING {{ rule.tests | join(' OR ') }}
LIMIT {{ limit }}
{%- endif -%}
{%- endmacro %}

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
  ids instead. And `checked`, a count over every value a check guards (NOT NULL,
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
{%- set checked = [] -%}
{%- for c in table.columns -%}
  {%- set vc = {} -%}{%- do spark_merge.spark_merge__value_checks(c, vc) -%}
  {%- if vc.any -%}{%- do checked.append('count(__sm_c' ~ loop.index0 ~ ')') -%}{%- endif -%}
{%- endfor -%}
SELECT op, bys, {{ spark_merge.spark_merge__json_of(old) }} AS __sm_old, {{ spark_merge.spark_merge__json_of(new_names) }} AS __sm_new,
       CAST(sum(__sm_targets) AS BIGINT) AS n, CAST(sum(__sm_dup) AS BIGINT) AS dups, CAST(sum(__sm_multi) AS BIGINT) AS multi,
       CAST(sum(__sm_checked) AS BIGINT) AS checked, to_json(collect_set(__sm_rf)) AS files
FROM (
  SELECT {% if rule.row_test %}CASE WHEN __sm_matched AND ({{ rule.row_test }}) THEN 1 ELSE 0 END{% else %}0{% endif %} AS __sm_dup,
         CASE WHEN coalesce(max(CASE WHEN __sm_op <> {{ none_op }} THEN __sm_op END), {{ none_op }}) IN ({{ spark_merge.spark_merge__op('delete', 'update') }}) THEN __sm_file END AS __sm_rf,
         CASE WHEN __sm_matched AND min(__sm_srow) < max(__sm_srow) AND count_if(__sm_op <> {{ spark_merge.spark_merge__op('delete') }}) > 0 THEN 1 ELSE 0 END AS __sm_multi,
         {{ (checked or ['0']) | join(' + ') }} AS __sm_checked,
         {{ rule.targets }} AS __sm_targets,
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
  carries the others over needs to rewrite; out.dups and
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
{%- set rewritten = {} -%}
{%- for r in rows -%}{%- for f in fromjson(r.get('files') or '[]') or [] -%}{%- do rewritten.update({f: true}) -%}{%- endfor -%}{%- endfor -%}
{%- do out.update({'metrics': m, 'partitions': partitions, 'deltas': deltas, 'dups': ns.dups, 'multi': ns.multi, 'matched': matched,
                   'files': rewritten.keys() | sort}) -%}
{%- endmacro %}

{#- The rows of exactly these data files (a rewrite that carries the others over): a filter on a
    file's constant metadata, which Spark's file index applies before reading anything. -#}
{% macro spark_merge__file_filter(files) -%}
{%- if files -%}_metadata.file_path IN ({% for f in files %}{{ spark_merge.spark_merge__literal(f) }}{{ ', ' if not loop.last }}{% endfor %})
{%- else -%}false
{%- endif -%}
{%- endmacro %}

{#- New content of the touched partitions (or of the whole unpartitioned table); with
    ctx.rewrite_files, only of those files (the others are carried over). -#}
{% macro spark_merge__rewrite_select(table, ctx, partitions) -%}
{%- set names = table.columns | map(attribute='name') | list -%}
{%- set in_partitions = spark_merge.spark_merge__partition_filter(table, partitions) | trim if table.partition_columns else '' -%}
{%- set where = ('(' ~ in_partitions ~ ') AND ' if in_partitions else '') ~ '(' ~ spark_merge.spark_merge__file_filter(ctx.rewrite_files) | trim ~ ')' if ctx.get('rewrite_files') is not none
    else in_partitions or none -%}
SELECT {% if table.partition_columns %}/*+ REBALANCE({{ spark_merge.spark_merge__column_list(table.partition_columns) }}) */{% else %}/*+ REBALANCE */{% endif %} * FROM (
  SELECT {{ spark_merge.spark_merge__column_list(names, '__sm_t.') }}
  FROM {{ spark_merge.spark_merge__target_scan(table, where) }} AS __sm_t
  LEFT ANTI JOIN (SELECT {% if ctx.get('broadcast_changed') %}/*+ BROADCAST */ {% endif %}__sm_file, __sm_row FROM {{ ctx.changes }} WHERE __sm_op IN ({{ spark_merge.spark_merge__op('delete', 'update') }})) AS __sm_d
    ON __sm_t.__sm_file = __sm_d.__sm_file AND __sm_t.__sm_row = __sm_d.__sm_row
  UNION ALL
  SELECT {% for c in table.columns %}__sm_c{{ loop.index0 }} AS {{ spark_merge.spark_merge__quote(c.name) }}{{ ", " if not loop.last }}{% endfor %}
  FROM {{ ctx.changes }} WHERE __sm_op IN ({{ spark_merge.spark_merge__op('insert', 'update') }})
) AS __sm_new
{%- endmacro %}

{#- New content of the touched partitions in one join (the fused write): changes_sql over those
    partitions, each row written as its clause makes it (inserted, updated) or copied as it is
    (no clause changed it, and it is in a touched partition); deleted rows and rows outside are
    not written. A CHAR(n) value is padded to n, as Spark stores it (the staging table's columns
    are plain strings). Only for a plan whose summary found no target row joined with several source
    rows that not all delete it (multi = 0): such a row would be copied once per source row. -#}
{% macro spark_merge__fused_rewrite_select(spec, table, resolved, ctx, partitions) -%}
SELECT {% if table.partition_columns %}/*+ REBALANCE({{ spark_merge.spark_merge__column_list(table.partition_columns) }}) */{% else %}/*+ REBALANCE */{% endif %} * FROM (
  SELECT {% for c in table.columns %}{{ 'rpad(' if c.get('char_pad') }}CASE WHEN __sm_op IN ({{ spark_merge.spark_merge__op('insert', 'update') }}) THEN __sm_c{{ loop.index0 }} ELSE __sm_t{{ loop.index0 }} END{{ ', ' ~ c.char_pad ~ ')' if c.get('char_pad') }} AS {{ spark_merge.spark_merge__quote(c.name) }}{{ ", " if not loop.last }}{% endfor %}
  FROM (
{{ spark_merge.spark_merge__changes_sql(spec, table, resolved, ctx, partitions) }}
  ) AS __sm_j
  WHERE __sm_op IN ({{ spark_merge.spark_merge__op('insert', 'update') }}) OR (__sm_op = {{ spark_merge.spark_merge__op('none') }} AND __sm_touched)
) AS __sm_new
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

{% macro spark_merge__append_sql(table, ctx) -%}
INSERT INTO {{ table.relation }}
SELECT {% if table.partition_columns %}/*+ REBALANCE({{ spark_merge.spark_merge__column_list(table.partition_columns | map('lower') | list) }}) */{% else %}/*+ REBALANCE */{% endif %} {% for c in table.columns %}__sm_c{{ loop.index0 }} AS {{ spark_merge.spark_merge__quote(c.name) }}{{ ", " if not loop.last }}{% endfor %}
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

{% macro spark_merge__cleanup_statements(ctx, out) -%}
{%- for kind in ['changes', 'source'] if ctx.get(kind ~ '_view') -%}
{%- do out.append('UNCACHE TABLE IF EXISTS ' ~ ctx[kind ~ '_view']) -%}
{%- do out.append('DROP VIEW IF EXISTS ' ~ ctx[kind ~ '_view']) -%}
{%- if ctx.get(kind ~ '_table') -%}{%- do out.append('DROP TABLE IF EXISTS ' ~ ctx[kind ~ '_table']) -%}{%- endif -%}
{%- endfor -%}
{%- if ctx.get('stage') and not ctx.get('stage_dropped') -%}{%- do out.append('DROP TABLE IF EXISTS ' ~ ctx.stage) -%}{%- endif -%}
{%- endmacro %}

{#-
  Where each rewritten partition goes, from file stats (rows of file_stats_sql,
  decoded by decode_partitions) of the partitions before (`old`) and of the staging table (`new`).
  Fills `out`: repoints (see spark_merge_commit.sql), empty (directories to create
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

{#- One text per partition, NULL apart from every string (the string 'None' included). -#}
{% macro spark_merge__partition_key(pcols, row) -%}
{%- for c in pcols %}{% if row[c] is none %}null{% else %}{{ row[c] | string | tojson }}{% endif %}/{% endfor -%}
{%- endmacro %}

{#- Partitions (by key) whose files differ between two decoded file_stats_sql results: another writer's commit. -#}
{% macro spark_merge__changed_partitions(table, before, now, out) -%}
{%- set a, b = {}, {} -%}
{%- for r in before -%}{%- do a.update({spark_merge.spark_merge__partition_key(table.partition_columns, r.partition): [r.dir, r.files | int, r.bytes | int, r.rows | int]}) -%}{%- endfor -%}
{%- for r in now -%}{%- do b.update({spark_merge.spark_merge__partition_key(table.partition_columns, r.partition): [r.dir, r.files | int, r.bytes | int, r.rows | int]}) -%}{%- endfor -%}
{%- for k in (a.keys() | list) + (b.keys() | list) if a.get(k) != b.get(k) and k not in out -%}
  {%- do out.append(k) -%}
{%- endfor -%}
{%- endmacro %}

{#-
  The write guards the plan: the staged rows (`new`, decoded file stats of the
  staging table) lie only in the planned partitions, and each planned partition
  holds exactly its rows before (`old`) plus the plan's delta (summarize_changes'
  deltas; none: counts unchecked). Appends to `out` one {message, excess} per
  violation (excess: rows beyond the plan in a planned partition; short: rows below
  it; else none); any violation stops the merge before its journal. A merge's rewrite
  copies every row of a partition whose row id the changes do not name, so changes
  read from files the partition no longer holds (a write that bypassed spark-merge
  while the merge planned) show as excess rows, one per changed row of those files;
  files the rewrite did not read (added since the plan listed the partition, by a
  write that bypassed spark-merge) show as short rows, once `old` counts them (the
  Python host lists the files as they are).
-#}
{% macro spark_merge__output_errors(table, partitions, deltas, old, new, out) -%}
{%- set pcols = table.partition_columns -%}
{%- set planned, before, after = [], {}, {} -%}
{%- for p in partitions -%}{%- do planned.append(spark_merge.spark_merge__partition_key(pcols, p)) -%}{%- endfor -%}
{%- for r in old -%}{%- set k = spark_merge.spark_merge__partition_key(pcols, r.partition) -%}{%- do before.update({k: before.get(k, 0) + r.rows | int}) -%}{%- endfor -%}
{%- for r in new -%}{%- set k = spark_merge.spark_merge__partition_key(pcols, r.partition) -%}{%- do after.update({k: after.get(k, 0) + r.rows | int}) -%}{%- endfor -%}
{%- for k in after.keys() | sort if k not in planned -%}
  {%- do out.append({'excess': none, 'short': none, 'message': 'the rewrite wrote ' ~ after[k] ~ ' row(s) into partition ' ~ (k.rstrip('/') or 'of the table') ~ ', which the plan did not list'}) -%}
{%- endfor -%}
{%- for k in planned if deltas is not none -%}
  {%- set expected = before.get(k, 0) + deltas.get(k, 0) -%}
  {%- if after.get(k, 0) != expected -%}
    {%- do out.append({'excess': after.get(k, 0) - expected if after.get(k, 0) > expected else none,
                       'short': expected - after.get(k, 0) if after.get(k, 0) < expected else none,
                       'message': 'the rewrite wrote ' ~ after.get(k, 0) ~ ' row(s) into partition ' ~ (k.rstrip('/') or 'of the table') ~ ' where the plan gives ' ~ expected ~ ' (' ~ before.get(k, 0) ~ ' before, ' ~ '%+d' | format(deltas.get(k, 0)) ~ ')'}) -%}
  {%- endif -%}
{%- endfor -%}
{%- endmacro %}
