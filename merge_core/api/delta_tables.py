"""Delta Lake's Python API (``delta.tables.DeltaTable``) for parquet and ORC tables, over spark-merge.

Snippets written for Delta run on a plain table with only the import changed::

    from merge_core.delta import DeltaTable          # instead of: from delta.tables import DeltaTable

    (DeltaTable.forName(spark, "sales.accounts").alias("t")
        .merge(updates.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"amount": "t.amount + s.amount"})
        .whenNotMatchedInsertAll()
        .execute())

A thin facade over the ``DataFrame.mergeInto``-style builder (writer.py): each ``whenX`` call adds
the clause Delta's would, ``execute()`` runs the merge and returns spark-merge's ``MergeResult``
(Delta returns a one-row DataFrame of counts; ``MergeResult.metrics`` holds them and more).
``update`` and ``delete`` are spark-merge's UPDATE and DELETE. Conditions and values are SQL text
or Columns (Columns need a classic session, as in the builder). A path (``forPath``) is not a
catalog table, so it is refused.
"""

from __future__ import annotations

from typing import Any

from merge_core.api.writer import MergeIntoWriter, sql_text
from merge_core.common.errors import SpecError
from merge_core.common.result import MergeResult


def source_alias(df: Any) -> str | None:
    """The alias ``df.alias(name)`` gave a DataFrame (classic or Spark Connect), or None."""
    plan = getattr(df, "_plan", None)  # Spark Connect: the client's plan
    if plan is not None and type(plan).__name__ == "SubqueryAlias":
        return plan._alias
    jdf = getattr(df, "_jdf", None)  # classic: the analyzed plan's root
    if jdf is not None:
        root = jdf.queryExecution().analyzed()
        if root.getClass().getSimpleName() == "SubqueryAlias":
            return root.alias()
    return None


class DeltaTable:
    """A catalog table, as Delta's ``DeltaTable`` (``forName``; ``alias``, ``merge``, ``update``,
    ``delete``, ``toDF``, ``history``)."""

    def __init__(self, spark: Any, name: str, alias: str | None = None):
        self._spark, self._name, self._alias = spark, name, alias

    @classmethod
    def forName(cls, sparkSession: Any, tableOrViewName: str) -> DeltaTable:  # noqa: N802, N803 (Delta's names)
        return cls(sparkSession, tableOrViewName)

    @classmethod
    def forPath(cls, sparkSession: Any, path: str, hadoopConf: Any = None) -> DeltaTable:  # noqa: N802, N803
        raise SpecError(
            f"DeltaTable.forPath({path!r}): spark-merge merges catalog tables (their history, journal and lock "
            f"live in the catalog); use DeltaTable.forName(spark, 'database.table')"
        )

    def alias(self, aliasName: str) -> DeltaTable:  # noqa: N803
        return DeltaTable(self._spark, self._name, aliasName)

    def toDF(self) -> Any:  # noqa: N802
        df = self._spark.table(self._name)
        return df.alias(self._alias) if self._alias else df

    def merge(self, source: Any, condition: Any) -> DeltaMergeBuilder:
        return DeltaMergeBuilder(self, source, condition)

    def update(self, condition: Any = None, set: dict[str, Any] | None = None) -> MergeResult:  # noqa: A002
        """UPDATE the rows where ``condition`` holds (every row without one), ``set``: {column: value}."""
        if not set:
            raise SpecError("DeltaTable.update needs set={column: value}")
        clause = {"when": "matched", "action": "update", "set": self._values(set)}
        return self._statement("update", condition, clause)

    def delete(self, condition: Any = None) -> MergeResult:
        """DELETE the rows where ``condition`` holds (every row without one)."""
        return self._statement("delete", condition, {"when": "matched", "action": "delete"})

    def history(self, limit: int | None = None) -> Any:
        """The table's history as a DataFrame, newest first: one row per commit (Delta's column names
        where they mean the same: version, timestamp, operation, operationMetrics; and merge_id)."""
        from merge_core.api.functions import history

        rows = [
            (
                e.get("version_after"),
                e.get("finished_at"),
                str(e.get("kind", "")).upper(),
                e.get("statement"),
                {k: str(v) for k, v in (e.get("metrics") or {}).items()},
                e["merge_id"],
            )
            for e in history(self._spark, self._name, limit or 1000)
        ]
        schema = (
            "version BIGINT, timestamp STRING, operation STRING, statement STRING, "
            "operationMetrics MAP<STRING, STRING>, merge_id STRING"
        )
        return self._spark.createDataFrame(rows, schema)

    def _values(self, assignments: dict[str, Any]) -> dict[str, str]:
        return {k: sql_text(v, f"value for {k}", self._spark) for k, v in assignments.items()}

    def _statement(self, kind: str, condition: Any, clause: dict) -> MergeResult:
        from merge_core.api.functions import merge

        on = "true" if condition is None else sql_text(condition, f"{kind} condition", self._spark)
        alias = self._alias or self._name.split(".")[-1].strip("`")
        spec = {"target": self._name, "target_alias": alias, "on": on, "kind": kind, "clauses": [clause]}
        return merge(self._spark, spec)


class DeltaMergeBuilder:
    """Delta's ``DeltaMergeBuilder``: the clauses in the order they are added, then ``execute()``."""

    def __init__(self, table: DeltaTable, source: Any, condition: Any):
        alias = source_alias(source) or "source"
        target_alias = table._alias or table._name.split(".")[-1].strip("`")
        self._writer = MergeIntoWriter(source, table._name, condition, source_alias=alias, target_alias=target_alias)

    def whenMatchedUpdate(self, condition: Any = None, set: dict[str, Any] | None = None) -> DeltaMergeBuilder:  # noqa: N802, A002
        if not set:
            raise SpecError("whenMatchedUpdate needs set={column: value}; whenMatchedUpdateAll() updates every column")
        self._writer.whenMatched(condition).update(set)
        return self

    def whenMatchedUpdateAll(self, condition: Any = None) -> DeltaMergeBuilder:  # noqa: N802
        self._writer.whenMatched(condition).updateAll()
        return self

    def whenMatchedDelete(self, condition: Any = None) -> DeltaMergeBuilder:  # noqa: N802
        self._writer.whenMatched(condition).delete()
        return self

    def whenNotMatchedInsert(self, condition: Any = None, values: dict[str, Any] | None = None) -> DeltaMergeBuilder:  # noqa: N802
        if not values:
            raise SpecError("whenNotMatchedInsert needs values={column: value}; whenNotMatchedInsertAll() inserts all")
        self._writer.whenNotMatched(condition).insert(values)
        return self

    def whenNotMatchedInsertAll(self, condition: Any = None) -> DeltaMergeBuilder:  # noqa: N802
        self._writer.whenNotMatched(condition).insertAll()
        return self

    def whenNotMatchedBySourceUpdate(  # noqa: N802
        self,
        condition: Any = None,
        set: dict[str, Any] | None = None,  # noqa: A002
    ) -> DeltaMergeBuilder:
        if not set:
            raise SpecError("whenNotMatchedBySourceUpdate needs set={column: value}")
        self._writer.whenNotMatchedBySource(condition).update(set)
        return self

    def whenNotMatchedBySourceDelete(self, condition: Any = None) -> DeltaMergeBuilder:  # noqa: N802
        self._writer.whenNotMatchedBySource(condition).delete()
        return self

    def withSchemaEvolution(self) -> DeltaMergeBuilder:  # noqa: N802
        self._writer.withSchemaEvolution()
        return self

    def execute(self, **options: Any) -> MergeResult:
        """Run the merge (options as ``merge_core.merge``'s: duplicate_rule, dry_run, ...)."""
        return self._writer.merge(**options)
