{#-
  The commit lock: a marker table next to the target, created atomically by the
  metastore (of two CREATE TABLE statements for one name, exactly one succeeds).
  A taker creates it IF NOT EXISTS and then reads whose merge id it holds: so losing
  the race to another taker (another application: the metastore refuses the create
  after Spark's own look found no table) is no error to catch, which dbt could not.
  Held only for the commit (check, journal, repoint), so seconds. The holder
  writes when its lease expires and renews it while it lives (renew_lock_sql);
  a lock whose lease lapsed belongs to a dead process and is broken by the next
  one that needs it (merge_core/spark/lock.py).
-#}

{#- The lock's timing, in seconds, for both hosts: a committer waits up to wait_s for a live
    holder's commit; a Python holder's lease is lease_s, renewed every lease_s / 3 from a thread; a
    dbt holder, which cannot renew, takes dbt_lease_s; a lapsed lease counts as dead grace_s later
    (clock skew between hosts); a lock without a lease (written before leases) is dead after stale_s. -#}
{% macro spark_merge__lock_settings(out) -%}
{%- do out.update({'wait_s': 120, 'lease_s': 30, 'dbt_lease_s': 120, 'grace_s': 5, 'stale_s': 900}) -%}
{%- endmacro %}

{#- Whether a holder is dead ('True' or empty): `lapsed_s` seconds since its lease expired (none
    when it wrote no lease), `held_s` seconds since it took the lock (none when unknown). -#}
{% macro spark_merge__lock_dead(lapsed_s, held_s) -%}
{%- set k = {} -%}
{%- do spark_merge.spark_merge__lock_settings(k) -%}
{%- if lapsed_s is not none -%}{{ 'True' if lapsed_s > k.grace_s else '' }}
{%- else -%}{{ 'True' if held_s is none or held_s > k.stale_s else '' }}
{%- endif -%}
{%- endmacro %}

{% macro spark_merge__lock_relation(table) -%}
{{ spark_merge.spark_merge__quote(table.database) }}.{{ spark_merge.spark_merge__quote('__sm_lock_' ~ table.table_name) }}
{%- endmacro %}

{% macro spark_merge__lock_sql(table, merge_id, since, expires, owner='') -%}
CREATE TABLE IF NOT EXISTS {{ spark_merge.spark_merge__lock_relation(table) }} (merge_id STRING) USING parquet
LOCATION {{ spark_merge.spark_merge__literal(table.root.rstrip('/') ~ '/_spark_merge/locks/' ~ merge_id) }}
TBLPROPERTIES ('spark_merge.lock.merge_id' = {{ spark_merge.spark_merge__literal(merge_id) }}, 'spark_merge.lock.since' = {{
    spark_merge.spark_merge__literal(since) }}, 'spark_merge.lock.expires' = {{ spark_merge.spark_merge__literal(expires)
        }}, 'spark_merge.lock.owner' = {{ spark_merge.spark_merge__literal(owner) }}, 'spark_merge.lock.table_id' = {{
            spark_merge.spark_merge__literal(table.table_id or '') }})
{%- endmacro %}

{#- The lock's holder from the lock table's properties `props`, checked (both hosts read it so):
    out.merge_id, since, expires, owner, and out.error when the properties are not a lock
    spark-merge wrote for this table (edited, or another table's), naming the repair. -#}
{% macro spark_merge__lock_record(table, props, out) -%}
{%- set r = {'merge_id': props.get('spark_merge.lock.merge_id'), 'since': props.get('spark_merge.lock.since') or '',
             'expires': props.get('spark_merge.lock.expires') or '', 'owner': props.get('spark_merge.lock.owner') or '',
             'table_id': props.get('spark_merge.lock.table_id') or ''} -%}
{%- set problems = [] -%}
{%- if not spark_merge.spark_merge__is_id(r.merge_id) -%}{%- do problems.append('spark_merge.lock.merge_id is ' ~ r.merge_id | tojson) -%}{%- endif -%}
{%- for k in ['since', 'expires'] if r[k] and not spark_merge.spark_merge__is_time(r[k]) -%}
  {%- do problems.append('spark_merge.lock.' ~ k ~ ' is ' ~ r[k] | tojson ~ ', not a time') -%}
{%- endfor -%}
{%- if r.table_id and table.table_id and r.table_id != table.table_id -%}
  {%- do problems.append('it is the lock of another table (table_id ' ~ r.table_id ~ ')') -%}
{%- endif -%}
{%- do out.update(r) -%}
{%- if problems -%}
  {%- do out.update({'error': 'the commit lock of ' ~ table.name ~ ' (' ~ spark_merge.spark_merge__lock_relation(table) ~
      ') is not one spark-merge wrote for it: ' ~ problems | join('; ') ~ '. `spark-merge recover ' ~ table.name ~ ' --break-lock` removes it'}) -%}
{%- endif -%}
{%- endmacro %}

{#- An ISO-8601 time as spark-merge writes it (2026-11-26T12:00:00.000+00:00): its shape only. -#}
{% macro spark_merge__is_time(text) -%}
{%- if text is string and text | length >= 19 and text[4] == '-' and text[7] == '-' and text[10] in 'T ' and text[13] == ':' and text[16] == ':'
      and (text[:4] ~ text[5:7] ~ text[8:10] ~ text[11:13] ~ text[14:16] ~ text[17:19]).isdigit() -%}True{%- endif -%}
{%- endmacro %}

{% macro spark_merge__renew_lock_sql(table, expires) -%}
ALTER TABLE {{ spark_merge.spark_merge__lock_relation(table) }} SET TBLPROPERTIES ('spark_merge.lock.expires' = {{ spark_merge.spark_merge__literal(expires) }})
{%- endmacro %}

{% macro spark_merge__unlock_sql(table) -%}
DROP TABLE IF EXISTS {{ spark_merge.spark_merge__lock_relation(table) }}
{%- endmacro %}

{#- The lock's holder as `lock` (a host's handle, below) finds it, into `out`: nothing when the lock is
    free; else merge_id, since, expires, owner, and dead (lock_dead, from the ages the handle
    measures); or error, when the lock table's properties are not a lock spark-merge wrote for this
    table (lock_record). -#}
{% macro spark_merge__lock_holder(lock, table, out) -%}
{%- set props = lock.properties(table, spark_merge.spark_merge__show_tables_sql(table.database, '__sm_lock_' ~ table.table_name),
    spark_merge.spark_merge__show_properties_sql(spark_merge.spark_merge__lock_relation(table))) -%}
{%- if props is not none -%}
  {%- set record = {} -%}
  {%- do spark_merge.spark_merge__lock_record(table, props, record) -%}
  {%- if record.get('error') -%}
    {%- do out.update({'error': record.error}) -%}
  {%- else -%}
    {%- set age = lock.ages(record.since, record.expires) -%}
    {%- do out.update({'merge_id': record.merge_id, 'since': record.since, 'expires': record.expires, 'owner': record.owner,
                       'dead': spark_merge.spark_merge__lock_dead(age.lapsed, age.held) | trim == 'True'}) -%}
  {%- endif -%}
{%- endif -%}
{%- endmacro %}

{#- The commit lock's wait, the one loop both hosts run (lock.py's table_lock and holder; the
    lifecycle's settle; the dbt host's lock). `lock` is the host's handle on lock tables (declared in
    merge_core/common/host_contract.py, LockHandle), each of whose primitives runs what it is given:
    lease() ({since, expires, owner} of a lock taken now), take(table, sql) (lock_sql: created only if
    none holds it), properties(table, listing_sql, props_sql) (the lock table's properties, none when
    there is none), ages(since, expires) (seconds since each), release(table, sql) (unlock_sql),
    pause() (a short wait), clock() (seconds, to time the wait), note(text) (a warning the user sees).
    `merge_id` none: wait until the lock is free, without taking it. Otherwise take it for that
    merge: the create is followed by a look, so a taker whose create lost the race to another
    (another application: the metastore took the other create) sees that one as the holder, and
    waits for it. A holder whose lease lapsed (its process is gone), or `finished` (the merge whose
    commit is complete: its lock guards no work), is broken at once.
    out.error: why the wait gave up (a live holder still in the way after `wait_s` seconds; with
    out.code 'metadata', a lock table that is not spark-merge's). -#}
{% macro spark_merge__lock_wait(lock, table, merge_id, finished, wait_s, out) -%}
{%- set state = {'done': false, 'start': lock.clock()} -%}
{%- for round in range(100000) -%}
  {%- if merge_id -%}
    {%- set lease = lock.lease() -%}
    {%- do lock.take(table, spark_merge.spark_merge__lock_sql(table, merge_id, lease.since, lease.expires, lease.owner)) -%}
  {%- endif -%}
  {%- set found = {} -%}
  {%- do spark_merge.spark_merge__lock_holder(lock, table, found) -%}
  {%- set holder = found if found else none -%}
  {%- if found.get('error') -%}
    {%- do out.update({'error': found.error, 'code': 'metadata'}) -%}
    {%- do state.update({'done': true}) -%}
  {%- elif holder is none or holder.merge_id == merge_id -%}
    {#- free, or held by this merge; a taker whose lock was released between its create and its look takes it again -#}
    {%- do state.update({'done': holder is not none or not merge_id}) -%}
  {%- elif holder.dead or holder.merge_id == finished -%}
    {%- do lock.note('breaking the commit lock on ' ~ table.name ~ ' of merge ' ~ holder.merge_id ~ ': ' ~
        ('its lease lapsed, the holder is gone' if holder.dead else 'its commit is complete')) -%}
    {%- do lock.release(table, spark_merge.spark_merge__unlock_sql(table)) -%}
    {%- do state.update({'done': not merge_id}) -%}
  {%- elif lock.clock() - state.start > wait_s -%}
    {%- do out.update({'error': spark_merge.spark_merge__lock_conflict(table, holder, lock.clock() - state.start) | trim}) -%}
    {%- do state.update({'done': true}) -%}
  {%- else -%}
    {%- do lock.pause() -%}
  {%- endif -%}
  {%- if state.done -%}{%- break -%}{%- endif -%}
{%- endfor -%}
{%- if not state.done -%}
  {%- do out.update({'error': 'the commit lock on ' ~ table.name ~ ' changed hands 100000 times while this merge waited; nothing was written, '
      ~ 'run it again'}) -%}
{%- endif -%}
{%- endmacro %}

{#- Why a wait for the commit lock gave up: `holder` is alive and still committing after
    `waited_s` seconds. -#}
{% macro spark_merge__lock_conflict(table, holder, waited_s) -%}
{%- set k = {} -%}
{%- do spark_merge.spark_merge__lock_settings(k) -%}
{{ table.name }} is being committed by merge {{ holder.merge_id }}{{ ' on ' ~ holder.owner if holder.owner }} (since {{ holder.since
}}{{ ', lease until ' ~ holder.expires if holder.expires }}), which is alive (it renews its lease); gave up after {{ waited_s | round | int
}} s; nothing was written. Run again once it finishes; if that process is stuck, stop it: its lock is broken {{ k.grace_s }} s after its lease lapses
{%- endmacro %}
