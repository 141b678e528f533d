"""spark-merge: standard SQL MERGE, UPDATE and DELETE on plain parquet/ORC Spark tables.

    from merge_core import get_session, merge
    result = merge(get_session(), "MERGE INTO sales.accounts t USING updates s ON t.id = s.id "
                                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    print(result.summary())

The package by role: ``api`` (these functions, the CLI, the DataFrame builder), ``request`` (what the
user asked: the spec, its parser, the options), ``lifecycle`` (one run of a commit and its write
modes), ``spark`` (the Spark host: the lifecycle's primitives, the lock, the metastore, the files),
``targets`` (row-change paradigms, PostgreSQL), ``maintenance`` (history, vacuum, rollback, the
canonical layout, adopt), ``common`` (errors, results, the macros' renderer).

The names below (listed in ``__init__.pyi``) load on first use: ``import merge_core`` costs no
PySpark, pyarrow or sqlglot import, so a command line that only talks to a warm server, or an
Airflow DAG file that is parsed and not run, starts in a fraction of a second.
"""

from __future__ import annotations

import logging

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

logging.getLogger("spark_merge").addHandler(logging.NullHandler())
