"""The file index (merge_core/spark/file_index.py): a listed file's facts come from an entry recorded
with its path, size and modification time, or else from its footer; what a merge learned is recorded by
its commit, chained to the manifests before it, and every CHAIN-th manifest is a snapshot that replaces
them. Each test is an input that would make the index lie: a file rewritten under its old name, a
manifest half written or of another format, a directory the commit replaced, a chain cut short."""

from __future__ import annotations

import datetime
import os
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from merge_core.spark import file_index

LOCAL = fs.LocalFileSystem()


def write(path: Path, table: pa.Table, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, str(path), **kwargs)
    return path


def info(path: Path) -> fs.FileInfo:
    return LOCAL.get_file_info(str(path))


def reads(fn) -> int:
    """How many footers fn() read."""
    before = file_index.footers_read
    fn()
    return file_index.footers_read - before


def manifests(root: Path) -> list[str]:
    return sorted(p.name for p in (root / file_index.INDEX_DIR).glob("*" + file_index.SUFFIX))


@pytest.fixture
def table(tmp_path):
    """A table root with two partitions: ids 0-4 and 30-34 in two row groups, and a date and a decimal."""
    root = tmp_path / "t"
    a = write(root / "dt=1/a.parquet", pa.table({"id": [0, 1, 2, 3, 4, 30, 31, 32, 33, 34]}), row_group_size=5)
    days = pa.array([datetime.date(2026, 1, 1), None], pa.date32())
    amounts = pa.array([Decimal("1.50"), Decimal("9.25")], pa.decimal128(10, 2))
    b = write(root / "dt=2/b.parquet", pa.table({"id": [40, 41], "day": days, "amount": amounts}))
    return root, a, b


def test_a_second_merge_answers_from_the_entries_the_first_recorded(table):
    """The first merge reads both footers and records them; the next reads none, and its facts are the
    footer's: rows, each row group's range (dates and decimals as such), the NULLs counted."""
    root, a, b = table
    first = file_index.FileIndex(f"file:{root}")
    assert reads(lambda: [first.facts(LOCAL, info(p)) for p in (a, b)]) == 2
    first.write("20261207000000_a")
    second = file_index.FileIndex(f"file:{root}")
    got = {}
    assert reads(lambda: got.update({p: second.facts(LOCAL, info(p)) for p in (a, b)})) == 0
    assert got[a] == file_index.footer_facts(LOCAL, str(a))
    assert got[a].ranges["id"] == [(0, 4, 0, 5), (30, 34, 0, 5)]
    assert got[b].ranges["day"] == [(datetime.date(2026, 1, 1), datetime.date(2026, 1, 1), 1, 2)]
    assert got[b].ranges["amount"] == [(Decimal("1.50"), Decimal("9.25"), 0, 2)]
    assert got[b].rows == 2 and not second.learned


def test_a_file_rewritten_under_its_old_name_is_read_again(table):
    """Same path, other bytes: the size or the modification time differs, so the entry does not answer;
    the footer does, and the next commit records it."""
    root, a, _ = table
    index = file_index.FileIndex(f"file:{root}")
    index.facts(LOCAL, info(a))
    index.write("20261207000000_a")
    stat = os.stat(a)
    write(a, pa.table({"id": [100, 200, 300]}))
    os.utime(a, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = file_index.FileIndex(f"file:{root}")
    facts = []
    assert reads(lambda: facts.append(again.facts(LOCAL, info(a)))) == 1
    assert facts[0].rows == 3 and facts[0].ranges["id"] == [(100, 300, 0, 3)]


def test_a_manifest_that_cannot_be_read_leaves_the_footers_to_answer(table):
    """Half written, or of another format: the index knows nothing, and every file is read."""
    root, a, b = table
    index = file_index.FileIndex(f"file:{root}")
    for p in (a, b):
        index.facts(LOCAL, info(p))
    index.write("20261207000000_a")
    head = root / file_index.INDEX_DIR / "20261207000000_a.index"
    head.write_bytes(head.read_bytes()[:40])
    file_index._cache.clear()
    assert reads(lambda: [file_index.FileIndex(f"file:{root}").facts(LOCAL, info(p)) for p in (a, b)]) == 2
    other = pa.table({"path": ["dt=1/a.parquet"]}).replace_schema_metadata({"spark_merge.file_index": "99"})
    pq.write_table(other, str(root / file_index.INDEX_DIR / "20261207000001_b.index"))
    assert reads(lambda: [file_index.FileIndex(f"file:{root}").facts(LOCAL, info(p)) for p in (a, b)]) == 2


def test_a_replaced_directory_s_entries_do_not_outlive_the_commit(table):
    """The commit repointed dt=1 elsewhere (retire): its manifest says so, and no later snapshot
    carries dt=1's old entries."""
    root, a, b = table
    index = file_index.FileIndex(f"file:{root}")
    for p in (a, b):
        index.facts(LOCAL, info(p))
    index.write("20261207000000_a")
    later = file_index.FileIndex(f"file:{root}")
    later.retire([f"file:{root}/dt=1"])
    later.write("20261207000001_b")
    reader = file_index.FileIndex(f"file:{root}")
    assert reads(lambda: reader.facts(LOCAL, info(a))) == 1
    assert reads(lambda: reader.facts(LOCAL, info(b))) == 0


def test_the_chain_is_bounded_and_a_snapshot_replaces_it(table, monkeypatch):
    """Each commit names the manifests before it; the CHAIN-th writes every live entry instead and
    removes the older ones: planning reads at most CHAIN files, and nothing known is lost."""
    monkeypatch.setattr(file_index, "CHAIN", 3)
    root, a, b = table
    first = file_index.FileIndex(f"file:{root}")
    first.facts(LOCAL, info(a))
    first.write("20261207000000_a")
    second = file_index.FileIndex(f"file:{root}")
    second.facts(LOCAL, info(b))
    second.write("20261207000001_b")
    assert manifests(root) == ["20261207000000_a.index", "20261207000001_b.index"]
    third = file_index.FileIndex(f"file:{root}")
    assert reads(lambda: [third.facts(LOCAL, info(p)) for p in (a, b)]) == 0
    third.write("20261207000002_c")
    assert manifests(root) == ["20261207000002_c.index"]
    assert reads(lambda: [file_index.FileIndex(f"file:{root}").facts(LOCAL, info(p)) for p in (a, b)]) == 0


def test_a_carried_file_is_known_under_its_new_name(table):
    """A file linked into the directory that replaces its partition holds what the original does."""
    root, a, _ = table
    index = file_index.FileIndex(f"file:{root}")
    index.facts(LOCAL, info(a))
    dest = root / "_merge_x/dt=1/a.parquet"
    dest.parent.mkdir(parents=True)
    os.link(a, dest)
    index.carried([(f"file:{a}", f"file:{dest}")])
    index.retire([f"file:{root}/dt=1"])
    index.write("20261207000000_a")
    assert reads(lambda: file_index.FileIndex(f"file:{root}").facts(LOCAL, info(dest))) == 0


def test_keys_against_a_file_s_ranges():
    """A file is out only when some key misses every row group; NULLs count only under `<=>`; a column
    without ranges tells nothing."""
    facts = file_index.Facts(10, {"id": [(0, 4, 0, 5), (30, 34, 2, 5)], "k": [(None, None, 3, 3)]})

    def key(column="id", lo=10, hi=20, null_safe=False):
        return {"column": column, "lo": lo, "hi": hi, "null_safe": null_safe}

    assert not file_index.can_hold(facts, [key()])
    assert file_index.can_hold(facts, [key(null_safe=True)])  # row group 2 holds NULL ids
    assert file_index.can_hold(facts, [key(lo=4, hi=5)])
    assert not file_index.can_hold(facts, [key(column="k", lo=0, hi=99)])  # only NULLs
    assert file_index.can_hold(facts, [key(column="other")])
    assert not file_index.can_hold(facts, [key(column="other"), key(lo=50, hi=60)])


def test_a_snapshot_keeps_a_directory_replaced_in_the_chain_out(table, monkeypatch):
    """dt=1 was replaced by the second of three commits: the snapshot the third writes holds dt=2's
    entry and not dt=1's, so dt=1's file is read again (were it still the table's, by a rollback)."""
    monkeypatch.setattr(file_index, "CHAIN", 3)
    root, a, b = table
    first = file_index.FileIndex(f"file:{root}")
    for p in (a, b):
        first.facts(LOCAL, info(p))
    first.write("20261207000000_a")
    second = file_index.FileIndex(f"file:{root}")
    second.retire([f"file:{root}/dt=1"])
    second.write("20261207000001_b")
    file_index.FileIndex(f"file:{root}").write("20261207000002_c")
    assert manifests(root) == ["20261207000002_c.index"]
    reader = file_index.FileIndex(f"file:{root}")
    assert reads(lambda: reader.facts(LOCAL, info(b))) == 0
    assert reads(lambda: reader.facts(LOCAL, info(a))) == 1


def test_a_lookup_decodes_only_the_row_groups_that_can_hold_its_path(tmp_path):
    """A manifest of 10,000 files: asking for one file decodes the one row group whose paths span it,
    so a merge touching a few partitions of a large table decodes a few thousand entries, not all."""
    facts = file_index.Facts(5, {"id": [(1, 2, 0, 5)]})
    entries = {f"dt={i:05d}/part-0.parquet": (100, 7, facts) for i in range(10_000)}
    rows = [r for p, e in sorted(entries.items()) for r in file_index._rows_of(p, e)]
    file_index._write_manifest(LOCAL, str(tmp_path), "m.index", pa.Table.from_pylist(rows, file_index.SCHEMA), [], ())
    manifest = file_index._manifest(LOCAL, str(tmp_path), "m.index")
    assert manifest.entry("dt=04321/part-0.parquet") == (100, 7, facts)
    assert manifest.entry("dt=04321/other.parquet") is None
    assert len(manifest._groups) == 1 < manifest._file.metadata.num_row_groups


def test_vacuum_leaves_one_snapshot_without_the_ranges_of_removed_files(table):
    """Vacuum removed dt=1's directory: the index it leaves is one manifest, holding dt=2's entry and no
    range of a row that was in dt=1 (the older manifests, which held them, are gone)."""
    root, a, b = table
    first = file_index.FileIndex(f"file:{root}")
    for p in (a, b):
        first.facts(LOCAL, info(p))
    first.write("20261207000000_a")
    file_index.FileIndex(f"file:{root}").vacuumed([f"file:{root}/dt=1"], "20261207000001_v")
    assert manifests(root) == ["20261207000001_v.index"]
    kept = pq.read_table(root / file_index.INDEX_DIR / "20261207000001_v.index")
    assert set(kept.column("path").to_pylist()) == {"dt=2/b.parquet"}
    empty = root.parent / "empty"
    empty.mkdir()
    file_index.FileIndex(f"file:{empty}").vacuumed([f"file:{empty}/dt=1"], "20261207000002_v")
    assert not (empty / file_index.INDEX_DIR).exists()
