"""Every code block of the README and docs/ is marked: run as written (tests/test_docs.py runs it in
a fresh clone) or a fragment. Read from the files, no run."""

from __future__ import annotations

from tests.test_docs import DOCS, FENCE, ROOT, blocks


def test_every_block_of_every_doc_is_run_or_marked_as_a_fragment():
    unmarked = [
        f"{doc.name}: {text.splitlines()[0][:60]}"
        for doc in DOCS
        for kind, _, text in blocks(doc)
        if kind == "unmarked"
    ]
    assert not unmarked, unmarked
    for doc in DOCS:  # the block pattern saw every fence
        assert len(blocks(doc)) * 2 == len(FENCE.findall(doc.read_text())), doc.name


def test_the_readme_marks_its_quick_starts():
    kinds = [(kind, slow) for kind, slow, _ in blocks(ROOT / "README.md") if kind != "fragment"]
    assert kinds == [("python", False), ("shell", True), ("shell", True), ("shell", True)], kinds
