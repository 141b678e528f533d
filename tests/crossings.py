"""Counting Python/Jinja crossings: how often one call stack passes between the languages.

A lifecycle macro called from Python is one crossing; a host primitive it calls is a second; a
primitive that renders a macro again is a third. ``Crossings`` wraps merge_core's entry into the
macros (``macros.render``) and every public method of the Python hosts, and records, per lifecycle
macro entered from Python, the deepest chain seen below it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from merge_core.common import macros


class Crossings:
    def __init__(self) -> None:
        self.stack = ["py"]
        self.path: list[str] = []
        self.deepest: dict[str, list[str]] = {}  # root macro -> its deepest chain

    def enter(self, lang: str, label: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        if self.stack[-1] == lang:
            return fn(*args, **kwargs)
        self.stack.append(lang)
        self.path.append(label)
        root = self.path[0]
        if len(self.path) > len(self.deepest.get(root, [])):
            self.deepest[root] = list(self.path)
        try:
            return fn(*args, **kwargs)
        finally:
            self.stack.pop()
            self.path.pop()

    def depth(self, root: str) -> int:
        return len(self.deepest.get(root, []))

    def chain(self, root: str) -> str:
        return " > ".join(self.deepest.get(root, []))


@contextmanager
def counted(monkeypatch: pytest.MonkeyPatch, *hosts: type) -> Iterator[Crossings]:
    """Count crossings while the block runs: macros entered from Python, the ``hosts``' methods."""
    c = Crossings()
    render = macros.render

    def traced_render(name: str, *args: Any, **kwargs: Any) -> Any:
        return c.enter("jinja", name, render, name, *args, **kwargs)

    monkeypatch.setattr(macros, "render", traced_render)
    monkeypatch.setattr(macros, "_render", traced_render)
    for cls in hosts:
        for name, member in list(vars(cls).items()):
            if callable(member) and not name.startswith("_"):
                monkeypatch.setattr(cls, name, _wrapped(c, f"{cls.__name__}.{name}", member))
    yield c


def _wrapped(c: Crossings, label: str, member: Callable) -> Callable:
    @functools.wraps(member)
    def method(*args: Any, **kwargs: Any) -> Any:
        return c.enter("py", label, member, *args, **kwargs)

    return method
