{#-
  The lifecycle of a copy-on-write merge, written once for both hosts.

  Each phase is a macro over a `host` that offers a few primitives, and a plain
  dict `s` (the planned changes: spec, table, resolved, ctx, merge_id, metrics,
  partitions, deltas, repoints, staged, locked). dbt passes a dict of its own
  macros as the host (materializations/spark_merge.sql, spark_merge__dbt_host);
  merge_core renders these same macros with jinja2 and passes a Python object
  (merge_core/spark/host.py). So both hosts issue the same statements in the same
  order; tests/test_conformance.py records both and compares them.

  The host primitives, with their signatures and meaning, are declared once, in
  merge_core/common/host_contract.py (StatementHost, BeginHost, RollbackHost).
-#}

{#- Every later step reads the same rows of the `kind` ('source' or 'changes'): Spark serves a
    cache only to a plan equal to the cached one, and a seedless rand() is seeded anew at each
    read, so then the rows are written once to a managed table of this merge. -#}
{% macro spark_merge__lifecycle_read_once(host, ctx, kind, select) -%}
{%- set served = {} -%}
{%- do spark_merge.spark_merge__read_once_served(host.rows(spark_merge.spark_merge__read_once_probe_sql(ctx, kind), 'probe')[0]['plan'], served) -%}
{%- if not served.served -%}
  {%- do host.step('plan: the ' ~ kind ~ ' is non-deterministic; writing it once to ' ~ ctx[kind ~ '_table']) -%}
  {%- set statements = [] -%}
  {%- do spark_merge.spark_merge__materialize_statements(ctx, kind, select, statements) -%}
  {%- for stmt in statements -%}{%- do host.run(stmt) -%}{%- endfor -%}
{%- endif -%}
{%- endmacro %}

{#- Stop the merge: release the lock if held, drop this merge's views and tables, fail. -#}
{% macro spark_merge__lifecycle_fail(host, s, code, message, rows=none, fields=none) -%}
{%- if s.get('locked') -%}{%- do host.unlock(s.table, s.merge_id) -%}{%- do s.update({'locked': false}) -%}{%- endif -%}
{%- do spark_merge.spark_merge__lifecycle_cleanup(host, s) -%}
{%- do host.fail(code, message, rows, fields or {}) -%}
{%- endmacro %}

{% macro spark_merge__lifecycle_cleanup(host, s) -%}
{%- if not s.get('cleaned') and s.get('ctx') -%}
  {%- set statements = [] -%}
  {%- do spark_merge.spark_merge__cleanup_statements(s.ctx, statements) -%}
  {%- for stmt in statements -%}{%- do host.run(stmt, tolerate=true) -%}{%- endfor -%}
  {%- do s.update({'cleaned': true}) -%}
{%- endif -%}
{%- endmacro %}

{#- The table `parts` names, as the catalog describes it now (table/describe.sql: table_info), into
    `out`. A missing or unreadable table stops the run (MERGE_TARGET_ERROR), and so do spark-merge
    properties that are not the table's own (MERGE_METADATA_ERROR: table_info's trust_errors), unless
    not `trusted` (a repair or a drop reads such a table to fix or remove it). -#}
{% macro spark_merge__lifecycle_describe(host, parts, out, trusted=true) -%}
{%- set quoted = [] -%}
{%- for p in parts -%}{%- do quoted.append(spark_merge.spark_merge__quote(p)) -%}{%- endfor -%}
{%- set rel = quoted | join('.') -%}
{%- set got = host.catalog(parts, spark_merge.spark_merge__describe_json_sql(rel), spark_merge.spark_merge__describe_columns_sql(rel)) -%}
{%- do spark_merge.spark_merge__table_info(got.desc, got.types, out) -%}
{%- if out.errors -%}{%- do host.fail(spark_merge.spark_merge__error_code('target'), out.errors | join('; ')) -%}{%- endif -%}
{%- if trusted and out.trust_errors -%}{%- do host.fail(spark_merge.spark_merge__error_code('metadata'), out.trust_errors[0]) -%}{%- endif -%}
{%- endmacro %}

{#- The table described again, into `out` (it changed: a commit recovered, columns added). -#}
{% macro spark_merge__lifecycle_redescribe(host, table, out) -%}
{%- do spark_merge.spark_merge__lifecycle_describe(host, [table.database, table.table_name], out) -%}
{%- endmacro %}

{#- The file table `parts` names, described and its files checked (check_files: another format's
    metadata refused; the staging tables of merges that died, which the host finds, dropped), into
    `out`. -#}
{% macro spark_merge__lifecycle_checked_target(host, parts, out) -%}
{%- do spark_merge.spark_merge__lifecycle_describe(host, parts, out) -%}
{%- set dead = host.check_files(out, spark_merge.spark_merge__show_tables_sql(out.database, '__sm_*')) -%}
{%- for name in dead -%}
  {%- do host.run(spark_merge.spark_merge__drop_table_sql(spark_merge.spark_merge__relation(out.database, name))) -%}
{%- endfor -%}
{%- if dead -%}{%- do host.warn('dropped ' ~ dead | length ~ ' table(s) left by merges that died: ' ~ dead | join(', ')) -%}{%- endif -%}
{%- endmacro %}

{#- The target of a rollback or a full refresh, into out.table: described, checked (its files), settled
    (an interrupted commit finished, then described again). -#}
{% macro spark_merge__lifecycle_settled_target(host, parts, out) -%}
{%- set table = {} -%}
{%- do spark_merge.spark_merge__lifecycle_checked_target(host, parts, table) -%}
{%- set settled = {} -%}
{%- do spark_merge.spark_merge__lifecycle_settle(host, table, settled) -%}
{%- set fresh = {} -%}
{%- if settled.recovered -%}{%- do spark_merge.spark_merge__lifecycle_redescribe(host, table, fresh) -%}{%- endif -%}
{%- do out.update({'table': fresh or table}) -%}
{%- endmacro %}

{#- Begin, before planning: let a live commit end (a dead holder's lock is broken: lock_wait, with
    the host's handle on lock tables, not taking the lock), then finish
    an interrupted commit (out.recovered: the table changed, describe it again), and drop this
    session's cached listing of the table's files (the recovery's commit did): the plan reads
    the files as they are, with rows another application appended to a partition since this
    session listed it (its INSERT, a spark-merge append), which a rewrite would otherwise drop. -#}
{% macro spark_merge__lifecycle_settle(host, table, out) -%}
{%- set lock, waited = host.lock_handle(), {} -%}
{%- do spark_merge.spark_merge__lock_wait(lock, table, none, table.properties.get('spark_merge.last_merge_id'), lock.wait_s, waited) -%}
{%- if waited.get('error') -%}{%- do host.fail(spark_merge.spark_merge__error_code(waited.get('code') or 'conflict'), waited.error) -%}{%- endif -%}
{%- do spark_merge.spark_merge__lifecycle_recover(host, table, out, true) -%}
{%- if not out.recovered -%}{%- do host.run(spark_merge.spark_merge__refresh_sql(table)) -%}{%- endif -%}
{%- endmacro %}

{#- The plan's fingerprint: the changes query, its merge id replaced (the same for both hosts). -#}
{% macro spark_merge__lifecycle_plan_hash(host, s) -%}
{%- do s.update({'plan_hash': host.hash(spark_merge.spark_merge__cache_changes_sql(s.spec, s.table, s.resolved, s.ctx) | trim | replace(s.merge_id,
    '<id>'))[:16]}) -%}
{%- endmacro %}

{#- Finish: the history entry, unless the commit's journal carried it, then the clean-up. The run's
    executionTimeMs is the one its history entry records (timed at the commit point when the journal
    carries the entry), so the result and the history agree. -#}
{% macro spark_merge__lifecycle_finish(host, s) -%}
{%- if not s.get('journaled') -%}
  {%- do s.metrics.update({'executionTimeMs': host.elapsed_ms(s)}) -%}
  {%- set entry = {} -%}
  {%- do spark_merge.spark_merge__history_entry(s, s.get('version_after', s.table.version), entry) -%}
  {%- do entry.update({'finished_at': host.now()}) -%}
  {%- do spark_merge.spark_merge__write_history(host, s.table, s.merge_id, entry) -%}
{%- endif -%}
{%- do spark_merge.spark_merge__lifecycle_cleanup(host, s) -%}
{%- endmacro %}

{#- Plan: the source once (with its ON-key statistics), the partitions holding matched rows, the
    changes (a lazy cache, dropped again when Spark would serve it: then the write joins once more,
    fused) with, in one aggregation, the duplicate check, the value checks, the counts and the
    touched partitions. Writes nothing. -#}
{% macro spark_merge__lifecycle_plan(host, s) -%}
{%- set spec, table, resolved, ctx, m = s.spec, s.table, s.resolved, s.ctx, s.metrics -%}
{%- do host.failpoint('after_validation') -%}
{%- do spark_merge.spark_merge__zero_metrics(m) -%}
{#- A rewrite whose changes Spark computes the same at every read needs no cache: the summary
    reads them as a subquery (only the columns it needs), and the write joins again, once
    (fused_rewrite_select). The same at every read: every part of the statement (ON, the WHEN
    conditions, partition_filter, every assigned value) is deterministic as Spark's analyzer judges
    it (validation's probes, resolved.deterministic: rand(7) would be served from a cache, yet draws
    by row position, which two different joins order differently), and the source is read once
    (read_once, below). An append and a database target read cached rows. -#}
{%- set fuse = {'ok': not s.get('insert_only') and table.provider != 'jdbc' and resolved.get('deterministic', false)} -%}
{%- do s.update({'fusable': fuse.ok}) -%}
{%- if spec.source_kind != 'none' -%}{%- do spark_merge.spark_merge__plan_source(host, s, fuse.ok) -%}{%- endif -%}
{#- an append no target file can take part in (its keys outside every file's range) joins nothing: its
    rows are the cached source's, read by the summary and again by the append, computed alike -#}
{%- set unjoined = s.get('insert_only') and ctx.get('match_filter') == 'false' and resolved.get('deterministic', false) -%}
{%- do host.step(spark_merge.spark_merge__step_label('changes') ~ (': the source\'s rows to insert, no join (no target file can hold a match)'
    if unjoined else ': join target and source' ~ (', in the write, which counts its own changes' if s.get('observed')
    else ', read by the summary and joined again by the write' if fuse.ok else ', kept for the write (the summary fills it)'))) -%}
{%- do ctx.update({'unjoined': unjoined}) -%}
{%- if fuse.ok or unjoined -%}
  {%- do ctx.update({'changes': '(' ~ spark_merge.spark_merge__changes_sql(spec, table, resolved, ctx) | trim ~ ')'}) -%}
{%- else -%}
  {#- the cache is lazy: the summary, the first statement reading it, runs the join and fills it -#}
  {%- do ctx.update({'changes_made': true}) -%}
  {%- do host.run(spark_merge.spark_merge__cache_changes_sql(spec, table, resolved, ctx)) -%}
  {%- do spark_merge.spark_merge__lifecycle_read_once(host, ctx, 'changes', spark_merge.spark_merge__changes_sql(spec, table, resolved, ctx)) -%}
{%- endif -%}
{%- if s.get('observed') -%}
  {%- do spark_merge.spark_merge__plan_files(host, s) -%}
{%- else -%}
  {%- do spark_merge.spark_merge__plan_summary(host, s) -%}
{%- endif -%}
{%- endmacro %}

{#- The plan's summary (summary.sql): the duplicate verdict, the counts, the partitions and files the
    changes touch, in one aggregation of the changes (ctx.changes), before anything is written. -#}
{% macro spark_merge__plan_summary(host, s) -%}
{%- set spec, table, resolved, ctx, m = s.spec, s.table, s.resolved, s.ctx, s.metrics -%}
{%- set fuse = {'ok': s.fusable} -%}
{%- do host.step(spark_merge.spark_merge__step_label('summary') ~ ': in one aggregation the duplicate check (' ~ spec.duplicate_rule ~
    ' rule), the counts and the partitions the changes touch') -%}
{#- a fused write of a merge that inserts must tell an inserted source row from one a target row matches
    without changing it: it reads the files holding a matched row, which the summary names -#}
{%- do ctx.update({'name_matched_files': fuse.ok and spark_merge.spark_merge__inserts(resolved) | trim == 'True'}) -%}
{%- set summary = {} -%}
{%- set summary_rows = host.rows(spark_merge.spark_merge__append_summary_sql(table, ctx) if ctx.get('unjoined')
    else spark_merge.spark_merge__change_summary_sql(spec, table, resolved, ctx), 'summary') -%}
{%- do spark_merge.spark_merge__summarize_changes(table, summary_rows, summary) -%}
{%- do s.update({'fused': fuse.ok and summary.multi == 0}) -%}
{%- if s.fused and ctx.name_matched_files -%}{%- do ctx.update({'matched_files': summary.matched_files}) -%}{%- endif -%}
{%- if s.get('matched_from_summary') -%}
  {%- do ctx.update({'scan_filter': spark_merge.spark_merge__scan_filter(spec, table, summary.matched) | trim}) -%}
  {%- do host.step('plan: ' ~ summary.matched | length ~ ' partition(s) hold matched rows') -%}
{%- endif -%}
{%- if fuse.ok and summary.multi -%}{%- do host.step('plan: ' ~ summary.multi ~
    ' target row(s) joined with several source rows: the write anti-joins the changed rows instead of one fused join') -%}{%- endif -%}
{%- do spark_merge.spark_merge__plan_refusals(host, s, summary) -%}
{%- do m.update(summary.metrics) -%}
{%- do host.step('plan: ' ~ m.numTargetRowsInserted ~ ' row(s) to insert, ' ~ m.numTargetRowsUpdated ~ ' to update, '
                 ~ m.numTargetRowsDeleted ~ ' to delete, in ' ~ summary.partitions | length ~ ' partition(s)') -%}
{#- for an append these are the partitions it adds files to (rollback needs to know) -#}
{%- do spark_merge.spark_merge__planned_changes(summary.partitions, summary.deltas, summary.files, s.changes) -%}
{%- set broadcast = {} -%}
{%- do spark_merge.spark_merge__broadcast_changed(m, broadcast) -%}
{%- do ctx.update({'broadcast_changed': broadcast.broadcast}) -%}
{%- endmacro %}

{#- The plan's source: read once and cached (with its ON-key statistics: row count, key ranges), the
    target's scans narrowed to the keys it holds, a small target broadcast, and the partitions
    holding matched rows (from the summary when the write is `fused`, else a step of their own). -#}
{% macro spark_merge__plan_source(host, s, fused) -%}
{%- set spec, table, resolved, ctx, m = s.spec, s.table, s.resolved, s.ctx, s.metrics -%}
{%- set narrowed = {'matched_by': 'join'} -%}
{%- set fuse = {'ok': fused} -%}
{%- do host.step(spark_merge.spark_merge__step_label('source') ~ ': read the source once') -%}
{%- do ctx.update({'source_made': true}) -%}
{%- do host.run(spark_merge.spark_merge__cache_source_sql(spec, ctx)) -%}
{%- do spark_merge.spark_merge__lifecycle_read_once(host, ctx, 'source', spark_merge.spark_merge__source_select(spec, ctx)) -%}
{%- set stats = host.rows(spark_merge.spark_merge__source_stats_sql(table, ctx), 'source_stats')[0] -%}
{%- do m.update({'numSourceRows': stats.numSourceRows | int}) -%}
{%- do ctx.update({'source_rows': m.numSourceRows, 'source_slices': stats.get('sourceSlices')}) -%}
{%- do host.step('plan: the source has ' ~ m.numSourceRows ~ ' row(s)') -%}
{%- do spark_merge.spark_merge__match_filter(table, ctx, stats, narrowed) -%}
{%- do spark_merge.spark_merge__plan_candidates(host, table, ctx, stats, narrowed) -%}
{%- do ctx.update({'match_filter': narrowed.filter, 'partitions_listed': narrowed.listed}) -%}
{%- set target_rows = host.target_rows(table) -%}
{%- if target_rows is not none and target_rows <= spark_merge.spark_merge__target_broadcast_rows() | int -%}
  {%- do ctx.update({'broadcast_target': true}) -%}
  {%- do host.step('plan: the target holds ' ~ target_rows ~ ' row(s): the join broadcasts them') -%}
{%- endif -%}
{%- if narrowed.filter -%}{%- do host.step('plan: target scans narrowed to ' ~ narrowed.filter[:300]) -%}{%- endif -%}
{%- set bys = {} -%}
{%- do spark_merge.spark_merge__by_source_reads(spec, resolved, bys) -%}
{%- if bys.note -%}{%- do host.step('plan: ' ~ bys.note[:400]) -%}{%- endif -%}
{%- set observable = {} -%}
{%- do spark_merge.spark_merge__observable(host, s, observable) -%}
{%- do s.update({'observed': observable.ok}) -%}
{%- if table.partition_columns and narrowed.matched_by != 'filter' and not bys.all -%}
  {%- if fuse.ok -%}
    {#- the summary's join reads only the columns it needs, and names the partitions holding matched
        rows exactly: the fused write reads those (summary.matched, below), not a step of its own -#}
    {%- do s.update({'matched_from_summary': true}) -%}
    {%- do host.step(spark_merge.spark_merge__step_label('matched') ~ ': the partitions holding matched rows come from the '
        ~ ('files the ON columns\' join finds' if s.observed else 'summary (its join reads the ON, condition and partition columns)')) -%}
  {%- else -%}
    {%- do host.step(spark_merge.spark_merge__step_label('matched') ~ ': find partitions with matched rows (' ~
        ('key range' if narrowed.matched_by == 'range' else 'key-only join') ~ ')') -%}
    {%- set matched = [] -%}
    {%- do spark_merge.spark_merge__decode_partitions(table, host.rows(spark_merge.spark_merge__matched_partitions_sql(spec, table, ctx,
        m.numSourceRows, narrowed.matched_by == 'range'), 'matched'), matched) -%}
    {%- do ctx.update({'scan_filter': spark_merge.spark_merge__scan_filter(spec, table, matched) | trim}) -%}
    {%- do host.step('plan: ' ~ matched | length ~ ' partition(s) hold matched rows') -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- Whether the write counts its own changes (the one-pass write), so that no summary runs before it
    (out.ok): a host that observes what its write job does (host.can_observe: Python's DataFrame writer;
    dbt sends SQL only), a fused rewrite whose source's ON columns the search for the files broadcasts
    (at most broadcast_rows()), without WHEN NOT MATCHED BY SOURCE clauses, change feed or auto compaction, whose last MATCHED
    clause has no condition: then every row ON matches changes, the files holding one are exactly the
    files to rewrite, and each of their rows passes through the write's join once per source row it
    matches, so the join's rows against the rows those files hold tell whether a target row matched
    two source rows (the one case the summary must decide: lifecycle_rewrite_observed). -#}
{% macro spark_merge__observable(host, s, out) -%}
{%- set matched, fold = s.resolved.clauses | selectattr('matched') | list, {} -%}
{%- do spark_merge.spark_merge__fold_policy(s.table, fold) -%}
{%- do out.update({'ok': s.fusable and matched | length > 0 and not matched[-1].condition
    and s.resolved.clauses | selectattr('by_source') | list | length == 0 and not s.ctx.get('feed')
    and s.metrics.numSourceRows <= spark_merge.spark_merge__broadcast_rows() | int
    and not fold and host.can_observe(s.table, s.ctx)}) -%}
{%- endmacro %}

{#- The one-pass plan (observable): the data files holding a target row ON matches, and their
    partitions, from one join of the target's ON and partition columns with the broadcast source
    (matched_files_sql): the files the write rewrites, the partitions it replaces (with those its new
    rows go to, which the staged files tell) and, for a merge that inserts with a source the write
    broadcasts, the rows that tell an inserted source row from a matched one (a larger source's FULL
    join tells them itself). An upsert whose keys no file holds reads no target row. -#}
{% macro spark_merge__plan_files(host, s) -%}
{%- set spec, table, ctx = s.spec, s.table, s.ctx -%}
{%- do host.step(spark_merge.spark_merge__step_label('summary') ~ ': the files holding a row ON matches (a join of the ON columns); '
    ~ 'the write counts its own changes') -%}
{%- set found, by_key, files = [], {}, [] -%}
{#- no file can hold a match (match_filter 'false'): no query (Spark 4.2 fails to analyze a semi-join with a
    scan filtered by a literal false, ASSIGNMENT_ARITY_MISMATCH) -#}
{%- if ctx.get('match_filter') != 'false' -%}
  {%- set shape = {} -%}{%- do spark_merge.spark_merge__fused_join_shape(table, s.metrics.numSourceRows, none, shape) -%}
  {%- if spark_merge.spark_merge__inserts(s.resolved) | trim == 'True' and shape.broadcast_source -%}
    {#- the pairs that find the files also tell the write which source rows no target row matches -#}
    {%- do ctx.update({'found_made': true}) -%}
    {%- do host.run(spark_merge.spark_merge__cache_found_sql(spec, table, ctx)) -%}
    {%- do ctx.update({'found': ctx.found_view}) -%}
  {%- endif -%}
  {%- do spark_merge.spark_merge__decode_partitions(table, host.rows(spark_merge.spark_merge__matched_files_sql(spec, table, ctx), 'files'),
      found) -%}
{%- endif -%}
{%- for r in found -%}
  {%- do by_key.update({spark_merge.spark_merge__partition_key(table.partition_columns, r.partition): r.partition}) -%}
  {%- do files.extend(fromjson(r.files)) -%}
{%- endfor -%}
{%- set partitions, files = [], files | sort -%}
{%- for k in by_key.keys() | sort -%}{%- do partitions.append(by_key[k]) -%}{%- endfor -%}
{%- if s.get('matched_from_summary') -%}
  {%- do ctx.update({'scan_filter': spark_merge.spark_merge__scan_filter(spec, table, found) | trim}) -%}
{%- endif -%}
{%- do ctx.update({'matched_files': files}) -%}
{%- do spark_merge.spark_merge__planned_changes(partitions, none, files, s.changes) -%}
{%- do s.update({'fused': true, 'observed': files | length > 0 or spark_merge.spark_merge__inserts(s.resolved) | trim == 'True'}) -%}
{%- do host.step('plan: ' ~ files | length ~ ' file(s) in ' ~ partitions | length ~ ' partition(s) hold a row ON matches'
    ~ ('' if s.observed else ': nothing to change')) -%}
{%- endmacro %}

{#- The one-pass write gave way (`why`): the summary plans the merge, and the write runs as without it. -#}
{% macro spark_merge__lifecycle_unobserved(host, s, why) -%}
{%- do host.step('plan: ' ~ why ~ ': the summary decides') -%}
{%- for k in ['rewrite_files', 'matched_files', 'broadcast_source', 'rebalance', 'inserts'] -%}{%- do s.ctx.pop(k, none) -%}{%- endfor -%}
{%- do s.update({'observed': false, 'staged': false}) -%}
{%- do spark_merge.spark_merge__plan_summary(host, s) -%}
{%- do spark_merge.spark_merge__lifecycle_write(host, s) -%}
{%- endmacro %}

{#- Planning from the files' metadata, where ON names no partition column (one it names narrows the
    scans by the source's values or range of it already, and the metastore finds those partitions by
    that filter, where this would list them all): the partitions with a data file whose key ranges can
    hold a row ON matches (host.key_candidates: each range key's minimum and maximum in the files'
    footers, against the source's range of it). None: nothing can match, and no scan reads the target;
    some of them: every target scan reads only those. A host that cannot tell (dbt: no footers) reads as
    before. -#}
{% macro spark_merge__plan_candidates(host, table, ctx, stats, narrowed) -%}
{%- set keys, pcols = [], table.partition_columns | map('lower') | list -%}
{%- set asked = narrowed.matched_by != 'filter' and ctx.on_keys | map(attribute='target') | map('lower') | select('in', pcols) | list | length == 0 -%}
{%- for k in ctx.on_keys -%}
  {%- set key, col = fromjson(stats['__sm_key' ~ loop.index0]), table.columns_by_name.get(k.target | lower) -%}
  {%- if asked and col and key.get('lo') is not none and (key.type | lower) == (col.type | lower) -%}
    {%- do keys.append({'column': col.name, 'type': col.type | lower, 'lo': key.lo, 'hi': key.hi, 'null_safe': k.null_safe}) -%}
  {%- endif -%}
{%- endfor -%}
{%- set held = host.key_candidates(table, keys) if keys else none -%}
{%- if held is not none and held.partitions | length == 0 -%}
  {%- do narrowed.update({'filter': 'false', 'matched_by': 'filter'}) -%}
  {%- do host.step('plan: no target file\'s key range holds a source key (' ~ held.files ~ ' file(s) read by their footers): nothing can '
      ~ 'match, no scan reads the target') -%}
{%- elif held is not none and held.partitions | length < held.of -%}
  {%- set only = '(' ~ spark_merge.spark_merge__partition_filter(table, held.partitions) ~ ')' -%}
  {%- do narrowed.update({'filter': only ~ (' AND ' ~ narrowed.filter if narrowed.filter else '')}) -%}
  {%- do host.step('plan: the key ranges of the target\'s files leave ' ~ held.partitions | length ~ ' of ' ~ held.of
      ~ ' partition(s) that can hold a match: the target scans read only those') -%}
{%- endif -%}
{%- endmacro %}

{#- What stops the plan before anything is written: a target row that breaks the duplicate rule (with
    examples of it, the failure path's own query), and a rewritten partition whose value ends with a
    space. -#}
{% macro spark_merge__plan_refusals(host, s, summary) -%}
{%- set spec, table, resolved, ctx = s.spec, s.table, s.resolved, s.ctx -%}
{%- if summary.dups -%}
  {#- the failure path only: which target rows, for the message -#}
  {%- set dups = {} -%}
  {%- set dup_rows = host.rows(spark_merge.spark_merge__duplicates_sql(spec, table, resolved, ctx), 'duplicates') -%}
  {%- do spark_merge.spark_merge__duplicate_examples(dup_rows, resolved, ctx, dups) -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('duplicate'),
      'One MERGE target table row matched more than one source row (duplicate_rule=' ~ spec.duplicate_rule ~ '), ' ~ summary.dups ~
      ' target row(s) in all. Offending target rows, each with up to 5 of the source rows that matched it and the clause each chose:\n' ~ dups.text,
      dups.examples, {'rule': spec.duplicate_rule}) -%}
{%- endif -%}
{%- if not s.get('insert_only') -%}{%- do spark_merge.spark_merge__unregistrable(host, s, summary.partitions) -%}{%- endif -%}
{%- endmacro %}

{#- The metastore drops trailing spaces from a partition value (CHAR(n)'s padding aside), so a rewritten
    partition (of `partitions`) could not be registered under its name: refused before the commit (an
    append is Spark's own INSERT, which registers such a partition itself). -#}
{% macro spark_merge__unregistrable(host, s, partitions) -%}
{%- set spec, table = s.spec, s.table -%}
{%- for part in partitions -%}
  {%- for c, v in part.items() if v is string and v != v.rstrip(' ') and not table.columns_by_name[c | lower].get('char_pad') -%}
    {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('validation'), 'this ' ~ spec.kind | upper ~
        ' rewrites partition ' ~ c ~ ' = ' ~ v | tojson ~ ' of ' ~ table.name ~
        ', a value that ends with a space: the Hive metastore drops trailing spaces from partition values, so the rewritten partition could ' ~
            'not be registered under it. Trim the value (rtrim) where the statement sets it, or keep such values out of partition columns; nothing was written')
        -%}
  {%- endfor -%}
{%- endfor -%}
{%- endmacro %}


{#- A value as an offending key shows it: strings quoted (as Python's repr), NULL as None. -#}
{% macro spark_merge__shown(v) -%}
{%- if v is none -%}None{%- elif v is string -%}'{{ v }}'{%- else -%}{{ v }}{%- endif -%}
{%- endmacro %}

{#- The table as it is now, failing MERGE_VERSION_MOVED if another merge committed since begin. -#}
{% macro spark_merge__lifecycle_unchanged(host, s, out) -%}
{%- set fresh = {} -%}
{%- do spark_merge.spark_merge__lifecycle_redescribe(host, s.table, fresh) -%}
{%- if fresh.version != s.table.version -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('version_moved'), fresh.name ~ ' moved from version ' ~
      s.table.version ~ ' to ' ~ fresh.version ~ ' since this merge began') -%}
{%- endif -%}
{%- do out.update(fresh) -%}
{%- endmacro %}

{#- Files, bytes, rows and directory per partition (of `partitions`) of table `name` in the target's
    database, `relation` (see file_stats_sql; the Python host answers it from the files' listing). -#}
{% macro spark_merge__lifecycle_file_stats(host, table, name, relation, partitions, out) -%}
{%- set where = spark_merge.spark_merge__partition_filter(table, partitions) | trim if table.partition_columns and name == table.table_name else none -%}
{%- do spark_merge.spark_merge__decode_partitions(table, host.file_stats(table, name, spark_merge.spark_merge__file_stats_sql(table, relation, where),
    partitions), out) -%}
{%- endmacro %}
