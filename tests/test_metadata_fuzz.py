"""Random corruption of spark-merge's metadata, against real Spark.

For each metadata object of a table (its root, commit journal, lock, version, a history entry and
the not_null property), garbage of three kinds (not JSON, JSON of the wrong shape, another table's
valid value) is written, and then every command runs: run (a MERGE), recover, history, rollback,
vacuum, compact. Each must either work correctly or fail with a one-line MergeError, and no live row
may ever be lost. SPARK_MERGE_CORRUPTION_CASES picks how many of the 18 (object, kind) cases run (CI
a random 2, `make test-all` all of them); SPARK_MERGE_CORRUPTION_SEED replays a draw.
"""

from __future__ import annotations

import json
import os
import random
import string
from pathlib import Path

import pytest

from merge_core import MergeError, compact, history, merge, recover, rollback, vacuum
from merge_core.common import macros
from merge_core.spark.catalog import describe_table

from .conftest import rows

OBJECTS = ["root", "journal", "lock", "version", "history", "not_null"]
KINDS = ["not json", "wrong shape", "another table's"]
# pytest-xdist's workers must collect the same cases: they share the run's id
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
SEED = int(
    os.environ.get("SPARK_MERGE_CORRUPTION_SEED")
    or (random.Random(_RUN).randrange(1 << 30) if _RUN else random.SystemRandom().randrange(1 << 30))
)
CASES = random.Random(SEED).sample(
    [(o, k) for o in OBJECTS for k in KINDS], min(18, int(os.environ.get("SPARK_MERGE_CORRUPTION_CASES", "2")))
)
REPORT = {"seed": SEED, "worked": 0, "refused": 0, "cases": 0}
UPDATE = (
    "MERGE INTO {t} t USING (SELECT 1 AS id, {v} AS v, 'a' AS p) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v"
)


def _garbage(rng: random.Random) -> str:
    return rng.choice(
        ["{garbage", "\\x00\\x01", "not json at all", "".join(rng.choices(string.printable, k=12))]
    ).replace("'", "")


def _wrong_shape(rng: random.Random) -> str:
    return rng.choice(["[1, 2]", '{"a": 1}', '"text"', "42", "null", '{"merge_id": 7, "repoints": "x"}'])


def _set(spark, table: str, key: str, value: str) -> None:
    spark.sql(
        f"ALTER TABLE {table} SET TBLPROPERTIES ({macros.render('literal', key)} = {macros.render('literal', value)})"
    )


def corrupt(spark, db: str, t: str, other: str, obj: str, kind: str, rng: random.Random) -> None:
    """Write garbage of ``kind`` into ``obj`` of table ``t`` (``other``: a second table, whose valid
    values are 'another table's')."""
    mine, theirs = describe_table(spark, t.split(".")), describe_table(spark, other.split("."))
    value = {"not json": _garbage(rng), "wrong shape": _wrong_shape(rng)}.get(kind)
    if obj in ("root", "version", "not_null"):
        key = f"spark_merge.{obj}"
        _set(spark, t, key, value if value is not None else theirs["properties"].get(key) or "w")
    elif obj == "journal":
        if value is None:  # another table's journal, as its commit wrote it
            value = json.dumps(
                {
                    "merge_id": theirs["properties"]["spark_merge.last_merge_id"],
                    "table_id": theirs["table_id"],
                    "repoints": [],
                }
            )
        _set(spark, t, "spark_merge.journal.parts", "1")
        _set(spark, t, "spark_merge.journal.0", value)
    elif obj == "lock":
        lock = f"{db}.__sm_lock_{mine['table_name']}"
        if value is None:  # a live, well-formed lock of the other table
            value = macros.render(
                "lock_sql",
                {**theirs, "table_name": mine["table_name"]},
                "20990101000000_abcdef12",
                "2099-01-01T00:00:00+00:00",
                "2099-01-01T00:01:00+00:00",
                "elsewhere",
            )
            spark.sql(value)
        else:
            spark.sql(
                f"CREATE TABLE {lock} (merge_id STRING) USING parquet TBLPROPERTIES "
                f"('spark_merge.lock.merge_id' = {macros.render('literal', value)}, "
                f"'spark_merge.lock.expires' = {macros.render('literal', value)})"
            )
    elif obj == "history":
        root = Path(mine["root"].removeprefix("file:")) / "_spark_merge" / "history"
        newest = max(p.name for p in root.iterdir())
        [part] = [p for p in (root / newest).iterdir() if p.name.startswith("part-")]
        if value is None:
            oroot = Path(theirs["root"].removeprefix("file:")) / "_spark_merge" / "history"
            [value] = [p.read_text() for d in oroot.iterdir() for p in d.iterdir() if p.name.startswith("part-")][:1]
        part.write_text(value if kind != "wrong shape" else json.dumps({"merge_id": newest, "entry": value}))


def _commands(spark, t: str, first: str):
    yield "run", lambda: merge(spark, UPDATE.format(t=t, v=99)), [(1, 99, "a"), (2, 20, "b")]
    yield "recover", lambda: recover(spark, t), None
    yield "history", lambda: history(spark, t), None
    yield "rollback", lambda: rollback(spark, t, first), [(1, 10, "a"), (2, 20, "b")]
    yield "vacuum", lambda: vacuum(spark, t, retain_hours=0), None
    yield "compact", lambda: compact(spark, t), None


@pytest.mark.parametrize("obj, kind", CASES)
def test_garbage_in_metadata_never_loses_a_row_and_fails_in_one_line(spark, db, obj, kind):
    rng = random.Random(f"{SEED}-{obj}-{kind}")
    t, other = f"{db}.t", f"{db}.other"
    for name in (t, other):
        spark.sql(f"CREATE TABLE {name} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p)")
        spark.sql(f"INSERT INTO {name} VALUES (1, 10, 'a'), (2, 20, 'b')")
    first = merge(spark, UPDATE.format(t=t, v=11)).merge_id
    merge(spark, UPDATE.format(t=t, v=12))
    merge(spark, UPDATE.format(t=other, v=5))
    corrupt(spark, db, t, other, obj, kind, rng)
    live = rows(spark, t)
    REPORT["cases"] += 1
    for name, command, changed in _commands(spark, t, first):
        try:
            command()
        except MergeError as e:
            assert "\n" not in str(e), f"{name} after {kind} {obj}: {e}"
            REPORT["refused"] += 1
        else:
            REPORT["worked"] += 1
            if changed is not None:  # it worked: the rows it must give
                live = changed
        spark.sql(f"REFRESH TABLE {t}")
        assert rows(spark, t) == live, f"{name} after {kind} {obj}"
