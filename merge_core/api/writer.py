"""PySpark 4's MERGE builder, for parquet/ORC tables: ``merge_into(df, table, condition)``.

The same method names and argument types as ``DataFrame.mergeInto`` (which raises on tables that are
not row-level, such as plain parquet): ``whenMatched([cond]).update({...}) | .updateAll() | .delete()``,
``whenNotMatched([cond]).insert({...}) | .insertAll()``,
``whenNotMatchedBySource([cond]).update({...}) | .delete()``, then ``.merge()``, which runs spark-merge and
returns its ``MergeResult``. Conditions and values are SQL text or Columns (Columns need a classic
session: Spark Connect sends expressions the client cannot turn back into SQL). The DataFrame is the
source, read through a temporary view of this merge named by ``source_alias`` (default ``source``); the
target is named by its table name (or ``target_alias``), as in Spark's own builder.

Delta Lake's Python API maps onto it directly: ``DeltaTable.forName(spark, t).alias("t").merge(df.alias("s"),
cond)`` is ``merge_into(df, t, cond, source_alias="s", target_alias="t")``; ``whenMatchedUpdate(set=...)``
is ``whenMatched().update(...)``, ``whenMatchedUpdateAll()`` is ``whenMatched().updateAll()``,
``whenMatchedDelete()`` is ``whenMatched().delete()``, ``whenNotMatchedInsert(values=...)`` is
``whenNotMatched().insert(...)``, ``whenNotMatchedInsertAll()`` is ``whenNotMatched().insertAll()``,
``whenNotMatchedBySourceUpdate(set=...)`` is ``whenNotMatchedBySource().update(...)``,
``whenNotMatchedBySourceDelete()`` is ``whenNotMatchedBySource().delete()``,
and ``execute()`` is ``merge()``.
"""

from __future__ import annotations

import uuid
from typing import Any

from merge_core.common.errors import SpecError
from merge_core.common.result import MergeResult


def sql_text(value: Any, what: str, spark: Any = None) -> str:
    """SQL text of a condition or value: a string as it is; a classic Column as Spark's own converter
    prints its expression (operators as functions, `` `=`(t.id, s.id) ``, which Spark's SQL reads back)."""
    if isinstance(value, str):
        return value
    jc = getattr(value, "_jc", None)
    if jc is not None and spark is not None:
        return spark._jsparkSession.expression(jc).sql()
    raise SpecError(
        f"{what}: give SQL text (a Column works only in a classic session, not over Spark Connect), "
        f"got {type(value).__name__}"
    )


class MergeIntoWriter:
    def __init__(
        self, source: Any, table: str, condition: Any, source_alias: str = "source", target_alias: str | None = None
    ):
        self._source, self._table = source, table
        self._spark = getattr(source, "sparkSession", None)
        self._on = sql_text(condition, "merge condition", self._spark)
        self._source_alias = source_alias
        self._target_alias = target_alias or table.split(".")[-1].strip("`")
        self._clauses: list[dict] = []
        self._schema_evolution = False

    def whenMatched(self, condition: Any = None) -> WhenMatched:
        return WhenMatched(self, condition)

    def whenNotMatched(self, condition: Any = None) -> WhenNotMatched:
        return WhenNotMatched(self, condition)

    def whenNotMatchedBySource(self, condition: Any = None) -> WhenNotMatchedBySource:
        return WhenNotMatchedBySource(self, condition)

    def withSchemaEvolution(self) -> MergeIntoWriter:
        """The source's columns the table lacks that the merge assigns directly (updateAll(), insertAll(),
        update({"c": "source.c"})) are added (option schema_evolution; see the README)."""
        self._schema_evolution = True
        return self

    def _add(self, when: str, condition: Any, action: str, **fields: Any) -> MergeIntoWriter:
        clause = {"when": when, "action": action, **fields}
        if condition is not None:
            clause["condition"] = sql_text(condition, f"WHEN {when.replace('_', ' ').upper()} condition", self._spark)
        self._clauses.append(clause)
        return self

    def spec(self, view: str) -> dict:
        """The merge as a spec dict (what the Airflow operator passes), reading the source from ``view``."""
        return {
            "target": self._table,
            "source": view,
            "source_kind": "table",
            "on": self._on,
            "target_alias": self._target_alias,
            "source_alias": self._source_alias,
            "clauses": list(self._clauses),
            "schema_evolution": self._schema_evolution,
        }

    def merge(self, **options: Any) -> MergeResult:
        """Run the merge (options as ``merge_core.merge``: duplicate_rule, dry_run, ...)."""
        from merge_core.api.functions import merge

        if not self._clauses:
            raise SpecError("add at least one whenMatched or whenNotMatched clause before merge()")
        view = f"__sm_df_{uuid.uuid4().hex[:12]}"
        spark = self._spark
        if spark is None:
            raise SpecError("the source of merge_into must be a DataFrame (it has no SparkSession)")
        self._source.createOrReplaceTempView(view)
        try:
            return merge(spark, self.spec(view), **options)
        finally:
            spark.catalog.dropTempView(view)


class WhenMatched:
    def __init__(self, writer: MergeIntoWriter, condition: Any):
        self._w, self._cond = writer, condition

    def update(self, assignments: dict[str, Any]) -> MergeIntoWriter:
        return self._w._add(
            "matched",
            self._cond,
            "update",
            assignments=[(k, sql_text(v, f"value for {k}", self._w._spark)) for k, v in assignments.items()],
        )

    def updateAll(self) -> MergeIntoWriter:
        return self._w._add("matched", self._cond, "update", star=True)

    def delete(self) -> MergeIntoWriter:
        return self._w._add("matched", self._cond, "delete")


class WhenNotMatched:
    def __init__(self, writer: MergeIntoWriter, condition: Any):
        self._w, self._cond = writer, condition

    def insert(self, assignments: dict[str, Any]) -> MergeIntoWriter:
        return self._w._add(
            "not_matched",
            self._cond,
            "insert",
            insert_columns=list(assignments),
            insert_values=[sql_text(v, f"value for {k}", self._w._spark) for k, v in assignments.items()],
        )

    def insertAll(self) -> MergeIntoWriter:
        return self._w._add("not_matched", self._cond, "insert", star=True)


class WhenNotMatchedBySource:
    def __init__(self, writer: MergeIntoWriter, condition: Any):
        self._w, self._cond = writer, condition

    def update(self, assignments: dict[str, Any]) -> MergeIntoWriter:
        return self._w._add(
            "not_matched_by_source",
            self._cond,
            "update",
            assignments=[(k, sql_text(v, f"value for {k}", self._w._spark)) for k, v in assignments.items()],
        )

    def delete(self) -> MergeIntoWriter:
        return self._w._add("not_matched_by_source", self._cond, "delete")


def merge_into(
    source: Any, table: str, condition: Any, source_alias: str = "source", target_alias: str | None = None
) -> MergeIntoWriter:
    """``df.mergeInto(table, condition)`` for parquet/ORC tables: see the module's docstring."""
    return MergeIntoWriter(source, table, condition, source_alias, target_alias)
