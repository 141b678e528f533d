{#-
  What a commit records: the metrics (one list, zeros first), the history entry (one builder),
  the plan's log line and the carried files' metrics.
-#}

{#- Every metric a commit reports (Delta's names where Delta has one), set to zero: the one list of
    them. numTargetFilesCarried / BytesCarried / RowsCarried: the unchanged files a file-granular
    rewrite carried into the new version without rewriting them (the removed files are then only
    the rewritten ones). numTargetFilesCompacted / BytesCompacted: the small files the table's auto
    compaction folded into a rewritten partition's new files (write.sql: lifecycle_fold). -#}
{% macro spark_merge__zero_metrics(out) -%}
{%- for k in ['numSourceRows', 'numTargetRowsInserted', 'numTargetRowsUpdated', 'numTargetRowsDeleted',
              'numTargetRowsNotMatchedBySourceUpdated', 'numTargetRowsNotMatchedBySourceDeleted', 'numTargetRowsCopied',
              'numOutputRows', 'numTargetFilesAdded', 'numTargetFilesRemoved', 'numTargetBytesAdded', 'numTargetBytesRemoved',
              'numTargetFilesCarried', 'numTargetBytesCarried', 'numTargetRowsCarried', 'numTargetFilesCompacted', 'numTargetBytesCompacted',
              'numTargetPartitionsRewritten', 'executionTimeMs'] -%}
  {%- do out.update({k: 0}) -%}
{%- endfor -%}
{%- endmacro %}

{#- The planned changes, the one record the plan hands the write (and a dry run reports): the
    partitions the changes touch (values by partition column), the rows each gains and loses
    (`deltas`, checked against the staged files; none: not checked row by row) and the files
    holding a changed row (`files`; none: whole partitions are rewritten). -#}
{% macro spark_merge__planned_changes(partitions, deltas, files, out) -%}
{%- do out.update({'partitions': partitions, 'deltas': deltas, 'files': files}) -%}
{%- endmacro %}

{#- A run's state, the one dict every lifecycle macro reads and fills (`s`), as either host starts
    it: the merge id, zeroed metrics, no plan hash and no planned changes yet, then the host's
    `fields` (spec, table, kind, statement, when it started; a host may pass its own metrics dict). -#}
{% macro spark_merge__run_state(merge_id, fields, out) -%}
{%- set m, changes = {}, {} -%}
{%- do spark_merge.spark_merge__zero_metrics(m) -%}
{%- do spark_merge.spark_merge__planned_changes([], none, none, changes) -%}
{%- do out.update({'merge_id': merge_id, 'metrics': m, 'plan_hash': '', 'changes': changes}) -%}
{%- do out.update(fields) -%}
{%- endmacro %}

{#- Whether a run changed its target: a file table's commit moves the table's version; a PostgreSQL
    target keeps no version, and its rows changed when the metrics count a row inserted, updated
    or deleted. The one rule of a no-op, for the history entry, the result, the summary and XCom.
    Renders 'True' or nothing. -#}
{% macro spark_merge__changed_target(s, version_after) -%}
{%- set m = s.metrics -%}
{%- if version_after != s.table.version or (m.numTargetRowsInserted + m.numTargetRowsUpdated + m.numTargetRowsDeleted) > 0 -%}True{%- endif -%}
{%- endmacro %}

{#- The one history-entry builder: what a commit records (the journal carries it). A statement
    that changed nothing (no matching rows, an empty source) is recorded as status 'no-op'. -#}
{% macro spark_merge__history_entry(s, version_after, out) -%}
{%- do out.update({
  'merge_id': s.merge_id, 'target': s.table.name, 'kind': s.kind, 'paradigm': s.paradigm, 'plan_hash': s.plan_hash,
  'status': 'committed' if spark_merge.spark_merge__changed_target(s, version_after) else 'no-op', 'statement': s.statement,
  'metrics': s.metrics.copy(),
  'partitions': s.changes.partitions,
  'repoints': s.get('repoints', []), 'version_before': s.table.version, 'version_after': version_after,
  'table_id': s.table.get('table_id') or (s.merge_id if version_after != s.table.version and s.table.provider != 'jdbc' else none),
  'checked_at': s.get('checked_at'),
}) -%}
{%- if s.get('feed_written') -%}{%- do out.update({'change_feed': true}) -%}{%- endif -%}
{%- if s.get('partition_rows') is not none -%}{%- do out.update({'partition_rows': s.partition_rows}) -%}{%- endif -%}
{%- do out.update(s.get('entry_extra', {})) -%}
{%- endmacro %}

{#- Plan a merge-on-read upsert: no join, no rewrite; the source's rows are appended to the log
    (s.table) and the view (s.view) is re-created over it, with the upsert options (s.upsert,
    s.log_plan) kept in the log's properties for the view and compaction. -#}
{% macro spark_merge__lifecycle_plan_log(host, s) -%}
{%- do host.failpoint('after_validation') -%}
{%- do spark_merge.spark_merge__zero_metrics(s.metrics) -%}
{%- do host.step('plan: count the source rows per partition of the log (merge-on-read: appended to the log, no join)') -%}
{%- set counts = [] -%}
{%- do spark_merge.spark_merge__decode_partitions(s.table, host.rows(spark_merge.spark_merge__mor_counts_sql(s.table, s.spec), 'source_stats'),
    counts) -%}
{%- set n = counts | sum(attribute='n') -%}
{%- do s.metrics.update({'numSourceRows': n, 'numTargetRowsInserted': n}) -%}
{#- what the view and compaction need, the same keys from either host (an empty list as null) -#}
{%- set options, keys = {}, [] -%}
{%- do spark_merge.spark_merge__option_names('upsert', keys) -%}
{%- for k in keys if k != 'merge_engine' -%}
  {%- set v = s.upsert.get(k) -%}{%- do options.update({k: none if v is none or v == [] else v}) -%}
{%- endfor -%}
{%- set partitions, deltas = [], {} -%}
{%- for c in counts -%}
  {%- do partitions.append(c.partition) -%}
  {%- do deltas.update({spark_merge.spark_merge__partition_key(s.table.partition_columns, c.partition): c.n | int}) -%}
{%- endfor -%}
{%- do spark_merge.spark_merge__planned_changes([], none, none, s.changes) -%}
{#- the partitions the append adds rows to, for its journal; the view is (re)created before it -#}
{%- do s.update({'insert_only': true, 'log_partitions': partitions, 'log_deltas': deltas,
                 'before_append': [spark_merge.spark_merge__mor_view_sql(s.view, s.table, s.log_plan)],
                 'append_statements': [spark_merge.spark_merge__mor_append_sql(s.table, s.spec)],
                 'properties': {'spark_merge.upsert': options | tojson}}) -%}
{%- if spark_merge.spark_merge__feed_on(s.table) == 'True' -%}
  {%- do s.update({'feed_statements': [spark_merge.spark_merge__feed_log_sql(s.table, s.spec, s.log_plan, s.merge_id)]}) -%}
{%- endif -%}
{%- endmacro %}

{#- An append's record, which its journal carries (write.sql: lifecycle_append): per partition it adds
    rows to (`partitions`, as the plan names them; an unpartitioned table's is {}), the rows there
    before it (`counted`: by partition_key, as lifecycle_rows_now counts them) and after it
    (`deltas`: the rows it adds, by partition_key). -#}
{% macro spark_merge__append_record(table, partitions, deltas, counted, out) -%}
{%- set parts = [] -%}
{%- for p in partitions -%}
  {%- set k = spark_merge.spark_merge__partition_key(table.partition_columns, p) -%}
  {%- do parts.append({'partition': p, 'before': counted.get(k, 0), 'after': counted.get(k, 0) + deltas.get(k, 0)}) -%}
{%- endfor -%}
{%- do out.update({'partitions': parts}) -%}
{%- endmacro %}

{#- The rows of decoded file_stats rows (`stats`), summed by partition_key, into `out`. -#}
{% macro spark_merge__rows_by_partition(table, stats, out) -%}
{%- for r in stats -%}
  {%- set k = spark_merge.spark_merge__partition_key(table.partition_columns, r.partition or {}) -%}
  {%- do out.update({k: out.get(k, 0) + r.rows | int}) -%}
{%- endfor -%}
{%- endmacro %}

{#- The rows each of `partitions` holds in the version a commit makes, from file_stats rows (`stats`:
    those of its new directories, carried files included; an append's record gives them itself), into
    out.rows ([{partition, rows}]): what time travel checks an old version's files against. -#}
{% macro spark_merge__partition_rows(table, partitions, stats, out) -%}
{%- set by_key = {} -%}
{%- do spark_merge.spark_merge__rows_by_partition(table, stats, by_key) -%}
{%- set rows = [] -%}
{%- for p in partitions -%}
  {%- do rows.append({'partition': p, 'rows': by_key.get(spark_merge.spark_merge__partition_key(table.partition_columns, p), 0)}) -%}
{%- endfor -%}
{%- do out.update({'rows': rows}) -%}
{%- endmacro %}

{#- Whether an interrupted append landed, from the rows its partitions hold now (`counted`, by
    partition_key) against its record: out.applied (every partition holds its rows after), or
    not (every one holds its rows before), or out.error, naming the first partition that holds
    neither. -#}
{% macro spark_merge__append_landed(table, record, counted, out) -%}
{%- set ns = namespace(after=0, before=0, error='') -%}
{%- for r in record.partitions -%}
  {%- set n = counted.get(spark_merge.spark_merge__partition_key(table.partition_columns, r.partition), 0) -%}
  {%- if n == r.after -%}{%- set ns.after = ns.after + 1 -%}
  {%- elif n == r.before -%}{%- set ns.before = ns.before + 1 -%}
  {%- elif not ns.error -%}
    {%- set ns.error = ('partition ' ~ r.partition | tojson if r.partition else 'the table') ~ ' holds ' ~ n ~ ' row(s), where it held ' ~ r.before ~
        ' before the append and holds ' ~ r.after ~ ' after it' -%}
  {%- endif -%}
{%- endfor -%}
{%- if not ns.error and ns.after and ns.before -%}
  {%- set ns.error = ns.after ~ ' of its ' ~ record.partitions | length ~ ' partitions hold its rows and ' ~ ns.before ~ ' do not' -%}
{%- endif -%}
{%- do out.update({'applied': not ns.error and ns.before == 0, 'error': ns.error}) -%}
{%- endmacro %}

{#- A file-granular rewrite's metrics, from what the host carried over (`carried`: file_stats rows):
    those files were not removed, nor are their rows output. -#}
{% macro spark_merge__carried_metrics(m, carried) -%}
{%- set n = {'files': carried | sum(attribute='files'), 'bytes': carried | sum(attribute='bytes'), 'rows': carried | sum(attribute='rows')} -%}
{%- do m.update({'numTargetFilesCarried': n.files, 'numTargetBytesCarried': n.bytes, 'numTargetRowsCarried': n.rows,
                 'numTargetFilesRemoved': m.numTargetFilesRemoved - n.files, 'numTargetBytesRemoved': m.numTargetBytesRemoved - n.bytes}) -%}
{%- endmacro %}
