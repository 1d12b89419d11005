"""The README's table of settings is a promise: every setting liminal reads is in it, under the
environment variable liminal reads for it (``mcp.enabled`` and ``harness.name`` were missing
from it, though ``liminal config`` listed both)."""

from __future__ import annotations

import re
from pathlib import Path

from liminal.config import setting_names

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `([a-z_.]+)` \| `(LIMINAL_[A-Z_]+)` \|", re.MULTILINE)


def test_every_setting_is_in_the_readme_under_its_variable() -> None:
    rows = dict(ROW.findall(README.read_text(encoding="utf-8")))
    names = [n for n in setting_names() if n != "home"]  # home: LIMINAL_HOME, said in prose
    missing = [n for n in names if n not in rows]
    assert not missing, f"settings missing from the README's table: {missing}"
    wrong = {n: v for n, v in rows.items() if v != "LIMINAL_" + n.replace(".", "_").upper()}
    assert not wrong, f"README rows naming another variable: {wrong}"
    unknown = sorted(set(rows) - set(names))
    assert not unknown, f"README rows for settings liminal does not read: {unknown}"
