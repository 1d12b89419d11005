"""Benchmark: ``liminal compress`` on one large Codex rollout, beside the Claude Code run
(``bench/compress.py``).

    .venv/bin/python bench/compress.py ... ; .venv/bin/python bench/codex_compress.py [--turns 600] [--runs 5] [--smoke]

1. Synthesizes a Codex 0.166 rollout (``ordinal`` on every line, ``world_state``,
   ``item_completed``, ``token_usage_record``; ``tests/support/codex_rollouts.py``) of about 600
   turns: 1 to 3 shell calls in most turns, outputs log-normal (median about 6 kB, capped at
   60 kB, as in the Claude run), reasoning in a fifth of the turns.
2. Runs ``python -m liminal compress --json`` on it as a child process, ``--runs`` times: wall
   clock and peak RSS (``getrusage`` of the child).
3. Checks the output (``gradient.check``: session_meta, pairs, ordinals) and that the recent
   turns are in it whole.
Prints a Markdown table for ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from liminal.harness.codex import gradient  # noqa: E402
from liminal.harness.codex.rollout import read_rollout  # noqa: E402
from tests.support.codex_rollouts import Call, RolloutBuilder, TurnSpec  # noqa: E402

WORDS = ("state", "frame", "router", "session", "token", "buffer", "result", "parse", "write")


def synthesize(turns: int, seed: int = 4) -> RolloutBuilder:
    rng = random.Random(seed)
    builder = RolloutBuilder("0.166")

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    for n in range(turns):
        calls = []
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            size = min(60_000, int(rng.lognormvariate(8.7, 1.0)))
            lines = "\n".join(text(12) for _ in range(max(1, size // 80)))
            calls.append(Call(f"grep -rn {rng.choice(WORDS)} src/", lines))
        builder.turn(TurnSpec(f"turn {n}: {text(20)}", calls, text(60), reasoning=rng.random() < 0.2))
    return builder


def run_once(path: Path, env: dict[str, str]) -> tuple[float, int, dict[str, object]]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "liminal", "compress", str(path), "--json"],
                          env=env, capture_output=True, check=True, cwd=ROOT)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = json.loads(done.stdout)
    return wall, max(peak, before), result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="a small, quick run: does the script still work (its figures mean nothing)")
    args = parser.parse_args()
    if args.smoke:
        args.turns, args.runs = 30, 1
    with tempfile.TemporaryDirectory(prefix="liminal-codex-bench-") as tmp:
        home = Path(tmp) / ".codex"
        builder = synthesize(args.turns)
        path = builder.write(home)
        env = {**os.environ, "CODEX_HOME": str(home), "LIMINAL_HOME": str(Path(tmp) / "liminal"),
               "PYTHONPATH": str(ROOT)}
        rollout = read_rollout(path)
        walls: list[float] = []
        peak = 0
        result: dict[str, object] = {}
        for _ in range(args.runs):
            wall, peak_kib, result = run_once(path, env)
            walls.append(wall)
            peak = max(peak, peak_kib)
            Path(str(result["path"])).unlink()
        # One more, kept, to check.
        _, _, result = run_once(path, env)
        out = Path(str(result["path"]))
        raw = tuple(out.read_bytes().splitlines(keepends=True))
        gradient.check(raw, str(result["new_session_id"]))
        copy = read_rollout(out)
        recent = [t.prompt for t in rollout.turns][-int(result["turns"]["recent"]):]  # type: ignore[index]
        intact = [t.prompt for t in copy.turns][-len(recent):] == recent
        calls = sum(1 for line in rollout.lines if line.is_item and line.kind == "function_call")
        kept = sum(1 for line in copy.lines if line.is_item and line.kind == "function_call")
        print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
              f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}")
        print(f"rollout: {path.stat().st_size / 1e6:.1f} MB, {len(rollout.lines):,} lines, "
              f"{len(rollout.turns)} turns, {calls:,} calls, "
              f"context {result['tokens_before']:,} tokens by its last token_count")
        print()
        print("| tool | wall, median of N (min) | peak RSS | context left (tokens) | turns kept "
              "(recent/middle/old) | calls kept | file | recent band intact |")
        print("|---|---|---|---|---|---|---|---|")
        turns = result["turns"]
        assert isinstance(turns, dict)
        print(f"| `liminal compress` (target {result['target_tokens']:,}) | "
              f"{statistics.median(walls):.3f} s ({min(walls):.3f} s) | {peak / 1024:.0f} MB | "
              f"{result['tokens_after']:,} | {turns['recent']}/{turns['middle']}/{turns['old']} "
              f"(+{turns['ancient']} summarized) | {kept} | {out.stat().st_size / 1e6:.2f} MB | "
              f"{'yes' if intact else 'NO'} |")
    return 0 if intact else 1


if __name__ == "__main__":
    sys.exit(main())
