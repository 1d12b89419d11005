"""The test process's ``ast.parse`` survives a finalizer that parses inside it (the guard is
installed by ``tests/conftest.py``): without it, a failed test's report raised ``SystemError`` and
ended the whole xdist run with an internal error."""

from __future__ import annotations

import ast
import traceback
from pathlib import Path
from typing import Any


class FormatsATraceback:
    """In a cycle, so the collector is what finalizes it, perhaps inside a parse."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        try:
            {}["missing"] + 1  # type: ignore[operator]
        except KeyError as exc:
            traceback.format_exception(exc)  # its carets parse the line


def test_a_parse_is_whole_while_finalizers_that_parse_wait_for_the_collector() -> None:
    source = Path(ast.__file__).read_text(encoding="utf-8")
    trees: list[Any] = []
    for _ in range(20):
        for _ in range(50):
            FormatsATraceback()
        trees.append(ast.parse(source))
    assert len(trees) == 20
