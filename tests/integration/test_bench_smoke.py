"""Every benchmark in ``bench/`` still runs: each script, found by globbing the folder, in its
``--smoke`` mode (a small run, seconds; its figures mean nothing). A benchmark that cannot run is
a broken test: ``bench/proxy_throughput.py``'s ``liminal`` case died before its first frame for
days ("the chain closed its stdout after 0 of 200000 frames") and nothing said so. A new script
without a ``--smoke`` mode fails here (argparse refuses the flag).

A script that needs the real adapters exits 77 in smoke mode when they are not installed, and is
skipped with its reason, like the acceptance tests. Helpers that are not benchmarks (the fast
agent) live in ``bench/support/``. About 90 s in all with the harness installed (half of it
``recycle.py``, ``swap.py`` and ``side_session.py``, which drive the real Claude Code), 20 s
without.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "bench").glob("*.py"))
SKIPPED = 77  # a smoke run that cannot run here (no harness) says so with this code


def test_the_folder_has_benchmarks() -> None:
    assert len(SCRIPTS) >= 9, SCRIPTS  # the glob finds them (a moved folder would pass vacuously)


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_a_benchmark_runs_in_its_smoke_mode(script: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    env["LIMINAL_HOME"] = str(tmp_path / "liminal-home")  # never the user's, whatever a script does
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, str(script), "--smoke"], cwd=tmp_path, env=env,
                          capture_output=True, timeout=300, check=False)
    said = (done.stdout + done.stderr).decode(errors="replace")
    if done.returncode == SKIPPED:
        pytest.skip(said.strip().splitlines()[-1])
    assert done.returncode == 0, said[-6000:]
    assert "Traceback" not in said, said[-6000:]
