{#-
  The lifecycle of a copy-on-write merge, written once for both hosts.

  Each phase is a macro over a `host` that offers a few primitives, and a plain
  dict `s` (the planned changes: spec, table, resolved, ctx, merge_id, metrics,
  partitions, deltas, repoints, staged, locked). dbt passes a dict of its own
  macros as the host (materializations/spark_merge.sql, spark_merge__dbt_host);
  merge_core renders these same macros with jinja2 and passes a Python object
  (merge_core/host.py). So both hosts issue the same statements in the same
  order; tests/test_conformance.py records both and compares them.

  Host primitives:
    run(sql, tolerate=false)    run a statement (tolerate: a failure is only a warning where the host can catch it)
    rows(sql)                   run a query, its rows as dicts
    file_stats(table, name, sql, partitions)   the rows of sql (file_stats_sql): dbt runs it; Python
                                lists the partitions' files where it can (no Spark job)
    step(text) / warn(text)     progress and warnings for the user
    fail(code, message, rows)   stop the merge with an error of that code (MERGE_VERSION_MOVED:
                                another merge committed since begin; Python plans again, dbt fails)
    failpoint(name)             crash tests stop here (merge_core/faults.py)
    describe(table)             the table as the catalog describes it now
    lock(table, merge_id) / unlock(table, merge_id)   the commit lock (a live holder is waited for)
    wait_free(table)            before planning: wait for a live commit to end, break a dead one's lock
    release_finished(table, merge_id)   break a lock that guards no work (finished or dead holder)
    exists(location)            true / false / none (cannot tell: dbt has no file system)
    repoint(table, merge_id, repoints)  point partitions at their new directories (Python may batch)
    journal(sql)                write the commit journal: the commit point (Python: not after an abort)
    can_carry(table, old)       whether it can carry unchanged files into a new version (listed them; dbt: no)
    carry(table, repoints, files)  link the replaced directories' files but `files` into the new ones
    carry_late(table, repoints) after the commit, link files another writer appended to a replaced
                                directory since the check under the lock into the new one (dbt: none)
    now()                       the time, ISO-8601 UTC
    elapsed_ms(s)               milliseconds since the merge began
-#}

{#- Every later step reads the same rows of the `kind` ('source' or 'changes'): Spark serves a
    cache only to a plan equal to the cached one, and a seedless rand() is seeded anew at each
    read, so then the rows are written once to a managed table of this merge. -#}
{% macro spark_merge__lifecycle_read_once(host, ctx, kind, select, out=none) -%}
{%- set served = {} -%}
{%- do spark_merge.spark_merge__read_once_served(host.rows(spark_merge.spark_merge__read_once_probe_sql(ctx, kind))[0]['plan'], served) -%}
{%- if out is not none -%}{%- do out.update(served) -%}{%- endif -%}
{%- if not served.served -%}
  {%- do host.step('plan: the ' ~ kind ~ ' is non-deterministic; writing it once to ' ~ ctx[kind ~ '_table']) -%}
  {%- set statements = [] -%}
  {%- do spark_merge.spark_merge__materialize_statements(ctx, kind, select, statements) -%}
  {%- for stmt in statements -%}{%- do host.run(stmt) -%}{%- endfor -%}
{%- endif -%}
{%- endmacro %}

{#- Stop the merge: release the lock if held, drop this merge's views and tables, fail. -#}
{% macro spark_merge__lifecycle_fail(host, s, code, message, rows=none) -%}
{%- if s.get('locked') -%}{%- do host.unlock(s.table, s.merge_id) -%}{%- do s.update({'locked': false}) -%}{%- endif -%}
{%- do spark_merge.spark_merge__lifecycle_cleanup(host, s) -%}
{%- do host.fail(code, message, rows) -%}
{%- endmacro %}

{% macro spark_merge__lifecycle_cleanup(host, s) -%}
{%- if not s.get('cleaned') and s.get('ctx') -%}
  {%- set statements = [] -%}
  {%- do spark_merge.spark_merge__cleanup_statements(s.ctx, statements) -%}
  {%- for stmt in statements -%}{%- do host.run(stmt, tolerate=true) -%}{%- endfor -%}
  {%- do s.update({'cleaned': true}) -%}
{%- endif -%}
{%- endmacro %}

{#- Begin, before planning: let a live commit end (a dead holder's lock is broken), then finish
    an interrupted commit (out.recovered: the table changed, describe it again), and drop this
    session's cached listing of the table's files (the recovery's commit did): the plan reads
    the files as they are, with rows another application appended to a partition since this
    session listed it (its INSERT, a spark-merge append), which a rewrite would otherwise drop. -#}
{% macro spark_merge__lifecycle_settle(host, table, out) -%}
{%- do host.wait_free(table) -%}
{%- do spark_merge.spark_merge__lifecycle_recover(host, table, out) -%}
{%- if not out.recovered -%}{%- do host.run(spark_merge.spark_merge__refresh_sql(table)) -%}{%- endif -%}
{%- endmacro %}

{#- The plan's fingerprint: the changes query, its merge id replaced (the same for both hosts). -#}
{% macro spark_merge__lifecycle_plan_hash(host, s) -%}
{%- do s.update({'plan_hash': host.hash(spark_merge.spark_merge__cache_changes_sql(s.spec, s.table, s.resolved, s.ctx) | trim | replace(s.merge_id, '<id>'))[:16]}) -%}
{%- endmacro %}

{#- Finish: the history entry, unless the commit's journal carried it, then the clean-up. -#}
{% macro spark_merge__lifecycle_finish(host, s) -%}
{%- do s.metrics.update({'executionTimeMs': host.elapsed_ms(s)}) -%}
{%- if not s.get('journaled') -%}
  {%- set entry = {} -%}
  {%- do spark_merge.spark_merge__history_entry(s, s.get('version_after', s.table.version), entry) -%}
  {%- do entry.update({'finished_at': host.now()}) -%}
  {%- set hctx = {} -%}
  {%- do spark_merge.spark_merge__context({}, s.table, s.merge_id, hctx) -%}
  {%- do host.run(spark_merge.spark_merge__history_write_sql(hctx, entry), tolerate=true) -%}
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
{%- set narrowed = {'matched_by': 'join'} -%}
{%- do spark_merge.spark_merge__zero_metrics(m) -%}
{#- A rewrite whose changes Spark computes the same at every read needs no cache: the summary
    reads only the columns it needs, and the write joins again, once (fused_rewrite_select).
    The same at every read: no value a clause assigns is non-deterministic, as Spark's analyzer
    judges it (value_determinism_probes: rand(7) would be served from a cache, yet draws by row
    position, which two different joins order differently; the conditions are deterministic, see
    validation), and Spark would serve the cache (read_once, below). An append and a database
    target read the cached rows. -#}
{%- set fuse = {'ok': not s.get('insert_only') and table.provider != 'jdbc'} -%}
{%- set probes = [] -%}
{%- if fuse.ok -%}{%- do spark_merge.spark_merge__value_determinism_probes(spec, table, resolved, probes) -%}{%- endif -%}
{%- for probe in probes -%}
  {%- if not host.rows(probe)[0]['plan'].startswith('== ') -%}{%- do fuse.update({'ok': false}) -%}{%- endif -%}
{%- endfor -%}
{%- if spec.source_kind != 'none' -%}
  {%- do host.step('plan: read the source once') -%}
  {%- do host.run(spark_merge.spark_merge__cache_source_sql(spec, ctx)) -%}
  {%- do spark_merge.spark_merge__lifecycle_read_once(host, ctx, 'source', spark_merge.spark_merge__source_select(spec, ctx)) -%}
  {%- set stats = host.rows(spark_merge.spark_merge__source_stats_sql(table, ctx))[0] -%}
  {%- do m.update({'numSourceRows': stats.numSourceRows | int}) -%}
  {%- do host.step('plan: the source has ' ~ m.numSourceRows ~ ' row(s)') -%}
  {%- do spark_merge.spark_merge__match_filter(table, ctx, stats, narrowed) -%}
  {%- do ctx.update({'match_filter': narrowed.filter}) -%}
  {%- if narrowed.filter -%}{%- do host.step('plan: target scans narrowed to ' ~ narrowed.filter[:300]) -%}{%- endif -%}
  {%- set bys = {} -%}
  {%- do spark_merge.spark_merge__by_source_reads(spec, resolved, bys) -%}
  {%- if bys.note -%}{%- do host.step('plan: ' ~ bys.note[:400]) -%}{%- endif -%}
  {%- if table.partition_columns and narrowed.matched_by != 'filter' and not bys.all -%}
    {%- if fuse.ok -%}
      {#- the summary's join reads only the columns it needs, and names the partitions holding matched
          rows exactly: the fused write reads those (summary.matched, below), not a step of its own -#}
      {%- do s.update({'matched_from_summary': true}) -%}
      {%- do host.step('plan: the partitions holding matched rows come from the summary (its join reads the ON, condition and partition columns)') -%}
    {%- else -%}
      {%- do host.step('plan: find partitions with matched rows (' ~ ('key range' if narrowed.matched_by == 'range' else 'key-only join') ~ ')') -%}
      {%- set matched = [] -%}
      {%- do spark_merge.spark_merge__decode_partitions(table, host.rows(spark_merge.spark_merge__matched_partitions_sql(spec, table, ctx, m.numSourceRows, narrowed.matched_by == 'range')), matched) -%}
      {%- do ctx.update({'scan_filter': spark_merge.spark_merge__scan_filter(spec, table, matched) | trim}) -%}
      {%- do host.step('plan: ' ~ matched | length ~ ' partition(s) hold matched rows') -%}
    {%- endif -%}
  {%- endif -%}
{%- endif -%}
{#- the cache is lazy: the summary, the first statement reading it, would run the join and fill it -#}
{%- do host.run(spark_merge.spark_merge__cache_changes_sql(spec, table, resolved, ctx)) -%}
{%- set served = {} -%}
{%- do spark_merge.spark_merge__lifecycle_read_once(host, ctx, 'changes', spark_merge.spark_merge__changes_sql(spec, table, resolved, ctx), served) -%}
{%- set fusable = fuse.ok and served.served -%}
{%- if fusable -%}{%- do host.run('UNCACHE TABLE IF EXISTS ' ~ ctx.changes_view) -%}{%- endif -%}
{%- do host.step('plan: join target and source; in one aggregation the duplicate check (' ~ spec.duplicate_rule ~ ' rule), the counts and the partitions the changes touch') -%}
{%- set summary = {} -%}
{%- do spark_merge.spark_merge__summarize_changes(table, host.rows(spark_merge.spark_merge__change_summary_sql(spec, table, resolved, ctx)), summary) -%}
{%- do s.update({'fused': fusable and summary.multi == 0}) -%}
{%- if s.get('matched_from_summary') -%}
  {%- do ctx.update({'scan_filter': spark_merge.spark_merge__scan_filter(spec, table, summary.matched) | trim}) -%}
  {%- do host.step('plan: ' ~ summary.matched | length ~ ' partition(s) hold matched rows') -%}
{%- endif -%}
{%- if fusable and summary.multi -%}{%- do host.step('plan: ' ~ summary.multi ~ ' target row(s) joined with several source rows: the write anti-joins the changed rows instead of one fused join') -%}{%- endif -%}
{%- if summary.dups -%}
  {#- the failure path only: which target rows, for the message -#}
  {%- set dups = host.rows(spark_merge.spark_merge__duplicates_sql(spec, table, resolved, ctx)) -%}
  {%- set shown = [] -%}
  {%- for d in dups -%}{%- set kv = [] -%}{%- for k, v in d.items() -%}{%- do kv.append(k ~ '=' ~ spark_merge.spark_merge__shown(v)) -%}{%- endfor -%}{%- do shown.append(kv | join(', ')) -%}{%- endfor -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('duplicate'), 'One MERGE target table row matched more than one source row (duplicate_rule=' ~ spec.duplicate_rule ~ '), ' ~ summary.dups ~ ' target row(s) in all. Offending target rows: ' ~ shown | join('; '), dups) -%}
{%- endif -%}
{#- the metastore drops trailing spaces from a partition value (CHAR(n)'s padding aside), so a
    rewritten partition could not be registered under its name: refused before any write (an append
    is Spark's own INSERT, which registers such a partition itself) -#}
{%- for part in summary.partitions if not s.get('insert_only') -%}
  {%- for c, v in part.items() if v is string and v != v.rstrip(' ') and not table.columns_by_name[c | lower].get('char_pad') -%}
    {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('validation'), 'this ' ~ spec.kind | upper ~ ' rewrites partition ' ~ c ~ ' = ' ~ v | tojson ~ ' of ' ~ table.name ~ ', a value that ends with a space: the Hive metastore drops trailing spaces from partition values, so the rewritten partition could not be registered under it. Trim the value (rtrim) where the statement sets it, or keep such values out of partition columns; nothing was written') -%}
  {%- endfor -%}
{%- endfor -%}
{%- do m.update(summary.metrics) -%}
{%- do host.step('plan: ' ~ m.numTargetRowsInserted ~ ' row(s) to insert, ' ~ m.numTargetRowsUpdated ~ ' to update, '
                 ~ m.numTargetRowsDeleted ~ ' to delete, in ' ~ summary.partitions | length ~ ' partition(s)') -%}
{#- for an append these are the partitions it adds files to (rollback needs to know) -#}
{%- do s.update({'partitions': summary.partitions, 'deltas': summary.deltas, 'rewrite_files': summary.files}) -%}
{%- set broadcast = {} -%}
{%- do spark_merge.spark_merge__broadcast_changed(m, broadcast) -%}
{%- do ctx.update({'broadcast_changed': broadcast.broadcast}) -%}
{%- endmacro %}

{#- A value as an offending key shows it: strings quoted (as Python's repr), NULL as None. -#}
{% macro spark_merge__shown(v) -%}
{%- if v is none -%}None{%- elif v is string -%}'{{ v }}'{%- else -%}{{ v }}{%- endif -%}
{%- endmacro %}

{#- The table as it is now, failing MERGE_VERSION_MOVED if another merge committed since begin. -#}
{% macro spark_merge__lifecycle_unchanged(host, s, out) -%}
{%- set fresh = host.describe(s.table) -%}
{%- if fresh.version != s.table.version -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('version_moved'), fresh.name ~ ' moved from version ' ~ s.table.version ~ ' to ' ~ fresh.version ~ ' since this merge began') -%}
{%- endif -%}
{%- do out.update(fresh) -%}
{%- endmacro %}

{#- Files, bytes, rows and directory per partition (of `partitions`) of table `name` in the target's
    database, `relation` (see file_stats_sql; the Python host answers it from the files' listing). -#}
{% macro spark_merge__lifecycle_file_stats(host, table, name, relation, partitions, out) -%}
{%- set where = spark_merge.spark_merge__partition_filter(table, partitions) | trim if table.partition_columns and name == table.table_name else none -%}
{%- do spark_merge.spark_merge__decode_partitions(table, host.file_stats(table, name, spark_merge.spark_merge__file_stats_sql(table, relation, where), partitions), out) -%}
{%- endmacro %}

{#- Every metric a commit reports (Delta's names where Delta has one), set to zero: the one list of
    them. numTargetFilesCarried / BytesCarried / RowsCarried: the unchanged files a file-granular
    rewrite carried into the new version without rewriting them (the removed files are then only
    the rewritten ones). -#}
{% macro spark_merge__zero_metrics(out) -%}
{%- for k in ['numSourceRows', 'numTargetRowsInserted', 'numTargetRowsUpdated', 'numTargetRowsDeleted',
              'numTargetRowsNotMatchedBySourceUpdated', 'numTargetRowsNotMatchedBySourceDeleted', 'numTargetRowsCopied',
              'numOutputRows', 'numTargetFilesAdded', 'numTargetFilesRemoved', 'numTargetBytesAdded', 'numTargetBytesRemoved',
              'numTargetFilesCarried', 'numTargetBytesCarried', 'numTargetRowsCarried',
              'numTargetPartitionsRewritten', 'executionTimeMs'] -%}
  {%- do out.update({k: 0}) -%}
{%- endfor -%}
{%- endmacro %}

{#- The one history-entry builder: what a commit records (the journal carries it). A statement
    that wrote nothing (no matching rows, an empty source) is recorded as status 'no-op'. -#}
{% macro spark_merge__history_entry(s, version_after, out) -%}
{%- do out.update({
  'merge_id': s.merge_id, 'target': s.table.name, 'kind': s.kind, 'paradigm': s.paradigm, 'plan_hash': s.plan_hash,
  'status': 'committed' if version_after != s.table.version else 'no-op', 'statement': s.statement, 'metrics': s.metrics.copy(), 'partitions': s.partitions,
  'repoints': s.get('repoints', []), 'version_before': s.table.version, 'version_after': version_after,
  'table_id': s.table.get('table_id') or (s.merge_id if version_after != s.table.version and s.table.provider != 'jdbc' else none),
  'checked_at': s.get('checked_at'),
}) -%}
{%- do out.update(s.get('entry_extra', {})) -%}
{%- endmacro %}

{#- Execute: write the planned changes and commit them. The write mode is a branch here:
    an insert-only merge or a merge-on-read upsert (s.append_statements) appends under the lock;
    a rollback (s.repoints given) commits its repoints; anything else stages the touched
    partitions (s.stage_statement: a compaction's query instead of the merge's) and commits them
    with a journal. -#}
{% macro spark_merge__lifecycle_write(host, s) -%}
{%- set m = s.metrics -%}
{%- if s.get('commit_repoints') -%}
  {%- do spark_merge.spark_merge__lifecycle_journal_commit(host, s) -%}
{%- elif s.get('append_statements') or s.get('stage_statement') or m.numTargetRowsInserted or m.numTargetRowsUpdated or m.numTargetRowsDeleted -%}
  {%- if s.get('insert_only') -%}
    {%- do spark_merge.spark_merge__lifecycle_append(host, s) -%}
  {%- else -%}
    {%- do spark_merge.spark_merge__lifecycle_rewrite(host, s) -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__lifecycle_append(host, s) -%}
{%- do host.step('execute: append inserted rows (under the commit lock)') -%}
{%- do host.lock(s.table, s.merge_id) -%}{%- do s.update({'locked': true}) -%}
{%- set fresh = {} -%}
{%- do spark_merge.spark_merge__lifecycle_unchanged(host, s, fresh) -%}
{%- do host.failpoint('before_append') -%}
{%- for stmt in s.get('append_statements') or [spark_merge.spark_merge__append_sql(s.table, s.ctx)] -%}{%- do host.run(stmt) -%}{%- endfor -%}
{%- do host.run(spark_merge.spark_merge__version_sql(fresh, s.merge_id, s.get('properties', {}))) -%}
{%- do host.unlock(s.table, s.merge_id) -%}{%- do s.update({'locked': false, 'version_after': fresh.version + 1}) -%}
{%- do s.metrics.update({'numOutputRows': s.metrics.numTargetRowsInserted}) -%}
{%- endmacro %}

{#- Stage the new content of s.partitions, then commit it. A merge's rewrite is checked against
    its plan: the changed rows' files are the files the commit replaces, and each partition gains
    exactly the rows the plan says (s.deltas). Another statement (s.stage_statement: a compaction)
    is checked only to stay inside s.partitions. -#}
{% macro spark_merge__lifecycle_rewrite(host, s) -%}
{%- set table, ctx, m = s.table, s.ctx, s.metrics -%}
{%- set merging = not s.get('stage_statement') -%}
{%- do host.step('execute: measure partitions to replace') -%}
{%- set old = [] -%}
{%- do spark_merge.spark_merge__lifecycle_file_stats(host, table, table.table_name, table.relation, s.partitions, old) -%}
{#- file-granular: a host that knows the partitions' files (it listed them) rewrites only the files
    holding a changed row, and carries the others over (a hard link or a server-side copy: the
    same file); a host without a file system (dbt) rewrites the touched partitions whole -#}
{%- set granular = merging and s.get('rewrite_files') is not none and host.can_carry(table, old) -%}
{%- if granular -%}{%- do ctx.update({'rewrite_files': s.rewrite_files}) -%}{%- endif -%}
{%- do host.step('execute: write ' ~ (s.rewrite_files | length ~ ' changed file(s) and the new rows of ' if granular else '') ~ s.partitions | length ~ ' partition(s) to staging') -%}
{%- do s.update({'staged': true}) -%}
{%- do host.run(s.stage_statement if not merging
                else spark_merge.spark_merge__fused_stage_sql(s.spec, table, s.resolved, ctx, s.partitions) if s.get('fused')
                else spark_merge.spark_merge__stage_sql(table, ctx, s.partitions)) -%}
{%- set new = [] -%}
{%- do spark_merge.spark_merge__lifecycle_file_stats(host, table, ctx.stage_name, ctx.stage, s.partitions, new) -%}
{%- do host.run('DROP TABLE IF EXISTS ' ~ ctx.stage) -%}{%- do ctx.update({'stage_dropped': true}) -%}
{%- do host.failpoint('after_staging') -%}
{%- set planned = {} -%}
{%- do spark_merge.spark_merge__repoints(table, ctx, s.partitions, old, new, planned) -%}
{%- for location in planned.empty -%}{%- do host.run(spark_merge.spark_merge__empty_partition_sql(table, location)) -%}{%- endfor -%}
{%- do m.update(planned.metrics) -%}
{%- if granular -%}
  {%- set carried = host.carry(table, planned.repoints, s.rewrite_files) -%}
  {%- do host.step('execute: carried ' ~ carried | sum(attribute='files') ~ ' unchanged file(s) into the new version') -%}
  {%- do spark_merge.spark_merge__carried_metrics(m, carried) -%}
  {%- set new = new + carried -%}
{%- endif -%}
{%- do m.update({'numTargetRowsCopied': m.numOutputRows - m.numTargetRowsInserted - m.numTargetRowsUpdated}) -%}
{%- if s.get('rows_before') is not none -%}{#- a compaction: the log rows it dropped -#}
  {%- do m.update({'numTargetRowsDeleted': s.rows_before - m.numOutputRows}) -%}
{%- endif -%}
{%- do s.update({'repoints': planned.repoints}) -%}
{%- do host.step('commit: lock, check for conflicts, journal, repoint') -%}
{%- do host.lock(table, s.merge_id) -%}{%- do s.update({'locked': true, 'checked_at': host.now()}) -%}
{#- the files as they are now: a query reads this session's listing, cached while planning -#}
{%- do host.run(spark_merge.spark_merge__refresh_sql(table)) -%}
{%- set current, changed = [], [] -%}
{%- do spark_merge.spark_merge__lifecycle_file_stats(host, table, table.table_name, table.relation, s.partitions, current) -%}
{%- do spark_merge.spark_merge__changed_partitions(table, old, current, changed) -%}
{%- if changed -%}
  {%- set names = [] -%}
  {%- for k in changed[:5] -%}{%- do names.append(k | replace('"', '') | trim('/') or 'all') -%}{%- endfor -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('conflict'), 'partition(s) ' ~ names | join(', ') ~ ' of ' ~ table.name ~ ' changed since this merge read them; nothing was written, run it again') -%}
{%- endif -%}
{%- set fresh = {} -%}
{%- do spark_merge.spark_merge__lifecycle_unchanged(host, s, fresh) -%}
{#- nothing moved under us (checked above): the staged rows must be exactly the plan's -#}
{%- set violations = [] -%}
{%- do spark_merge.spark_merge__output_errors(table, s.partitions, s.deltas if merging else none, old, new, violations) -%}
{%- set messages = violations | map(attribute='message') | list -%}
{%- if violations and merging and violations | selectattr('excess', 'none') | list | length == 0 -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('conflict'), 'this merge read rows of ' ~ table.name ~ ' from file(s) the table no longer holds (' ~ messages[:3] | join('; ') ~ '): the data changed while it planned, by a write that bypassed spark-merge; nothing was written, run it again') -%}
{%- elif violations and merging and violations | rejectattr('short', 'none') | list | length == violations | length -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('conflict'), 'the files of ' ~ table.name ~ ' hold rows this merge did not read (' ~ messages[:3] | join('; ') ~ '): a write that bypassed spark-merge added them since the merge began; nothing was written, run it again') -%}
{%- elif violations -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('plan_violation'), messages[:5] | join('; ') ~ '; nothing was committed') -%}
{%- endif -%}
{%- for r in s.repoints if host.exists(r.location) is sameas false -%}
  {%- if loop.first -%}
    {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('conflict'), 'the staged data of this merge (' ~ r.location ~ ') was removed, most likely by a vacuum with a retention shorter than the merge took; nothing was written, run it again') -%}
  {%- endif -%}
{%- endfor -%}
{%- do spark_merge.spark_merge__lifecycle_journal_commit(host, s, fresh) -%}
{%- endmacro %}

{#- The commit point and after, under the lock: the history entry goes into the journal, then the
    journal is applied. A rollback comes here directly: its caller took the lock and checked
    that each partition is where the history says (s.repoints, s.commit_repoints). -#}
{% macro spark_merge__lifecycle_journal_commit(host, s, fresh=none) -%}
{%- if fresh is none -%}
  {%- set fresh = {} -%}
  {%- do spark_merge.spark_merge__lifecycle_unchanged(host, s, fresh) -%}
{%- endif -%}
{%- do s.metrics.update({'executionTimeMs': host.elapsed_ms(s)}) -%}
{%- if not s.get('checked_at') -%}{%- do s.update({'checked_at': host.now()}) -%}{%- endif -%}
{%- set entry = {} -%}
{%- do spark_merge.spark_merge__history_entry(s, fresh.version + 1, entry) -%}
{%- do host.journal(spark_merge.spark_merge__journal_sql(fresh, s.merge_id, s.repoints, entry)) -%}
{%- do s.update({'journaled': true, 'version_after': fresh.version + 1, 'entry': entry}) -%}
{%- do host.failpoint('after_journal') -%}
{%- do spark_merge.spark_merge__lifecycle_apply_journal(host, fresh, s.merge_id, s.repoints, entry, false) -%}
{%- do host.carry_late(fresh, s.repoints) -%}
{%- do host.unlock(s.table, s.merge_id) -%}{%- do s.update({'locked': false}) -%}
{%- endmacro %}

{#- Complete a journaled commit: repoint, write the history entry, mark done, refresh. Every
    step is idempotent (the entry overwrites its own file), so replaying it is harmless. -#}
{% macro spark_merge__lifecycle_apply_journal(host, table, merge_id, repoints, entry, recovered) -%}
{%- do host.repoint(table, merge_id, repoints) -%}
{%- do host.failpoint('after_last_repoint') -%}
{%- if entry -%}
  {%- set e = entry.copy() -%}
  {%- do e.update({'finished_at': host.now()}) -%}
  {%- if recovered -%}{%- do e.update({'recovered': true}) -%}{%- endif -%}
  {%- set hctx = {} -%}
  {%- do spark_merge.spark_merge__context({}, table, merge_id, hctx) -%}
  {%- do host.run(spark_merge.spark_merge__history_write_sql(hctx, e), tolerate=true) -%}
{%- endif -%}
{%- do host.run(spark_merge.spark_merge__journal_done_sql(table, merge_id)) -%}
{#- re-read the properties so the clean-up removes exactly the journal keys present now -#}
{%- set clear = spark_merge.spark_merge__journal_clear_sql(host.describe(table)) | trim -%}
{%- if clear -%}{%- do host.run(clear) -%}{%- endif -%}
{%- do host.failpoint('before_refresh') -%}
{%- do host.run(spark_merge.spark_merge__refresh_sql(table)) -%}
{%- endmacro %}

{#- Finish an interrupted commit from its journal; out.recovered tells whether there was one.
    Staged data is only ever removed before its journal exists, so a journal whose new locations
    are missing was never applied: it is discarded rather than replayed. A lock held by the
    merge just completed, or by the table's last finished merge, guards no work: released. -#}
{% macro spark_merge__lifecycle_recover(host, table, out) -%}
{%- set journal = {} -%}
{%- do spark_merge.spark_merge__pending_journal(table, journal) -%}
{%- if journal.get('corrupt') -%}
  {%- do host.fail(spark_merge.spark_merge__error_code('corrupt_journal'), spark_merge.spark_merge__corrupt_journal_message(table, journal) | trim) -%}
{%- endif -%}
{%- set finished = {'id': table.properties.get('spark_merge.last_merge_id')} -%}
{%- if journal -%}
  {%- set missing = [] -%}
  {%- for r in journal.repoints if host.exists(r.location) is sameas false -%}{%- do missing.append(r.location) -%}{%- endfor -%}
  {%- set repoints = [] -%}
  {%- if missing -%}
    {%- do host.warn('discarding journal of merge ' ~ journal.merge_id ~ ' on ' ~ table.name ~ ': its staged data ' ~ missing[0] ~ ' is gone, nothing was repointed') -%}
  {%- else -%}
    {%- do host.warn('recovering interrupted merge ' ~ journal.merge_id ~ ' on ' ~ table.name ~ ': replaying ' ~ journal.repoints | length ~ ' repoint(s)') -%}
    {%- for r in journal.repoints -%}{%- set c = r.copy() -%}{%- do c.update({'exists': false}) -%}{%- do repoints.append(c) -%}{%- endfor -%}
  {%- endif -%}
  {%- do spark_merge.spark_merge__lifecycle_apply_journal(host, table, journal.merge_id, repoints, journal.get('entry') if repoints else none, true) -%}
  {%- do finished.update({'id': journal.merge_id}) -%}
{%- endif -%}
{%- do host.release_finished(table, finished.id) -%}
{%- do out.update({'recovered': journal | length > 0}) -%}
{%- endmacro %}

{#- Plan a merge-on-read upsert: no join, no rewrite; the source's rows are appended to the log
    (s.table) and the view (s.view) is re-created over it, with the upsert options (s.upsert,
    s.log_plan) kept in the log's properties for the view and compaction. -#}
{% macro spark_merge__lifecycle_plan_log(host, s) -%}
{%- do host.failpoint('after_validation') -%}
{%- do spark_merge.spark_merge__zero_metrics(s.metrics) -%}
{%- do host.step('plan: count the source rows (merge-on-read: appended to the log, no join)') -%}
{%- set n = host.rows('SELECT count(*) AS n FROM ' ~ spark_merge.spark_merge__source_relation(s.spec) ~ ' AS s')[0].n | int -%}
{%- do s.metrics.update({'numSourceRows': n, 'numTargetRowsInserted': n}) -%}
{#- what the view and compaction need, the same keys from either host (an empty list as null) -#}
{%- set options = {} -%}
{%- for k in ['primary_key', 'watermark_key', 'tombstone_key', 'tombstone_string_key_value', 'upsert_mode'] -%}{%- set v = s.upsert.get(k) -%}{%- do options.update({k: none if v is none or v == [] else v}) -%}{%- endfor -%}
{%- do s.update({'insert_only': true, 'partitions': [], 'deltas': none,
                 'append_statements': [spark_merge.spark_merge__mor_append_sql(s.table, s.spec), spark_merge.spark_merge__mor_view_sql(s.view, s.table, s.log_plan)],
                 'properties': {'spark_merge.upsert': options | tojson}}) -%}
{%- endmacro %}

{#- A file-granular rewrite's metrics, from what the host carried over (`carried`: file_stats rows):
    those files were not removed, nor are their rows output. -#}
{% macro spark_merge__carried_metrics(m, carried) -%}
{%- set n = {'files': carried | sum(attribute='files'), 'bytes': carried | sum(attribute='bytes'), 'rows': carried | sum(attribute='rows')} -%}
{%- do m.update({'numTargetFilesCarried': n.files, 'numTargetBytesCarried': n.bytes, 'numTargetRowsCarried': n.rows,
                 'numTargetFilesRemoved': m.numTargetFilesRemoved - n.files, 'numTargetBytesRemoved': m.numTargetBytesRemoved - n.bytes}) -%}
{%- endmacro %}
