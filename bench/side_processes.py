"""Benchmark: the older Claude adapter's CLI processes and memory across swaps, with the model's
summaries off and on.

    LIMINAL_HARNESS_DIR=/work/main/.harness .venv/bin/python bench/side_processes.py [--swaps 24] [--smoke]

claude-zed (claude-code-acp 0.16.2, Claude Code 2.1.44: no ``session/close``, a CLI process a
session) behind ``liminal acp``, the fake Anthropic server on loopback, one thread of prompts of
2.6k tokens against a trigger 9k tokens above the CLI's own prompt (a swap every two or three
turns), ``swap.max_stale_sessions`` 4 (the default): the scenario of
``tests/acceptance/test_recycle.py``'s side-session test, once with ``swap.summaries`` off and
once on (a side session a swap cycle, asked from half the trigger on). After every turn, once
its swap and any recycle are over: the Claude Code processes of the thread's sessions and of
liminal's side sessions (told apart by their working folder) and the resident memory of liminal
and everything it started (sum of VmRSS); meanwhile, every 0.25 s, the same, for the peaks
between turn ends. Prints one line per turn and a Markdown table (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.harness import Rig, adapters  # noqa: E402
from tests.acceptance.test_recycle import (  # noqa: E402
    Census,
    SummarisedRun,
    count,
    run_summarised,
    summaries_made,
)

SKIPPED = 77  # what a smoke run exits with when it cannot run here (tests/integration/test_bench_smoke.py)
MAX_STALE = 4


@dataclass
class Result:
    samples: list[Census]
    polled_claude: int  # most Claude Code processes seen at once, between turn ends too
    polled_side: int
    polled_rss_kib: int
    summaries: int
    recycles: int
    seconds: float
    summary_seconds: list[float]  # each summary's, from its request to its answer (liminal's log)


class Poller:
    """Counts what runs under liminal every 0.25 s, once told of the run, until stopped."""

    def __init__(self) -> None:
        self.claude = self.side = self.rss_kib = 0
        self.stop = threading.Event()
        self.run: SummarisedRun | None = None

    def watch(self) -> None:
        while not self.stop.wait(0.25):
            if self.run is None:
                continue
            try:
                found, _ = count(self.run.client, self.run.side_root, 0)
            except OSError:  # a process ending while it is read: the next round
                continue
            self.claude = max(self.claude, found.claude)
            self.side = max(self.side, found.side)
            self.rss_kib = max(self.rss_kib, found.rss_kib)


def measure(swaps: int, summaries: bool) -> Result:
    with tempfile.TemporaryDirectory(prefix="liminal-side-processes-") as root:
        rig = Rig.start(adapters()["claude-zed"], Path(root))
        poller = Poller()
        watcher = threading.Thread(target=poller.watch, daemon=True)
        watcher.start()
        t0 = time.monotonic()
        try:
            run = run_summarised(rig, swaps, MAX_STALE, summaries=summaries,
                                 started=lambda run: setattr(poller, "run", run))
            seconds = time.monotonic() - t0
            run.client.close()
            made = summaries_made(rig)
            log = (rig.home.logs / "stderr-liminal.log").read_text(errors="replace")
            recycles = log.count('"sessions moved to a fresh agent process"')
            took = [float(json.loads(line)["seconds"]) for line in log.splitlines()
                    if '"summary made"' in line and line.startswith("{")]
        finally:
            poller.stop.set()
            watcher.join()
            rig.stop()
    return Result(run.samples, poller.claude, poller.side, poller.rss_kib, made, recycles, seconds, took)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--swaps", type=int, default=24)
    parser.add_argument("--smoke", action="store_true",
                        help="two swaps with summaries on: does it still run (skips, exit 77, without the harness)")
    args = parser.parse_args()
    reason = adapters()["claude-zed"].missing_reason()
    if reason:
        print(f"claude-zed: {reason} (export LIMINAL_HARNESS_DIR?)", file=sys.stderr)
        return SKIPPED if args.smoke else 1
    configs = [("summaries off", False), ("summaries on", True)]
    if args.smoke:
        args.swaps, configs = 2, [("summaries on", True)]
    print(f"# {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}")
    results: dict[str, Result] = {}
    for label, summaries in configs:
        result = results[label] = measure(args.swaps, summaries)
        for s in result.samples:
            print(f"{label}: swaps {s.swaps:2d} claude {s.threads:2d} + side {s.side} "
                  f"adapters {s.adapters} rss {s.rss_mb:,.0f} MB")
        print(f"{label}: {len(result.samples)} turns, {result.summaries} summaries, "
              f"{result.recycles} recycles in {result.seconds:.1f} s")
    print("\n| after swap | " + " | ".join(f"{label}: Claude Code processes (side), RSS" for label in results)
          + " |")
    print("|---:|" + "---:|" * len(results))
    for n in sorted({1, 6, 12, 18, args.swaps}):
        row = []
        for result in results.values():
            found = [s for s in result.samples if s.swaps == n]
            row.append(f"{found[-1].claude} ({found[-1].side}), {found[-1].rss_mb:,.0f} MB" if found else "-")
        print(f"| {n} | " + " | ".join(row) + " |")
    row = []
    for result in results.values():
        peak = max(result.samples, key=lambda s: (s.claude, s.rss_kib))
        row.append(f"{peak.claude} ({peak.side}), {max(s.rss_kib for s in result.samples) / 1024:,.0f} MB")
    print("| peak after a turn | " + " | ".join(row) + " |")
    print("| peak, every 0.25 s | " + " | ".join(
        f"{r.polled_claude} ({r.polled_side}), {r.polled_rss_kib / 1024:,.0f} MB" for r in results.values()) + " |")
    print("| summaries, recycles | " + " | ".join(f"{r.summaries}, {r.recycles}" for r in results.values()) + " |")
    print("| a summary took (median, max) | " + " | ".join(
        f"{statistics.median(r.summary_seconds):.1f} s, {max(r.summary_seconds):.1f} s" if r.summary_seconds else "-"
        for r in results.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
