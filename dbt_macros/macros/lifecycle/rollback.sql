{#-
  Rollback, for both hosts: point a table back at the version it had before merge `s.to_merge_id`.
  A rollback is itself a journaled commit (it can be interrupted, recovered and rolled back in turn).

  Begin reads the history and decides, from the entries of that merge and the later ones, where each
  partition they replaced goes back to (rollback_plan: plain data in, a plan or a refusal out).
  Execute, under the lock, checks that each partition is still where the history says and commits
  the repoints with a journal, the tail of every commit (lifecycle_journal_commit).

  Host primitives besides the lifecycle's:
    check_files(table, listing_sql)   refuse another format's files (Python; dbt cannot see them);
                                      the staging tables to drop (none: a rollback drops none)
    history(table)                    its history entries, each checked (a rejected one refuses)
    partition_location(table, part)   where the catalog points a partition now (none: not there)
    require(location, message)        fail when a directory is gone (Python lists it; dbt reads it
                                      with Spark, which refuses a missing path)
    written_after(table, location, since, during)
                                      the data files Spark reads in a directory that were written
                                      after the moment `since`, but not during one of the periods
                                      `during` ([start, end] instants) (Python: their modification
                                      times in a listing; dbt: Spark's _metadata.file_modification_time)
-#}

{% macro spark_merge__lifecycle_begin_rollback(host, s) -%}
{%- do host.step('begin: read the history (rollback)') -%}
{%- set target = {} -%}
{%- do spark_merge.spark_merge__lifecycle_settled_target(host, s.target, target) -%}
{%- set table = target.table -%}
{%- set plan = {} -%}
{%- do spark_merge.spark_merge__rollback_plan(table, host.history(table), s.to_merge_id, plan) -%}
{%- if plan.get('error') -%}{%- do host.fail(spark_merge.spark_merge__error_code(plan.error[0]), plan.error[1]) -%}{%- endif -%}
{%- set ctx, parts, changes = {}, [], {} -%}
{%- do spark_merge.spark_merge__context({}, table, s.merge_id, ctx) -%}
{%- for target in plan.restore -%}{%- do parts.append(target.partition or {}) -%}{%- endfor -%}
{%- do spark_merge.spark_merge__planned_changes(parts, none, none, changes) -%}
{%- do s.update({'table': table, 'ctx': ctx, 'paradigm': 'ROLLBACK', 'commit_repoints': true, 'restore': plan.restore, 'changes': changes,
                 'statement': 'ROLLBACK ' ~ table.name ~ ' TO BEFORE ' ~ s.to_merge_id,
                 'entry_extra': {'rolled_back': plan.rolled_back, 'discarded': []}}) -%}
{%- endmacro %}

{#- Under the lock: each partition must still be where the history says; a partition the range
    created is emptied (a new empty directory), one whose directory vacuum removed is refused. -#}
{% macro spark_merge__lifecycle_execute_rollback(host, s) -%}
{%- do host.lock(s.table, s.merge_id) -%}{%- do s.update({'locked': true}) -%}
{%- set table = {} -%}
{%- do spark_merge.spark_merge__lifecycle_redescribe(host, s.table, table) -%}
{%- do s.update({'table': table}) -%}
{%- set repoints = [] -%}
{%- for target in s.restore -%}
  {%- set now_at = host.partition_location(table, target.partition) -%}
  {%- set where = spark_merge.spark_merge__where_in(table, target.partition) | trim -%}
  {%- if now_at is none or spark_merge.spark_merge__location_key(now_at) | trim != spark_merge.spark_merge__location_key(target.current) | trim -%}
    {%- do host.fail(spark_merge.spark_merge__error_code('conflict'), where ~ (' no longer exists (dropped outside spark-merge)' if now_at is none
        else ' is at ' ~ now_at) ~ ', not at ' ~ target.current ~
        ' as the history of ' ~ table.name ~ ' says: it was changed outside spark-merge; nothing was rolled back') -%}
  {%- endif -%}
  {%- do spark_merge.spark_merge__rollback_later_writes(host, s, table, target, where) -%}
  {%- set location = target.location -%}
  {%- set emptied = location and (location.split('/') | last).startswith('empty-') and (location.split('/') | last)[6:].isdigit() -%}
  {%- if location is none or (emptied and host.exists(location) is sameas false) -%}
    {%- set location = location or s.ctx.stage_location ~ '/empty-' ~ loop.index0 -%}
    {%- do s.update({'staged': true}) -%}
    {%- do host.run(spark_merge.spark_merge__empty_partition_sql(table, location)) -%}
  {%- else -%}
    {%- do host.require(location, 'cannot roll back ' ~ table.name ~ ' to before ' ~ s.to_merge_id ~ ': ' ~ location ~ ', which ' ~ where ~
        ' had then, is gone: removed by vacuum (its version was older than the retention) or by a write outside spark-merge (INSERT ' ~
        'OVERWRITE, ALTER TABLE ... DROP PARTITION, TRUNCATE TABLE delete a partition\'s directory); nothing was rolled back') -%}
  {%- endif -%}
  {%- do repoints.append({'partition': target.partition, 'location': location, 'old_location': now_at, 'exists': true,
      'restored': not emptied and target.location is not none}) -%}
{%- endfor -%}
{#- a merge-on-read table's log holds every upserted row, not the view's: its rollback records none -#}
{%- if s.ctx.get('feed') and not (table.get('properties') or {}).get('spark_merge.upsert') -%}
  {%- set restore, statements = [], [] -%}
  {%- for r in repoints -%}
    {%- do restore.append({'partition': r.partition, 'location': r.location if r.restored else none, 'current': r.old_location}) -%}
  {%- endfor -%}
  {%- do spark_merge.spark_merge__feed_rollback_statements(table, restore, s.merge_id, statements) -%}
  {%- do spark_merge.spark_merge__lifecycle_feed(host, s, statements) -%}
{%- endif -%}
{%- for r in repoints -%}{%- do r.pop('restored') -%}{%- endfor -%}
{%- do s.update({'repoints': repoints}) -%}
{%- do s.metrics.update({'numTargetPartitionsRewritten': repoints | length}) -%}
{%- do spark_merge.spark_merge__lifecycle_write(host, s) -%}
{%- endmacro %}

{#- Rows written after the rolled-back merges by anything else (a plain INSERT) into a directory the
    rollback replaces: the data files of each directory the range made current for the partition
    (target.chain) written after the commit that made it (one it carried forward is found in the
    directory it was written to), but for those an insert-only merge of the range appended there
    (target.appends: when each ran), whose rows the rollback undoes with it. The rollback would
    drop their rows: refused, unless the run says
    s.discard_later_writes; then they are listed in its history entry (`discarded`), and vacuum
    reports them when it deletes them. -#}
{% macro spark_merge__rollback_later_writes(host, s, table, target, where) -%}
{%- set later = [] -%}
{%- for link in target.chain -%}{%- do later.extend(host.written_after(table, link.location, link.since, target.appends)) -%}{%- endfor -%}
{%- if later and not s.get('discard_later_writes') -%}
  {%- do host.fail(spark_merge.spark_merge__error_code('unsupported'), 'cannot roll back ' ~ table.name ~ ' to before ' ~ s.to_merge_id ~ ': ' ~
      where ~ ' holds ' ~ later | length ~ ' data file(s) written after the commit of ' ~ target.chain | map(attribute='merge_id') | join(' or ') ~
      ' by a write that bypassed spark-merge (a plain INSERT): ' ~ later[:5] | join(', ') ~ '. The rollback would drop their rows; nothing was ' ~
      'rolled back. Roll back with --discard-later-writes (discard_later_writes=True) to drop them, or undo the merge with a statement to keep them') -%}
{%- endif -%}
{%- do s.entry_extra.discarded.extend(later) -%}
{%- endmacro %}

{#- "partition p=1/q=x", or the table's name for an unpartitioned table. -#}
{% macro spark_merge__where_in(table, partition) -%}
{%- if partition -%}
  {%- set kv = [] -%}{%- for c, v in partition.items() -%}{%- do kv.append(c ~ '=' ~ v) -%}{%- endfor -%}
partition {{ kv | join('/') }}
{%- else -%}{{ table.name }}{%- endif -%}
{%- endmacro %}

{#- A partition's values as one sortable key, a NULL value apart from every string. -#}
{% macro spark_merge__partition_sort_key(partition) -%}
{%- set items = [] -%}
{%- for k, v in (partition or {}).items() -%}{%- do items.append([k | lower, v is not none, v if v is not none else '']) -%}{%- endfor -%}
{{ items | sort | tojson }}
{%- endmacro %}

{#- Where each partition goes back to, from `entries` (the table's history) and `to_merge_id`: out.restore
    ([{partition, location: its directory before the range (none: the range created it), current: its
    directory after the range, per the history}], in partition order) and out.rolled_back (the merge ids
    undone); or out.error ([code name, message]) when the rollback must be refused. -#}
{% macro spark_merge__rollback_plan(table, entries, to_merge_id, out) -%}
{%- set to = to_merge_id -%}
{#- commit order is version order (a history entry is written after the lock is released) -#}
{%- set keyed, ordered = [], [] -%}
{%- for e in entries -%}{%- do keyed.append([e.get('version_before') or 0, e.finished_at, loop.index0]) -%}{%- endfor -%}
{%- for k in keyed | sort -%}{%- do ordered.append(entries[k[2]]) -%}{%- endfor -%}
{%- set ids = ordered | map(attribute='merge_id') | list -%}
{%- if to not in ids -%}
  {%- do out.update({'error': ['invalid_spec', table.name ~ ' has no merge ' ~ to ~ ' in its history (`spark-merge history ' ~ table.name ~
      '` lists them)']}) -%}
{%- else -%}
  {%- set undone = ordered[ids.index(to):] -%}
  {%- do spark_merge.spark_merge__rollback_gap(table, undone, to, out) -%}
  {%- set restore, current, chains = {}, {}, {} -%}
  {%- for entry in undone if not out.get('error') -%}
    {%- for r in entry.get('repoints') or [] -%}
      {%- set k = spark_merge.spark_merge__partition_sort_key(r.partition) | trim -%}
      {%- if k not in restore -%}{%- do restore.update({k: {'partition': r.partition, 'location': r.get('old_location')}}) -%}{%- endif -%}
      {%- do current.update({k: r.location}) -%}
      {%- do chains.setdefault(k, []).append({'location': r.location, 'since': entry.get('checked_at') or entry.finished_at,
          'merge_id': entry.merge_id}) -%}
    {%- endfor -%}
    {%- if not entry.get('repoints') and (entry.get('metrics') or {}).get('numTargetRowsInserted') -%}
      {%- for p in entry.get('partitions') or [{}] if not out.get('error') -%}
        {%- set k = spark_merge.spark_merge__partition_sort_key(p) | trim -%}
        {%- set before = restore.get(k, {}).get('location') -%}
        {%- if k not in current or (before and spark_merge.spark_merge__location_key(before) | trim ==
            spark_merge.spark_merge__location_key(current[k]) | trim) -%}
          {%- set kv = [] -%}{%- for c, v in p.items() -%}{%- do kv.append(c ~ '=' ~ v) -%}{%- endfor -%}
          {%- do out.update({'error': ['unsupported', 'cannot roll back ' ~ table.name ~ ' to before ' ~ to ~ ': insert-only merge ' ~
              entry.merge_id ~ ' appended rows to ' ~ (kv | join('/') or 'the table') ~ ' in place; delete them with a DELETE instead']}) -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if not out.get('error') and not restore -%}
    {%- do out.update({'error': ['invalid_spec', 'merge ' ~ to ~ ' and the later ones changed no data in ' ~ table.name ~ '; nothing to roll back']}) -%}
  {%- endif -%}
  {%- if not out.get('error') -%}
    {%- set targets = [] -%}
    {%- set appends = [] -%}
    {%- for e in undone if not e.get('repoints') and (e.get('metrics') or {}).get('numTargetRowsInserted') -%}
      {%- set m = e.merge_id -%}
      {%- do appends.append([m[0:4] ~ '-' ~ m[4:6] ~ '-' ~ m[6:8] ~ 'T' ~ m[8:10] ~ ':' ~ m[10:12] ~ ':' ~ m[12:14] ~ '+00:00', e.finished_at]) -%}
    {%- endfor -%}
    {%- for k in restore | sort -%}
      {%- set t = restore[k].copy() -%}{%- do t.update({'current': current[k], 'chain': chains[k], 'appends': appends}) -%}{%- do targets.append(t) -%}
    {%- endfor -%}
    {%- do spark_merge.spark_merge__rollback_reused(table, undone, targets, to, out) -%}
    {%- do out.update({'restore': targets, 'rolled_back': undone | map(attribute='merge_id') | list}) -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- The table version an entry's commit left (older entries: inferred from what it changed), into out.after. -#}
{% macro spark_merge__version_after(entry, out) -%}
{%- if 'version_after' in entry -%}{%- do out.update({'after': entry.version_after}) -%}
{%- elif entry.get('version_before') is none -%}{%- do out.update({'after': none}) -%}
{%- else -%}
  {%- set changed = entry.get('repoints') or (entry.get('metrics') or {}).get('numTargetRowsInserted') -%}
  {%- do out.update({'after': entry.version_before + (1 if changed else 0)}) -%}
{%- endif -%}
{%- endmacro %}

{#- Refuse, into out.error, unless every commit from the merge to undo to now has its entry: every commit
    moves the table's version by one, so the entries must chain that merge's version to the table's
    current one without a gap. A gap is a commit whose entry is missing (its process died before writing
    it); rolling back past it would keep its changes while undoing earlier ones, a state that never existed. -#}
{% macro spark_merge__rollback_gap(table, entries, to, out) -%}
{%- set ns = namespace(expected=entries[0].get('version_before'), stopped=false, error=none) -%}
{%- for entry in entries if not ns.stopped and ns.error is none -%}
  {%- set v = {} -%}{%- do spark_merge.spark_merge__version_after(entry, v) -%}
  {%- if entry.get('version_before') is none or v.after is none or ns.expected is none -%}
    {%- set ns.error = 'cannot roll back ' ~ table.name ~ ' to before ' ~ to ~ ': history entry ' ~ entry.merge_id ~
        ' does not record the table version it changed; nothing was rolled back' -%}
  {%- elif v.after != entry.version_before -%}
    {%- if entry.version_before != ns.expected -%}{%- set ns.stopped = true -%}{%- else -%}{%- set ns.expected = v.after -%}{%- endif -%}
  {%- endif -%}
{%- endfor -%}
{%- if ns.error is none and ns.expected != table.version -%}
  {%- set ns.error = 'cannot roll back ' ~ table.name ~ ' to before ' ~ to ~ ': its history has no entry for the commit that moved it from version ' ~
      ns.expected ~ ' (the table is at version ' ~ table.version ~ '); a commit whose entry is missing would be kept while earlier ones are ' ~
      'undone, a state that never existed. Nothing was rolled back' -%}
{%- endif -%}
{%- if ns.error is not none -%}{%- do out.update({'error': ['unsupported', ns.error]}) -%}{%- endif -%}
{%- endmacro %}

{#- Refuse, into out.error, a rollback that would point a partition at a directory a later commit wrote
    again. A merge points partitions at directories it wrote new, and a rollback at ones it found
    unchanged; only vacuum's canonical layout writes into a directory an older version used (it refills a
    partition's canonical directory once no version inside retention uses it). A version older than that
    refill named the directory with other content: out of reach, as if vacuum had removed it. -#}
{% macro spark_merge__rollback_reused(table, entries, targets, to, out) -%}
{%- set written = {} -%}
{%- for e in entries if e.get('kind') == 'canonicalize' -%}
  {%- for r in e.get('repoints') or [] -%}{%- do written.update({spark_merge.spark_merge__location_key(r.location) | trim: e.merge_id}) -%}{%- endfor -%}
{%- endfor -%}
{%- for t in targets if t.location and not out.get('error') -%}
  {%- set k = spark_merge.spark_merge__location_key(t.location) | trim -%}
  {%- if k in written -%}
    {%- do out.update({'error': ['unsupported', 'cannot roll back ' ~ table.name ~ ' to before ' ~ to ~ ': ' ~ t.location ~ ', which ' ~
        spark_merge.spark_merge__where_in(table, t.partition) | trim ~ ' had then, was refilled with later data by ' ~ written[k] ~
        " (vacuum's canonical layout, once no version inside retention used it); that version is gone, as after a vacuum. " ~
        'Nothing was rolled back']}) -%}
  {%- endif -%}
{%- endfor -%}
{%- endmacro %}
