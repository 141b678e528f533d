{#-
  The execute phase of every commit (overview in lifecycle/phases.sql): an append, or the
  rewrite (stage, carry, check, lock, journal, repoint), and the journal's apply and recovery.
-#}

{#- A progress line's phase: the plan's step label (step_label) for a merge that planned its steps
    (lifecycle_plan set s.fused), else `other` (a compaction, a merge-on-read upsert). -#}
{% macro spark_merge__phase(s, name, other) -%}
{{ spark_merge.spark_merge__step_label(name) if 'fused' in s else other }}
{%- endmacro %}

{#- Execute: write the planned changes and commit them. The write mode is a branch here:
    an insert-only merge or a merge-on-read upsert (s.append_statements) appends under the lock;
    a rollback (s.repoints given) commits its repoints; anything else stages the touched
    partitions (s.stage_select: a compaction's query instead of the merge's) and commits them
    with a journal. -#}
{% macro spark_merge__lifecycle_write(host, s) -%}
{%- set m = s.metrics -%}
{%- if s.get('commit_repoints') -%}
  {%- do spark_merge.spark_merge__lifecycle_journal_commit(host, s) -%}
{%- elif s.get('observed') -%}
  {%- do spark_merge.spark_merge__lifecycle_rewrite_observed(host, s) -%}
{%- elif s.get('append_statements') or s.get('stage_select') or m.numTargetRowsInserted or m.numTargetRowsUpdated or m.numTargetRowsDeleted -%}
  {%- if s.get('insert_only') -%}
    {%- do spark_merge.spark_merge__lifecycle_append(host, s) -%}
  {%- else -%}
    {%- do spark_merge.spark_merge__lifecycle_rewrite(host, s) -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- The change feed's statements (lifecycle/feed.sql), into the commit's own directory, before its
    journal: a failure leaves nothing, and the history entry says they are there. -#}
{% macro spark_merge__lifecycle_feed(host, s, statements) -%}
{%- do host.step('execute: record the change rows (change feed)') -%}
{%- do s.update({'staged': true}) -%}
{%- for statement in statements -%}{%- do host.run(statement) -%}{%- endfor -%}
{%- do s.update({'feed_written': true}) -%}
{%- do host.failpoint('after_feed') -%}
{%- endmacro %}

{#- An append (an insert-only merge, a merge-on-read upsert's log) is Spark's own INSERT INTO, which cannot
    be replayed: so its journal, written under the commit lock before the INSERT, carries the append
    record (append_record: the rows each partition it adds to holds before it and must hold after it)
    beside the history entry, and whoever finds that journal (the next begin, `recover`, a run_key
    retry) counts the partitions again: the rows there, the append is rolled forward (history entry,
    journal done); the rows not there, it is discarded (nothing became visible); anything else is
    refused, never guessed (lifecycle_recover). -#}
{% macro spark_merge__lifecycle_append(host, s) -%}
{%- do host.step(spark_merge.spark_merge__phase(s, 'write', 'execute') ~ ': append inserted rows (under the commit lock)') -%}
{%- if (s.get('ctx') or {}).get('feed') and not s.get('append_statements') -%}
  {%- do spark_merge.spark_merge__lifecycle_feed(host, s, [spark_merge.spark_merge__feed_write_sql(s.table, s.ctx, s.merge_id)]) -%}
{%- endif -%}
{%- do host.lock(s.table, s.merge_id) -%}{%- do s.update({'locked': true}) -%}
{%- set fresh = {} -%}
{%- do spark_merge.spark_merge__lifecycle_unchanged(host, s, fresh) -%}
{#- a merge-on-read upsert's change rows depend on the log it appends to: read under the lock -#}
{%- if s.get('feed_statements') -%}{%- do spark_merge.spark_merge__lifecycle_feed(host, s, s.feed_statements) -%}{%- endif -%}
{%- for stmt in s.get('before_append') or [] -%}{%- do host.run(stmt) -%}{%- endfor -%}
{#- the partitions it adds rows to, and how many to each: a merge's plan, or a merge-on-read upsert's count -#}
{%- set partitions, deltas = (s.log_partitions, s.log_deltas) if 'log_partitions' in s else (s.changes.partitions, s.changes.deltas) -%}
{%- set counted, record = {}, {} -%}
{%- do spark_merge.spark_merge__lifecycle_rows_now(host, fresh, partitions, counted) -%}
{%- do spark_merge.spark_merge__append_record(fresh, partitions, deltas, counted, record) -%}
{%- do s.metrics.update({'numOutputRows': s.metrics.numTargetRowsInserted}) -%}
{%- set rows = [] -%}
{%- for r in record.partitions -%}{%- do rows.append({'partition': r.partition, 'rows': r.after}) -%}{%- endfor -%}
{%- do s.update({'repoints': [], 'append': record, 'partition_rows': rows,
                 'append_sql': s.get('append_statements') or [spark_merge.spark_merge__append_sql(s.table, s.ctx)]}) -%}
{%- do spark_merge.spark_merge__lifecycle_journal_commit(host, s, fresh) -%}
{%- endmacro %}

{#- The rows each of `partitions` of `table` holds now, by partition_key, into `out` (a partition without
    files: none), counted from the files (file_stats) as they are: after a REFRESH, for a host that
    reads them by a query. An append's record, its recovery and the change feed's check of plain
    writes (feed.sql: plain_writes) count so. -#}
{% macro spark_merge__lifecycle_rows_now(host, table, partitions, out) -%}
{%- do host.run(spark_merge.spark_merge__refresh_sql(table)) -%}
{%- set stats = [] -%}
{%- do spark_merge.spark_merge__lifecycle_file_stats(host, table, table.table_name, table.relation, partitions, stats) -%}
{%- do spark_merge.spark_merge__rows_by_partition(table, stats, out) -%}
{%- endmacro %}

{#- Stage the new content of s.changes.partitions, then commit it. A merge's rewrite is checked against
    its plan: the changed rows' files are the files the commit replaces, and each partition gains
    exactly the rows the plan says (s.changes.deltas). Another query (s.stage_select: a compaction)
    is checked only to stay inside s.changes.partitions. -#}
{% macro spark_merge__lifecycle_rewrite(host, s) -%}
{%- set table, ctx, m = s.table, s.ctx, s.metrics -%}
{%- set merging = not s.get('stage_select') -%}
{%- do host.step(spark_merge.spark_merge__phase(s, 'write', 'execute') ~ ': measure partitions to replace') -%}
{%- set old = [] -%}
{%- do spark_merge.spark_merge__lifecycle_file_stats(host, table, table.table_name, table.relation, s.changes.partitions, old) -%}
{#- file-granular: a host that knows the partitions' files (it listed them) rewrites only the files
    holding a changed row, and carries the others over (a hard link or a server-side copy: the
    same file); a host without a file system (dbt) rewrites the touched partitions whole -#}
{%- set granular = merging and s.changes.files is not none and host.can_carry(table, old) -%}
{%- if granular -%}
  {%- do ctx.update({'rewrite_files': s.changes.files}) -%}
  {%- do spark_merge.spark_merge__lifecycle_fold(host, s, old) -%}
{%- endif -%}
{%- set shape = {'broadcast_source': false, 'rebalance': true} -%}
{%- if merging and s.get('fused') -%}{%- do spark_merge.spark_merge__fused_join_shape(table, m.numSourceRows, ctx.get('fold'), shape) -%}{%- endif -%}
{%- do ctx.update({'broadcast_source': shape.broadcast_source, 'rebalance': shape.rebalance, 'inserts': m.numTargetRowsInserted > 0}) -%}
{%- do host.step('execute: write ' ~ (s.changes.files | length ~ ' changed file(s) and the new rows of ' if granular else '') ~ s.changes.partitions | length
    ~ ' partition(s) to staging') -%}
{%- do s.update({'staged': true}) -%}
{%- set select = s.stage_select if not merging
    else spark_merge.spark_merge__fused_rewrite_select(s.spec, table, s.resolved, ctx, s.changes.partitions) if s.get('fused')
    else spark_merge.spark_merge__rewrite_select(table, ctx, s.changes.partitions) -%}
{%- set new = [] -%}
{%- do spark_merge.spark_merge__decode_partitions(table, host.stage(table, ctx, spark_merge.spark_merge__stage_select_sql(table, ctx, select) | trim,
    select | trim, s.changes.partitions), new) -%}
{%- do ctx.update({'stage_dropped': true}) -%}
{%- do host.failpoint('after_staging') -%}
{%- if merging and ctx.get('feed') -%}
  {%- do spark_merge.spark_merge__lifecycle_feed(host, s, [spark_merge.spark_merge__feed_write_sql(table, ctx, s.merge_id)]) -%}
{%- endif -%}
{%- do spark_merge.spark_merge__lifecycle_commit_staged(host, s, old, new, merging, granular) -%}
{%- endmacro %}

{#- The one-pass write (lifecycle_plan: observable): the files holding a matched row (s.changes.files)
    rewritten and the new rows added in one job, which counts its own changes as it writes
    (host.stage_observed); the partitions its new rows went to come from the staged files. Where the
    job's target rows outnumber the rows of the files it read (a target row matched two source rows), or
    the host did not list those files, the staging is gone and the summary plans the merge. -#}
{% macro spark_merge__lifecycle_rewrite_observed(host, s) -%}
{%- set table, ctx, m = s.table, s.ctx, s.metrics -%}
{%- do host.step(spark_merge.spark_merge__phase(s, 'write', 'execute') ~ ': measure partitions to replace') -%}
{%- set old = [] -%}
{%- do spark_merge.spark_merge__lifecycle_file_stats(host, table, table.table_name, table.relation, s.changes.partitions, old) -%}
{%- if old and not host.can_carry(table, old) -%}
  {%- do spark_merge.spark_merge__lifecycle_unobserved(host, s, 'the files holding matched rows were not listed') -%}
{%- else -%}
  {%- set shape = {} -%}{%- do spark_merge.spark_merge__fused_join_shape(table, m.numSourceRows, none, shape) -%}
  {%- do ctx.update({'rewrite_files': s.changes.files, 'broadcast_source': shape.broadcast_source, 'rebalance': shape.rebalance,
      'inserts': spark_merge.spark_merge__inserts(s.resolved) | trim == 'True'}) -%}
  {%- do host.step('execute: write ' ~ s.changes.files | length ~ ' file(s) holding matched rows and the new rows to staging, counting the '
      ~ 'changes') -%}
  {%- do s.update({'staged': true}) -%}
  {%- set written = host.stage_observed(table, ctx, spark_merge.spark_merge__fused_rewrite_select(s.spec, table, s.resolved, ctx,
      s.changes.partitions, true) | trim, s.changes.files) -%}
  {%- if written is none -%}
    {%- do spark_merge.spark_merge__lifecycle_unobserved(host, s, 'a target row matched several source rows') -%}
  {%- else -%}
    {%- do spark_merge.spark_merge__lifecycle_observed(host, s, old, written) -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- After the one-pass write: its counts, the partitions its rows went to (their files measured now, as a
    rewrite measures its partitions first), then the commit as for any rewrite. Its staged rows must be
    the rows it counted written. -#}
{% macro spark_merge__lifecycle_observed(host, s, old, written) -%}
{%- set table, ctx, m, got = s.table, s.ctx, s.metrics, written.metrics -%}
{%- set new = [] -%}
{%- do spark_merge.spark_merge__decode_partitions(table, written.stats, new) -%}
{%- do ctx.update({'stage_dropped': true}) -%}
{%- do host.failpoint('after_staging') -%}
{%- do m.update({'numTargetRowsInserted': got.inserted, 'numTargetRowsUpdated': got.updated, 'numTargetRowsDeleted': got.deleted}) -%}
{%- set staged, wrote = new | sum(attribute='rows'), got.copied + got.inserted + got.updated -%}
{%- if staged != wrote -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('plan_violation'), 'the rewrite staged '
      ~ staged ~ ' row(s) where its join wrote ' ~ wrote ~ '; nothing was committed') -%}
{%- endif -%}
{%- set by_key, extra = {}, [] -%}
{%- for p in s.changes.partitions -%}{%- do by_key.update({spark_merge.spark_merge__partition_key(table.partition_columns, p): p}) -%}{%- endfor -%}
{%- for r in new -%}
  {%- set k = spark_merge.spark_merge__partition_key(table.partition_columns, r.partition) -%}
  {%- if k not in by_key -%}{%- do extra.append(r.partition) -%}{%- do by_key.update({k: r.partition}) -%}{%- endif -%}
{%- endfor -%}
{%- if extra -%}
  {%- do spark_merge.spark_merge__lifecycle_file_stats(host, table, table.table_name, table.relation, extra, old) -%}
{%- endif -%}
{%- set partitions = [] -%}
{%- for k in by_key.keys() | sort -%}{%- do partitions.append(by_key[k]) -%}{%- endfor -%}
{%- do spark_merge.spark_merge__planned_changes(partitions, none, s.changes.files, s.changes) -%}
{%- do host.step('plan: ' ~ m.numTargetRowsInserted ~ ' row(s) inserted, ' ~ m.numTargetRowsUpdated ~ ' updated, ' ~ m.numTargetRowsDeleted
    ~ ' deleted, in ' ~ partitions | length ~ ' partition(s)') -%}
{%- do spark_merge.spark_merge__unregistrable(host, s, partitions) -%}
{%- if partitions -%}
  {%- do spark_merge.spark_merge__lifecycle_commit_staged(host, s, old, new, true, true) -%}
{%- else -%}
  {%- do s.update({'staged': false}) -%}
{%- endif -%}
{%- endmacro %}

{#- A rewrite's commit once its rows are staged (`new`: their file statistics; `old`: those of the
    partitions it replaces): the repoints, the carried files (`granular`), the counts, the checks
    under the lock, the journal. -#}
{% macro spark_merge__lifecycle_commit_staged(host, s, old, new, merging, granular) -%}
{%- set table, ctx, m = s.table, s.ctx, s.metrics -%}
{%- set planned = {} -%}
{%- do spark_merge.spark_merge__repoints(table, ctx, s.changes.partitions, old, new, planned) -%}
{%- for location in planned.empty -%}{%- do host.run(spark_merge.spark_merge__empty_partition_sql(table, location)) -%}{%- endfor -%}
{%- do m.update(planned.metrics) -%}
{%- if granular -%}
  {%- set carried = host.carry(table, planned.repoints, s.changes.files, ctx.get('fold')) -%}
  {%- do host.step('execute: carried ' ~ carried | sum(attribute='files') ~ ' unchanged file(s) into the new version') -%}
  {%- do spark_merge.spark_merge__carried_metrics(m, carried) -%}
  {%- set new = new + carried -%}
{%- endif -%}
{%- do m.update({'numTargetRowsCopied': m.numOutputRows - m.numTargetRowsInserted - m.numTargetRowsUpdated}) -%}
{%- if s.get('rows_before') is not none -%}{#- a compaction: the log rows it dropped -#}
  {%- do m.update({'numTargetRowsDeleted': s.rows_before - m.numOutputRows}) -%}
{%- endif -%}
{%- set counted = {} -%}
{%- do spark_merge.spark_merge__partition_rows(table, s.changes.partitions, new, counted) -%}
{%- do s.update({'repoints': planned.repoints, 'partition_rows': counted.rows}) -%}
{%- set fresh = {} -%}
{%- do spark_merge.spark_merge__lifecycle_verify(host, s, old, new, merging, fresh) -%}
{%- do spark_merge.spark_merge__lifecycle_journal_commit(host, s, fresh) -%}
{%- endmacro %}

{#- The table's auto compaction (fold_plan) for a file-granular rewrite: the small files it folds into
    the partitions' new files, said as a step and counted (numTargetFilesCompacted); a bad policy
    fails the merge here, before anything is staged. -#}
{% macro spark_merge__lifecycle_fold(host, s, old) -%}
{%- set fold = {} -%}
{%- do spark_merge.spark_merge__fold_plan(s.table, old, fold) -%}
{%- if fold.get('error') -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('invalid_spec'), fold.error) -%}
{%- elif fold -%}
  {%- do s.ctx.update({'fold': fold}) -%}
  {%- do s.metrics.update({'numTargetFilesCompacted': fold.files, 'numTargetBytesCompacted': fold.bytes}) -%}
  {%- do host.step('execute: auto compaction folds ' ~ fold.files ~ ' small file(s) of ' ~ fold.dirs | length ~ ' partition(s) into the rewrite'
      ~ ' (spark_merge.auto_compact.min_files = ' ~ fold.min_files ~ ')') -%}
{%- endif -%}
{%- endmacro %}

{#- The commit's checks, under the lock: no partition the merge read changed since (its files as they
    are now against `old`, as planned), the table's version did not move (`fresh`: the table as it is
    now), the staged rows (`new`) are exactly the plan's (when `merging`: a compaction's rows are the
    table's own), and the staged data is still there. Any of them failing: nothing is written. -#}
{% macro spark_merge__lifecycle_verify(host, s, old, new, merging, fresh) -%}
{%- set table = s.table -%}
{%- do host.step(spark_merge.spark_merge__phase(s, 'commit', 'commit') ~ ': lock, check for conflicts, journal, repoint') -%}
{%- do host.lock(table, s.merge_id) -%}{%- do s.update({'locked': true, 'checked_at': host.now()}) -%}
{#- the files as they are now: a query reads this session's listing, cached while planning -#}
{%- do host.run(spark_merge.spark_merge__refresh_sql(table)) -%}
{%- set current, changed = [], [] -%}
{%- do spark_merge.spark_merge__lifecycle_file_stats(host, table, table.table_name, table.relation, s.changes.partitions, current) -%}
{%- do spark_merge.spark_merge__changed_partitions(table, old, current, changed) -%}
{%- if changed -%}
  {%- set names = [] -%}
  {%- for k in changed[:5] -%}{%- do names.append(k | replace('"', '') | trim('/') or 'all') -%}{%- endfor -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('conflict'), 'partition(s) ' ~ names | join(', ') ~
      ' of ' ~ table.name ~ ' changed since this merge read them; nothing was written, run it again') -%}
{%- endif -%}
{%- do spark_merge.spark_merge__lifecycle_unchanged(host, s, fresh) -%}
{#- nothing moved under us (checked above): the staged rows must be exactly the plan's -#}
{%- set violations = [] -%}
{%- do spark_merge.spark_merge__output_errors(table, s.changes.partitions, s.changes.deltas if merging else none, old, new, violations) -%}
{%- set messages = violations | map(attribute='message') | list -%}
{%- if violations and merging and violations | selectattr('excess', 'none') | list | length == 0 -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('conflict'), 'this merge read rows of ' ~ table.name ~
      ' from file(s) the table no longer holds (' ~ messages[:3] | join('; ') ~
      '): the data changed while it planned, by a write that bypassed spark-merge; nothing was written, run it again') -%}
{%- elif violations and merging and violations | rejectattr('short', 'none') | list | length == violations | length -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('conflict'), 'the files of ' ~ table.name ~
      ' hold rows this merge did not read (' ~ messages[:3] | join('; ') ~
      '): a write that bypassed spark-merge added them since the merge began; nothing was written, run it again') -%}
{%- elif violations -%}
  {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('plan_violation'), messages[:5] | join('; ') ~
      '; nothing was committed') -%}
{%- endif -%}
{%- for r in s.repoints if host.exists(r.location) is sameas false -%}
  {%- if loop.first -%}
    {%- do spark_merge.spark_merge__lifecycle_fail(host, s, spark_merge.spark_merge__error_code('conflict'), 'the staged data of this merge (' ~
        r.location ~ ') was removed, most likely by a vacuum with a retention shorter than the merge took; nothing was written, run it again') -%}
  {%- endif -%}
{%- endfor -%}
{%- endmacro %}

{#- The commit point and after, under the lock: the history entry goes into the journal, then the
    journal is applied. An append (s.append_sql) runs its INSERT between the two: the journal carries
    its record (s.append). A rollback comes here directly: its caller took the lock and checked
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
{%- do host.journal(spark_merge.spark_merge__journal_sql(fresh, s.merge_id, s.repoints, entry, s.get('append'), s.get('properties') or {})) -%}
{%- do s.update({'journaled': true, 'version_after': fresh.version + 1, 'entry': entry}) -%}
{%- do host.failpoint('after_journal') -%}
{%- if s.get('append_sql') -%}
  {%- do host.failpoint('before_append') -%}
  {%- for stmt in s.append_sql -%}{%- do host.run(stmt) -%}{%- endfor -%}
  {%- do host.failpoint('after_append') -%}
{%- endif -%}
{%- do spark_merge.spark_merge__lifecycle_apply_journal(host, fresh, s.merge_id, s.repoints, entry, false, s.get('append')) -%}
{%- do host.carry_late(fresh, s.repoints) -%}
{%- do host.unlock(s.table, s.merge_id) -%}{%- do s.update({'locked': false}) -%}
{%- endmacro %}

{#- Complete a journaled commit: repoint, write the history entry, mark done, refresh. Every
    step is idempotent (the entry overwrites its own file), so replaying it is harmless. `append`:
    the journal's append record (the journal's text is measured with it, to clear it). -#}
{% macro spark_merge__lifecycle_apply_journal(host, table, merge_id, repoints, entry, recovered, append=none) -%}
{%- if repoints -%}{%- do host.repoint(table, merge_id, repoints) -%}{%- endif -%}
{%- do host.failpoint('after_last_repoint') -%}
{%- if entry -%}
  {%- set e = entry.copy() -%}
  {%- do e.update({'finished_at': host.now()}) -%}
  {%- if recovered -%}{%- do e.update({'recovered': true}) -%}{%- endif -%}
  {%- do spark_merge.spark_merge__write_history(host, table, merge_id, e) -%}
{%- endif -%}
{#- done, and the journal's text dropped, in one statement; the text keys present now, without
    describing the table again: those `table` held when described (a journal recovered) and those
    the journal of this commit wrote (under the lock since, from these very arguments) -#}
{%- set written = {} -%}
{%- do spark_merge.spark_merge__journal_parts(table, merge_id, repoints, entry, written, append) -%}
{%- do host.run(spark_merge.spark_merge__journal_done_sql(table, merge_id, written.parts | length)) -%}
{%- do host.failpoint('before_refresh') -%}
{%- do host.run(spark_merge.spark_merge__refresh_sql(table)) -%}
{%- endmacro %}

{#- Finish an interrupted commit from its journal; out.recovered tells whether there was one.
    Staged data is only ever removed before its journal exists, so a journal whose new locations
    are missing was never applied: it is discarded rather than replayed. A lock held by the
    merge just completed, or by the table's last finished merge, guards no work: released
    (`waited`: wait_free has just applied that rule to the last finished merge, and no journal
    changed which merge that is, so there is nothing left to release). -#}
{% macro spark_merge__lifecycle_recover(host, table, out, waited=false) -%}
{%- set journal = {} -%}
{%- do spark_merge.spark_merge__pending_journal(table, journal) -%}
{%- if journal.get('corrupt') -%}
  {%- do host.fail(spark_merge.spark_merge__error_code('corrupt_journal'), spark_merge.spark_merge__corrupt_journal_message(table, journal) | trim) -%}
{%- endif -%}
{%- set finished = {'id': table.properties.get('spark_merge.last_merge_id')} -%}
{%- if journal.get('append') -%}
  {#- an append: its INSERT landed or did not; the rows its partitions hold now tell which -#}
  {%- set counted, landed = {}, {} -%}
  {%- do spark_merge.spark_merge__lifecycle_rows_now(host, table, journal.append.partitions | map(attribute='partition') | list, counted) -%}
  {%- do spark_merge.spark_merge__append_landed(table, journal.append, counted, landed) -%}
  {%- if landed.error -%}
    {%- do host.fail(spark_merge.spark_merge__error_code('corrupt_journal'), 'the append of merge ' ~ journal.merge_id ~ ' into ' ~ table.name ~
        ' was interrupted, and ' ~ landed.error ~ ': not all of its rows, nor none, are there (Spark was moving its files when it stopped, '
        ~ 'or another writer added rows since); nothing was changed. Look at the partition\'s newest files, then `spark-merge repair-journal '
        ~ table.name ~ '` clears the journal') -%}
  {%- elif landed.applied -%}
    {%- do host.warn('recovering interrupted append of merge ' ~ journal.merge_id ~ ' on ' ~ table.name ~ ': its rows are in the table; '
        ~ 'recording its commit') -%}
  {%- else -%}
    {%- do host.warn('discarding journal of merge ' ~ journal.merge_id ~ ' on ' ~ table.name ~ ': its append never became visible') -%}
  {%- endif -%}
  {%- do spark_merge.spark_merge__lifecycle_apply_journal(host, table, journal.merge_id, [], journal.get('entry') if landed.applied else none,
      true, journal.append) -%}
  {%- do finished.update({'id': journal.merge_id}) -%}
{%- elif journal -%}
  {%- set missing = [] -%}
  {%- for r in journal.repoints if host.exists(r.location) is sameas false -%}{%- do missing.append(r.location) -%}{%- endfor -%}
  {%- set repoints = [] -%}
  {%- if missing -%}
    {%- do host.warn('discarding journal of merge ' ~ journal.merge_id ~ ' on ' ~ table.name ~ ': its staged data ' ~ missing[0] ~
        ' is gone, nothing was repointed') -%}
  {%- else -%}
    {%- do host.warn('recovering interrupted merge ' ~ journal.merge_id ~ ' on ' ~ table.name ~ ': replaying ' ~ journal.repoints | length ~ ' repoint(s)') -%}
    {%- for r in journal.repoints -%}{%- set c = r.copy() -%}{%- do c.update({'exists': false}) -%}{%- do repoints.append(c) -%}{%- endfor -%}
  {%- endif -%}
  {%- do spark_merge.spark_merge__lifecycle_apply_journal(host, table, journal.merge_id, repoints, journal.get('entry') if repoints else none, true) -%}
  {%- do finished.update({'id': journal.merge_id}) -%}
{%- endif -%}
{%- if journal or not waited -%}{%- do host.release_finished(table, finished.id) -%}{%- endif -%}
{%- do out.update({'recovered': journal | length > 0}) -%}
{%- endmacro %}

{#- How a fused write joins the source (out.broadcast_source, out.rebalance). A source of at most
    source_broadcast_rows() is broadcast: each target row stays in the scan task that read it, which
    writes it where it belongs; no shuffle to spread the rows (rebalance_hint). A larger source's join
    shuffles every row it writes already: into a partitioned table the REBALANCE gathers each
    partition's rows into few files; into an unpartitioned one it would only shuffle every row again,
    to size files the join's own partitions size (adaptive execution coalesces them). A `fold` gathers
    each partition's rows into one file or a few (the REBALANCE), as the compaction is for. -#}
{% macro spark_merge__fused_join_shape(table, source_rows, fold, out) -%}
{%- set broadcast = source_rows | int <= spark_merge.spark_merge__source_broadcast_rows() | int -%}
{%- do out.update({'broadcast_source': broadcast, 'rebalance': (not broadcast and table.partition_columns | length > 0) or fold is not none}) -%}
{%- endmacro %}
