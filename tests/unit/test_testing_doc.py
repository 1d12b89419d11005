"""The table of promises and their proofs (docs/testing.md) names only tests that exist: a test
renamed or removed would leave a promise claiming a proof it no longer has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Promises and their proofs"
NAMED = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def named_tests() -> list[tuple[str, str | None]]:
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    assert SECTION in text
    section = text.split(SECTION, 1)[1]
    return [(path, name or None) for path, name in NAMED.findall(section)]


def test_every_test_the_promise_table_names_exists() -> None:
    named = named_tests()
    assert len(named) > 50  # the table, not a stray mention
    missing = []
    for path, name in named:
        file = ROOT / path
        if not file.is_file():
            missing.append(path)
        elif name is not None and not re.search(rf"^(async )?def {name}\(", file.read_text(encoding="utf-8"), re.M):
            missing.append(f"{path}::{name}")
    assert missing == []
