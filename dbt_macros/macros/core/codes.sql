{#-
  The codes both hosts use, declared once (and the labels of dbt's one-line summary, and the words
  naming a WHEN clause's kind in a dict spec or dbt's merge_clauses). The plan's SQL marks each changed row with an
  operation code (__sm_op: Trino's INSERT=1, DELETE=2, UPDATE=3, none=-1); every error a
  merge raises on purpose starts with its error code. The lifecycle and the plan read them
  here (spark_merge__op, spark_merge__error_code); merge_core/common/errors.py gives its exception
  classes these codes, and tests/unit/test_options.py checks no other code is spelled anywhere.
-#}
{% macro spark_merge__codes(out) -%}
{%- do out.update({
  'op': {'insert': 1, 'delete': 2, 'update': 3, 'none': -1},
  'when': ['matched', 'not_matched', 'not_matched_by_source'],
  'error': {
    'error': 'MERGE_ERROR',
    'invalid_spec': 'MERGE_INVALID_SPEC',
    'parse': 'MERGE_PARSE_ERROR',
    'unsupported': 'MERGE_UNSUPPORTED',
    'validation': 'MERGE_VALIDATION_ERROR',
    'target': 'MERGE_TARGET_ERROR',
    'duplicate': 'MERGE_TARGET_ROW_MULTIPLE_MATCHES',
    'not_null': 'MERGE_NOT_NULL_VIOLATION',
    'length': 'MERGE_EXCEED_LIMIT_LENGTH',
    'engine_rejected': 'MERGE_ENGINE_REJECTED',
    'plan_violation': 'MERGE_PLAN_VIOLATION',
    'corrupt_journal': 'MERGE_CORRUPT_JOURNAL',
    'metadata': 'MERGE_METADATA_ERROR',
    'late_append': 'MERGE_LATE_APPEND',
    'target_refused': 'MERGE_TARGET_REFUSED',
    'conflict': 'MERGE_CONFLICT',
    'retry': 'MERGE_RETRY',
    'version_moved': 'MERGE_VERSION_MOVED',
  },
  'message': [['inserted', 'numTargetRowsInserted'], ['updated', 'numTargetRowsUpdated'], ['deleted', 'numTargetRowsDeleted'],
              ['copied', 'numTargetRowsCopied'], ['partitions rewritten', 'numTargetPartitionsRewritten'],
              ['files added', 'numTargetFilesAdded'], ['files removed', 'numTargetFilesRemoved']],
}) -%}
{%- endmacro %}

{#- The one-line summary of a commit dbt shows (adapter_response._message): 'MERGE <id>: inserted 1,
    updated 2, ...' with the labels above, which merge_core.common.result.parse_message reads back. -#}
{% macro spark_merge__message(merge_id, m) -%}
{%- set c = {} -%}{%- do spark_merge.spark_merge__codes(c) -%}
{%- set parts = [] -%}{%- for label, key in c.message -%}{%- do parts.append(label ~ ' ' ~ m[key]) -%}{%- endfor -%}
MERGE {{ merge_id }}: {{ parts | join(', ') }}
{%- endmacro %}

{#- The operation codes of the names given, comma-separated: `__sm_op IN ({{ op('delete', 'update') }})`. -#}
{% macro spark_merge__op() -%}
{%- set c = {} -%}{%- do spark_merge.spark_merge__codes(c) -%}
{%- set out = [] -%}{%- for name in varargs -%}{%- do out.append(c.op[name]) -%}{%- endfor -%}
{{- out | join(', ') -}}
{%- endmacro %}

{% macro spark_merge__error_code(name) -%}
{%- set c = {} -%}{%- do spark_merge.spark_merge__codes(c) -%}{{- c.error[name] -}}
{%- endmacro %}
