"""The host contract: every primitive the shared lifecycle macros call on their ``host``.

The lifecycle (dbt_macros/macros/lifecycle, plan, commit) is written once, in Jinja, and run by two
hosts: Python (merge_core/spark/host.py and its begin and rollback subclasses) and dbt (the dict of
macros in materializations/spark_merge_host.sql). This module is where the primitives are declared,
with their signatures and meaning. mypy holds the Python hosts to it (they subclass these protocols);
tests/unit/test_host_contract.py holds the dbt dict to the same names, checks that each Python host
implements every member itself, and that every ``host.<name>(`` call in the macros names one.

Records (``table``, ``ctx``, repoints, partitions) are the plain dicts the macros build; ``s`` is the
run state (common/run_state.py).
"""

from __future__ import annotations

from typing import Protocol

from merge_core.common.run_state import RunState


class LockHandle(Protocol):
    """A host's handle on lock tables (commit/lock.sql: spark_merge__lock_holder, spark_merge__lock_wait):
    the statements are the macros'; the handle runs them and keeps time."""

    wait_s: float  # how long a waiter waits for a live holder

    def lease(self) -> dict:
        """``{'since', 'expires', 'owner'}`` of a lock taken now (the host's lease and name)."""

    def take(self, table: dict, sql: str) -> None:
        """Run ``sql`` (lock_sql: created only if none holds it)."""

    def properties(self, table: dict, listing_sql: str, props_sql: str) -> dict | None:
        """The lock table's properties (``props_sql``), None when ``listing_sql`` finds no lock table."""

    def ages(self, since: str, expires: str) -> dict:
        """``{'lapsed', 'held'}``: seconds since ``expires`` and since ``since`` (None where not a time)."""

    def release(self, table: dict, sql: str) -> None:
        """Run ``sql`` (unlock_sql)."""

    def pause(self) -> None:
        """A short wait between looks."""

    def clock(self) -> float:
        """Seconds, to time the wait."""

    def note(self, text: str) -> None:
        """A warning the user sees."""


class StatementHost(Protocol):
    """What every lifecycle (merge, rollback, recovery) calls: statements, progress, the lock, files."""

    def run(self, sql: str, tolerate: bool = False) -> None:
        """Run a statement. ``tolerate``: a failure is a warning where the host can catch it."""

    def rows(self, sql: str, kind: str = "rows") -> list[dict]:
        """Run a query; its rows as dicts. ``kind`` names what the query asks (the plan's: ``probe``,
        ``source_stats``, ``matched``, ``summary``, ``duplicates``), so that explain's host
        (lifecycle/explain_host.py) can answer it without running it."""

    def analyze(self, sql: str, label: str) -> None:
        """Have Spark analyze a statement without running it; a refusal is a validation error naming ``label``."""

    def step(self, text: str) -> None:
        """Progress for the user."""

    def warn(self, text: str) -> None:
        """A warning for the user."""

    def fail(self, code: str, message: str, rows: list | None = None, fields: dict | None = None) -> None:
        """Stop with the error of ``code`` (macros/core/codes.sql), its structured fields given (a
        validation's errors, a duplicate's rule and example ``rows``). MERGE_VERSION_MOVED: another merge
        committed since begin; Python plans again, dbt fails."""

    def failpoint(self, name: str) -> None:
        """Where the crash tests stop a merge (merge_core/spark/faults.py)."""

    def catalog(self, parts: list[str], json_sql: str, columns_sql: str) -> dict:
        """What the catalog says of the table ``parts`` (spark_merge__lifecycle_describe makes the table
        record of it): ``{'desc'}``, the JSON ``json_sql`` returns, and ``{'types'}``, the [name, type]
        rows of ``columns_sql``; a missing table stops the run."""

    def lock(self, table: dict, merge_id: str) -> None:
        """Take the commit lock (a live holder is waited for)."""

    def unlock(self, table: dict | None = None, merge_id: str = "") -> None:
        """Release the commit lock if this merge holds it (also on abort)."""

    def lock_handle(self) -> LockHandle:
        """The host's handle on lock tables, for the lock's macros (before planning, the lifecycle waits
        through it for a live commit to end and breaks a dead one's lock: spark_merge__lock_wait)."""

    def release_finished(self, table: dict, merge_id: str | None) -> None:
        """Break a lock that guards no work (its holder finished or died)."""

    def exists(self, location: str) -> bool | None:
        """Whether ``location`` exists; None when the host cannot tell (dbt has no file system)."""

    def file_stats(self, table: dict, name: str, sql: str, partitions: list[dict]) -> list[dict]:
        """The rows of ``sql`` (file_stats_sql): dbt runs it; Python lists the files where it can."""

    def target_rows(self, table: dict) -> int | None:
        """The rows of a small unpartitioned target when countable without a Spark job; else None."""

    def key_candidates(self, table: dict, keys: list[dict]) -> dict | None:
        """{'partitions': those with a data file whose key ranges can hold a row with every key of ``keys``
        in range, 'of': the partitions in all, 'files': the files read}, without a Spark job (the files'
        footers); None where it cannot tell."""

    def stage(self, table: dict, ctx: dict, sql: str, select: str, partitions: list[dict]) -> list[dict]:
        """Write the staged rows (``select``) under ctx.stage_location; their file_stats_sql rows."""

    def can_observe(self, table: dict, ctx: dict) -> bool:
        """Whether stage_observed can count what its write job does (observed metrics); dbt cannot."""

    def stage_observed(self, table: dict, ctx: dict, select: str, rewritten: list[str]) -> dict | None:
        """Write the rows of ``select`` whose __sm_write holds under ctx.stage_location, without its
        columns __sm_op, __sm_write and __sm_target, counting in the same job: {'stats': their
        file_stats_sql rows, 'metrics': {'read' (rows with __sm_target), 'inserted', 'updated', 'deleted'
        (by __sm_op), 'copied' (target rows written unchanged)}}. None, with nothing left staged, where
        the target rows read are not exactly the rows the files ``rewritten`` hold."""

    def repoint(self, table: dict, merge_id: str, repoints: list[dict]) -> None:
        """Point partitions (or the table) at their new directories."""

    def history_write(self, location: str, record: dict, sql: str) -> None:
        """Write a history record at ``location`` (``sql``: the statement that writes it)."""

    def can_carry(self, table: dict, old: list[dict]) -> bool:
        """Whether unchanged files can be carried into a new version (the host listed them)."""

    def carry(self, table: dict, repoints: list[dict], rewritten: list[str], fold: dict | None = None) -> list[dict]:
        """Link the replaced directories' files but ``rewritten`` (and the small files of the
        directories ``fold`` names, auto compaction) into the new ones; what it carried.
        Called only when ``can_carry`` said so."""

    def carry_late(self, table: dict, repoints: list[dict]) -> None:
        """After the commit: link files another writer appended to a replaced directory since the
        check under the lock into the directory that replaced it."""

    def journal(self, sql: str) -> None:
        """Write the commit journal: the commit point (Python: not after an abort)."""

    def now(self) -> str:
        """The time, ISO-8601 UTC."""

    def elapsed_ms(self, s: RunState | None = None) -> int:
        """Milliseconds since the run began."""

    def hash(self, text: str) -> str:
        """A hex digest of ``text`` (the plan's fingerprint)."""


class BeginHost(StatementHost, Protocol):
    """A merge's begin (lifecycle/begin.sql): the steps each host takes its own way."""

    def own_target(self, parts: list[str]) -> dict | None:
        """The target named by ``parts`` when it is of the host's own kind (a PostgreSQL table), described;
        None for a catalog table (the lifecycle describes it)."""

    def check_files(self, table: dict, listing_sql: str) -> list[str]:
        """Refuse a table whose files another format manages; the staging tables of merges that died
        that ``listing_sql`` lists, to drop (none where the host cannot tell a dead merge)."""

    def source_types(self, spec: dict, sql: str) -> list[list[str]]:
        """The source's columns and types (``sql``: describe_source_sql); a refusal names the source."""

    def prepare(self, s: RunState, table: dict, source_types: list[list[str]]) -> dict:
        """The request shaped for the table (names qualified, schema evolved): ``{'spec', 'table'}``."""

    def evolve_spec(self, spec: dict, table: dict, source_types: list[list[str]]) -> dict:
        """Schema evolution's part of the spec, in place (the source's columns, a struct given in part
        filled in): ``{'direct', 'errors'}``, the columns assigned directly and what cannot be stored."""

    def part_types(self, sql: str, singles: list[list[str]]) -> dict:
        """The types of the statement's parts (``sql``: all at once), ``{'types', 'errors'}``; where the
        host can catch a refusal, each part of ``singles`` ([label, sql]) asked alone, named in its error."""

    def on_keys(self, s: RunState, spec: dict) -> list[dict]:
        """ON's equalities: ``[{'target', 'source', 'null_safe'}]``."""

    def target_begin(self, table: dict) -> str:
        """Choose the row-change paradigm for the target; its name."""


class RollbackHost(StatementHost, Protocol):
    """A rollback (lifecycle/rollback.sql): the history and the files it restores."""

    def check_files(self, table: dict, listing_sql: str) -> list[str]:
        """Refuse a table whose files another format manages; the staging tables to drop."""

    def history(self, table: dict) -> list[dict]:
        """The table's history entries, checked; refused while one is unreadable."""

    def partition_location(self, table: dict, partition: dict | None) -> str | None:
        """Where the catalog points a partition (the table, unpartitioned); None if it has none."""

    def require(self, location: str, message: str) -> None:
        """Stop with ``message`` when ``location`` is known to be gone."""

    def written_after(self, table: dict, location: str, since: str, during: list[list[str]]) -> list[str]:
        """The data files in ``location`` written after ``since`` but not during one of ``during``."""


def primitives(*protocols: type) -> set[str]:
    """The names a host of these protocols provides (their own members and their bases')."""
    return {
        name
        for p in protocols
        for c in p.__mro__
        if c.__module__ == __name__
        for name in vars(c)
        if not name.startswith("_")
    }
