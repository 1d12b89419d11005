"""``scripts/install-harness`` and the adapters' skip under CI: a CI run without npm exited 0
and skipped 93 acceptance tests; under ``CI=true`` a missing npm or node, or an adapter that did
not install, fails the run with one line saying so. Elsewhere they still skip, saying why."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fixtures.harness import adapters, clients

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-harness"
PINS = tomllib.loads((ROOT / "fixtures" / "harness" / "pins.toml").read_text(encoding="utf-8"))


def run(tmp_path: Path, path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    world = {"PATH": str(path), "LIMINAL_HARNESS_DIR": str(tmp_path / "harness"), **env}
    if "CI" not in env:
        world.pop("CI", None)
    return subprocess.run([sys.executable, str(SCRIPT)], env=world, capture_output=True, text=True,
                          timeout=60, check=False)


def tools(tmp_path: Path, **scripts: str) -> Path:
    """A folder for PATH holding only these programs (shell scripts)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, body in scripts.items():
        program = folder / name
        program.write_text(f"#!/bin/sh\n{body}\n")
        program.chmod(0o755)
    return folder


@pytest.mark.parametrize("missing", [("npm", "node"), ("npm",), ("node",)])
def test_without_npm_or_node_ci_fails_in_one_line(tmp_path: Path, missing: tuple[str, ...]) -> None:
    path = tools(tmp_path, **{t: "exit 0" for t in ("npm", "node") if t not in missing})
    done = run(tmp_path, path, CI="true")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done
    assert all(t in lines[0] for t in missing) and "CI=true" in lines[0], lines
    assert "Traceback" not in done.stderr
    # Outside CI the acceptance tests skip, saying why; the script says so and goes on.
    elsewhere = run(tmp_path, path)
    assert elsewhere.returncode == 0 and "will skip" in elsewhere.stderr, elsewhere


def test_an_adapter_that_does_not_install_fails_in_one_line(tmp_path: Path) -> None:
    path = tools(tmp_path, npm="echo 'npm ERR! 404 Not Found' >&2; exit 1", node="exit 0")
    done = run(tmp_path, path, CI="true")
    said = [line for line in done.stderr.splitlines() if line.startswith("install-harness:")]
    assert done.returncode == 1 and len(said) == 1, done
    # Every npm package pinned: the adapters, the clients (acpx) and the schema alike.
    pinned = len(adapters()) + len(clients()) + len(PINS.get("schemas", {}))
    assert f"{pinned} of {pinned} packages not installed" in said[0], said
    assert "claude-zed" in said[0] and "CI=true" in said[0], said
    assert run(tmp_path, path).returncode == 1  # outside CI too: a failed install is a failure


def test_under_ci_a_missing_adapter_fails_the_test_that_needs_it(tmp_path: Path) -> None:
    """The acceptance tests skip when an adapter is missing; under CI=true they fail."""
    test = tmp_path / "test_needs_adapter.py"
    test.write_text("def test_it(make_rig):\n    make_rig('claude-zed')\n")
    (tmp_path / "conftest.py").write_text("pytest_plugins = ['fixtures.harness.pytest_plugin']\n")
    env = {**os.environ, "LIMINAL_HARNESS_DIR": str(tmp_path / "empty"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    outcomes = {}
    for ci in ("", "true"):
        env["CI"] = ci
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider",
                               str(test)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        outcomes[ci] = done
    assert outcomes[""].returncode == 0 and "1 skipped" in outcomes[""].stdout, outcomes[""].stdout
    assert outcomes["true"].returncode == 1 and "1 failed" in outcomes["true"].stdout, outcomes["true"].stdout
    assert "CI=true" in outcomes["true"].stdout
