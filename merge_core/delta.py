"""Delta Lake's Python API on parquet and ORC tables: ``from merge_core.delta import DeltaTable`` in
place of ``from delta.tables import DeltaTable`` (merge_core/api/delta_tables.py)."""

from merge_core.api.delta_tables import DeltaMergeBuilder, DeltaTable

__all__ = ["DeltaMergeBuilder", "DeltaTable"]
