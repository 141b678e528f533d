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
