-- Change data capture with deletes: 'D' removes the account, other rows add to its balance.
{{ config(
    materialized='spark_merge',
    unique_key='id',
    duplicate_rule='postgres',
    merge_clauses=[
      {'when': 'matched', 'condition': "DBT_INTERNAL_SOURCE.op = 'D'", 'action': 'delete'},
      {'when': 'matched', 'action': 'update',
       'set': {'balance': 'DBT_INTERNAL_DEST.balance + DBT_INTERNAL_SOURCE.balance', 'name': 'DBT_INTERNAL_SOURCE.name'}},
      {'when': 'not_matched', 'condition': "DBT_INTERNAL_SOURCE.op <> 'D'", 'action': 'insert'},
    ]) }}
select id, name, amount as balance, op
from {{ ref('account_updates') }}
where batch = {{ var('batch', 1) }}
