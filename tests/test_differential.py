"""Differential test: random MERGE statements run here and in DuckDB.

Each case makes a small random target and source (NULL keys, duplicate keys,
NULL values; about half the targets partitioned by a column holding NULLs), a
MERGE with 1-4 clauses (conditions on both sides, extra ON predicates, subquery
sources, partition-moving updates into and out of NULL; WHEN NOT MATCHED BY
SOURCE clauses, UPDATE or DELETE on target-only conditions, in about a third of
the cases; about a fifth of the
cases built so that two source rows of one key choose different UPDATE/DELETE
clauses), and runs it under a duplicate rule drawn per case.

What each rule must do is derived from its definition, not from another engine's
behaviour: DuckDB computes, for every matched (target row, source row) pair, the
WHEN clause it chooses; from those choices the rule says whether the merge must
fail with MERGE_TARGET_ROW_MULTIPLE_MATCHES. When it must not, the final rows
must equal DuckDB's MERGE result (every target row received at most one
modifying action, so the result is defined), or, for a lone unconditional
DELETE matched twice under `strict`, the rows that deleting each matched row once
gives. The seed is printed so a failure can be replayed with
SPARK_MERGE_DIFF_SEED; SPARK_MERGE_DIFF_CASES sets the count (default 10, more while a rule or shape is untried; make test-all runs 200).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass

import duckdb

from merge_core import DuplicateMatchError, SpecError, ValidationError, merge

CASES = int(os.environ.get("SPARK_MERGE_DIFF_CASES", "10"))
SEED = int(os.environ.get("SPARK_MERGE_DIFF_SEED", random.randrange(1 << 30)))
REPORT: dict = {}  # printed in the terminal summary (see conftest.py)
COLUMNS = ["id", "k", "v", "s", "p"]
TYPES = {"id": "INT", "k": "INT", "v": "INT", "s": "STRING", "p": "INT"}


RULES = ["trino", "postgres", "strict"]


@dataclass
class Clause:
    matched: bool
    action: str  # update | delete | insert (a NOT MATCHED BY SOURCE clause: matched False, by_source)
    condition: str  # "" when none
    text: str  # the WHEN clause as written
    by_source: bool = False


@dataclass
class Case:
    number: int
    partitioned: bool
    rule: str
    target_rows: list[tuple]
    source_rows: list[tuple]
    on: str
    source_rel: str  # "{source}" or a subquery over it
    clauses: list[Clause]

    @property
    def statement(self) -> str:  # {target} and {source} are filled per engine
        return f"MERGE INTO {{target}} AS t USING {self.source_rel} AS s ON {self.on} " + " ".join(
            c.text for c in self.clauses
        )


def _value(rng: random.Random, column: str, partitioned: bool):
    if column == "p":
        return rng.randrange(3) if rng.random() < 0.8 else None
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


def _by_source_condition(rng) -> str:
    return rng.choice(
        ["t.v > 0", "t.v IS NULL", "t.s = 'a'", "t.p = 1", "t.p IS NULL", "t.k = 1", "t.p = 2 AND t.v < 5"]
    )


def _by_source_update(rng) -> str:
    choices = {
        "v": ["t.v + 1", "NULL", "-t.v"],
        "s": ["'gone'", "t.s || 'x'"],
        "k": ["t.k + 1"],
        "p": ["2", "t.p + 1", "NULL"],
    }  # moves rows between partitions too
    cols = rng.sample(list(choices), rng.randrange(1, 3))
    return ", ".join(f"{c} = {rng.choice(choices[c])}" for c in cols)


def _update(rng, partitioned: bool) -> str:
    choices = {
        "v": ["s.v", "t.v + s.v", "t.v + 1", "coalesce(s.v, t.v)", "CASE WHEN s.v > t.v THEN s.v ELSE t.v END", "NULL"],
        "s": ["s.s", "t.s || s.s", "'u'", "coalesce(t.s, 'z')"],
        "k": ["s.k", "t.k + 1"],
        # moves rows between partitions, the NULL partition included
        "p": ["s.p", "2", "t.p + 1", "NULL"],
    }
    cols = rng.sample(list(choices), rng.randrange(1, 4))
    return ", ".join(f"{c} = {rng.choice(choices[c])}" for c in cols)


def _insert(rng, partitioned: bool) -> str:
    if rng.random() < 0.2:
        return "INSERT VALUES (s.id, s.k, s.v, s.s, s.p)"
    cols = ["id"] + rng.sample(["k", "v", "s"], rng.randrange(0, 4)) + ["p"]
    values = {
        "id": "s.id",
        "k": rng.choice(["s.k", "5"]),
        "v": rng.choice(["s.v", "s.v * 2", "-1"]),
        "s": rng.choice(["s.s", "'new'"]),
        "p": rng.choice(["s.p", "coalesce(s.p, 1)", "NULL"]),
    }
    return f"INSERT ({', '.join(cols)}) VALUES ({', '.join(values[c] for c in cols)})"


def make_case(rng: random.Random, number: int, rule: str | None = None, by_source: bool | None = None) -> Case:
    """A random case. To cover what the draw left untried: ``rule``, its duplicate rule instead of
    the drawn one; ``by_source`` (partitioned or not), a target of that shape and a NOT MATCHED BY
    SOURCE clause among the clauses (the same draws are made either way)."""
    drawn = rng.random() < 0.5
    partitioned = drawn if by_source is None else by_source
    drawn_rule = rng.choice(RULES)
    rule = rule or drawn_rule
    if rng.random() < 0.2 and by_source is None:
        return _collision_case(rng, number, partitioned, rule)
    target = _target_rows(rng, partitioned)
    source = [_row(rng, partitioned) for _ in range(rng.randrange(0, 7))]
    if source and rng.random() < 0.35:  # a repeated key: a duplicate match when it hits a target row
        source.append((rng.choice(source)[0],) + _row(rng, partitioned)[1:])
    on = rng.choice(
        [
            "t.id = s.id",
            "t.id = s.id",
            "t.id = s.id AND t.k = s.k",
            "t.id = s.id AND s.v > 0",
            "t.id = s.id AND t.p = s.p",
            "t.id = s.id + 1",
        ]
    )
    pool = ["update", "update", "delete", "insert", "insert"]
    if rng.random() < 0.35:
        pool += ["bys_update", "bys_delete"]
    kinds = [rng.choice(pool) for _ in range(rng.randrange(1, 5))]
    if by_source is not None and not any(k.startswith("bys_") for k in kinds):
        kinds.append(rng.choice(["bys_update", "bys_delete"]))
    # only the last clause of each kind (matched / not matched / not matched by source) may lack a
    # condition, except in about 5% of cases, which check that both engines reject the unreachable clause
    last = {_when(k): max(i for i, j in enumerate(kinds) if _when(j) == _when(k)) for k in kinds}
    careless = rng.random() < 0.05
    clauses = []
    for i, kind in enumerate(kinds):
        optional = careless or i == last[_when(kind)]
        if rng.random() < 0.5 and optional:
            cond = ""
        elif kind.startswith("bys_"):
            cond = _by_source_condition(rng)
        else:
            cond = _condition(rng, kind != "insert")
        clauses.append(_clause(rng, kind, cond, partitioned))
    source_rel = "(SELECT id, k, v, s, p FROM {source} WHERE v IS NULL OR v <> 7)" if rng.random() < 0.3 else "{source}"
    return Case(number, partitioned, rule, target, source, on, source_rel, clauses)


def _when(kind: str) -> str:
    return "not_matched_by_source" if kind.startswith("bys_") else "not_matched" if kind == "insert" else "matched"


def _clause(rng, kind: str, cond: str, partitioned: bool) -> Clause:
    when = {
        "matched": "WHEN MATCHED",
        "not_matched": "WHEN NOT MATCHED",
        "not_matched_by_source": "WHEN NOT MATCHED BY SOURCE",
    }[_when(kind)] + (f" AND {cond}" if cond else "")
    action = {
        "update": lambda: f"UPDATE SET {_update(rng, partitioned)}",
        "delete": lambda: "DELETE",
        "insert": lambda: _insert(rng, partitioned),
        "bys_update": lambda: f"UPDATE SET {_by_source_update(rng)}",
        "bys_delete": lambda: "DELETE",
    }[kind]()
    return Clause(
        _when(kind) == "matched",
        kind.removeprefix("bys_"),
        cond,
        f"{when} THEN {action}",
        by_source=kind.startswith("bys_"),
    )


def _collision_case(rng, number: int, partitioned: bool, rule: str) -> Case:
    """Two source rows of one key choose different modifying clauses (UPDATE + UPDATE, or UPDATE +
    DELETE) for the same target row; sometimes a third source row chooses no clause."""
    key = rng.randrange(3)
    target = [(key,) + _row(rng, partitioned)[1:]] + _target_rows(rng, partitioned)
    source = [
        (key, rng.choice([0, 1]), 5, "a", rng.choice([0, 1, None])),
        (key, rng.choice([0, 1]), -5, "b", rng.choice([0, 1, None])),
    ]
    if rng.random() < 0.3:
        source.append((key, 0, None, "c", 0))
    source += [_row(rng, partitioned) for _ in range(rng.randrange(0, 3))]
    second = rng.choice(["update", "delete"])
    clauses = [_clause(rng, "update", "s.v > 0", partitioned), _clause(rng, second, "s.v < 0", partitioned)]
    if rng.random() < 0.5:
        clauses.append(_clause(rng, "insert", "", partitioned))
    return Case(number, partitioned, rule, target, source, "t.id = s.id", "{source}", clauses)


def _literal(v, column):
    if v is None:
        return f"CAST(NULL AS {TYPES[column]})"
    return f"'{v}'" if isinstance(v, str) else str(v)


def _values(rows):
    return ", ".join("(" + ", ".join(_literal(v, c) for v, c in zip(r, COLUMNS)) + ")" for r in rows)


def _norm(rows):
    return sorted((tuple(r) for r in rows), key=lambda r: tuple((v is None, v if v is not None else 0) for v in r))


def _duckdb(case: Case):
    con = duckdb.connect()
    ddl = ", ".join(f"{c} {'VARCHAR' if TYPES[c] == 'STRING' else TYPES[c]}" for c in COLUMNS)
    con.execute(f"CREATE TABLE tgt ({ddl})")
    con.execute(f"CREATE TABLE src ({ddl})")
    if case.target_rows:
        con.execute(f"INSERT INTO tgt VALUES {_values(case.target_rows).replace('STRING', 'VARCHAR')}")
    if case.source_rows:
        con.execute(f"INSERT INTO src VALUES {_values(case.source_rows).replace('STRING', 'VARCHAR')}")
    return con


def expected_error(case: Case, con) -> bool:
    """Whether the case's rule must refuse it, from the clause each matched pair chooses (DuckDB)."""
    matched = [(i, c) for i, c in enumerate(case.clauses) if c.matched]
    choose = " ".join(f"WHEN {c.condition or 'true'} THEN {i}" for i, c in matched)
    pairs = con.execute(
        f"SELECT t.__tid, {f'CASE {choose} ELSE -1 END' if matched else '-1'} "
        f"FROM (SELECT row_number() OVER () AS __tid, * FROM tgt) AS t "
        f"JOIN (SELECT * FROM {case.source_rel.format(source='src')}) AS s ON {case.on}"
    ).fetchall()
    per_row = Counter(tid for tid, _ in pairs)
    per_clause = Counter(pairs)
    mods = Counter(tid for tid, c in pairs if c >= 0)  # matched clauses all UPDATE or DELETE
    lone_delete = len(matched) == 1 and matched[0][1].action == "delete" and not matched[0][1].condition
    twice_modified = any(n > 1 for n in mods.values())
    if case.rule == "trino":
        return twice_modified or any(n > 1 for n in per_clause.values())
    if case.rule == "postgres":
        return twice_modified
    return not lone_delete and (twice_modified or (bool(matched) and any(n > 1 for n in per_row.values())))


def run_duckdb(case: Case):
    con = _duckdb(case)
    try:
        must_fail = expected_error(case, con)
    except duckdb.Error as e:
        return ("invalid", str(e).splitlines()[0])
    statement = case.statement.format(target="tgt", source="src")
    try:
        con.execute(statement)
    except duckdb.Error as e:
        message = str(e).splitlines()[0]
        if "more than once" not in message:
            return ("invalid", message)
        if must_fail:
            return ("duplicate", message)
        # the one rule-accepted case DuckDB (PostgreSQL's rule) refuses: strict's lone unconditional
        # DELETE matched twice. Its result: every matched target row deleted once, and the NOT
        # MATCHED clauses applied to the source rows no target row matches.
        con = _duckdb(case)
        source = case.source_rel.format(source="src")
        con.execute(
            f"CREATE TABLE unmatched AS SELECT * FROM {source} AS s WHERE NOT EXISTS "
            f"(SELECT 1 FROM tgt AS t WHERE {case.on})"
        )
        con.execute(f"DELETE FROM tgt AS t WHERE EXISTS (SELECT 1 FROM {source} AS s WHERE {case.on})")
        # the NOT MATCHED clauses, and the NOT MATCHED BY SOURCE ones on the target rows left (none matched)
        inserts = [c.text for c in case.clauses if not c.matched]
        if inserts:
            con.execute("MERGE INTO tgt AS t USING unmatched AS s ON false " + " ".join(inserts))
    else:
        if must_fail:
            return ("duplicate", f"the {case.rule} rule refuses it")
    return ("rows", _norm(con.execute("SELECT id, k, v, s, p FROM tgt").fetchall()))


def run_spark(spark, db: str, case: Case):
    target, source = f"{db}.tgt{case.number}", f"src{case.number}"
    cols = ", ".join(f"CAST({c} AS {TYPES[c]}) AS {c}" for c in COLUMNS)
    part = "PARTITIONED BY (p)" if case.partitioned else ""
    rows = case.target_rows or [(None,) * 5]
    where = "" if case.target_rows else "WHERE false"
    # written in two parts, the lower ids first: a partition's files then hold key ranges apart, which
    # the plan's candidates (the files' footers) may rule out; the rows are the same
    ordered = sorted(rows, key=lambda r: (r[0] is not None, r[0] or 0))
    first, rest = (ordered[: len(ordered) // 2], ordered[len(ordered) // 2 :]) if len(ordered) > 1 else (ordered, [])
    spark.sql(
        f"CREATE TABLE {target} USING parquet {part} AS SELECT {cols} FROM VALUES {_values(first)} AS x({', '.join(COLUMNS)}) {where}"
    )
    if rest:
        spark.sql(f"INSERT INTO {target} SELECT {cols} FROM VALUES {_values(rest)} AS x({', '.join(COLUMNS)})")
    srows = case.source_rows or [(None,) * 5]
    swhere = "" if case.source_rows else "WHERE false"
    spark.sql(
        f"CREATE OR REPLACE TEMP VIEW {source} AS SELECT {cols} FROM VALUES {_values(srows)} AS x({', '.join(COLUMNS)}) {swhere}"
    )
    try:
        merge(spark, case.statement.format(target=target, source=source), duplicate_rule=case.rule)
    except DuplicateMatchError as e:
        return ("duplicate", str(e))
    except (ValidationError, SpecError) as e:
        return ("invalid", str(e))
    finally:
        spark.sql(f"DROP VIEW IF EXISTS {source}")
    return ("rows", _norm(spark.sql(f"SELECT id, k, v, s, p FROM {target}").collect()))


def test_random_merges_follow_each_rules_definition(spark, db):
    rng = random.Random(SEED)
    kinds = {
        (rule, shape): {"rows": 0, "duplicate": 0, "invalid": 0}
        for rule in RULES
        for shape in ("partitioned", "unpartitioned")
    }
    by_source = Counter()
    REPORT.update(seed=SEED, cases=CASES, outcomes=kinds, not_matched_by_source=by_source)

    def untried() -> list[str]:
        """The rules without both outcomes yet."""
        return [
            rule
            for rule in RULES
            if any(
                sum(kinds[(rule, shape)][k] for shape in ("partitioned", "unpartitioned")) == 0
                for k in ("rows", "duplicate")
            )
        ]

    def steer(rng: random.Random) -> tuple[str | None, bool | None]:
        """The rule, or else the shape of target with a by-source clause, still untried."""
        if untried():
            return rng.choice(untried()), None
        shapes = [p for p, name in ((True, "partitioned"), (False, "unpartitioned")) if not by_source[(name, "rows")]]
        return None, (shapes[0] if shapes else None)

    def covered() -> bool:
        """Every rule with both outcomes, and by-source clauses that ran on both shapes of target."""
        return not untried() and (by_source[("partitioned", "rows")] > 0 and by_source[("unpartitioned", "rows")] > 0)

    # CASES random cases, then more (up to three times as many again) only while the draw left a shape
    # untried, steered to it: a rule still untried, else a shape without a by-source clause that ran
    # (unsteered, about one seed in eight left one untried after 3 x CASES)
    for number in range(4 * CASES):
        if number >= CASES and covered():
            break
        case = make_case(rng, number, *steer(rng) if number >= CASES else (None, None))
        expected = run_duckdb(case)
        replay = (
            f"case {number} (seed {SEED}, partitioned={case.partitioned}, rule={case.rule})\n{case.statement}\n"
            f"target={case.target_rows}\nsource={case.source_rows}\nexpected={expected}"
        )
        try:
            got = run_spark(spark, db, case)
        except Exception as e:  # an error no rule explains: the case and its seed, to replay it
            raise AssertionError(f"{replay}\nspark-merge raised {type(e).__name__}: {e}") from e
        detail = f"{replay}\nspark-merge={got}"
        if expected[0] == "rows":
            assert got == expected, detail
        else:  # the same kind of refusal: a duplicate match, or a statement both reject
            assert got[0] == expected[0], detail
        kinds[(case.rule, "partitioned" if case.partitioned else "unpartitioned")][expected[0]] += 1
        if any(c.by_source for c in case.clauses):
            by_source[("partitioned" if case.partitioned else "unpartitioned", expected[0])] += 1
    # the generator must exercise every rule with both outcomes, or the test proves little
    for rule in RULES:
        rows_ = sum(kinds[(rule, shape)]["rows"] for shape in ("partitioned", "unpartitioned"))
        dups = sum(kinds[(rule, shape)]["duplicate"] for shape in ("partitioned", "unpartitioned"))
        assert rows_ > 0 and dups > 0, (rule, kinds)
    # and merges with NOT MATCHED BY SOURCE clauses that ran, on both shapes of target
    assert by_source[("partitioned", "rows")] > 0 and by_source[("unpartitioned", "rows")] > 0, by_source
