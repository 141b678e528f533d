"""A table's versions over time: its history, vacuum, rollback, the canonical layout, and adopt."""
