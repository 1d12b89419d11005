#!/usr/bin/env python3
"""What a context policy costs, replayed over one conversation's model calls (issue 12).

    python bench/cost.py                          # a seeded synthetic long conversation
    python bench/cost.py --idle 0.15              # ... where 15% of turns follow a long pause
    python bench/cost.py --calls calls.jsonl      # recorded: {"input": N, "output": N, "t": s}
    python bench/cost.py --requests server.jsonl  # a model server's log: {"t", "body", "output"}
    python bench/cost.py --store THREAD           # a thread liminal recorded (its CLI's usage)
    python bench/cost.py --sweep                  # the recent band's size against cost

Cost is in input-token equivalents (``liminal.kernel.policy.Prices``: cache read 0.10, cache
write 1.25, output 5.0). The conversation is replayed as its growth (``bench.support.costmodel``)
under: no management; Claude Code's auto-compact at 167k (a summary call, then the CLI's prompt
and the summary); liminal's fixed policies as the settings once defaulted to; and liminal's
default, the cost policy, which is the very code the swap manager runs. A log of real requests
is also priced as made (``measure``). The figures say which policy is cheaper and by about how
much; ``docs/gradient.md`` records the choices made from them.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.support.costmodel import Call, Request, Result, growth, measure, replay  # noqa: E402
from liminal.config import GradientSettings, SwapSettings  # noqa: E402
from liminal.harness.claude.live import ClaudeSessions  # noqa: E402
from liminal.kernel.policy import PRICES, CostPolicy  # noqa: E402

SYSTEM_TOKENS = 15_000  # the CLI's system prompt and tool definitions
SIDE_SUMMARY_OUTPUT = 1_000  # a summary by the model (issue 24): its STATE and SUMMARY sections
AUTO_COMPACT_AT = ClaudeSessions.ceiling_tokens  # Claude Code's own compaction (167k of a 200k window)


def synthetic(turns: int = 130, seed: int = 12, idle: float = 0.0) -> list[Call]:
    """A long coding session: turns of 1 to 8 model calls, tool output of very mixed sizes;
    a share ``idle`` of the turns come after a pause longer than the cache's life."""
    rng = random.Random(seed)
    calls: list[Call] = []
    t = 0.0
    for _ in range(turns):
        n = rng.choice([1, 2, 3, 3, 4, 4, 5, 6, 8])
        t += rng.uniform(20, 120)  # the person reads, thinks, types
        if rng.random() < idle:
            t += rng.uniform(400, 3600)  # a meeting, lunch
        for i in range(n):
            t += rng.uniform(3, 15)
            size = int(rng.lognormvariate(7.0, 1.0)) + 150  # median ~1.2k tokens a call
            calls.append(Call(size, rng.randint(80, 900), t, i == n - 1))
    return calls


def recorded(path: Path) -> list[Call]:
    """Model calls as a log gives them: one JSON object a line, ``input`` (the whole prompt,
    cache included), ``output``, ``t`` (seconds), optional ``turn_end``."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return from_sizes([(int(row["input"]), int(row.get("output", 0)), float(row.get("t", n)),
                        bool(row.get("turn_end", True))) for n, row in enumerate(rows)])


def from_sizes(rows: Sequence[tuple[int, int, float, bool]]) -> list[Call]:
    """Calls as (whole prompt, output, t, turn end) to growth per call. Where the prompt shrank
    (a swap or a compaction in between) that call's growth is unknown, taken as 0."""
    calls, previous = [], SYSTEM_TOKENS
    for size, output, t, turn_end in rows:
        calls.append(Call(max(0, size - previous), output, t, turn_end))
        previous = size
    return calls


def from_store(thread: str) -> tuple[list[Call], Result] | None:
    """A recorded thread's model calls, from the CLI's own usage in the session records the
    store indexed (every backing session the thread has had), and what they cost as billed."""
    import anyio

    from liminal import config
    from liminal.harness.claude.sessionfile import ModelCall, model_calls
    from liminal.store.configured import open_store

    settings = config.load()

    backings: list[str] = []

    async def read() -> tuple[list[ModelCall], list[float]]:
        async with open_store(settings, create=False) as store:
            messages = await store.messages(thread)
            backings[:] = [thread] + [str(m.data.get("new_backing_id")) for m in messages
                                      if m.kind == "swap" and m.status == "committed"]
            # The CLI's lines only: liminal's (a rewrite's head) copy calls billed earlier.
            records = [r for b in backings for r in await store.session_records(b) if not r.own]
            return model_calls(records), sorted(m.time for m in messages if m.kind == "turn_end")

    rows, ends = anyio.run(read)
    if not rows:
        return None
    billed = Result("as billed (the CLI's usage)", swaps=len(backings) - 1)
    later = [row.t for row in rows[1:]] + [float("inf")]
    calls = from_sizes([(row.input, row.output, row.t, any(row.t <= e < after for e in ends))
                        for row, after in zip(rows, later, strict=True)])
    for row in rows:
        billed.cost += (PRICES.read * row.cache_read + PRICES.write * row.cache_write
                        + row.uncached + PRICES.output * row.output)
        billed.context_sum += row.input
        billed.calls += 1
        billed.peak = max(billed.peak, row.input)
    return calls, billed


def requests_log(path: Path) -> list[Request]:
    """A model server's log: one JSON object a line, ``t``, the request ``body``, ``output``."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [Request.from_body(float(r["t"]), r["body"], int(r.get("output", 0))) for r in rows]


def policies(recent: int = GradientSettings().recent_tokens) -> list[tuple[str, CostPolicy]]:
    gradient = GradientSettings(recent_tokens=recent)
    fixed = [(120_000, 100_000), (120_000, 50_000), (80_000, 30_000)]
    return [(f"liminal {h // 1000}k to {t // 1000}k", CostPolicy(
        SwapSettings(high_tokens=h, target_tokens=t), gradient, AUTO_COMPACT_AT)) for h, t in fixed] + [
        (f"liminal default (cost policy, recent band {recent // 1000}k)",
         CostPolicy(SwapSettings(), gradient, AUTO_COMPACT_AT))]


def results(calls: Sequence[Call], recent: int = GradientSettings().recent_tokens,
            overhead: int = SYSTEM_TOKENS) -> list[Result]:
    summary = GradientSettings().summary_tokens
    found = [replay(calls, "no management", None, overhead=overhead),
             replay(calls, "Claude Code auto-compact at 167k", None, overhead=overhead,
                    auto_compact_at=AUTO_COMPACT_AT)]
    for name, policy in policies(recent):
        found.append(replay(calls, name, policy, overhead=overhead,
                            recent_tokens=policy.gradient.recent_tokens, summary_tokens=summary))
    # Issue 24: the default with a summary by the model per swap, in a fresh side session (an
    # upper bound: its range priced whole at the cache-write price, plus its output).
    name, policy = policies(recent)[-1]
    found.append(replay(calls, name.replace("(cost policy", "+ model summaries (cost policy"),
                        CostPolicy(policy.swap, policy.gradient, AUTO_COMPACT_AT), overhead=overhead,
                        recent_tokens=policy.gradient.recent_tokens, summary_tokens=summary,
                        side_summary_output=SIDE_SUMMARY_OUTPUT))
    return found


def table(results: Sequence[Result], base: float) -> str:
    lines = ["| policy | swaps (idle) | mean context | peak | cost | of auto-compact |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r.name} | {r.swaps} ({r.idle_swaps}) | {r.mean_context / 1000:.0f}k | "
                     f"{r.peak / 1000:.0f}k | {r.cost / 1e6:.2f}M | {r.cost / base:.2f} |")
    return "\n".join(lines)


def of_auto_compact(calls: Sequence[Call], overhead: int, recent: int, high: int | None) -> tuple[float, Result]:
    """The default policy's cost (recent band ``recent``, trigger ``high`` or its own) as a share
    of Claude Code's auto-compact on the same calls."""
    gradient = GradientSettings(recent_tokens=recent)
    auto = replay(calls, "auto", None, overhead=overhead, auto_compact_at=AUTO_COMPACT_AT)
    policy = CostPolicy(SwapSettings(high_tokens=high), gradient, AUTO_COMPACT_AT)
    mine = replay(calls, "policy", policy, overhead=overhead, recent_tokens=recent,
                  summary_tokens=gradient.summary_tokens)
    return mine.cost / auto.cost, mine


def sweep(sessions: Sequence[Sequence[Call]], overhead: int, *, triggers: bool) -> None:
    """Cost as a share of auto-compact: against the recent band, or (``triggers``) the policy's
    trigger against fixed ones at the default band; mean and range over the sessions."""
    default = GradientSettings().recent_tokens
    rows: list[tuple[str, int, int | None]] = (
        [("the policy's", default, None)] + [(f"fixed {h // 1000}k", default, h)
                                             for h in (50_000, 60_000, 70_000, 80_000, 100_000, 120_000)]
        if triggers else [(f"{r // 1000}k", r, None) for r in (10_000, 15_000, 20_000, 30_000, 40_000)])
    print(f"| {'trigger' if triggers else 'recent band'} | swaps (idle) | of auto-compact, mean | range |\n"
          "|---|---:|---:|---:|")
    for name, recent, high in rows:
        found = [of_auto_compact(calls, overhead, recent, high) for calls in sessions]
        shares = [share for share, _ in found]
        swaps = sum(r.swaps for _, r in found) / len(found)
        idle = sum(r.idle_swaps for _, r in found) / len(found)
        print(f"| {name} | {swaps:.0f} ({idle:.0f}) | {sum(shares) / len(shares):.2f} | "
              f"{min(shares):.2f}-{max(shares):.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--calls", type=Path, help="a JSONL log of model calls (default: synthetic)")
    parser.add_argument("--requests", type=Path, help="a JSONL log of model requests")
    parser.add_argument("--store", metavar="THREAD", help="a thread from liminal's store")
    parser.add_argument("--turns", type=int, default=130)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--idle", type=float, default=0.0, help="share of turns after a long pause")
    parser.add_argument("--sweep", action="store_true", help="the recent band against cost")
    parser.add_argument("--triggers", action="store_true", help="the policy's trigger against fixed ones")
    parser.add_argument("--seeds", type=int, default=0,
                        help="with --sweep or --triggers: synthetic sessions of seeds 1..N (range shown)")
    parser.add_argument("--smoke", action="store_true", help="a small, quick run: does the script still work (its figures mean nothing)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.turns = 30
    made: Result | None = None
    overhead = SYSTEM_TOKENS
    if args.requests:
        logged = requests_log(args.requests)
        made = measure(logged)
        calls = growth(logged)
        overhead = logged[0].parts[0][1]  # the CLI's own prompt, as the log shows it
    elif args.store:
        found_store = from_store(args.store)
        if found_store is None:
            print(f"no model calls recorded for {args.store}", file=sys.stderr)
            return 1
        calls, made = found_store
    elif args.calls:
        calls = recorded(args.calls)
    else:
        calls = synthetic(args.turns, args.seed, args.idle)
    print(f"{len(calls)} model calls, {sum(c.turn_end for c in calls)} turns", file=sys.stderr)
    if args.sweep or args.triggers:
        sessions = ([synthetic(args.turns, seed, args.idle) for seed in range(1, args.seeds + 1)]
                    if args.seeds else [calls])
        sweep(sessions, overhead, triggers=args.triggers)
        return 0
    found = results(calls, overhead=overhead)
    if made is not None:
        found.insert(0, made if args.store else replace(made, name="as made (measured)"))
    print(table(found, next(r for r in found if r.name.startswith("Claude")).cost))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
