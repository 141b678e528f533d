-- A merge engine (aggregation, as in Apache Paimon): one row per account, each batch's rows folded
-- into it by per-column functions. Aggregates add up, so each batch must be merged once (unlike the
-- watermark models, a re-run of a batch counts it twice): pass `batches` to load several at once.
{{ config(materialized='spark_merge', unique_key='id', merge_engine='aggregation',
          aggregate_function={'total': 'sum', 'events': 'count', 'largest': 'max', 'regions': 'collect'},
          distinct=['regions']) }}
select id, amount as total, 1 as events, amount as largest, array(region) as regions, name
from {{ ref('account_updates') }}
where batch in ({{ var('batches', [var('batch', 1)]) | join(', ') }})
