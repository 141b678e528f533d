{#-
  Full refresh, for both hosts: replace every row of a table with a new version written beside it,
  as one journaled commit (history kind 'full_refresh'), so a failure before the commit point leaves
  the old version and `rollback` returns to it afterwards.

  The host writes the new rows first, into this commit's staging table (ctx.stage at
  ctx.stage_location, under the table's root): a table of the same columns, partitioning and format.
  Execute measures the staged table and, under the lock, the table as it is; then every partition
  of either is repointed: at its staged directory, or, when the new version has no rows of it, at an
  empty one. Nothing is copied: the staged files become the table's.
-#}

{#- Begin: the table, described and checked, an interrupted commit finished, the commit's names. -#}
{% macro spark_merge__lifecycle_begin_refresh(host, s) -%}
{%- do host.step('begin: describe (full refresh)') -%}
{%- set target = {} -%}
{%- do spark_merge.spark_merge__lifecycle_settled_target(host, s.target, target) -%}
{%- set table = target.table -%}
{%- set ctx = {} -%}
{%- do spark_merge.spark_merge__context({}, table, s.merge_id, ctx) -%}
{%- do s.update({'table': table, 'ctx': ctx, 'paradigm': 'FULL_REFRESH',
                 'statement': s.get('statement') or 'FULL REFRESH ' ~ table.name}) -%}
{%- endmacro %}

{#- The differences between the table and the columns a new version would have (`columns`: [name,
    type] in the order of a CREATE TABLE ... PARTITIONED BY, partition columns last), into out.errors:
    a refresh by repointing keeps the table's definition, so it needs the same columns, types,
    partitioning and format. -#}
{% macro spark_merge__refresh_shape(table, columns, partition_by, provider, out) -%}
{%- set errors = [] -%}
{%- set have = [] -%}{%- for c in table.columns -%}{%- do have.append((c.name | lower) ~ ' ' ~ (c.type | lower)) -%}{%- endfor -%}
{%- set want = [] -%}{%- for name, type in columns -%}{%- do want.append((name | lower) ~ ' ' ~ (type | lower)) -%}{%- endfor -%}
{%- if have != want -%}{%- do errors.append('columns ' ~ have | join(', ') ~ ' -> ' ~ want | join(', ')) -%}{%- endif -%}
{%- if table.partition_columns | map('lower') | list != partition_by | map('lower') | list -%}
  {%- do errors.append('partitioned by (' ~ table.partition_columns | join(', ') ~ ') -> (' ~ partition_by | join(', ') ~ ')') -%}
{%- endif -%}
{%- if table.provider | lower != provider | lower -%}{%- do errors.append('format ' ~ table.provider ~ ' -> ' ~ provider) -%}{%- endif -%}
{%- do out.update({'errors': errors}) -%}
{%- endmacro %}

{#- Execute: measure the staged rows, drop the staging table (its files stay: they are the new
    version), then under the lock measure the table, repoint every partition and commit. -#}
{% macro spark_merge__lifecycle_execute_refresh(host, s) -%}
{%- set table, ctx, m = s.table, s.ctx, s.metrics -%}
{%- do host.step('execute: measure the new version') -%}
{%- set new = [] -%}
{%- do spark_merge.spark_merge__decode_partitions(table, host.file_stats(table, ctx.stage_name,
    spark_merge.spark_merge__file_stats_sql(table, ctx.stage), none), new) -%}
{%- do host.run('DROP TABLE IF EXISTS ' ~ ctx.stage) -%}{%- do ctx.update({'stage_dropped': true}) -%}
{%- do host.failpoint('after_staging') -%}
{%- do host.step('commit: lock, journal, repoint every partition') -%}
{%- do host.lock(table, s.merge_id) -%}{%- do s.update({'locked': true, 'checked_at': host.now()}) -%}
{%- set fresh = {} -%}
{%- do spark_merge.spark_merge__lifecycle_unchanged(host, s, fresh) -%}
{%- do host.run(spark_merge.spark_merge__refresh_sql(table)) -%}
{%- set old = [] -%}
{%- do spark_merge.spark_merge__decode_partitions(table, host.file_stats(table, table.table_name,
    spark_merge.spark_merge__file_stats_sql(table, table.relation), none), old) -%}
{%- set keyed = {} -%}
{%- for r in old + new -%}{%- do keyed.update({spark_merge.spark_merge__partition_key(table.partition_columns, r.partition): r.partition}) -%}{%- endfor -%}
{%- set partitions = [] -%}
{%- for k in keyed | sort -%}{%- do partitions.append(keyed[k]) -%}{%- endfor -%}
{%- if not table.partition_columns and not partitions -%}{%- do partitions.append({}) -%}{%- endif -%}
{%- set planned = {} -%}
{%- do spark_merge.spark_merge__repoints(table, ctx, partitions, old, new, planned) -%}
{%- for location in planned.empty -%}{%- do host.run(spark_merge.spark_merge__empty_partition_sql(table, location)) -%}{%- endfor -%}
{%- do m.update(planned.metrics) -%}
{#- every staged row is inserted (repoints counted them: numOutputRows), every row of the table deleted -#}
{%- set n = namespace(old=0) -%}
{%- for r in old -%}{%- set n.old = n.old + r.rows | int -%}{%- endfor -%}
{%- do m.update({'numSourceRows': m.numOutputRows, 'numTargetRowsInserted': m.numOutputRows, 'numTargetRowsDeleted': n.old,
                 'numTargetRowsCopied': 0}) -%}
{%- do spark_merge.spark_merge__planned_changes(partitions, none, none, s.changes) -%}
{%- do s.update({'repoints': planned.repoints}) -%}
{%- do spark_merge.spark_merge__lifecycle_journal_commit(host, s, fresh) -%}
{%- endmacro %}
