"""The Python host of the lifecycle macros (dbt_macros/macros/lifecycle/phases.sql).

The statement sequence of a merge is written once, in Jinja; dbt runs it with its own
macros as the host primitives, and this class binds the same primitives to a
SparkSession: statements, progress logs, errors, the waiting commit lock with its
renewed lease, failpoints, the metastore's batch repoint, and the commit guard that
keeps an abort from another thread away from a journal being written.

``trace``: set it to a list and every statement and primitive the lifecycle issues is
appended to it (tests/test_conformance.py compares it with dbt's; `explain --counts` prints a
dry run's statements from it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, NoReturn

from pyspark.errors import PySparkException
from pyspark.sql import Observation, SparkSession, functions as F

from merge_core.common import macros
from merge_core.common.errors import (
    EngineRejected,
    LengthViolation,
    MergeError,
    NotNullViolation,
    TargetError,
    ValidationError,
    codes,
    error_for,
)
from merge_core.common.host_contract import StatementHost
from merge_core.common.run_state import RunState
from merge_core.spark import faults, file_index, files, key_ranges, lock, metastore
from merge_core.spark.catalog import SPARK_ERRORS, catalog_rows, spark_message

log = logging.getLogger("spark_merge")
# the errors a check raises from inside Spark (raise_error in the plan's SQL); their codes are read
# on first use, so importing renders nothing
_RAISED = (NotNullViolation, LengthViolation, EngineRejected)


def raised_by_check(e: Exception) -> MergeError | None:
    """The error a check of the plan raised inside Spark (raise_error: Spark's USER_RAISED_EXCEPTION,
    its message a code and text), from Spark's structured error, never from its message text (which
    quotes the statement, with every check's message in it)."""
    if not isinstance(e, PySparkException) or not str(e.getCondition() or "").startswith("USER_RAISED_EXCEPTION"):
        return None
    code, _, text = str((e.getMessageParameters() or {}).get("errorMessage", "")).partition(": ")
    raised_by = {e.code: e for e in _RAISED}
    return raised_by[code](text) if code in raised_by else None


# the partitions' directories listed (and their footers read) at once by file_stats: on an object
# store each listing is a request of its own
LISTING_THREADS = 8
# target_rows counts an unpartitioned table's rows from its footers only when it is this small
TARGET_COUNT_FILES, TARGET_COUNT_BYTES = 64, 16 << 20
# key_candidates reads the footers of at most this many data files, of at most this many partitions
CANDIDATE_FILES, CANDIDATE_PARTITIONS = 1000, 1000
trace: list | None = None  # the statements and primitives of every lifecycle, in order (tests; explain --counts)


@functools.lru_cache(maxsize=1)
def _ops() -> dict[str, int]:
    """The plan's operation codes (core/codes.sql), read once: the one-pass write counts by them."""
    return {k: int(v) for k, v in macros.codes()["op"].items()}


def _trace(kind: str, text: str = "") -> None:
    if trace is not None:
        trace.append((kind, text))


class SparkHost(StatementHost):
    """Host primitives over ``spark`` for one merge (or one recovery, rollback, compaction)."""

    def __init__(self, spark: SparkSession, merge_id: str = "", stop_check: Callable[[], None] | None = None):
        self.spark, self.merge_id = spark, merge_id
        self.stop_check = stop_check or (lambda: None)
        self.journaled = False
        # held while the journal is decided and written, and while an abort decides whether the
        # staged data may go: never both (an abort must not remove data a journal points at)
        self.guard = threading.Lock()
        self.stopped = False
        self._held: Any = None  # the commit lock's context while held
        self._read_locked: dict | None = None  # the target's partitions last read under the lock (repoint)
        self._t0 = time.monotonic()
        self._op = _ops()  # read here: a primitive renders no macro
        self.observes = True  # the one-pass write where it can (can_observe); a dry run's plan counts first
        # {files.key(directory): {name: (bytes, rows)}} of the data files the last listing of each
        # directory found: which files a rewrite carries over (carry), and what the check under the
        # commit lock saw, so that files appended to a replaced directory after it are carried too
        self.seen: dict[str, dict[str, tuple[int, int]]] = {}
        self.strays: set[str] = set()  # files no scan reads, said once (_read_files)
        self._strays_lock = threading.Lock()
        self._file_index: file_index.FileIndex | None = None  # the target's, once asked (_index)

    def _index(self, table: dict) -> file_index.FileIndex | None:
        """The file index of a parquet ``table`` where this session reaches its files (None elsewhere:
        footers are read, as for a file the index does not know)."""
        if table["provider"] != "parquet" or not table.get("root") or not metastore.batch_available(self.spark):
            return None
        if self._file_index is None or self._file_index.root != table["root"].rstrip("/"):
            try:
                self._file_index = file_index.FileIndex(table["root"])
            except Exception as e:  # a file system pyarrow cannot reach
                log.debug("[%s] no file index: %s", self.merge_id, e)
                return None
        return self._file_index

    def _indexed(self, what: str, fn: Callable[[file_index.FileIndex], None]) -> None:
        """Tell the file index what the commit did; the index only saves reading footers, so a failure
        here is a debug line, never the merge's."""
        if self._file_index is None:
            return
        try:
            fn(self._file_index)
        except Exception as e:  # noqa: BLE001 - a file system error: the next merge reads footers
            log.debug("[%s] file index not told of %s: %s", self.merge_id, what, e)

    # -- statements -----------------------------------------------------------
    def run(self, sql: str, tolerate: bool = False) -> None:
        sql = str(sql).strip()
        _trace("sql", sql)
        if tolerate:
            try:
                self.spark.sql(sql)
            except SPARK_ERRORS as e:
                log.warning("[%s] %s: %s", self.merge_id, sql.split("\n")[0][:80], spark_message(e))
            return
        self._sql(sql)

    def rows(self, sql: str, kind: str = "rows") -> list[dict]:
        sql = str(sql).strip()
        _trace("sql", sql)
        return [r.asDict() for r in self._sql(sql, collect=True)]

    def analyze(self, sql: str, label: str) -> None:
        """An analysis-only statement (DESCRIBE QUERY); Spark's refusal is a ValidationError naming
        ``label`` (dbt's binding lets dbt report it)."""
        sql = str(sql).strip()
        _trace("sql", sql)
        self.stop_check()
        try:
            self.spark.sql(sql).collect()
        except SPARK_ERRORS as e:
            raise ValidationError([f"{label}: {spark_message(e)}"]) from None

    def _sql(self, sql: str, collect: bool = False) -> Any:
        self.stop_check()  # aborted meanwhile (on_kill): no statement may follow the clean-up
        log.debug("[%s] SQL: %s", self.merge_id, sql)
        try:
            df = self.spark.sql(sql)
            return df.collect() if collect else df
        except Exception as e:
            self._failed(e)

    def _failed(self, e: Exception) -> NoReturn:
        """Raise what a failed statement or write means to the user (never returns)."""
        if self.journaled:
            raise e
        raised = raised_by_check(e)
        if raised is not None:  # a check raised in SQL (NOT NULL, a CHAR/VARCHAR length, a merge engine)
            raise raised from None
        if isinstance(e, SPARK_ERRORS) or (isinstance(e, PySparkException) and not self.stopped):
            # an analysis error, or one a row raised at run time (an overflow under ANSI
            # mode, a failed cast): name it, no JVM stack
            raise MergeError(f"the merge failed in Spark, nothing was written: {spark_message(e)}") from None
        raise e

    # -- the user sees ---------------------------------------------------------
    def step(self, text: str) -> None:
        log.info("[%s] %s (%.1f s)", self.merge_id, text, time.monotonic() - self._t0)

    def warn(self, text: str) -> None:
        log.warning("[%s] %s", self.merge_id, text)

    def fail(self, code: str, message: str, rows: list | None = None, fields: dict | None = None) -> None:
        _trace("fail", code)
        raise error_for(code, message, rows, fields)

    def failpoint(self, name: str) -> None:
        faults.reached(name)

    # -- catalog and lock ------------------------------------------------------
    def catalog(self, parts: list[str], json_sql: str, columns_sql: str) -> dict:
        _trace("catalog")
        self.stop_check()
        return catalog_rows(self.spark, parts, json_sql, columns_sql)

    def lock(self, table: dict, merge_id: str) -> None:
        _trace("lock")
        held = lock.table_lock(self.spark, table, merge_id)
        held.__enter__()
        self._held = held

    def unlock(self, table: dict | None = None, merge_id: str = "") -> None:
        """Release the commit lock if this host holds it (also on abort)."""
        held, self._held, self._read_locked = self._held, None, None
        if held is not None:
            _trace("unlock")
            held.__exit__(None, None, None)

    def lock_handle(self) -> Any:
        _trace("lock_handle")
        return lock.handle(self.spark)

    def release_finished(self, table: dict, merge_id: str | None) -> None:
        _trace("release_finished")
        lock.break_if_dead(self.spark, table, finished=merge_id)

    # -- files and commit --------------------------------------------------------
    def exists(self, location: str) -> bool | None:
        return files.exists(location)

    def file_stats(self, table: dict, name: str, sql: str, partitions: list[dict]) -> list[dict]:
        """The rows of ``sql`` (file_stats_sql: files, bytes and rows per directory of
        ``partitions`` of ``name``, the target or this merge's staging table in its database),
        answered without a Spark job where this session reaches the catalog and the files:
        the partitions' locations as the catalog gives them now, listed, rows counted from the
        footers. That is the files as they are, where a query reads Spark's cached listing.
        A staging table with a partition the plan does not list is measured by ``sql``, whose
        rows name it (output_errors refuses it). Spark Connect, or files out of reach: ``sql``,
        which reads every row of the partitions (the listing reads the footers only)."""
        _trace("file_stats", sql)
        return self._file_stats(table, name, sql, partitions)

    def _file_stats(self, table: dict, name: str, sql: str, partitions: list[dict]) -> list[dict]:
        self.stop_check()
        try:
            listed = self._listed_stats(table, name, partitions)
        except files.ForeignFormat as e:
            raise TargetError(
                f"{table['name']} is registered as a {table['provider']} table, but {e.location} (a "
                f"directory this {'merge rewrites' if name == table['table_name'] else 'merge staged'}) "
                f"holds {e.found} metadata: rewriting it as plain {table['provider']} would leave that "
                f"metadata describing files that are gone. Nothing was written"
            ) from None
        except Exception as e:  # py4j, a file system pyarrow cannot reach, a footer it cannot read
            log.debug("[%s] file statistics by query (listing failed: %s)", self.merge_id, e)
            listed = None
        if listed is None:
            return [r.asDict() for r in self._sql(str(sql).strip(), collect=True)]
        return listed

    def target_rows(self, table: dict) -> int | None:
        """How many rows an unpartitioned target holds, when that costs no Spark job and little
        else: this session reaches the catalog and the files, and the table is at most
        TARGET_COUNT_FILES files of at most TARGET_COUNT_BYTES (a listing and their footers). None
        otherwise (a partitioned table, Spark Connect, a larger table): the plan then does not
        broadcast the target."""
        _trace("target_rows")
        if table["partition_columns"] or table["provider"] not in ("parquet", "orc"):
            return None
        if not metastore.batch_available(self.spark):
            return None
        try:
            return files.small_row_count(table["location"], table["provider"], TARGET_COUNT_FILES, TARGET_COUNT_BYTES)
        except Exception as e:  # a file system pyarrow cannot reach, a footer it cannot read
            log.debug("[%s] target rows not counted: %s", self.merge_id, e)
            return None

    def key_candidates(self, table: dict, keys: list[dict]) -> dict | None:
        """The partitions of ``table`` ({column: string or None}; an unpartitioned table: [{}] or [])
        with a data file whose footer's key ranges can hold a row with every key of ``keys`` ({column,
        type, lo, hi, null_safe}: an ON equality's source range) in range, as
        key_ranges.partitions_holding gives them ({'partitions', 'of', 'files'}): no Spark job, a
        listing and the footers. None where that is not told so cheaply: Spark Connect, files out of
        reach, ORC, more than CANDIDATE_PARTITIONS partitions or CANDIDATE_FILES data files (the plan
        then reads the target as before)."""
        _trace("key_candidates")
        if table["provider"] != "parquet" or not metastore.batch_available(self.spark):
            return None
        try:
            located = metastore.all_locations(self.spark, table, CANDIDATE_PARTITIONS)
            if located is None:
                return None
            return key_ranges.partitions_holding(located, keys, CANDIDATE_FILES, self._index(table))
        except Exception as e:  # a file system pyarrow cannot reach, a footer it cannot read
            log.debug("[%s] no candidates from the footers: %s", self.merge_id, e)
            return None

    def stage(self, table: dict, ctx: dict, sql: str, select: str, partitions: list[dict]) -> list[dict]:
        """Write the staged rows (``select``) under ctx['stage_location'] and return their file
        statistics, as file_stats_sql's rows. On a classic session that reaches the files, the
        rows are written as files by the DataFrame writer (the files ``sql``'s CREATE TABLE ... AS
        writes, partitioned alike) and listed: no staging table to create, to register each
        partition of in the metastore and to drop again, which cost a merge 0.2-0.5 s. Elsewhere
        (Spark Connect) ``sql``: the staging table, measured and dropped, as dbt does it."""
        _trace("stage", sql)
        location = ctx["stage_location"]
        if metastore.batch_available(self.spark) and files.reachable(location):
            self.stop_check()
            log.debug("[%s] staging to %s: %s", self.merge_id, location, select)
            try:
                writer = self.spark.sql(select).write.format(table["provider"])
                writer.partitionBy(*table["partition_columns"]).save(location)
            except Exception as e:
                self._failed(e)
            return self._staged_stats(table, location)
        self._sql(sql)
        rows = self._file_stats(table, ctx["stage_name"], macros.file_stats_sql(table, ctx["stage"], None), partitions)
        self._sql(macros.drop_table_sql(ctx["stage"]))
        return rows

    def can_observe(self, table: dict, ctx: dict) -> bool:
        """Where stage writes with the DataFrame writer, the same job can count its rows."""
        _trace("can_observe")
        return self.observes and metastore.batch_available(self.spark) and files.reachable(ctx["stage_location"])

    def stage_observed(self, table: dict, ctx: dict, select: str, rewritten: list[str]) -> dict | None:
        """The one-pass write (host_contract.StatementHost.stage_observed): an Observation on the
        joined rows counts them as the writer writes the rows to keep. The target rows it read must be
        exactly the rows of the files it rewrote, from their footers (listed while planning): one more
        means a target row matched two source rows, which only the summary can judge; the staged files
        are removed then and None returned. No rows at all: nothing is left staged either."""
        _trace("stage", select)
        location = ctx["stage_location"]
        expected = self._rows_in(rewritten)
        self.stop_check()
        log.debug("[%s] staging (observed) to %s: %s", self.merge_id, location, select)
        seen = Observation()
        counts = {
            "read": "count_if(__sm_target)",
            "inserted": f"count_if(__sm_op = {self._op['insert']})",
            "updated": f"count_if(__sm_op = {self._op['update']})",
            "deleted": f"count_if(__sm_op = {self._op['delete']})",
            "copied": f"count_if(__sm_target AND __sm_write AND __sm_op = {self._op['none']})",
        }
        try:
            rows = self.spark.sql(select).observe(seen, *[F.expr(e).alias(k) for k, e in counts.items()])
            kept = rows.where("__sm_write").drop("__sm_op", "__sm_write", "__sm_target")
            kept.write.format(table["provider"]).partitionBy(*table["partition_columns"]).save(location)
            got = {k: int(v or 0) for k, v in seen.get.items()}
        except Exception as e:
            self._failed(e)
        stats = self._staged_stats(table, location) if got["read"] == expected else []
        if not stats:
            files.remove(location)
            self._indexed("the removed staging", lambda index: index.forget(location))
        if got["read"] != expected:
            log.info(
                "[%s] the write read %s target row(s) from files holding %s: a row matched several source rows",
                self.merge_id,
                got["read"],
                expected,
            )
            return None
        return {"stats": stats, "metrics": got}

    def _rows_in(self, uris: list[str]) -> int | None:
        """The rows the data files ``uris`` (as _metadata.file_path names them) hold, from this merge's
        listing; None if one was not listed."""
        total = 0
        for uri in uris:
            directory, _, name = files.location_of_uri(uri).rpartition("/")
            found = self.seen.get(files.key(directory), {}).get(name)
            if found is None:
                return None
            total += found[1]
        return total

    def _staged_stats(self, table: dict, location: str) -> list[dict]:
        """file_stats_sql's rows of the files written under ``location``: each directory's
        partition values read from its name (``col=value`` per level, unescaped as Spark does),
        a directory that does not name exactly the partition columns refused."""
        utils = metastore.jvm(self.spark).org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
        null, pcols = utils.DEFAULT_PARTITION_NAME(), [c.lower() for c in table["partition_columns"]]
        base, rows = location.rstrip("/"), []

        def unescape(name: str) -> str:
            return files.unescape_path_name(name, lambda text: str(utils.unescapePathName(text)))

        depth = len(table["partition_columns"])
        index = self._index(table)
        for d, (n, size, count) in files.data_files(location, table["provider"], self.seen, depth, index=index).items():
            levels = [level.partition("=") for level in d[len(base) :].strip("/").split("/") if level]
            values = {unescape(k).lower(): unescape(v) for k, _, v in levels}
            if sorted(values) != sorted(pcols) or len(levels) != len(pcols):
                raise MergeError(
                    f"the staged files in {d} are not in a partition directory of {table['name']}; nothing was written"
                )
            part = [None if values[c] == null else values[c] for c in pcols]
            rows.append(
                {
                    "__sm_part": json.dumps(part, separators=(",", ":"), ensure_ascii=False),
                    "dir": d,
                    "files": n,
                    "bytes": size,
                    "rows": count,
                }
            )
        return rows

    def _listed_stats(self, table: dict, name: str, partitions: list[dict]) -> list[dict] | None:
        stage = name.lower() != table["table_name"].lower()
        read: dict = {}
        found = metastore.locations(self.spark, table, name, partitions, count=stage, read=read)
        # read under the commit lock: what the repoint that follows moves, as it is now
        self._read_locked = read if self._held is not None and not stage and read else None
        if found is None or (stage and (found[1] or 0) > len(found[0])):
            return None
        pcols = table["partition_columns"]
        located = found[0]
        with ThreadPoolExecutor(max_workers=min(LISTING_THREADS, max(1, len(located)))) as pool:
            listed = list(pool.map(lambda pair: self._read_files(table, pair[1]), located))
        return [
            {
                "__sm_part": json.dumps([part[c] for c in pcols], separators=(",", ":"), ensure_ascii=False),
                "dir": d,
                "files": n,
                "bytes": size,
                "rows": rows,
                # each data file's size: what the table's auto compaction decides by (rewrite.sql: fold_plan)
                "sizes": sorted(size for size, _ in self.seen.get(files.key(d), {}).values()),
            }
            for (part, _), in_partition in zip(located, listed, strict=True)
            for d, (n, size, rows) in in_partition.items()
        ]

    def _read_files(self, table: dict, location: str) -> dict[str, list[int]]:
        """files.data_files of a partition's (or the table's) directory; the files in it that no scan
        reads (copied into a subdirectory) are said once per merge and otherwise left alone. Runs in
        file_stats' threads: each fills its own keys of self.seen."""
        strays: list[str] = []
        found = files.data_files(location, table["provider"], self.seen, strays=strays, index=self._index(table))
        with self._strays_lock:
            new = [p for p in strays if p not in self.strays]
            self.strays.update(new)
        if new:
            log.warning(
                "[%s] %d file(s) in the directories of %s are not read by Spark's scan of the table (they are in a "
                "subdirectory), so they are not the table's rows: left where they are, not merged, not carried: %s",
                self.merge_id,
                len(new),
                table["name"],
                ", ".join(new[:5]),
            )
        return found

    def repoint(self, table: dict, merge_id: str, repoints: list[dict]) -> None:
        _trace("repoint", str(len(repoints)))
        known, self._read_locked = self._read_locked, None  # set only under the lock, cleared at unlock
        window = metastore.repoint(self.spark, table, repoints, known)
        replaced = [r["old_location"] for r in repoints if r.get("old_location")]
        self._indexed("the replaced directories", lambda index: index.retire(replaced))
        log.info("[%s] %d partition location(s) changed within %.3f s", merge_id, len(repoints), window)

    def history_write(self, location: str, record: dict, sql: str) -> None:
        """Write a merge's history record (commit.sql: history_record) as the JSON line ``sql``'s
        Spark job would write, without the job where this session reaches the files (a classic
        session); else, or when the write fails, ``sql``. A failure of both is a warning: the commit
        is done, only its history entry is missing."""
        _trace("history_write", sql)
        if metastore.batch_available(self.spark):
            try:
                files.write_only(location, "part-00000.json", json.dumps(record, ensure_ascii=False) + "\n")
                if record.get("merge_id") == self.merge_id:
                    self._indexed("the commit", lambda index: index.write(self.merge_id))
                return
            except Exception as e:  # a file system pyarrow cannot reach
                log.debug("[%s] history record by query (writing failed: %s)", self.merge_id, e)
        try:
            self._sql(str(sql).strip())
        except SPARK_ERRORS as e:
            log.warning("[%s] the history entry was not written: %s", self.merge_id, spark_message(e))

    def can_carry(self, table: dict, old: list[dict]) -> bool:
        """Whether this host can carry a partition's untouched files into its new version: it listed
        every one of the rewritten directories (so it knows their files) and reaches them."""
        _trace("can_carry")
        return bool(old) and all(files.key(r["dir"]) in self.seen for r in old)

    def carry(self, table: dict, repoints: list[dict], rewritten: list[str], fold: dict | None = None) -> list[dict]:
        """Link each replaced directory's data files, but those in ``rewritten`` (file URIs, as
        _metadata.file_path gives them) and, in the directories ``fold`` names (the table's auto
        compaction, rewrite.sql: fold_plan), those under ``fold['below']`` bytes, into the directory
        that replaces it: a hard link on a local file system, a server-side copy on an object store
        (files.link), never a re-encoding. The rewrite read exactly the files left out here. Returns
        per directory what it carried, as file_stats rows ({'partition', 'dir', 'files', 'bytes', 'rows'})."""
        _trace("carry", str(len(rewritten)))
        gone = {files.key(files.location_of_uri(f)) for f in rewritten}
        folded = {files.key(d) for d in (fold or {}).get("dirs", [])}
        below = (fold or {}).get("below", 0)
        out, pairs = [], []
        for r in repoints:
            if not r.get("old_location"):
                continue
            old = r["old_location"].rstrip("/")
            small = below if files.key(old) in folded else 0
            kept = [
                (name, size, rows)
                for name, (size, rows) in sorted(self.seen.get(files.key(old), {}).items())
                if files.key(f"{old}/{name}") not in gone and size >= small
            ]
            pairs += [(f"{old}/{name}", f"{r['location'].rstrip('/')}/{name}") for name, _, _ in kept]
            if kept:
                out.append(
                    {
                        "partition": r["partition"] or {},
                        "dir": r["location"],
                        "files": len(kept),
                        "bytes": sum(k[1] for k in kept),
                        "rows": sum(k[2] for k in kept),
                    }
                )
        files.link_all(pairs)
        self._indexed("the carried files", lambda index: index.carried(pairs))
        return out

    def carry_late(self, table: dict, repoints: list[dict]) -> None:
        """After a commit: data files that appeared in a replaced directory after the check under the
        lock listed it (an INSERT of another application that bypassed the lock) are linked into the
        directory that replaced it, so the new version holds them too, and reported (MERGE_LATE_APPEND).
        Only directories this host listed under the lock are compared; vacuum keeps any others."""
        _trace("carry_late")
        carried = []
        for r in repoints:
            old = r.get("old_location")
            if not old or self.seen.get(files.key(old)) is None:
                continue
            for relative, _ in files.data_file_times(old):
                if relative.rsplit("/", 1)[-1] in self.seen.get(
                    files.key(f"{old}/{relative}".rsplit("/", 1)[0]), set()
                ):
                    continue
                files.link(f"{old.rstrip('/')}/{relative}", f"{r['location'].rstrip('/')}/{relative}")
                carried.append(f"{old.rstrip('/')}/{relative}")
        if carried:
            log.warning(
                "[%s] %s: %d data file(s) were written into %s after this merge checked it under the commit "
                "lock (a write that bypassed spark-merge); carried into the new version: %s",
                self.merge_id,
                codes()["late_append"],
                len(carried),
                table["name"],
                ", ".join(carried[:5]),
            )

    def journal(self, sql: str) -> None:
        """The commit point: from here the commit is rolled forward, never back."""
        with self.guard:
            self.stop_check()
            self.run(sql)
            self.journaled = True

    def now(self) -> str:
        return datetime.now(UTC).isoformat(timespec="milliseconds")

    def elapsed_ms(self, s: RunState | None = None) -> int:
        return int((time.monotonic() - self._t0) * 1000)

    def hash(self, text: str) -> str:
        return hashlib.md5(str(text).encode()).hexdigest()


def recover(spark: SparkSession, table: dict) -> bool:
    """Finish an interrupted commit from its journal (spark__lifecycle_recover). True if there was one."""
    return bool(macros.lifecycle_recover(SparkHost(spark), table)["recovered"])
