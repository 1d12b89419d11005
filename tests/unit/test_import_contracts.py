"""The import contracts (pyproject.toml, ``[tool.importlinter]``; docs/architecture.md, "Floors").

``lint-imports`` runs in scripts/test next to ruff and mypy; these run it from pytest too, and
show that the loop contract does catch what it is there for: a loop between two files, in one
package or across two.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed")


def lint(cwd: Path, config: Path) -> subprocess.CompletedProcess[str]:
    # --no-cache: a cache from another tree (or an older run) must not answer for this one.
    return subprocess.run([str(LINT_IMPORTS), "--config", str(config), "--no-cache"], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def test_liminal_keeps_its_import_contracts() -> None:
    done = lint(ROOT, ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _loop_contract() -> str:
    """liminal's own loop contract, as configured, pointed at another package."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (loops,) = [c for c in contracts if c["id"] == "no-loops"]
    assert loops["type"] == "acyclic_siblings" and loops["ancestors"] == ["liminal"]
    return ('[tool.importlinter]\nroot_package = "loopy"\n\n[[tool.importlinter.contracts]]\n'
            f'id = "no-loops"\nname = "{loops["name"]}"\ntype = "{loops["type"]}"\n'
            'ancestors = ["loopy"]\n')


def _package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize(("files", "unlooped"), [
    # Two files of one package, the first importing the second inside a function (as the
    # factories that closed liminal's circles did).
    ({"loopy/__init__.py": "", "loopy/store/__init__.py": "",
      "loopy/store/base.py": "def open_store():\n    from loopy.store.sqlite import Sqlite\n",
      "loopy/store/sqlite.py": "from loopy.store.base import open_store\nclass Sqlite: ...\n"},
     {"loopy/store/base.py": "class Store: ...\n"}),
    # Files in two packages, the import under TYPE_CHECKING on one side.
    ({"loopy/__init__.py": "", "loopy/kernel/__init__.py": "", "loopy/mcp/__init__.py": "",
      "loopy/kernel/commands.py": "from loopy.mcp.link import SlashRequest\nclass Center: ...\n",
      "loopy/mcp/link.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    from loopy.kernel.commands import Center\nclass SlashRequest: ...\n"},
     {"loopy/mcp/link.py": "class SlashRequest: ...\n"}),
], ids=["in-one-package", "across-packages"])
def test_a_loop_between_files_breaks_the_contract(tmp_path: Path, files: dict[str, str],
                                                  unlooped: dict[str, str]) -> None:
    _package(tmp_path, files)
    (tmp_path / "contracts.toml").write_text(_loop_contract())
    done = lint(tmp_path, tmp_path / "contracts.toml")
    assert done.returncode != 0, done.stdout + done.stderr
    assert "BROKEN" in done.stdout
    # Without the loop the same contract is kept: it is the loop that breaks it.
    _package(tmp_path, unlooped)
    done = lint(tmp_path, tmp_path / "contracts.toml")
    assert done.returncode == 0, done.stdout + done.stderr
