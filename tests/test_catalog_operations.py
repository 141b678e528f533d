"""What plain Spark and the catalog do to a spark-merge table (docs/operations.md, "What other tools do
to a table"): each operation is handled, reported or refused, never a silent loss. Against real Spark."""

from __future__ import annotations

import glob
import os
import shutil

import pytest

from merge_core import ConflictError, MergeError, UnsupportedError, drop_table, history, merge, rollback, vacuum

from .conftest import location, rows


def test_a_rollback_refuses_to_drop_rows_a_plain_insert_added_then_says_what_it_drops(spark, db):
    """A merge rewrites partition a; a plain INSERT adds a row to a (the merge's new directory) and one to
    b. Rolling the merge back would drop a's row: refused, nothing changed; with discard_later_writes
    it drops it and says so, b's row stays; vacuum then reports the file it deletes."""
    t = f"{db}.ab"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1, 'a'), (2, 2, 'b')")
    m = merge(spark, f"UPDATE {t} SET v = 10 WHERE p = 'a'")
    spark.sql(f"INSERT INTO {t} VALUES (3, 3, 'a'), (4, 4, 'b')")
    before = rows(spark, t)
    with pytest.raises(UnsupportedError, match=r"holds 1 data file\(s\) written after the commit of .*plain INSERT"):
        rollback(spark, t, m.merge_id)
    assert rows(spark, t) == before
    entry = rollback(spark, t, m.merge_id, discard_later_writes=True)
    assert rows(spark, t) == [(1, 1, "a"), (2, 2, "b"), (4, 4, "b")]
    [dropped] = entry["discarded"]
    assert "/p=a/" in dropped and os.path.exists(dropped.removeprefix("file:"))
    assert history(spark, t)[0]["discarded"] == [dropped]
    result = vacuum(spark, t, retain_hours=0, canonicalize=False)
    assert result.discarded == [dropped] and "a rollback with discard_later_writes dropped" in result.summary()
    assert not os.path.exists(dropped.removeprefix("file:"))


@pytest.mark.parametrize("partitioned", [True, False], ids=["partition", "unpartitioned"])
def test_a_file_in_a_subdirectory_is_not_the_tables_and_makes_no_conflict(spark, db, partitioned, caplog):
    """Spark's scan of a catalog table reads a partition's (or the table's) own files, not those in a
    subdirectory: spark-merge counts, checks and carries exactly those, and says once that the others
    are there; merges go on (before: MERGE_CONFLICT on every run)."""
    t = f"{db}.stray"
    part = "PARTITIONED BY (p)" if partitioned else ""
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet {part}")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1, 'a'), (2, 2, 'b')")
    spark.range(3).selectExpr("CAST(id + 100 AS INT) AS id", "0 AS v", "'a' AS p").write.parquet(f"/tmp/{db}_stray")
    where = location(spark, t, "p='a'" if partitioned else None).removeprefix("file:")
    os.makedirs(f"{where}/sub")
    shutil.copy(glob.glob(f"/tmp/{db}_stray/*.parquet")[0], f"{where}/sub/copied.parquet")
    shutil.rmtree(f"/tmp/{db}_stray")
    spark.sql(f"REFRESH TABLE {t}")
    assert spark.table(t).count() == 2  # Spark does not read it
    with caplog.at_level("WARNING", logger="spark_merge"):
        r1 = merge(spark, f"UPDATE {t} SET v = 5 WHERE id = 1")
        r2 = merge(spark, f"UPDATE {t} SET v = 6 WHERE id = 1")
    assert r1.metrics["numTargetRowsUpdated"] == r2.metrics["numTargetRowsUpdated"] == 1
    assert rows(spark, t) == [(1, 6, "a"), (2, 2, "b")]
    said = [r.message for r in caplog.records if "not read by Spark's scan" in r.message]
    assert said and "sub/copied.parquet" in said[0]
    assert os.path.exists(f"{where}/sub/copied.parquet")  # left where it is


def test_null_partition_values_in_every_spelling_merge_as_one_partition(spark, db):
    """NULL, '' and '__HIVE_DEFAULT_PARTITION__' name one partition, as Spark's own INSERT stores them
    (row by row): a MERGE inserting all three in one write stores them there and reads NULL back
    (before: a 110-line FileAlreadyExistsException from Spark's writer)."""
    t = f"{db}.nulls"
    spark.sql(f"CREATE TABLE {t} (id INT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (0, 'x')")
    r = merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT * FROM VALUES (1, CAST(NULL AS STRING)), (2, ''), "
        f"(3, '__HIVE_DEFAULT_PARTITION__') AS s(id, p)) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *",
    )
    assert r.metrics["numTargetRowsInserted"] == 3
    assert rows(spark, t) == [(0, "x"), (1, None), (2, None), (3, None)]
    # as a plain INSERT of each spelling, one statement per row, stores them
    control = f"{db}.nulls_insert"
    spark.sql(f"CREATE TABLE {control} (id INT, p STRING) USING parquet PARTITIONED BY (p)")
    for i, value in enumerate(["CAST(NULL AS STRING)", "''", "'__HIVE_DEFAULT_PARTITION__'"], 1):
        spark.sql(f"INSERT INTO {control} SELECT {i}, {value}")
    assert rows(spark, control) == [(1, None), (2, None), (3, None)]
    assert [r[0] for r in spark.sql(f"SHOW PARTITIONS {t}").collect()] == ["p=__HIVE_DEFAULT_PARTITION__", "p=x"]
    # an UPDATE moving rows there in two spellings at once, too
    merge(spark, f"UPDATE {t} SET p = CASE WHEN id = 0 THEN '' ELSE p END WHERE id = 0")
    assert rows(spark, t)[0] == (0, None)


@pytest.mark.parametrize("partitioned", [True, False], ids=["partition", "unpartitioned"])
def test_a_renamed_table_keeps_its_identity_history_rollback_and_vacuum_once_adopted(spark, db, partitioned):
    """ALTER TABLE ... RENAME TO on a managed table after merges. Partitioned: the catalog moves the root
    with it. Unpartitioned: Spark points it at the new name's empty directory, leaving the root (and
    the version it read) behind. Every command says to adopt; adopt keeps the identity and history
    (before: a new identity, every entry "another table's"), rollback and vacuum then work."""
    from merge_core import MetadataError, adopt

    t, renamed = f"{db}.before_rename", f"{db}.after_rename"
    part = "PARTITIONED BY (p)" if partitioned else ""
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet {part}")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1, 'a'), (2, 2, 'b')")
    first = merge(spark, f"UPDATE {t} SET v = 10 WHERE id = 1")
    second = merge(spark, f"UPDATE {t} SET v = 20 WHERE id = 2")
    table_id = history(spark, t)[0]["table_id"]
    spark.sql(f"ALTER TABLE {t} RENAME TO {renamed}")
    with pytest.raises(MetadataError, match=f"spark-merge adopt {renamed}"):
        merge(spark, f"UPDATE {renamed} SET v = 0 WHERE id = 1")
    done = adopt(spark, renamed)
    assert any("renamed from" in r for r in done["reasons"]), done
    assert rows(spark, renamed) == [(1, 10, "a"), (2, 20, "b")]
    entries = history(spark, renamed)
    assert [e["merge_id"] for e in entries] == [second.merge_id, first.merge_id]
    assert {e["table_id"] for e in entries} == {table_id}
    assert not os.path.exists(
        f"{spark.conf.get('spark.sql.warehouse.dir').removeprefix('file:')}/{db}.db/before_rename"
    )
    third = merge(spark, f"UPDATE {renamed} SET v = 30 WHERE id = 1")
    assert history(spark, renamed)[0]["table_id"] == table_id
    rollback(spark, renamed, second.merge_id)
    assert rows(spark, renamed) == [(1, 10, "a"), (2, 2, "b")]
    vacuum(spark, renamed, retain_hours=0)
    assert rows(spark, renamed) == [(1, 10, "a"), (2, 2, "b")]
    assert third.merge_id in [e["merge_id"] for e in history(spark, renamed)]


@pytest.mark.parametrize("edit", ["garbage", "another table's"])
def test_an_edited_table_id_is_refused_before_anything_is_written_and_adopt_restores_it(spark, db, edit):
    """spark_merge.table_id set by hand (to an id-shaped word, or to another table's id) no longer
    matches the identity its commits recorded: every command refuses, naming adopt, and nothing is
    written (before: the merge committed and tagged its history entry with it); adopt sets it back to
    the id of the table's first commit."""
    from merge_core import MetadataError, adopt

    t, other = f"{db}.owned", f"{db}.other"
    for name in (t, other):
        spark.sql(f"CREATE TABLE {name} (id INT, v INT) USING parquet")
        spark.sql(f"INSERT INTO {name} VALUES (1, 1)")
    first = merge(spark, f"UPDATE {t} SET v = 2")
    merge(spark, f"UPDATE {other} SET v = 2")
    wrong = "garbage" if edit == "garbage" else history(spark, other)[0]["table_id"]
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.table_id' = '{wrong}')")
    before = rows(spark, t)
    with pytest.raises(MetadataError, match=f"not the id its commits recorded.*spark-merge adopt {t}"):
        merge(spark, f"UPDATE {t} SET v = 3")
    assert rows(spark, t) == before and [e["merge_id"] for e in history(spark, other)] != []
    done = adopt(spark, t)
    assert done["set"]["spark_merge.table_id"] == first.merge_id, done
    merge(spark, f"UPDATE {t} SET v = 3")
    assert {e["table_id"] for e in history(spark, t)} == {first.merge_id}
    vacuum(spark, t, retain_hours=0)


def test_overwrite_truncate_and_drop_partition_are_reported_or_refused(spark, db, caplog):
    """INSERT OVERWRITE of a partition a merge rewrote: a rollback of the merge would drop its rows, so it
    refuses. DROP PARTITION of a rewritten partition: the rollback says the partition is gone. TRUNCATE of
    an unpartitioned table read from its root deletes its history: `history` says so (before: nothing)."""
    t = f"{db}.ow"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1, 'a'), (2, 2, 'b')")
    m = merge(spark, f"UPDATE {t} SET v = 10 WHERE p = 'a'")
    spark.sql(f"INSERT OVERWRITE {t} PARTITION (p = 'a') VALUES (5, 5)")
    before = rows(spark, t)
    with pytest.raises(UnsupportedError, match="written after the commit of"):
        rollback(spark, t, m.merge_id)
    assert rows(spark, t) == before == [(2, 2, "b"), (5, 5, "a")]
    m2 = merge(spark, f"UPDATE {t} SET v = 20 WHERE p = 'b'")
    spark.sql(f"ALTER TABLE {t} DROP PARTITION (p = 'b')")
    with pytest.raises(ConflictError, match="partition p=b no longer exists"):
        rollback(spark, t, m2.merge_id)
    assert rows(spark, t) == [(5, 5, "a")]

    u = f"{db}.trunc"
    spark.sql(f"CREATE TABLE {u} (id INT, v INT) USING parquet")
    spark.sql(f"INSERT INTO {u} VALUES (1, 1)")
    merge(spark, f"UPDATE {u} SET v = 2")
    vacuum(spark, u, retain_hours=0)  # the table reads its root again
    spark.sql(f"TRUNCATE TABLE {u}")
    with caplog.at_level("WARNING", logger="spark_merge"):
        assert history(spark, u) == []
    assert any(f"the history of {u} is gone" in r.message for r in caplog.records), caplog.text
    again = merge(
        spark, f"MERGE INTO {u} t USING (SELECT 7 AS id, 7 AS v) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"
    )
    assert [e["merge_id"] for e in history(spark, u)] == [again.merge_id] and rows(spark, u) == [(7, 7)]


def test_a_dropped_partition_reloads_with_overwrite_or_after_vacuum_without_its_replaced_version(spark, db):
    """DROP PARTITION, then a reload of the partition (docs/operations.md): INSERT OVERWRITE empties the
    canonical directory that still holds the version a merge replaced; after `vacuum --retain 0` a plain
    INSERT finds that directory without it. Neither reads a replaced row back."""
    t = f"{db}.reload"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1, 'a'), (2, 2, 'b')")
    merge(spark, f"UPDATE {t} SET v = 10")
    spark.sql(f"ALTER TABLE {t} DROP PARTITION (p = 'a')")
    spark.sql(f"INSERT OVERWRITE {t} PARTITION (p = 'a') VALUES (3, 3)")
    assert rows(spark, t) == [(2, 10, "b"), (3, 3, "a")]
    spark.sql(f"ALTER TABLE {t} DROP PARTITION (p = 'b')")
    vacuum(spark, t, retain_hours=0)
    spark.sql(f"INSERT INTO {t} VALUES (4, 4, 'b')")
    assert rows(spark, t) == [(3, 3, "a"), (4, 4, "b")]


def test_add_partition_msck_and_refresh_change_nothing_spark_merge_keeps(spark, db):
    """Partition discovery skips spark-merge's `_merge_*` directories: MSCK REPAIR TABLE adds no version
    as a partition, and an added partition merges like any other."""
    t = f"{db}.msck"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1, 'a'), (2, 2, 'b')")
    merge(spark, f"UPDATE {t} SET v = 10 WHERE p = 'a'")
    merge(spark, f"DELETE FROM {t} WHERE p = 'b'")
    spark.sql(f"ALTER TABLE {t} ADD PARTITION (p = 'z')")
    spark.sql(f"MSCK REPAIR TABLE {t}")
    spark.sql(f"REFRESH TABLE {t}")
    assert rows(spark, t) == [(1, 10, "a")]
    merge(
        spark,
        f"MERGE INTO {t} t USING (SELECT 9 AS id, 9 AS v, 'z' AS p) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *",
    )
    merge(spark, f"UPDATE {t} SET v = 99 WHERE p = 'z'")
    assert rows(spark, t) == [(1, 10, "a"), (9, 99, "z")]


def test_create_like_and_ctas_make_tables_of_their_own(spark, db):
    """A table made LIKE a spark-merge table, or AS SELECT from it, merges on its own: its commits never
    touch the original's root or history (copied properties are refused until adopted)."""
    from merge_core import MetadataError, adopt

    t = f"{db}.orig"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1)")
    merge(spark, f"UPDATE {t} SET v = 2")
    original = [e["merge_id"] for e in history(spark, t)]
    for copy, ddl in ((f"{db}.liked", f"CREATE TABLE {db}.liked LIKE {t}"),
                      (f"{db}.ctas", f"CREATE TABLE {db}.ctas USING parquet AS SELECT * FROM {t}")):  # fmt: skip
        spark.sql(ddl)
        statement = (
            f"MERGE INTO {copy} t USING (SELECT 3 AS id, 3 AS v) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"
        )
        try:
            merge(spark, statement)
        except MetadataError as e:  # it copied the original's properties: refused until adopted
            assert "spark-merge adopt" in str(e)
            adopt(spark, copy)
            merge(spark, statement)
        assert (3, 3) in rows(spark, copy)
    assert [e["merge_id"] for e in history(spark, t)] == original and rows(spark, t) == [(1, 2)]


def test_drop_leaves_nothing_that_blocks_the_name(spark, db):
    """Spark's DROP TABLE of a merged unpartitioned managed table deletes only its current version's
    directory: the root stays and CREATE TABLE of the name fails. spark-merge drop drops it whole; run
    after a plain DROP TABLE, it removes what that left."""
    for name, plain in (("dropped", False), ("plain_dropped", True)):
        t = f"{db}.{name}"
        spark.sql(f"CREATE TABLE {t} (id INT, v INT) USING parquet")
        spark.sql(f"INSERT INTO {t} VALUES (1, 1)")
        merge(spark, f"UPDATE {t} SET v = 2")
        root = location(spark, t).rsplit("/_merge_", 1)[0].removeprefix("file:")
        if plain:
            spark.sql(f"DROP TABLE {t}")
            assert os.path.isdir(root)
            with pytest.raises(Exception, match="LOCATION_ALREADY_EXISTS"):
                spark.sql(f"CREATE TABLE {t} (id INT) USING parquet")
            done = drop_table(spark, t)
            assert not done["dropped"] and done["removed"] == [f"file:{root}"] or done["removed"] == [root], done
        else:
            done = drop_table(spark, t)
            assert done["dropped"] and done["removed"], done
        assert not os.path.exists(root)
        spark.sql(f"CREATE TABLE {t} (id INT) USING parquet")
    with pytest.raises(MergeError, match="nothing to drop"):
        drop_table(spark, f"{db}.never_was")


STEPS = int(os.environ.get("SPARK_MERGE_CATALOG_STEPS", "24"))


def test_random_operations_keep_the_rows_of_a_model(spark, db):
    """Merges, rollbacks (with and without discard_later_writes), vacuums and plain Spark operations
    (INSERT, INSERT OVERWRITE of a partition, DROP and ADD PARTITION, a stray file, REFRESH), in random
    order: after every step the table holds the model's rows, or the step was refused with nothing
    changed. SPARK_MERGE_CATALOG_STEPS sets the steps (make test-all: 150); SPARK_MERGE_CATALOG_SEED
    replays a run."""
    import random

    seed = int(os.environ.get("SPARK_MERGE_CATALOG_SEED", random.randrange(10**6)))
    rng = random.Random(seed)
    t = f"{db}.rand"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT, p STRING) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, 'c')")
    model = {(1, 1, "a"), (2, 2, "b"), (3, 3, "c")}
    commits: list[tuple[str, set, set]] = []  # (merge id, the model before it, the partitions it repointed)
    next_id, done, refused = [100], [], []

    def new_id() -> int:
        next_id[0] += 1
        return next_id[0]

    def committed(result, before) -> None:
        touched = {p["p"] for p in result.partitions} if result.metrics["numTargetPartitionsRewritten"] else set()
        commits.append((result.merge_id, before, touched))

    def step_merge(before):
        kind = rng.choice(["update", "delete", "insert"])
        p = rng.choice("abc")
        if kind == "update":
            committed(merge(spark, f"UPDATE {t} SET v = v + 1 WHERE p = '{p}'"), before)
            return {(i, v + 1 if q == p else v, q) for i, v, q in before}
        if kind == "delete" and before:
            i = rng.choice(sorted(before))[0]
            committed(merge(spark, f"DELETE FROM {t} WHERE id = {i}"), before)
            return {r for r in before if r[0] != i}
        i = new_id()
        also = rng.choice(["", "WHEN MATCHED THEN UPDATE SET v = s.v "])  # an insert-only merge appends in place
        if not spark.sql(f"SHOW PARTITIONS {t} PARTITION (p = '{p}')").count():
            # appended in place, a dropped partition comes back in its canonical directory, which keeps the
            # version a merge replaced until vacuum (docs/operations.md, DROP PARTITION): staged instead
            also = "WHEN MATCHED THEN UPDATE SET v = s.v "
        committed(merge(spark, f"MERGE INTO {t} t USING (SELECT {i} AS id, 0 AS v, '{p}' AS p) s ON t.id = s.id "
                               f"{also}WHEN NOT MATCHED THEN INSERT *"), before)  # fmt: skip
        return before | {(i, 0, p)}

    def step_rollback(before):
        if not commits:
            return before
        k = rng.randrange(len(commits))
        merge_id, then, _ = commits[k]
        restored = set().union(*(c[2] for c in commits[k:]))
        entry = rollback(spark, t, merge_id, discard_later_writes=rng.random() < 0.5)
        after = {r for r in before if r[2] not in restored} | {r for r in then if r[2] in restored}
        commits.append((entry["merge_id"], before, {r["partition"]["p"] for r in entry["repoints"]}))
        return after

    def step_plain(before):
        op = rng.choice(["insert", "overwrite", "drop_partition", "add_partition", "stray", "refresh", "vacuum"])
        p = rng.choice("abcd")
        if op == "insert":
            if not spark.sql(f"SHOW PARTITIONS {t} PARTITION (p = '{p}')").count():
                # a plain INSERT re-creates a dropped partition in its canonical directory, which keeps the
                # version a merge replaced until vacuum (docs/operations.md, DROP PARTITION): a new value
                p = "d"
            i = new_id()
            spark.sql(f"INSERT INTO {t} VALUES ({i}, 5, '{p}')")
            return before | {(i, 5, p)}
        if op == "overwrite":
            i = new_id()
            spark.sql(f"INSERT OVERWRITE {t} PARTITION (p = '{p}') VALUES ({i}, 6)")
            return {r for r in before if r[2] != p} | {(i, 6, p)}
        if op == "drop_partition":
            spark.sql(f"ALTER TABLE {t} DROP IF EXISTS PARTITION (p = '{p}')")
            return {r for r in before if r[2] != p}
        if op == "add_partition":  # of a new value: a, b and c keep replaced versions in their own directories
            spark.sql(f"ALTER TABLE {t} ADD IF NOT EXISTS PARTITION (p = '{rng.choice('de')}')")
        elif op == "stray" and spark.sql(f"SHOW PARTITIONS {t} PARTITION (p = '{p}')").count():
            where = location(spark, t, f"p='{p}'").removeprefix("file:")
            data = glob.glob(f"{where}/*.parquet")
            if data:
                os.makedirs(f"{where}/stray", exist_ok=True)
                shutil.copy(data[0], f"{where}/stray/{rng.randrange(10**6)}.parquet")
        elif op == "refresh":
            spark.sql(f"REFRESH TABLE {t}")
        elif op == "vacuum":
            vacuum(spark, t, retain_hours=rng.choice([0, 168]))
        return before

    for number in range(STEPS):
        step = rng.choices([step_merge, step_rollback, step_plain], weights=[4, 2, 4])[0]
        before = set(model)
        try:
            model = step(before)
            done.append(step.__name__)
        except MergeError as e:  # refused: nothing changed
            refused.append(f"{step.__name__}: {str(e)[:120]}")
            model = before
        got = set(rows(spark, t))
        assert got == model, f"seed {seed}, step {number} ({step.__name__}): {sorted(got)} != {sorted(model)}"
    print(f"seed {seed}: {len(done)} steps done, {len(refused)} refused: {refused}")


def test_a_table_of_a_newer_format_is_refused_in_one_line_and_an_older_one_is_read(spark, db):
    """Commits write the format of their metadata (spark_merge.format_version); a release reads every
    format up to its own (a table of the first release has none) and refuses a newer one."""
    from merge_core import TargetError

    t = f"{db}.formats"
    spark.sql(f"CREATE TABLE {t} (id INT, v INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (1, 1)")
    merge(spark, f"UPDATE {t} SET v = 2")
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {t}").collect()}
    assert props["spark_merge.format_version"] == "2"
    spark.sql(f"ALTER TABLE {t} UNSET TBLPROPERTIES ('spark_merge.format_version')")  # as the first release left it
    merge(spark, f"UPDATE {t} SET v = 3")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('spark_merge.format_version' = '9')")
    for command in (lambda: merge(spark, f"UPDATE {t} SET v = 4"), lambda: history(spark, t), lambda: vacuum(spark, t)):
        with pytest.raises(
            TargetError, match=r"written by a newer spark-merge \(table format 9; this release reads formats 1 to 2\)"
        ) as e:
            command()
        assert "\n" not in str(e.value)
    assert rows(spark, t) == [(1, 3)]
