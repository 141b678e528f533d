"""spark-merge command line: run, explain, upsert, history, vacuum, rollback, recover, compact, adopt,
repair-journal, repair-history, server, merge-service, options.

    spark-merge run --sql "MERGE INTO ..."            # embedded local Spark under ./var
    spark-merge explain --file merge.sql --remote sc://spark:15002
    spark-merge history sales.accounts
    spark-merge vacuum sales.accounts --retain 24 --dry-run
    spark-merge rollback sales.accounts --to 20261122093000_1a2b3c4d
    spark-merge upsert --target sales.orders --source staging.cdc --primary-key id --watermark-key ts
    spark-merge upsert --target sales.totals --source staging.sales --primary-key id \
        --merge-engine aggregation --field price.aggregate-function=max --field sales.aggregate-function=sum
Also usable as a cluster job: spark-submit --master yarn merge_core/__main__.py run --file merge.sql
(inside spark-submit the job's own SparkSession is used).

Each command is a parser builder (``_command_parsers``) and a handler (``HANDLERS``); every error is
one line, ``error: MERGE_...``, and exit status 2. A handler imports the API function it calls, so
``server``, ``options`` and a ``run`` or ``upsert`` that a warm server carries out start without
importing PySpark, pyarrow or sqlglot.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from merge_core.api import merge_service, service_client
from merge_core.common.errors import MergeError, SpecError
from merge_core.common.result import MergeResult
from merge_core.request import options
from merge_core.spark import server
from merge_core.spark.session import METASTORE_ENV, home_dir

WAREHOUSE_HELP = (
    "folder of the embedded warehouse and metastore (default: $SPARK_MERGE_HOME, else the project's var/: the "
    "nearest one above the working directory, or var/ beside the project's .git or pyproject.toml)"
)
JDBC_OPTIONS = ("jdbc_url", "jdbc_user", "jdbc_password")


def statement_options() -> tuple[str, ...]:
    """The statement's declared options that have a flag (options.sql, group merge): `run` and
    `explain` offer them and pass them on to merge() when given, with --dialect."""
    return tuple(n for n in options.names("merge") if options.option(n)["cli"])


def upsert_flags() -> list[str]:
    """The upsert command's flags: the declared upsert and engine options with a flag of their own."""
    return [
        n
        for n in options.names("upsert", "engine")
        if options.option(n)["kind"] != "fields" and options.option(n)["cli"]
    ]


def field_option_names() -> dict[str, str]:
    """--field NAME.OPTION=VALUE: the OPTIONs (Paimon's spellings) and the option each is."""
    return {o["cli"]: o["name"] for o in options.table() if o["kind"] == "fields"}


def declared(parser: argparse.ArgumentParser, o: dict, required: bool = False) -> None:
    """The flag of a declared option: a list repeats, a choice offers its values, a bool is a switch."""
    kwargs: dict = {"dest": o["name"], "help": o["help"]}
    if o["kind"] == "list":
        kwargs.update(action="append", help=o["help"] + " (repeat for several)")
    elif o["kind"] == "choice":
        kwargs["choices"] = o["choices"]
    elif o["kind"] == "bool":
        kwargs["action"] = "store_true"
    parser.add_argument(o["cli"], required=required, **kwargs)


def field_options(items: list[str]) -> dict:
    """``NAME.OPTION=VALUE`` items (Paimon's ``fields.<name>.<option>``) as the engine's per-field options."""
    known = field_option_names()
    out: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        name, dot, option = key.removeprefix("fields.").rpartition(".")
        if not (sep and dot and name) or option not in known:
            raise SpecError(f"--field {item!r}: expected NAME.OPTION=VALUE with OPTION one of {', '.join(known)}")
        out.setdefault(known[option], {})[name] = value
    return out


def _spark_options(sp: argparse.ArgumentParser) -> None:
    where = sp.add_mutually_exclusive_group()
    where.add_argument("--master", help="Spark master URL (default: local[*] or the spark-submit job's)")
    where.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002")
    sp.add_argument("--warehouse", help=WAREHOUSE_HELP)
    sp.add_argument(
        "--metastore",
        metavar="THRIFT_URI",
        help="a shared Hive metastore (thrift://host:9083) instead of the embedded Derby one "
        "(default: $SPARK_MERGE_METASTORE)",
    )
    sp.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress log")
    sp.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="debug log, Spark's warnings, its progress bars and the Python side of Spark's errors",
    )


def _jdbc_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--jdbc-url",
        help="the target is a PostgreSQL table: jdbc:postgresql://host:5432/database (changed in place by primary key)",
    )
    sp.add_argument("--jdbc-user")
    sp.add_argument("--jdbc-password", help="better: $SPARK_MERGE_JDBC_PASSWORD")


def _statement_parser(sub: Any, name: str, text: str) -> argparse.ArgumentParser:
    """run and explain: a statement, its options, and where Spark is."""
    sp = sub.add_parser(name, help=text)
    src = sp.add_mutually_exclusive_group(required=True)
    src.add_argument("--sql", help="the MERGE, UPDATE or DELETE statement")
    src.add_argument("--file", type=Path, help="a .sql file holding one statement")
    for option in statement_options():
        declared(sp, options.option(option))
    sp.add_argument("--dialect", choices=["spark", "trino"], help="how to read the SQL (default: Spark, then Trino)")
    sp.add_argument("--json", action="store_true", help="print the result as JSON")
    _jdbc_options(sp)
    _spark_options(sp)
    return sp


def _statement_parsers(sub: Any) -> None:
    run = _statement_parser(sub, "run", "run a statement")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="run the planning jobs only and report what would be inserted, updated, deleted and rewritten; "
        "write nothing",
    )
    run.add_argument(
        "--max-retries",
        type=int,
        default=3,
        help="how often to plan again when another merge committed elsewhere in the table meanwhile "
        "(default 3; raise it for many concurrent writers)",
    )
    _statement_parser(
        sub, "explain", "print the plan without running it (with -v/--verbose: each step's SQL)"
    ).add_argument(
        "--counts",
        action="store_true",
        help="after the plan, run its planning jobs (as run --dry-run), print the statements they ran "
        "(with the real key ranges and partitions) and report the counts; write nothing",
    )


def _upsert_parser(sub: Any) -> None:
    sp = sub.add_parser(
        "upsert",
        help="primary-key upsert: guarded by a watermark key (idempotent, out-of-order safe), or combined by "
        "a merge engine (deduplicate, partial-update, ...)",
    )
    sp.add_argument("--target", required=True, help="the table to upsert into (database.table)")
    sp.add_argument("--source", required=True, help="a table name or a SELECT")
    for name in upsert_flags():
        declared(sp, options.option(name), required=name == "primary_key")
    sp.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="NAME.OPTION=VALUE",
        help="a per-field engine option, as Paimon's fields.<name>.<option>: "
        + ", ".join(field_option_names())
        + " (e.g. --field price.aggregate-function=max --field g_1.sequence-group=a,b)",
    )
    sp.add_argument("--json", action="store_true")
    _jdbc_options(sp)
    _spark_options(sp)


# the commands that take a table: (name, help, [(flags, add_argument keywords)])
TABLE_COMMANDS: list[tuple[str, str, list[tuple[tuple[str, ...], dict]]]] = [
    ("history", "merges recorded for a table, newest first",
     [(("--limit",), {"type": int, "default": 20}), (("--json",), {"action": "store_true"})]),
    ("compact", "rewrite a merge-on-read table's log to one row per key",
     [(("--tombstone-retention-hours",), {"type": float,
       "help": "drop tombstones whose (date/timestamp) watermark is older than this"})]),
    ("recover", "finish a commit that was interrupted (the next merge would do it too)",
     [(("--break-lock",), {"action": "store_true", "help": "remove the commit lock of a process known to be dead"})]),
    ("repair-journal", "clear a commit journal that cannot be used (not JSON, another shape, another table's) "
     "from the table's properties; prints it first, changes nothing else",
     [(("--dry-run",), {"action": "store_true", "help": "print it, clear nothing"})]),
    ("adopt", "give a table spark-merge properties of its own (after a copy of another table's DDL, a move, "
     "a rename or an edited version)",
     [(("--dry-run",), {"action": "store_true", "help": "say what would change, change nothing"})]),
    ("repair-history", "move history entries that cannot be used (not JSON, another shape, another table's) "
     "aside, so vacuum and rollback can run",
     [(("--dry-run",), {"action": "store_true", "help": "list them, move nothing"})]),
    ("vacuum", "remove directories no version inside the retention period uses",
     [(("--retain",), {"type": float, "metavar": "HOURS",
       "help": "retention in hours (default: table property spark_merge.retention_hours, else 168)"}),
      (("--dry-run",), {"action": "store_true", "help": "list what would be removed, remove nothing"}),
      (("--keep-layout",), {"action": "store_true", "help": "skip the first step, which puts partitions no "
       "retained version needs elsewhere back at their canonical directory (so path readers see current rows)"})]),
    ("changes", "the table's change feed: one row per row change of each commit in the range",
     [(("--since",), {"metavar": "MERGE_ID", "help": "after this commit (default: from the first)"}),
      (("--until",), {"metavar": "MERGE_ID", "help": "up to this commit, included (default: the latest)"}),
      (("--accept-plain-writes",), {"action": "store_true", "help": "print the recorded changes even when a write "
       "that bypassed spark-merge changed a partition they touched since (refused otherwise)"}),
      (("--limit",), {"type": int, "default": 100, "help": "rows to print (default 100)"})]),
    ("show", "print a table's rows, now or as they were right after a commit (time travel)",
     [(("--as-of",), {"metavar": "MERGE_ID|TIMESTAMP", "help": "right after this commit, or after the latest commit "
       "at or before this time (ISO; UTC unless it says otherwise)"}),
      (("--limit",), {"type": int, "default": 100, "help": "rows to print (default 100)"})]),
    ("drop", "drop a table with every version and its history (a plain DROP TABLE of a merged unpartitioned table "
     "leaves its root behind); after a plain DROP TABLE, remove the root it left",
     [(("--dry-run",), {"action": "store_true", "help": "say what would be dropped and removed, change nothing"})]),
    ("rollback", "point the table back at the version before a merge",
     [(("--to",), {"required": True, "metavar": "MERGE_ID", "help": "the merge to undo, with every later one"}),
      (("--discard-later-writes",), {"action": "store_true", "help": "drop rows that a write bypassing spark-merge "
       "(a plain INSERT) added after those merges to a partition the rollback restores (refused otherwise)"})]),
]  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="spark-merge", description="SQL MERGE, UPDATE and DELETE for Spark parquet/ORC tables"
    )
    sub = p.add_subparsers(dest="command", required=True)
    _statement_parsers(sub)
    _upsert_parser(sub)
    for name, text, flags in TABLE_COMMANDS:
        sp = sub.add_parser(name, help=text)
        sp.add_argument("table", help="the table (database.table)")
        for names, kwargs in flags:
            sp.add_argument(*names, **kwargs)
        _spark_options(sp)
    _server_parsers(sub)
    sp = sub.add_parser("options", help="every option: what it applies to, its values, its CLI flag and dbt config")
    sp.add_argument("-q", "--quiet", action="store_true")
    sp.add_argument("-v", "--verbose", action="store_true")
    return p


def _server_parsers(sub: Any) -> None:
    """server and merge-service."""
    sp = sub.add_parser(
        "server",
        help="start, stop or show a warm local Spark over the warehouse (its merge service and Spark Connect); while "
        "it is up, commands on that warehouse use it",
    )
    sp.add_argument("action", choices=["start", "stop", "status"])
    sp.add_argument("--warehouse", help=WAREHOUSE_HELP)
    sp.add_argument("--port", type=int, default=server.DEFAULT_PORT, help="start: Spark Connect's port (default 15002)")
    sp.add_argument(
        "--merges-port",
        type=int,
        default=server.DEFAULT_MERGES_PORT,
        help="start: the merge service's port (default 15003)",
    )
    sp.add_argument(
        "--idle-minutes",
        type=float,
        metavar="MINUTES",
        help="start: stop after this many minutes without work (default: stay up; a server a command started "
        f"itself stops after ${server.IDLE_ENV}, default {server.AUTO_IDLE_MINUTES:g})",
    )
    sp.add_argument(
        "--warm-up",
        type=int,
        default=server.WARM_UP_MERGES,
        metavar="N",
        help="start: warm the new server up with up to N small merges of its own while it is idle (0: none)",
    )
    sp.add_argument("-q", "--quiet", action="store_true")
    sp.add_argument("-v", "--verbose", action="store_true")
    sp = sub.add_parser(
        "merge-service",
        help="run merges submitted over HTTP (the CLI's on a warm server, deferrable Airflow tasks), in the foreground",
    )
    where = sp.add_mutually_exclusive_group()
    where.add_argument("--remote", help="run merges on this Spark Connect server, sc://host:port")
    where.add_argument("--warehouse", help="own the Spark driver of this embedded warehouse (what `server start` runs)")
    sp.add_argument("--master", default="local[*]", help="with --warehouse: the Spark master")
    sp.add_argument(
        "--connect-port", type=int, default=server.DEFAULT_PORT, help="with --warehouse: serve Spark Connect here"
    )
    sp.add_argument(
        "--warm-up", type=int, default=server.WARM_UP_MERGES, metavar="N", help="with --warehouse: as `server start`'s"
    )
    sp.add_argument("--idle-minutes", type=float, metavar="MINUTES", help="with --warehouse: as `server start`'s")
    sp.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: this machine only)")
    sp.add_argument(
        "--port", type=int, default=server.DEFAULT_MERGES_PORT, help="the port to listen on (default 15003)"
    )
    sp.add_argument("-q", "--quiet", action="store_true")
    sp.add_argument("-v", "--verbose", action="store_true")


def _starts_server(args: argparse.Namespace) -> bool:
    """Whether this command starts the warehouse's warm server first (server.ensure): a Spark command on
    the embedded warehouse and metastore, not in a spark-submit job, with SPARK_MERGE_AUTO_SERVER on."""
    if args.master or args.remote or args.metastore or os.environ.get(METASTORE_ENV) or not server.auto_start():
        return False
    return "PYSPARK_GATEWAY_PORT" not in os.environ  # set by spark-submit: the job's own Spark


def _session(args: argparse.Namespace) -> Any:
    from pyspark.sql import SparkSession

    from merge_core.spark.session import get_session

    conf = dict(c.split("=", 1) for c in args.conf)
    # a warm server runs with the metastore of its start: a --metastore named here is not served by it
    if not (args.master or args.remote or args.metastore):
        warm = server.status(args.warehouse)
        if warm:  # `spark-merge server start` is up for this warehouse: no JVM of our own
            return get_session(remote=warm)
        active = SparkSession.getActiveSession()
        if active is not None:
            return active  # inside spark-submit
    return get_session(
        master=args.master, remote=args.remote, warehouse=args.warehouse, conf=conf, metastore=args.metastore
    )


@dataclass
class WarmMerges:
    """The merge service of the warehouse's `spark-merge server`, standing in for a session in `run`
    and `upsert`: the merge runs inside the server's Spark driver, its statements calls within that
    process rather than round trips over Spark Connect."""

    url: str


def _warm_merges(args: argparse.Namespace) -> WarmMerges | None:
    """`run` (not explain) and `upsert` of a Spark catalog table, on a warehouse whose server is up."""
    if args.command not in ("run", "upsert") or args.master or args.remote or args.metastore or args.jdbc_url:
        return None
    url = server.merges_url(args.warehouse)
    return WarmMerges(url) if url else None


def _merge(spark: Any, request: Any, **kwargs: Any) -> MergeResult:
    """merge(), or the same merge submitted to the warm server's merge service."""
    if not isinstance(spark, WarmMerges):
        from merge_core.api.functions import merge

        return merge(spark, request, **kwargs)
    max_retries = kwargs.pop("max_retries", 3)
    return service_client.run_merge(spark.url, request, kwargs, max_retries)


def _server(args: argparse.Namespace) -> int:
    if args.action == "start":
        url = server.start(
            args.warehouse, args.port, merges_port=args.merges_port, warm_up=args.warm_up, idle=args.idle_minutes
        )
        print(f"Spark Connect server for {home_dir(args.warehouse)}: {url}")
        print(f"merge service (run, upsert, deferrable Airflow tasks): {server.merges_url(args.warehouse)}")
    elif args.action == "stop":
        print("stopped" if server.stop(args.warehouse) else "no server was running")
    else:
        running = server.status(args.warehouse)
        print(running or "not running")
        return 0 if running else 1
    return 0


def _recover(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import recover

    done = recover(spark, args.table, break_lock=args.break_lock)
    print(f"{args.table}: {'interrupted commit finished' if done else 'nothing to recover'}")
    return 0


def _repair_journal(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import repair_journal

    found = repair_journal(spark, args.table, dry_run=True)
    if found is None:
        print(f"{args.table}: no journal to repair")
        return 0
    print(f"{args.table}: the commit journal cannot be used ({found['why']}); it reads:\n{found['text']}")
    if not args.dry_run:
        repair_journal(spark, args.table)
        print(
            f"{args.table}: cleared it (nothing else changed); `spark-merge history {args.table}` and "
            f"SHOW PARTITIONS tell which commit each partition shows"
        )
    return 0


def _adopt(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import adopt

    done = adopt(spark, args.table, dry_run=args.dry_run)
    if not done["reasons"]:
        print(f"{done['table']}: its spark-merge properties are its own; nothing to change")
    for reason in done["reasons"]:
        print(f"{done['table']}: {reason}")
    for k, v in done["set"].items():
        print(f"  {'would set' if args.dry_run else 'set'} {k} = {v}")
    for k in done["unset"]:
        print(f"  {'would unset' if args.dry_run else 'unset'} {k}")
    return 0


def _repair_history(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import repair_history

    moved = repair_history(spark, args.table, dry_run=args.dry_run)
    for path, why in moved:
        print(f"{'would move' if args.dry_run else 'moved'} {path} aside: {why}")
    entries = f"entr{'y' if len(moved) == 1 else 'ies'}"
    print(f"{args.table}: {len(moved)} history {entries} {'to move' if args.dry_run else 'moved'} aside")
    return 0


def _vacuum(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import vacuum

    result = vacuum(
        spark, args.table, retain_hours=args.retain, dry_run=args.dry_run, canonicalize=not args.keep_layout
    )
    for path in result.layout.moved if result.layout else []:
        print(("would refill " if args.dry_run else "refilled ") + path)
    for path in result.removed:
        print(("would remove " if args.dry_run else "removed ") + path)
    print(result.summary())
    return 0


def _rollback(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import rollback

    entry = rollback(spark, args.table, args.to, discard_later_writes=args.discard_later_writes)
    print(
        f"{args.table}: rolled back to before {args.to} ({len(entry['repoints'])} partition(s) repointed; "
        f"undo with: spark-merge rollback {args.table} --to {entry['merge_id']})"
    )
    for path in entry.get("discarded") or []:
        print(f"  dropped the rows of {path} (written by a write that bypassed spark-merge)")
    return 0


def _changes(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import table_changes

    _print_rows(table_changes(spark, args.table, args.since, args.until, args.accept_plain_writes), args.limit)
    return 0


def _show(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import read_as_of

    if args.as_of is None:
        frame = spark.table(args.table)
    elif re.fullmatch(r"(adopted_)?\d{14}_[0-9a-f]{8}", args.as_of):
        frame = read_as_of(spark, args.table, merge_id=args.as_of)
    else:
        frame = read_as_of(spark, args.table, timestamp=args.as_of)
    _print_rows(frame, args.limit)
    return 0


def _print_rows(frame: Any, limit: int) -> None:
    """The rows, one per line, tab-separated under a header of the column names."""
    print("\t".join(frame.columns))
    for row in frame.limit(limit).collect():
        print("\t".join("NULL" if v is None else str(v) for v in row))


def _drop(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import drop_table

    done = drop_table(spark, args.table, dry_run=args.dry_run)
    verb = "would" if args.dry_run else ""
    if done["dropped"]:
        print(f"{done['table']}: {verb + ' be ' if verb else ''}dropped")
    for path in done["removed"]:
        print(f"  {verb + ' remove' if verb else 'removed'} {path}")
    if done["kept"]:
        print(f"  {done['kept']}")
    return 0


def _history(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import history

    entries = history(spark, args.table, args.limit)
    if args.json:
        print(json.dumps(entries, indent=2, default=str))
        return 0
    for e in entries:
        m = e["metrics"]
        print(
            f"{e['finished_at']}  {e['merge_id']}  {e['kind']:<12}  +{m.get('numTargetRowsInserted', 0)} "
            f"~{m.get('numTargetRowsUpdated', 0)} -{m.get('numTargetRowsDeleted', 0)}  "
            f"partitions {m['numTargetPartitionsRewritten']}  {m['executionTimeMs']} ms"
            + ("  (no-op: changed nothing)" if e.get("status") == "no-op" else "")
        )
    return 0


def _compact(spark: Any, args: argparse.Namespace) -> int:
    from merge_core.api.functions import compact

    done = compact(spark, args.table, args.tombstone_retention_hours)
    print(f"{args.table}: {done['rows_before']} log rows -> {done['rows_after']}")
    return 0


def _upsert(spark: Any, args: argparse.Namespace) -> int:
    result = _merge(
        spark,
        {"target": args.target, "source": args.source},
        **{name: getattr(args, name) or None for name in upsert_flags()},
        **{k: getattr(args, k) for k in JDBC_OPTIONS},
        **field_options(args.field),
    )
    print(json.dumps(result.metrics, indent=2) if args.json else result.summary())
    return 0


def _statement_args(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The statement of run and explain, and the options chosen for it."""
    sql = args.sql if args.sql is not None else args.file.read_text()
    return sql, {k: getattr(args, k) for k in ("dialect", *statement_options(), *JDBC_OPTIONS) if getattr(args, k)}


def _checked_statement(args: argparse.Namespace) -> None:
    """The statement of run and explain as a spec (parsed, its options checked), which needs no Spark: a
    syntax error or a bad option is a MergeError before any session or server starts."""
    from merge_core.api.functions import to_spec

    sql, chosen = _statement_args(args)
    to_spec(sql, **{k: v for k, v in chosen.items() if k not in JDBC_OPTIONS})


def _statement(spark: Any, args: argparse.Namespace) -> int:
    """run and explain."""
    sql, chosen = _statement_args(args)
    if args.command == "explain":
        from merge_core.api.functions import explain

        print(explain(spark, sql, verbose=args.verbose or args.counts, **chosen))
        if not args.counts:
            return 0
        # --counts: the dry run, and the planning statements it ran
        result, ran = _recorded(lambda: _merge(spark, sql, dry_run=True, **chosen))
        print("-- the statements the dry run ran: the plan as the run will issue them, with this source's "
              "key ranges and partitions")  # fmt: skip
        print("".join(f"{text};\n\n" for text in ran), end="")
    else:
        result = _merge(spark, sql, dry_run=args.dry_run, max_retries=args.max_retries, **chosen)
    if not args.json:
        print(result.summary())
        return 0
    fields = ("merge_id", "target", "paradigm", "plan_hash", "metrics", "partitions", "noop", "dry_run")
    print(json.dumps({k: getattr(result, k) for k in fields}, indent=2))
    return 0


HANDLERS: dict[str, Callable[[Any, argparse.Namespace], int]] = {
    "run": _statement, "explain": _statement, "upsert": _upsert, "recover": _recover,
    "repair-journal": _repair_journal, "adopt": _adopt, "repair-history": _repair_history, "vacuum": _vacuum,
    "rollback": _rollback, "history": _history, "compact": _compact, "drop": _drop, "changes": _changes,
    "show": _show,
}  # fmt: skip


def _logging(args: argparse.Namespace) -> None:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("spark_merge.summary").setLevel(logging.WARNING)  # the CLI prints it to stdout
    if args.verbose:
        os.environ.setdefault("SPARK_LOG_LEVEL", "WARN")
    else:
        # py4j's connection chatter, and PySpark's JSON copy (with a Java stack trace) of a Spark error
        # that spark-merge reports itself, one line, as a MERGE_... error
        logging.getLogger("py4j").setLevel(logging.WARNING)
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _logging(args)
    try:
        if args.command == "server":
            return _server(args)
        if args.command == "merge-service":
            if args.remote:
                merge_service.serve(args.remote, args.host, args.port)
            else:
                merge_service.serve_driver(
                    args.warehouse,
                    args.master,
                    args.connect_port,
                    args.host,
                    args.port,
                    args.warm_up,
                    args.idle_minutes,
                )
            return 0
        if args.command == "options":  # no Spark needed
            print(options.markdown())
            return 0
        if args.command in ("run", "explain"):  # a statement that cannot run is said before Spark starts
            _checked_statement(args)
        if _starts_server(args):
            server.ensure(args.warehouse)
        return HANDLERS[args.command](_warm_merges(args) or _session(args), args)
    except MergeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _recorded(fn: Callable[[], Any]) -> tuple[Any, list[str]]:
    """fn()'s result and the SQL statements its lifecycle issued (host.trace), in order."""
    from merge_core.spark import host

    kept, host.trace = host.trace, []
    try:
        result = fn()
        return result, [text for kind, text in host.trace if kind == "sql"]
    finally:
        host.trace = kept


if __name__ == "__main__":
    sys.exit(main())
