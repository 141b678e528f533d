"""Differential test: random MERGE statements run here and in DuckDB's MERGE INTO.

Each case makes a small random target and source (NULL keys, duplicate keys,
NULL values), a MERGE with 1-4 clauses (conditions on both sides, extra ON
predicates, subquery sources, partition-moving updates), runs it under the
`postgres` duplicate rule (DuckDB's), and requires the same final rows, or an
error on both sides. The seed is printed so a failure can be replayed with
SPARK_MERGE_DIFF_SEED; SPARK_MERGE_DIFF_CASES sets the count (default 200).
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass

import duckdb
import pytest

from merge_core import DuplicateMatchError, SpecError, ValidationError, merge

CASES = int(os.environ.get("SPARK_MERGE_DIFF_CASES", "200"))
SEED = int(os.environ.get("SPARK_MERGE_DIFF_SEED", random.randrange(1 << 30)))
REPORT: dict = {}  # printed in the terminal summary (see conftest.py)
COLUMNS = ["id", "k", "v", "s", "p"]
TYPES = {"id": "INT", "k": "INT", "v": "INT", "s": "STRING", "p": "INT"}


@dataclass
class Case:
    number: int
    partitioned: bool
    target_rows: list[tuple]
    source_rows: list[tuple]
    statement: str  # {target} and {source} are filled per engine


def _value(rng: random.Random, column: str, partitioned: bool):
    if column == "p":
        return rng.randrange(3) if partitioned or rng.random() < 0.8 else None
    if column == "s":
        return rng.choice(["a", "b", "c", None])
    if column == "id":
        return rng.choice([0, 1, 2, 3, 4, 5, 6, None])
    if column == "k":
        return rng.choice([0, 1, None])
    return rng.choice([-5, 0, 1, 2, 7, 10, None])


def _row(rng, partitioned):
    return tuple(_value(rng, c, partitioned) for c in COLUMNS)


def _target_rows(rng, partitioned):
    """0-8 rows from small domains, so keys repeat and NULL keys occur."""
    return [_row(rng, partitioned) for _ in range(rng.randrange(0, 9))]


def _condition(rng, matched: bool) -> str:
    source_only = ["s.v > 0", "s.v IS NULL", "s.s = 'a'", "s.s <> 'b'", "s.k = 1", "s.id < 3", "s.v + 1 > 2"]
    both = ["t.v < s.v", "t.s = s.s", "t.v IS NULL", "t.p = s.p", "t.v + s.v > 3", "t.s IS NOT NULL AND s.v > 1"]
    return rng.choice(source_only + (both if matched else []))


def _update(rng, partitioned: bool) -> str:
    choices = {
        "v": ["s.v", "t.v + s.v", "t.v + 1", "coalesce(s.v, t.v)", "CASE WHEN s.v > t.v THEN s.v ELSE t.v END", "NULL"],
        "s": ["s.s", "t.s || s.s", "'u'", "coalesce(t.s, 'z')"],
        "k": ["s.k", "t.k + 1"],
        # partition values stay non-NULL (source p is never NULL in partitioned cases)
        "p": ["s.p", "2", "t.p + 1"] if partitioned else ["s.p", "t.p + 1", "NULL"],
    }
    cols = rng.sample(list(choices), rng.randrange(1, 4))
    return ", ".join(f"{c} = {rng.choice(choices[c])}" for c in cols)


def _insert(rng, partitioned: bool) -> str:
    if rng.random() < 0.2:
        return "INSERT VALUES (s.id, s.k, s.v, s.s, " + ("coalesce(s.p, 1)" if partitioned else "s.p") + ")"
    cols = ["id"] + rng.sample(["k", "v", "s"], rng.randrange(0, 4)) + ["p"]
    values = {"id": "s.id", "k": rng.choice(["s.k", "5"]), "v": rng.choice(["s.v", "s.v * 2", "-1"]),
              "s": rng.choice(["s.s", "'new'"]), "p": "coalesce(s.p, 1)" if partitioned else rng.choice(["s.p", "NULL"])}
    return f"INSERT ({', '.join(cols)}) VALUES ({', '.join(values[c] for c in cols)})"


def make_case(rng: random.Random, number: int) -> Case:
    partitioned = rng.random() < 0.5
    target = _target_rows(rng, partitioned)
    source = [_row(rng, partitioned) for _ in range(rng.randrange(0, 7))]
    if source and rng.random() < 0.35:  # a repeated key: a duplicate match when it hits a target row
        source.append((rng.choice(source)[0],) + _row(rng, partitioned)[1:])
    if partitioned:
        source = [r[:4] + (r[4] if r[4] is not None else 0,) for r in source]
    on = rng.choice(["t.id = s.id", "t.id = s.id", "t.id = s.id AND t.k = s.k", "t.id = s.id AND s.v > 0",
                     "t.id = s.id AND t.p = s.p", "t.id = s.id + 1"])
    kinds = [rng.choice(["update", "update", "delete", "insert", "insert"]) for _ in range(rng.randrange(1, 5))]
    # only the last clause of each kind (matched / not matched) may lack a condition, except in
    # about 5% of cases, which check that both engines reject the unreachable clause
    last = {matched: max(i for i, k in enumerate(kinds) if (k != "insert") == matched)
            for matched in {k != "insert" for k in kinds}}
    careless = rng.random() < 0.05
    clauses = []
    for i, kind in enumerate(kinds):
        matched = kind != "insert"
        optional = careless or i == last[matched]
        cond = f" AND {_condition(rng, matched)}" if not optional or rng.random() < 0.5 else ""
        if kind == "update":
            clauses.append(f"WHEN MATCHED{cond} THEN UPDATE SET {_update(rng, partitioned)}")
        elif kind == "delete":
            clauses.append(f"WHEN MATCHED{cond} THEN DELETE")
        else:
            clauses.append(f"WHEN NOT MATCHED{cond} THEN {_insert(rng, partitioned)}")
    if rng.random() < 0.3:
        source_sql = "(SELECT id, k, v, s, p FROM {source} WHERE v IS NULL OR v <> 7) AS s"
    else:
        source_sql = "{source} AS s"
    statement = f"MERGE INTO {{target}} AS t USING {source_sql} ON {on} " + " ".join(clauses)
    return Case(number, partitioned, target, source, statement)


def _literal(v, column):
    if v is None:
        return f"CAST(NULL AS {TYPES[column]})"
    return f"'{v}'" if isinstance(v, str) else str(v)


def _values(rows):
    return ", ".join("(" + ", ".join(_literal(v, c) for v, c in zip(r, COLUMNS)) + ")" for r in rows)


def _norm(rows):
    return sorted((tuple(r) for r in rows), key=lambda r: tuple((v is None, v if v is not None else 0) for v in r))


def run_duckdb(case: Case):
    con = duckdb.connect()
    ddl = ", ".join(f"{c} {'VARCHAR' if TYPES[c] == 'STRING' else TYPES[c]}" for c in COLUMNS)
    con.execute(f"CREATE TABLE tgt ({ddl})")
    con.execute(f"CREATE TABLE src ({ddl})")
    if case.target_rows:
        con.execute(f"INSERT INTO tgt VALUES {_values(case.target_rows).replace('STRING', 'VARCHAR')}")
    if case.source_rows:
        con.execute(f"INSERT INTO src VALUES {_values(case.source_rows).replace('STRING', 'VARCHAR')}")
    try:
        con.execute(case.statement.format(target="tgt", source="src"))
    except duckdb.Error as e:
        message = str(e).splitlines()[0]
        return ("duplicate" if "more than once" in message else "invalid", message)
    return ("rows", _norm(con.execute("SELECT id, k, v, s, p FROM tgt").fetchall()))


def run_spark(spark, db: str, case: Case):
    target, source = f"{db}.tgt{case.number}", f"src{case.number}"
    cols = ", ".join(f"CAST({c} AS {TYPES[c]}) AS {c}" for c in COLUMNS)
    part = "PARTITIONED BY (p)" if case.partitioned else ""
    rows = case.target_rows or [(None,) * 5]
    where = "" if case.target_rows else "WHERE false"
    spark.sql(f"CREATE TABLE {target} USING parquet {part} AS SELECT {cols} FROM VALUES {_values(rows)} AS x({', '.join(COLUMNS)}) {where}")
    srows = case.source_rows or [(None,) * 5]
    swhere = "" if case.source_rows else "WHERE false"
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {source} AS SELECT {cols} FROM VALUES {_values(srows)} AS x({', '.join(COLUMNS)}) {swhere}")
    try:
        merge(spark, case.statement.format(target=target, source=source), duplicate_rule="postgres")
    except DuplicateMatchError as e:
        return ("duplicate", str(e))
    except (ValidationError, SpecError) as e:
        return ("invalid", str(e))
    finally:
        spark.sql(f"DROP VIEW IF EXISTS {source}")
    return ("rows", _norm(spark.sql(f"SELECT id, k, v, s, p FROM {target}").collect()))


def test_random_merges_agree_with_duckdb(spark, db):
    rng = random.Random(SEED)
    kinds = {"rows": 0, "duplicate": 0, "invalid": 0}
    REPORT.update(seed=SEED, cases=CASES, outcomes=kinds)
    for number in range(CASES):
        case = make_case(rng, number)
        expected = run_duckdb(case)
        got = run_spark(spark, db, case)
        detail = (f"case {number} (seed {SEED}, partitioned={case.partitioned})\n{case.statement}\n"
                  f"target={case.target_rows}\nsource={case.source_rows}\nduckdb={expected}\nspark-merge={got}")
        if expected[0] == "rows":
            assert got == expected, detail
        else:  # the same kind of refusal: a duplicate match, or a statement both reject
            assert got[0] == expected[0], detail
        kinds[expected[0]] += 1
    # the generator must exercise both outcomes, or the test proves little
    assert kinds["rows"] > CASES // 2 and kinds["duplicate"] > 0, kinds
