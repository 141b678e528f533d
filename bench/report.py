"""A bench's tables: printed as they come, and (with --write-docs) written into docs/performance.md
between the markers of their section, so the tables there come from a run of the bench, not an editor."""

from __future__ import annotations

from datetime import date
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "performance.md"


class Report:
    def __init__(self, marker: str):
        self.marker, self.lines = marker, []

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def write(self) -> None:
        """Replace the section between <!-- marker:begin --> and <!-- marker:end --> with this run's lines."""
        doc = DOCS.read_text()
        begin, end = f"<!-- {self.marker}:begin -->", f"<!-- {self.marker}:end -->"
        if begin not in doc or end not in doc:
            raise SystemExit(f"{DOCS} has no {begin} ... {end} section")
        head, rest = doc.split(begin, 1)
        body = "\n".join([f"Measured on {date.today().isoformat()}.", *self.lines]).strip()
        DOCS.write_text(f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}")
