{#-
  The merge plan (DELETE_ROW_AND_INSERT_ROW, copy-on-write), in the steps plan_steps numbers (the
  progress lines and explain name them by these numbers too):

  1. source:    the source is read once and cached with a row number
                (__sm_srow), so every later step sees the same rows; the job
                that fills the cache also returns numSourceRows and the range
                (or list) of the source's values of each ON equality, which
                narrows every target scan below (match_filter).
  2. matched:   (partitioned targets, with a source) the partitions holding a
                target row that ON matches: named by step 1's lists, or from a
                scan of a dense key range, or from a join that reads only the
                columns ON names and the partition columns; step 3 scans only
                those partitions, so the full-width read follows the change.
                The fused write finds them in step 4 instead.
  3. changes:   target (with a row id) RIGHT JOIN source ON ... (a FULL join when
                WHEN NOT MATCHED BY SOURCE clauses need the unmatched target
                rows: see by_source_reads); a searched CASE
                picks the first WHEN clause that holds (case number, -1 = none)
                and its operation (INSERT=1, DELETE=2, UPDATE=3); the new values
                are computed per target column as __sm_c<i>, each with its checks
                (NOT NULL, CHAR/VARCHAR length). A subquery when Spark computes it
                the same at every read (the fused write, step 5), else a lazy
                cache (the first step reading it fills it) or written once to a
                table.
  4. summary:   one aggregation: duplicate matches per the duplicate rule (their
                examples queried only when there are some), NOT NULL and length
                violations raised, the counts per operation and the partitions
                touched: where a changed row was, and where an output row goes;
                for the fused write also the partitions holding matched rows.
                Nothing is written before it passes.
  5. write:     the fused write: the touched partitions joined with the source
                once more, each row written as its clause makes it or copied
                (fused_rewrite_select); else untouched target rows (anti-join on
                row id) + new rows. A staging table under <root>/_merge_<id>.
                Insert-only merges append their rows instead.
  6. commit:    see commit/commit.sql.
  Joins whose build side holds at most broadcast_rows() rows are broadcast
  (no shuffle of the large side).
-#}

{#- The plan's steps, numbered once: the overview above, the progress lines (step_label) and explain
    (MergeRun.explain, the paradigms' write and commit) all number them by their place here. -#}
{% macro spark_merge__plan_steps(out) -%}
{%- do out.extend(['source', 'matched', 'changes', 'summary', 'write', 'commit']) -%}
{%- endmacro %}

{#- A step's label in the progress lines: "step 4/6 (summary)". -#}
{% macro spark_merge__step_label(name) -%}
{%- set steps = [] -%}
{%- do spark_merge.spark_merge__plan_steps(steps) -%}
step {{ steps.index(name) + 1 }}/{{ steps | length }} ({{ name }})
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
      {%- if type in ['tinyint', 'smallint', 'int', 'bigint'] and (key.hi | int) - (key.lo | int) < 4 * (stats.numSourceRows | int) -%}{%-
          do dense.append(col.name) -%}{%- endif -%}
      {%- set p = name ~ ' BETWEEN ' ~ spark_merge.spark_merge__typed_literal(key.lo, col.type) ~ ' AND ' ~
          spark_merge.spark_merge__typed_literal(key.hi, col.type) -%}
    {%- endif -%}
    {%- do parts.append(p if p == 'false' and not k.null_safe else '(' ~ p ~ (' OR ' ~ name ~ ' IS NULL' if k.null_safe else '') ~ ')') -%}
  {%- endif -%}
{%- endfor -%}
{%- set all_listed = pcols | length > 0 and pcols | reject('in', listed) | list | length == 0 -%}
{%- do out.update({'filter': parts | join(' AND '), 'listed': listed,
                   'matched_by': 'filter' if all_listed or 'false' in parts else ('range' if dense else 'join')}) -%}
{%- endmacro %}

{#- Partitions (__sm_part, see partition_json) holding a target row that ON matches: a key-only join, no row ids.
    `source_rows`: the source's size; a small source is broadcast. With `by_range`, no join: the
    partitions holding a row that ctx.match_filter keeps (a superset). -#}
{% macro spark_merge__matched_partitions_sql(spec, table, ctx, source_rows=none, by_range=false) -%}
{%- set s = spark_merge.spark_merge__quote(spec.source_alias) -%}
{%- set where = spark_merge.spark_merge__target_filter(spec, ctx) -%}
SELECT {% if not by_range and source_rows is not none and source_rows | int <= spark_merge.spark_merge__broadcast_rows() | int
    %}/*+ BROADCAST({{ s }}) */ {% endif %}DISTINCT {{ spark_merge.spark_merge__partition_json(table,
        spark_merge.spark_merge__quote(spec.target_alias) ~ '.') }} AS __sm_part
FROM {% if where %}(SELECT * FROM {{ table.relation }} WHERE {{ where }}){% else %}{{ table.relation }}{% endif %} AS {{
    spark_merge.spark_merge__quote(spec.target_alias) }}
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
    'WHEN NOT MATCHED BY SOURCE: besides the rows ON can match, the target rows' ~ where ~ ' where ' ~ conds | join(' OR ') ~
        ' are read (Spark prunes partitions by the partition columns it names; without them every partition is a candidate)')}) -%}
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
{%- if matched is not none -%}{%- do parts.append('(' ~ spark_merge.spark_merge__partition_filter(table, matched |
    map(attribute='partition') | list) ~ ')') -%}{%- endif -%}
{{ parts | join(' AND ') }}
{%- endmacro %}

{#- Whether a clause inserts (WHEN NOT MATCHED [BY TARGET]): the plan's join then keeps unmatched source rows. -#}
{% macro spark_merge__inserts(resolved) -%}
{{- resolved.clauses | rejectattr('matched') | rejectattr('by_source') | list | length > 0 -}}
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
{%- set inserts = spark_merge.spark_merge__inserts(resolved) | trim == 'True' -%}
{#- with WHEN NOT MATCHED BY SOURCE, a FULL join: a target row without a source row is one of its rows;
    the fused write keeps every target row (copied or changed), so LEFT, FULL with inserts -#}
{%- set full = has_source and (resolved.clauses | selectattr('by_source') | list | length > 0 or (fused and inserts)) -%}
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
  {%- do whens.append('WHEN ' ~ (is_matched if cl.matched else (by_source if cl.by_source else t ~ '.__sm_file IS NULL')) ~ (' AND (' ~ cl.condition ~
      ')' if cl.condition else '') ~ ' THEN ') -%}
{%- endfor -%}
{%- set plain = [] -%}
{%- do spark_merge.spark_merge__changes_plain_columns(spec, table, ctx, fused, plain) -%}
SELECT {{ plain | join(', ') }}
{%- for c in table.columns %},
  {{ spark_merge.spark_merge__checked_value(spec, table, c, loop.index0, writers) }} AS __sm_c{{ loop.index0 }}
{%- endfor %}
FROM (
SELECT{% if has_source and ((fused and ctx.get('broadcast_source')) or (not fused and not full
    and spark_merge.spark_merge__inner_broadcasts_source(ctx, inserts) | trim == 'True')) %} /*+ BROADCAST({{ s }}) */
{%- elif not fused and not full and has_source and ctx.get('broadcast_target') %} /*+ BROADCAST({{ t }}) */{% endif %}
  {{ spark_merge.spark_merge__literal(ctx.merge_id) }} AS __sm_merge,
  {{ t }}.__sm_file AS __sm_file,
  {{ t }}.__sm_row AS __sm_row,
  {{ is_matched }} AS __sm_matched,
  {{ s ~ '.__sm_srow' if has_source else 'CAST(NULL AS BIGINT)' }} AS __sm_srow,
{%- if fused %}
  {{ t }}.__sm_touched AS __sm_touched,
{%- endif %}
{{- spark_merge.spark_merge__changes_target_columns(spec, table, ctx, fused, t) }}
  CASE{% for cl in resolved.clauses %} {{ whens[loop.index0] }}{{ cl.index }}{% endfor %} ELSE -1 END AS __sm_case,
  CASE{% for cl in resolved.clauses %} {{ whens[loop.index0] }}{{ cl.op }}{% endfor %} ELSE {{ spark_merge.spark_merge__op('none') }} END AS __sm_op
{%- for c in table.columns %},
  {% if writers | length == 0 or c.get('computed_by_target') -%}
  CAST(NULL AS {{ c.type }})
  {%- else -%}
  CASE{% for cl in resolved.clauses %} {{ whens[loop.index0] }}{{ spark_merge.spark_merge__output_value(spec, cl, c) if cl.action !=
      'delete' else 'NULL' }}{% endfor %} END
  {%- endif %} AS __sm_x{{ loop.index0 }}
{%- endfor %}
{{ spark_merge.spark_merge__changes_from(spec, table, ctx, write_partitions, full, inserts, changes_filter) }}
) AS __sm_j0
{%- endmacro %}

{#- The changes query's FROM: the target (narrowed by `changes_filter`; in the fused write, every row of
    the partitions it writes, `write_partitions`) joined with the source (`full`: FULL, else LEFT when
    fused, else RIGHT when a clause inserts: INNER without one, as a source row no target row matches
    then changes nothing, and an inner join broadcasts a small source itself: inner_broadcasts_source),
    or the target alone for an UPDATE or DELETE. -#}
{% macro spark_merge__changes_from(spec, table, ctx, write_partitions, full, inserts, changes_filter) -%}
{%- set t = spark_merge.spark_merge__quote(spec.target_alias) -%}
{%- set s = spark_merge.spark_merge__quote(spec.source_alias) -%}
{%- set has_source = spec.source_kind != 'none' -%}
{%- set fused = write_partitions is not none -%}
{%- set join = 'FULL' if full else ('LEFT' if fused else ('RIGHT' if inserts else 'INNER')) -%}
{% if has_source -%}
FROM {% if fused %}{{ spark_merge.spark_merge__fused_target_scan(table, changes_filter, write_partitions, t, inserts,
    ctx.get('rewrite_files'), ctx.get('fold'), ctx) }}{% elif not full and spark_merge.spark_merge__semi_joins_source(ctx, inserts) | trim == 'True'
    %}{{ spark_merge.spark_merge__matched_target_rows(spec, table, ctx, changes_filter)
    }}{% else %}{{ spark_merge.spark_merge__target_scan(table, changes_filter, t if full else none) }}{% endif %} AS {{ t }}
{{ join }} JOIN {{ ctx.source }} AS {{ s }}
  ON ({% if fused and changes_filter %}{{ t }}.__sm_j AND {% endif %}({{ spec.on }}))
{%- elif fused -%}
FROM {{ spark_merge.spark_merge__fused_target_scan(table, spec.partition_filter or '', write_partitions, t, false, ctx.get('rewrite_files'),
    ctx.get('fold')) }} AS {{ t }}
{%- else -%}
FROM {{ spark_merge.spark_merge__target_scan(table, spec.partition_filter) }} AS {{ t }}
WHERE ({{ spec.on }})
{%- endif %}
{%- endmacro %}

{#- The names of the plan columns changes_sql passes through from its inner query, in order, appended to `out`. -#}
{% macro spark_merge__changes_plain_columns(spec, table, ctx, fused, out) -%}
{%- do out.extend(['__sm_merge', '__sm_file', '__sm_row', '__sm_matched', '__sm_srow']) -%}
{%- if fused -%}{%- do out.append('__sm_touched') -%}{%- endif -%}
{#- each changed row's old values: the fused write copies the unchanged ones; the change feed records them -#}
{%- if fused or ctx.get('feed') -%}{%- for c in table.columns -%}{%- do out.append('__sm_t' ~ loop.index0) -%}{%- endfor -%}{%- endif -%}
{%- for k in spec.key_columns if (k | lower) in table.columns_by_name -%}{%- do out.append('__sm_key' ~ loop.index0) -%}{%- endfor -%}
{%- for p in table.partition_columns -%}{%- do out.append('__sm_old' ~ loop.index0) -%}{%- endfor -%}
{%- for k in table.get('primary_key') or [] -%}{%- do out.append('__sm_pk' ~ loop.index0) -%}{%- endfor -%}
{%- do out.extend(['__sm_case', '__sm_op']) -%}
{%- endmacro %}

{#- changes_sql's columns of the target row (`t`, its alias): its old values (the fused write and the change
    feed read them), its key columns, its partition values and its primary key. -#}
{% macro spark_merge__changes_target_columns(spec, table, ctx, fused, t) -%}
{%- if fused or ctx.get('feed') %}
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
{%- endmacro %}

{#- Column `c`'s value in the changes, __sm_x<i>, with the checks of what it is given (NOT NULL, a struct
    field listed in spark_merge.not_null, CHAR/VARCHAR length), so every statement reading it checks it. -#}
{% macro spark_merge__checked_value(spec, table, c, i, writers) -%}
{%- set checks, vc = [], {} -%}
{%- do spark_merge.spark_merge__value_checks(c, vc) -%}
{%- if vc.not_null -%}
  {#- a column with a database default is written only by the clauses that name it (jdbc targets) -#}
  {%- set writers_of_c = [] -%}
  {%- for cl in writers if (c.name | lower) in cl.outputs or cl.action == 'update' -%}{%- do writers_of_c.append(cl.index) -%}{%- endfor -%}
  {%- do checks.append(('__sm_case IN (' ~ (writers_of_c or [-2]) | join(', ') ~ ')' if c.get('has_default') else '__sm_op IN (' ~
      spark_merge.spark_merge__op('insert', 'update') ~ ')')
                       ~ ' AND __sm_x' ~ i ~ ' IS NULL THEN raise_error(' ~
                           spark_merge.spark_merge__literal(spark_merge.spark_merge__error_code('not_null') ~ ': a ' ~ spec.kind | upper ~
                               ' would write NULL into NOT NULL column ' ~ c.name ~ ' of ' ~ table.name) ~ ')') -%}
{%- endif -%}
{%- for path in vc.fields -%}
  {%- set parts = [] -%}{%- for p in path.split('.') -%}{%- do parts.append(spark_merge.spark_merge__quote(p) | trim) -%}{%- endfor -%}
  {%- set outer = [] -%}{%- for n in range(1, parts | length) -%}{%- do outer.append(' AND __sm_x' ~ i ~ '.' ~ parts[:n] | join('.') ~
      ' IS NOT NULL') -%}{%- endfor -%}
  {%- do checks.append('__sm_op IN (' ~ spark_merge.spark_merge__op('insert', 'update') ~ ') AND __sm_x' ~ i ~ ' IS NOT NULL' ~ outer | join('')
                       ~ ' AND __sm_x' ~ i ~ '.' ~ parts | join('.') ~ ' IS NULL THEN raise_error(' ~
                           spark_merge.spark_merge__literal(spark_merge.spark_merge__error_code('not_null') ~ ': a ' ~ spec.kind | upper ~
                               ' would write NULL into NOT NULL field ' ~ c.name ~ '.' ~ path ~ ' of ' ~ table.name) ~ ')') -%}
{%- endfor -%}
{%- set value = spark_merge.spark_merge__char_checked(spec, table, c, '__sm_x' ~ i) if vc.length
    else spark_merge.spark_merge__nested_char_checked(spec, table, 'field ' ~ c.name, '__sm_x' ~ i, c.nested_chars) if vc.nested
    else '__sm_x' ~ i -%}
{%- set value = spark_merge.spark_merge__partition_value(table, c, value) -%}
{% if checks %}CASE{% for check in checks %} WHEN {{ check }}{% endfor %} ELSE {{ value }} END{% else %}{{ value }}{% endif %}
{%- endmacro %}

{#- Whether the summary's join reads the target through matched_target_rows: never when its inner join
    broadcasts the source itself (inner_broadcasts_source, no clause inserting), else a source of at most
    source_broadcast_rows(), or of at most broadcast_rows() when the match filter does not list the
    source's values of a partition column (ctx.partitions_listed, from match_filter: an ON equality
    on a partition column). Where it lists them, the join reads only the partitions the source's rows
    name, whose rows are often about as many as the source's: the broadcast then costs more than the
    shuffle it spares (the CDC workload, ON id AND dt, 500,000 source rows: 5.03 s against 4.19 s);
    elsewhere the join reads every partition the filter keeps (Delta's benchmark on the monthly table,
    over 100,000 source rows into 4M: 5.46 s against 6.97 s without it). Never when the join
    broadcasts the target (ctx.broadcast_target: at most target_broadcast_rows() rows): nothing is
    shuffled then, and the semi-join would only add a broadcast. -#}
{% macro spark_merge__semi_joins_source(ctx, inserts) -%}
{%- set rows = ctx.get('source_rows') -%}
{{- spark_merge.spark_merge__inner_broadcasts_source(ctx, inserts) | trim != 'True' and not ctx.get('broadcast_target') and rows is not none
    and rows | int <= (spark_merge.spark_merge__source_broadcast_rows() if ctx.get('partitions_listed')
    else spark_merge.spark_merge__broadcast_rows()) | int -}}
{%- endmacro %}

{#- Whether the changes' INNER join (no clause inserts: `inserts` false) broadcasts the source at full width,
    instead of a semi-join with its ON columns narrowing the target first: a source of at most
    source_broadcast_rows(), the fused write's own limit for a full-width broadcast, and never when the
    join broadcasts the target. A larger source keeps the semi-join (its broadcast holds the ON columns
    only), and the inner join is left to Spark. -#}
{% macro spark_merge__inner_broadcasts_source(ctx, inserts) -%}
{%- set rows = ctx.get('source_rows') -%}
{{- not inserts and not ctx.get('broadcast_target') and rows is not none and rows | int <= spark_merge.spark_merge__source_broadcast_rows() | int -}}
{%- endmacro %}

{#- The target rows (with row ids) that ON matches with some source row: a RIGHT join keeps no other
    target row, and cannot broadcast the source, so a semi-join with the broadcast source's ON columns
    first leaves it only those rows to shuffle, instead of every row ON could match. -#}
{% macro spark_merge__matched_target_rows(spec, table, ctx, where) -%}
{%- set t = spark_merge.spark_merge__quote(spec.target_alias) -%}
{%- set s = spark_merge.spark_merge__quote(spec.source_alias) -%}
(SELECT /*+ BROADCAST({{ s }}) */ {{ t }}.* FROM {{ spark_merge.spark_merge__target_scan(table, where) }} AS {{ t }}
 LEFT SEMI JOIN {{ ctx.source }} AS {{ s }} ON ({{ spec.on }}))
{%- endmacro %}

{#- The fused write's target side: every row of the touched partitions (`partitions`; all rows of
    an unpartitioned table), flagged __sm_touched, and __sm_j where `matchable` holds. With `widen`
    (the merge inserts), also the rows `matchable` keeps elsewhere: they only mark the source rows
    they match as matched (not inserted); without inserts an unmatched source row writes nothing.
    Where the summary named the files holding a matched row (ctx.matched_files), only those rows of
    them: a source key range that spans the table (new keys beside old ones) would otherwise read,
    and shuffle at full width, every row of it. -#}
{% macro spark_merge__fused_target_scan(table, matchable, partitions, alias, widen=false, only_files=none, fold=none, ctx={}) -%}
{#- with `only_files`, the rows of those files only, inside the touched partitions (a predicate on the
    partition columns too, so Spark still prunes partitions when the scan ORs it with `matchable`) -#}
{%- set touched = spark_merge.spark_merge__rewrite_filter(table, partitions, only_files, fold) | trim -%}
{%- set widened = spark_merge.spark_merge__matched_files_filter(matchable, ctx) | trim if widen else '' -%}
(SELECT *, '' AS __sm_file, 0L AS __sm_row, {{ 'coalesce((' ~ matchable ~ '), false)' if matchable else 'true' }} AS __sm_j, {{ 'coalesce(('
    ~ touched ~ '), false)' if touched else 'true' }} AS __sm_touched
 FROM {{ table.relation }} AS {{ alias }}{% if touched and not (widen and not widened) %} WHERE ({{ touched }}){% if widen %} OR ({{
     widened }}){% endif %}{% endif %})
{%- endmacro %}

{#- `where` (a filter of the target's rows ON can match; empty: all) narrowed to the files the summary
    found holding a matched row (ctx.matched_files, when it names them: see lifecycle_plan). -#}
{% macro spark_merge__matched_files_filter(where, ctx) -%}
{%- set files = ctx.get('matched_files') -%}
{%- if files is none -%}{{ where }}
{%- else -%}{{ '(' ~ where ~ ') AND ' if where else '' }}({{ spark_merge.spark_merge__file_filter(files) | trim }})
{%- endif -%}
{%- endmacro %}

{#- LAZY: the first step that reads it (the duplicate check, else the summary) runs the join and fills it. -#}
{% macro spark_merge__cache_changes_sql(spec, table, resolved, ctx) -%}
CACHE LAZY TABLE {{ ctx.changes_view }} OPTIONS ('storageLevel' 'MEMORY_AND_DISK') AS
{{ spark_merge.spark_merge__changes_sql(spec, table, resolved, ctx) }}
{%- endmacro %}
