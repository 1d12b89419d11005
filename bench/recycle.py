"""Benchmark: the memory of the older Claude adapter across swaps, with and without recycling.

    LIMINAL_HARNESS_DIR=/work/main/.harness .venv/bin/python bench/recycle.py [--swaps 20] [--smoke]

The scenario of tests/acceptance/test_recycle.py (claude-zed, a fake Anthropic server on
loopback, a swap at every turn end of a small conversation), once with ``swap.max_stale_sessions``
4 and once with 1000 (no recycle). After every turn, once its swap (and any recycle) is over and
a replaced adapter process has gone: the Claude Code processes in the adapter's process group and
the group's resident memory (sum of VmRSS). Prints one line per turn and a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.harness import Rig, adapters  # noqa: E402
from tests.acceptance.test_recycle import Sample, run_swaps  # noqa: E402

SKIPPED = 77  # what a smoke run exits with when it cannot run here (tests/integration/test_bench_smoke.py)


def measure(swaps: int, max_stale: int) -> tuple[list[Sample], float]:
    with tempfile.TemporaryDirectory(prefix="liminal-recycle-") as root:
        rig = Rig.start(adapters()["claude-zed"], Path(root))
        t0 = time.monotonic()
        try:
            run = run_swaps(rig, swaps, max_stale)
            seconds = time.monotonic() - t0
            run.client.close()
        finally:
            rig.stop()
    return run.samples, seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--swaps", type=int, default=20)
    parser.add_argument("--smoke", action="store_true",
                        help="two swaps and a recycle: does it still run (skips, exit 77, without the harness)")
    args = parser.parse_args()
    reason = adapters()["claude-zed"].missing_reason()
    if reason:
        print(f"claude-zed: {reason} (export LIMINAL_HARNESS_DIR?)", file=sys.stderr)
        return SKIPPED if args.smoke else 1
    configs = [("recycling (max_stale_sessions 4)", 4), ("no recycling", 1000)]
    if args.smoke:  # one recycle, after the second swap
        args.swaps, configs = 2, [("recycling (max_stale_sessions 1)", 1)]
    print(f"# {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}")
    results = {}
    for label, max_stale in configs:
        samples, seconds = measure(args.swaps, max_stale)
        results[label] = samples
        for s in samples:
            print(f"{label}: swaps {s.swaps:2d} claude {s.claude:2d} adapters {s.adapters} rss {s.rss_mb} MB")
        print(f"{label}: {len(samples)} turns in {seconds:.1f} s")
    print("\n| after swap | " + " | ".join(f"{label}: Claude Code processes, RSS" for label in results) + " |")
    print("|---:|" + "---:|" * len(results))
    for n in (1, 5, 10, 15, args.swaps):
        row = []
        for samples in results.values():
            found = next((s for s in samples if s.swaps == n), None)
            row.append(f"{found.claude}, {found.rss_mb:,.0f} MB" if found else "-")
        print(f"| {n} | " + " | ".join(row) + " |")
    for label, samples in results.items():
        peak = max(samples, key=lambda s: s.rss_kib)
        print(f"{label}: peak {peak.claude} Claude Code processes, {peak.rss_mb:,.0f} MB (after swap {peak.swaps})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
