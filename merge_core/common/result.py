"""What a merge returns, and how merges are named: shared by every write mode."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
    dry_run: bool = False  # planned only: the metrics say what a run would change
    version: int | None = None  # the table's version after the run (its version before, when noop or dry_run)
    # an earlier run with the same run key had committed: this is its result, nothing was merged now
    replayed: bool = False

    def summary(self) -> str:
        m = self.metrics
        if self.dry_run:
            return (
                f"dry run of merge {self.merge_id} into {self.target} ({self.paradigm}): would insert "
                f"{m['numTargetRowsInserted']}, update {m['numTargetRowsUpdated']}, delete {m['numTargetRowsDeleted']} "
                f"(source rows {m['numSourceRows']}), rewriting {m['numTargetPartitionsRewritten']} partition(s); "
                f"nothing written; {m['executionTimeMs'] / 1000:.1f} s"
            )
        if self.replayed:
            return (
                f"merge {self.merge_id} into {self.target} had already committed (version {self.version}) under "
                f"this run key: nothing merged again; inserted {m['numTargetRowsInserted']}, updated "
                f"{m['numTargetRowsUpdated']}, deleted {m['numTargetRowsDeleted']}"
            )
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
            f"bytes +{m['numTargetBytesAdded']}/-{m['numTargetBytesRemoved']}"
            + (f" ({m['numTargetFilesCompacted']} small file(s) compacted)" if m.get("numTargetFilesCompacted") else "")
            + f"; {m['executionTimeMs'] / 1000:.1f} s"
        )


def new_merge_id(run_key: str | None = None) -> str:
    """Unique, a valid SQL identifier fragment (spark_merge__new_merge_id, as dbt builds it), and
    sortable by the second it began in; ids of one second sort by their random part, so the
    history's finished_at, not the id, orders merges. With a run key, the random part starts with
    the key's tag (run_key_tag), so a later run with that key finds this merge's history entry by
    listing names, reading no others."""
    from merge_core.common import macros

    entropy = uuid.uuid4().hex
    if run_key:
        entropy = run_key_tag(run_key) + entropy[4:]
    return macros.new_merge_id(datetime.now(UTC).isoformat(), entropy)


def run_key_tag(run_key: str) -> str:
    """The 4 hex digits a run key puts at the start of its merges' random part."""
    return hashlib.sha256(run_key.encode("utf-8")).hexdigest()[:4]


def parse_message(message: str) -> dict[str, Any]:
    """dbt's one-line summary of a model's merge (adapter_response._message, built by the macro
    spark_merge__message) back into its merge id and metrics: how an Airflow task reading
    run_results.json gets the same metrics a Python merge returns."""
    from merge_core.common import macros

    found = re.match(r"MERGE (\S+): (.*)", message or "")
    if not found:
        return {}
    parts = dict(p.rsplit(" ", 1) for p in found.group(2).split(", ") if re.fullmatch(r"[a-z ]+ \d+", p))
    labels = macros.codes()["message"]
    return {"merge_id": found.group(1), "metrics": {key: int(parts[label]) for label, key in labels if label in parts}}
