"""Comments and docstrings under ``liminal/`` state invariants and reasons, not history.

What happened when, which issue asked for what and what the code did before belong in the commit
log and ``docs/decisions/``; a comment that tells them goes stale the day it is written. This test
reads every comment and docstring (not code, not other strings) and fails on the forms history
takes there: an issue or pull-request number, "used to", "previously", "as before", "before rule
N". A version of a CLI stated as a fact of its file format ("Claude Code 2.1.44 writes ...") is
not history and passes.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "liminal"

HISTORY = re.compile(
    r"\bissues?\s*#?\d+"  # "issue 25", "issues 20 and 23"
    r"|\b(?:PR|pull request)\s*#?\d+"
    r"|(?<![\w&/])#\d+\b"  # "#35"
    r"|(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bbeen )(?<!\bbeing )(?<!\bget )\bused to\b"  # "it used to"
    r"|\bpreviously\b"
    r"|\bas before\b"
    r"|\bbefore rule \d+",
    re.IGNORECASE)


def prose(source: str) -> list[tuple[int, str]]:
    """Every comment and docstring of a module, by the line it starts on."""
    found = [(token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(source).readline)
             if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                found.append((first.lineno, first.value.value))
    return sorted(found)


def history_in(source: str) -> list[tuple[int, str]]:
    """Each place a comment or docstring tells history: its line and the words that do."""
    told = []
    for line, text in prose(source):
        for match in HISTORY.finditer(text):
            told.append((line + text.count("\n", 0, match.start()), match[0]))
    return told


def test_no_comment_or_docstring_under_liminal_tells_history() -> None:
    told = [f"{path.relative_to(ROOT).as_posix()}:{line}: {words!r}"
            for path in sorted(PACKAGE.rglob("*.py"))
            for line, words in history_in(path.read_text(encoding="utf-8"))]
    assert not told, ("comments and docstrings state the invariant and why; history goes in the commit "
                      "message or docs/decisions/:\n  " + "\n  ".join(told))


def test_the_check_reads_comments_and_docstrings_only() -> None:
    source = (
        '"""Module. Rule 10 came with issue 25."""\n'
        "def f(x):\n"
        '    """It used to patch the router (#35)."""\n'
        "    y = '#35 issue 4 used to'  # previously: as before; before rule 10\n"
        "    # a hook is used to keep requests; Claude Code 2.1.44 writes one line\n"
        "    return y\n")
    assert [words for _, words in history_in(source)] == [
        "issue 25", "used to", "#35", "previously", "as before", "before rule 10"]
    assert [line for line, _ in history_in(source)] == [1, 3, 3, 4, 4, 4]
