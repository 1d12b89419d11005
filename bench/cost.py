#!/usr/bin/env python3
"""What a context policy costs, replayed over one conversation's model calls (issue 12, a start).

    python bench/cost.py                       # a seeded synthetic long conversation
    python bench/cost.py --calls calls.jsonl   # a recorded one: {"input": N, "output": N, "t": s}

Cost is in input-token equivalents: a prompt prefix read from the cache costs 0.10, tokens
written to it 1.25, output tokens 5.0 (Anthropic's price ratios). A continuing conversation
reads its previous prompt from the cache and writes only what is new; a swap (or Claude Code's
compaction) changes the prompt's prefix, so the next call writes the whole prompt again; so does
a pause longer than the cache's life (5 minutes).

The conversation is replayed as its growth: each call adds what the recorded (or generated)
prompt added over the previous one. A policy decides at each turn end whether to cut, and to
what size; a liminal swap cannot cut below the recent band (kept byte for byte) plus the
preamble, whatever the target. Claude Code's auto-compact is simulated as a summary call (the
whole context read, a summary written as output) that leaves the summary plus the system
prompt. This is a model of the costs, not a measurement of the gradient: the figures say which
policy is cheaper, and by about how much; `docs/gradient.md` records the choices made from them.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

READ, WRITE, OUTPUT = 0.10, 1.25, 5.0
CACHE_LIFE_SECONDS = 300.0
SYSTEM_TOKENS = 15_000  # the CLI's system prompt and tool definitions
RECENT_TOKENS = 40_000  # the gradient's recent band, kept byte for byte
SUMMARY_TOKENS = 6_000  # the preamble of the ancient band
AUTO_COMPACT_AT = 167_000  # Claude Code's own compaction, near 83% of a 200k window
AUTO_COMPACT_SUMMARY = 8_000


@dataclass(frozen=True, slots=True)
class Call:
    growth: int  # tokens this call's prompt adds over the previous call's
    output: int
    t: float  # seconds since the start
    turn_end: bool  # the last call of a turn: where a policy may act


@dataclass(slots=True)
class Result:
    name: str
    swaps: int = 0
    cost: float = 0.0
    context_sum: int = 0
    calls: int = 0
    peak: int = 0

    @property
    def mean_context(self) -> float:
        return self.context_sum / max(self.calls, 1)


Policy = Callable[[int, float], int | None]  # (context, seconds idle) -> new context, or None


def fixed(high: int, target: int) -> Policy:
    def decide(context: int, idle: float) -> int | None:
        if context <= high:
            return None
        return min(context, max(target, RECENT_TOKENS + SUMMARY_TOKENS + SYSTEM_TOKENS))
    return decide


def replay(calls: list[Call], name: str, policy: Policy | None, *, auto_compact: bool = False) -> Result:
    result = Result(name)
    context = SYSTEM_TOKENS
    cached = 0  # the prefix the cache holds (what the last call sent)
    last_t = 0.0
    for call in calls:
        context += call.growth
        if call.t - last_t > CACHE_LIFE_SECONDS:
            cached = 0  # the cache expired: the whole prompt is written again
        result.cost += READ * min(cached, context) + WRITE * max(0, context - cached) + OUTPUT * call.output
        cached = context
        result.context_sum += context
        result.calls += 1
        result.peak = max(result.peak, context)
        last_t = call.t
        if not call.turn_end:
            continue
        if auto_compact and context > AUTO_COMPACT_AT:
            result.cost += READ * context + OUTPUT * AUTO_COMPACT_SUMMARY  # the summary call
            context, cached = SYSTEM_TOKENS + AUTO_COMPACT_SUMMARY, 0
            result.swaps += 1
        elif policy is not None:
            cut = policy(context, 0.0)
            if cut is not None and cut < context:
                context, cached = cut, 0  # the swap costs nothing now; the next call rebuilds
                result.swaps += 1
    return result


def synthetic(turns: int = 130, seed: int = 12) -> list[Call]:
    """A long coding session: turns of 1 to 8 model calls, tool output of very mixed sizes."""
    rng = random.Random(seed)
    calls: list[Call] = []
    t = 0.0
    for _ in range(turns):
        n = rng.choice([1, 2, 3, 3, 4, 4, 5, 6, 8])
        t += rng.uniform(20, 120)  # the person reads, thinks, types
        for i in range(n):
            t += rng.uniform(3, 15)
            growth = int(rng.lognormvariate(7.0, 1.0)) + 150  # median ~1.2k tokens a call
            calls.append(Call(growth, rng.randint(80, 900), t, i == n - 1))
    return calls


def recorded(path: Path) -> list[Call]:
    """Model calls as a log gives them: one JSON object a line, ``input`` (the whole prompt,
    cache included), ``output``, ``t`` (seconds), optional ``turn_end``."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    calls, previous = [], SYSTEM_TOKENS
    for n, row in enumerate(rows):
        size = int(row["input"])
        calls.append(Call(max(0, size - previous), int(row.get("output", 0)), float(row.get("t", n)),
                          bool(row.get("turn_end", True))))
        previous = size
    return calls


def table(results: Iterator[Result] | list[Result], base: float) -> str:
    lines = ["| policy | swaps | mean context | peak | cost | of no management |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r.name} | {r.swaps} | {r.mean_context / 1000:.0f}k | {r.peak / 1000:.0f}k | "
                     f"{r.cost / 1e6:.1f}M | {r.cost / base:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=Path, help="a JSONL log of model calls (default: synthetic)")
    parser.add_argument("--turns", type=int, default=130)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args(argv)
    calls = recorded(args.calls) if args.calls else synthetic(args.turns, args.seed)
    results = [
        replay(calls, "no management", None),
        replay(calls, "Claude Code auto-compact at 167k", None, auto_compact=True),
        replay(calls, "liminal 120k to 100k", fixed(120_000, 100_000)),
        replay(calls, "liminal 120k to 50k", fixed(120_000, 50_000)),
        replay(calls, "liminal 80k to 30k", fixed(80_000, 30_000)),
    ]
    print(f"{len(calls)} model calls, {sum(c.turn_end for c in calls)} turns", file=sys.stderr)
    print(table(results, results[0].cost))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
