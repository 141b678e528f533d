"""What a merge returns, and how merges are named: shared by every write mode."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any


@dataclass
class MergeResult:
    merge_id: str
    target: str
    paradigm: str
    plan_hash: str
    metrics: dict[str, Any]
    partitions: list[dict] = field(default_factory=list)
    noop: bool = False  # the statement changed nothing: the table kept its version

    def summary(self) -> str:
        m = self.metrics
        if self.noop:
            return (
                f"merge {self.merge_id} into {self.target} ({self.paradigm}): no changes, nothing written "
                f"(source rows {m['numSourceRows']}); {m['executionTimeMs'] / 1000:.1f} s"
            )
        return (
            f"merge {self.merge_id} into {self.target} ({self.paradigm}): "
            f"source rows {m['numSourceRows']}, inserted {m['numTargetRowsInserted']}, "
            f"updated {m['numTargetRowsUpdated']}, deleted {m['numTargetRowsDeleted']}, "
            f"copied {m['numTargetRowsCopied']}; partitions rewritten {m['numTargetPartitionsRewritten']}, "
            f"files +{m['numTargetFilesAdded']}/-{m['numTargetFilesRemoved']}, "
            f"bytes +{m['numTargetBytesAdded']}/-{m['numTargetBytesRemoved']}; "
            f"{m['executionTimeMs'] / 1000:.1f} s"
        )


def new_merge_id() -> str:
    """Sortable by time, unique, and a valid SQL identifier fragment."""
    return f"{datetime.now(timezone.utc):%Y%m%d%H%M%S}_{uuid.uuid4().hex[:8]}"
