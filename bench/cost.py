#!/usr/bin/env python3
"""What a context policy costs, replayed over one conversation's model calls (issue 12).

    python bench/cost.py                          # a seeded synthetic long conversation
    python bench/cost.py --idle 0.15              # ... where 15% of turns follow a long pause
    python bench/cost.py --calls calls.jsonl      # recorded: {"input": N, "output": N, "t": s}
    python bench/cost.py --requests server.jsonl  # a model server's log: {"t", "body", "output"}
    python bench/cost.py --store THREAD           # a thread liminal recorded (its CLI's usage)
    python bench/cost.py --sweep                  # the recent band's size against cost
    python bench/cost.py --sweep --long-cache     # ... the band with the 1-hour cache
    python bench/cost.py --summaries --seeds 8    # the model's summaries (issue 24), both cache lives

Cost is in input-token equivalents (``liminal.kernel.policy.Prices``: cache read 0.10, cache
write 1.25, output 5.0). The conversation is replayed as its growth (``bench.support.costmodel``)
under: no management; Claude Code's auto-compact at 167k (a summary call, then the CLI's prompt
and the summary); liminal's fixed policies as the settings once defaulted to; and liminal's
default, the cost policy, which is the very code the swap manager runs, without and with the
model's summaries (``swap.summaries``: one side session per swap cycle, its request
``summary_request`` over the digests of the synthetic turns, its own prompt as
``bench/side_session.py`` measured it; or a fork of the live session). A log of real requests
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

from bench.support.costmodel import Call, Request, Result, SidePrice, growth, measure, replay  # noqa: E402
from liminal.config import GradientSettings, MemorySettings, SwapSettings  # noqa: E402
from liminal.gradient.summarize import TurnDigest  # noqa: E402
from liminal.harness.claude.live import ClaudeSessions  # noqa: E402
from liminal.harness.claude.records import PROMPT_HEAD_CHARS, TEXT_HEAD_CHARS  # noqa: E402
from liminal.harness.codex.live import CodexSessions  # noqa: E402
from liminal.kernel.policy import (  # noqa: E402
    PRICES,
    SHORT_CACHE_SECONDS,
    CostPolicy,
    Prices,
    cache_prices,
)

SYSTEM_TOKENS = 15_000  # the CLI's system prompt and tool definitions
AUTO_COMPACT_AT = ClaudeSessions.ceiling_tokens  # Claude Code's own compaction (167k of a 200k window)
# The two cache lives the CLIs use: 5 minutes (writes at 1.25 of the input price), and 1 hour
# (writes at 2x; Anthropic's extended cache).
CACHE_LIVES = {"5 min": (SHORT_CACHE_SECONDS, PRICES), "1 hour": (3600.0, cache_prices(PRICES, 3600.0))}
# How a summary by the model is paid for (issue 24): the side session's own prompt as measured
# with the rig (``SessionHarness.side_session_tokens``), or a fork of the live session.
SIDES = [SidePrice("side session, Claude Code", ClaudeSessions.side_session_tokens),
         SidePrice("side session, Codex", CodexSessions.side_session_tokens),
         SidePrice("fork of the live session (Claude Code)", 0, fork=True)]
# The summaries as they were before the lessons and the review rode their request (issue 34):
# no lessons asked, so no bound on the answer, priced at ``SUMMARY_OUTPUT``; nothing reviewed.
NO_MEMORY = MemorySettings(lessons=False, review=False)


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


WORDS = ("router", "session", "token", "buffer", "parse", "config", "thread", "swap", "record",
         "index", "error", "cache", "frame", "store", "schema", "retry", "timeout", "lease")


def digests(calls: Sequence[Call], seed: int = 12) -> list[TurnDigest]:
    """The turns of ``synthetic`` as the summarizer is given them (``SessionHarness.ancient``):
    the person's prompt (up to ``PROMPT_HEAD_CHARS``), the head of each answer the model wrote
    (``TEXT_HEAD_CHARS``), each tool call's path or command. Drawn from a random stream of their
    own, so the calls (and every figure without summaries) stay as they were."""
    rng = random.Random(seed * 7919 + 1)

    def words(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    out: list[TurnDigest] = []
    replies: list[str] = []
    tools: list[tuple[str, str]] = []
    for call in calls:
        if call.turn_end:  # the answer that ends the turn: prose
            replies.append(words(max(5, int(rng.lognormvariate(4.0, 0.8)))))
        else:  # a tool call or a few, perhaps a sentence before them
            if rng.random() < 0.5:
                replies.append("I will check the " + words(rng.randint(3, 25)))
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                kind = rng.choice(["Read", "Bash", "Grep", "Edit"])
                detail = (f"pytest -q tests/test_{rng.choice(WORDS)}.py -k {rng.choice(WORDS)}"
                          if kind == "Bash" else f"/home/dev/project/src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py")
                tools.append((kind, detail))
        if call.turn_end:
            prompt = words(max(3, int(rng.lognormvariate(3.5, 0.9))))
            out.append(TurnDigest(len(out) + 1, prompt[:PROMPT_HEAD_CHARS],
                                  tuple(r[:TEXT_HEAD_CHARS] for r in replies), tuple(tools)))
            replies, tools = [], []
    return out


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


def from_store(thread: str) -> tuple[list[Call], Result, str] | None:
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
    hour = CACHE_LIVES["1 hour"][1]
    for row in rows:  # a write to the hour's cache at its price
        billed.cost += (PRICES.read * row.cache_read + PRICES.write * (row.cache_write - row.cache_write_1h)
                        + hour.write * row.cache_write_1h + row.uncached + PRICES.output * row.output)
        billed.context_sum += row.input
        billed.calls += 1
        billed.peak = max(billed.peak, row.input)
    # The replays compare at the cache the thread wrote (an hour's, if any call wrote one).
    return calls, billed, "1 hour" if any(row.cache_write_1h for row in rows) else "5 min"


def requests_log(path: Path) -> list[Request]:
    """A model server's log: one JSON object a line, ``t``, the request ``body``, ``output``."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [Request.from_body(float(r["t"]), r["body"], int(r.get("output", 0))) for r in rows]


def policies(recent: int = GradientSettings().recent_tokens) -> list[tuple[str, CostPolicy]]:
    gradient = GradientSettings(recent_tokens=recent)
    fixed = [(120_000, 100_000), (120_000, 50_000), (80_000, 30_000)]
    return [(f"liminal {h // 1000}k to {t // 1000}k", CostPolicy(
        SwapSettings(high_tokens=h, target_tokens=t, summaries=False), gradient, AUTO_COMPACT_AT)) for h, t in fixed] + [
        (f"liminal cost policy, no summaries (recent band {recent // 1000}k)",
         CostPolicy(SwapSettings(summaries=False), gradient, AUTO_COMPACT_AT))]


def results(calls: Sequence[Call], recent: int = GradientSettings().recent_tokens,
            overhead: int = SYSTEM_TOKENS, turns: Sequence[TurnDigest] = (), life: str = "5 min") -> list[Result]:
    """Every policy on ``calls``, at the cache life ``life`` (a key of ``CACHE_LIVES``)."""
    summary = GradientSettings().summary_tokens
    seconds, prices = CACHE_LIVES[life]
    found = [replay(calls, "no management", None, overhead=overhead, cache_life=seconds, prices=prices),
             replay(calls, "Claude Code auto-compact at 167k", None, overhead=overhead,
                    auto_compact_at=AUTO_COMPACT_AT, cache_life=seconds, prices=prices)]
    for name, policy in policies(recent):
        found.append(replay(calls, name, policy, overhead=overhead, recent_tokens=policy.gradient.recent_tokens,
                            summary_tokens=summary, cache_life=seconds, prices=prices))
    # Issue 24: the default with a summary by the model per swap cycle, priced as made.
    if turns:
        for side in SIDES[:1] + SIDES[2:]:
            found.append(with_summaries(calls, turns, side, overhead, recent, cache_life=seconds, prices=prices))
    return found


def with_summaries(calls: Sequence[Call], turns: Sequence[TurnDigest], side: SidePrice, overhead: int,
                   recent: int = GradientSettings().recent_tokens, cache_life: float = 300.0,
                   prices: Prices = PRICES, ceiling: int = AUTO_COMPACT_AT,
                   memory: MemorySettings | None = None) -> Result:
    """The default policy with ``swap.summaries`` on, each summary paid as ``side`` says; the
    lessons and the review in its request as ``memory`` says (the defaults: both)."""
    gradient = GradientSettings(recent_tokens=recent)
    swap = SwapSettings(summaries=True, cache_life_seconds=cache_life)
    policy = CostPolicy(swap, gradient, ceiling, prices=prices, side_session_tokens=side.fixed, memory=memory)
    return replay(calls, f"liminal default: cost policy + model summaries ({side.name})", policy, overhead=overhead,
                  recent_tokens=recent, summary_tokens=gradient.summary_tokens, side=side, turns=turns,
                  cache_life=cache_life, prices=prices)


# Codex as OpenAI bills it: a cached read 0.1 of the input price, no premium to write the cache
# (its cached prefixes live minutes), against Codex's own compaction at its ceiling.
OPENAI = ("Codex: OpenAI's prices, its compaction at 230k", 300.0, Prices(write=1.0), CodexSessions.ceiling_tokens)


def summaries_table(sessions: Sequence[tuple[list[Call], list[TurnDigest]]], overhead: int) -> None:
    """Summaries on against off, as a share of the CLI's own compaction, at both of Anthropic's
    cache lives (Claude Code's auto-compact) and at OpenAI's prices (Codex's); mean and range
    over the sessions (issue 24: the default must cost at most 0.85 at both cache lives)."""
    print("| cache life | summaries | swaps | side sessions | request, mean | turns covered | of the CLI's compaction, mean | range |\n"
          "|---|---|---:|---:|---:|---:|---:|---:|")
    gradient = GradientSettings()
    # Each side session with the lessons and the review (the defaults), and Claude Code's also
    # without them, as summaries were before they rode the request (issue 34).
    bare = (f"{SIDES[0].name}, no lessons or review", SIDES[0], NO_MEMORY)
    lives: list[tuple[str, float, Prices, int, list[tuple[str, SidePrice | None, MemorySettings | None]]]] = [
        (life, seconds, prices, AUTO_COMPACT_AT, [("off", None, None), bare, *((s.name, s, None) for s in SIDES)])
        for life, (seconds, prices) in CACHE_LIVES.items()]
    lives.append((*OPENAI, [("off", None, None), (f"{SIDES[1].name}, no lessons or review", SIDES[1], NO_MEMORY),
                            (SIDES[1].name, SIDES[1], None)]))
    for life, seconds, prices, ceiling, rows in lives:
        for name, side, memory in rows:
            shares, swaps, made, asked, gone, covered = [], 0, 0, 0, 0, 0
            for calls, turns in sessions:
                auto = replay(calls, "auto", None, overhead=overhead, auto_compact_at=ceiling,
                              cache_life=seconds, prices=prices)
                if side is None:
                    policy = CostPolicy(SwapSettings(cache_life_seconds=seconds, summaries=False), gradient,
                                        ceiling, prices=prices)
                    mine = replay(calls, "off", policy, overhead=overhead, recent_tokens=gradient.recent_tokens,
                                  summary_tokens=gradient.summary_tokens, cache_life=seconds, prices=prices)
                else:
                    mine = with_summaries(calls, turns, side, overhead, cache_life=seconds, prices=prices,
                                          ceiling=ceiling, memory=memory)
                shares.append(mine.cost / auto.cost)
                swaps += mine.swaps
                made += mine.summaries
                asked += mine.summary_request_tokens
                gone += mine.consolidated
                covered += mine.covered
            k = len(sessions)
            print(f"| {life} | {name} | {swaps / k:.0f} | {made / k:.0f} | "
                  f"{asked / max(made, 1) / 1000:.1f}k | {covered / max(gone, 1):.0%} | {sum(shares) / k:.3f} | {min(shares):.2f}-{max(shares):.2f} |")


def table(results: Sequence[Result], base: float) -> str:
    lines = ["| policy | swaps (idle) | mean context | peak | cost | of auto-compact |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r.name} | {r.swaps} ({r.idle_swaps}) | {r.mean_context / 1000:.0f}k | "
                     f"{r.peak / 1000:.0f}k | {r.cost / 1e6:.2f}M | {r.cost / base:.2f} |")
    return "\n".join(lines)


def of_auto_compact(calls: Sequence[Call], overhead: int, recent: int, high: int | None, *,
                    long_cache: bool = False) -> tuple[float, Result]:
    """The default policy's cost (recent band ``recent``, trigger ``high`` or its own) as a share
    of Claude Code's auto-compact on the same calls; ``long_cache``: both at the 1-hour cache
    (``recent`` then the band for it, ``gradient.long_cache_recent_tokens``)."""
    seconds, prices = CACHE_LIVES["1 hour" if long_cache else "5 min"]
    gradient = (GradientSettings(long_cache_recent_tokens=recent) if long_cache
                else GradientSettings(recent_tokens=recent))
    auto = replay(calls, "auto", None, overhead=overhead, auto_compact_at=AUTO_COMPACT_AT,
                  cache_life=seconds, prices=prices)
    policy = CostPolicy(SwapSettings(high_tokens=high, summaries=False), gradient, AUTO_COMPACT_AT)
    mine = replay(calls, "policy", policy, overhead=overhead, recent_tokens=gradient.recent_tokens,
                  summary_tokens=gradient.summary_tokens, cache_life=seconds, prices=prices)
    return mine.cost / auto.cost, mine


def sweep(sessions: Sequence[Sequence[Call]], overhead: int, *, triggers: bool, long_cache: bool = False) -> None:
    """Cost as a share of auto-compact: against the recent band, or (``triggers``) the policy's
    trigger against fixed ones at the default band; mean and range over the sessions.
    ``long_cache``: at the 1-hour cache, the band for it."""
    default = GradientSettings().long_cache_recent_tokens if long_cache else GradientSettings().recent_tokens
    rows: list[tuple[str, int, int | None]] = (
        [("the policy's", default, None)] + [(f"fixed {h // 1000}k", default, h)
                                             for h in (50_000, 60_000, 70_000, 80_000, 100_000, 120_000)]
        if triggers else [(f"{r // 1000}k", r, None) for r in (5_000, 8_000, 10_000, 15_000, 20_000, 30_000, 40_000)])
    print(f"| {'trigger' if triggers else 'recent band'} | swaps (idle) | of auto-compact, mean | range |\n"
          "|---|---:|---:|---:|")
    for name, recent, high in rows:
        found = [of_auto_compact(calls, overhead, recent, high, long_cache=long_cache) for calls in sessions]
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
    parser.add_argument("--long-cache", action="store_true", help="with --sweep or --triggers: at the 1-hour cache")
    parser.add_argument("--summaries", action="store_true",
                        help="model summaries (issue 24) on against off, at both cache lives")
    parser.add_argument("--seeds", type=int, default=0,
                        help="with --sweep, --triggers or --summaries: synthetic sessions of seeds 1..N (range shown)")
    parser.add_argument("--smoke", action="store_true", help="a small, quick run: does the script still work (its figures mean nothing)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.turns = 30
    made: Result | None = None
    overhead = SYSTEM_TOKENS
    life = "5 min"
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
        calls, made, life = found_store
    elif args.calls:
        calls = recorded(args.calls)
    else:
        calls = synthetic(args.turns, args.seed, args.idle)
    print(f"{len(calls)} model calls, {sum(c.turn_end for c in calls)} turns", file=sys.stderr)
    if args.summaries:
        seeds = range(1, args.seeds + 1) if args.seeds else [args.seed]
        made_sessions = [synthetic(args.turns, seed, args.idle) for seed in seeds]
        summaries_table([(c, digests(c, seed)) for c, seed in zip(made_sessions, seeds, strict=True)], overhead)
        return 0
    if args.sweep or args.triggers:
        sessions = ([synthetic(args.turns, seed, args.idle) for seed in range(1, args.seeds + 1)]
                    if args.seeds else [calls])
        sweep(sessions, overhead, triggers=args.triggers, long_cache=args.long_cache)
        return 0
    synthetic_turns = digests(calls, args.seed) if not (args.requests or args.store or args.calls) else []
    found = results(calls, overhead=overhead, turns=synthetic_turns, life=life)
    if made is not None:
        found.insert(0, made if args.store else replace(made, name="as made (measured)"))
    print(table(found, next(r for r in found if r.name.startswith("Claude")).cost))
    if args.smoke:  # every mode once, small: the summaries' table, the band at the 1-hour cache
        short = [synthetic(args.turns, seed) for seed in (1, 2)]
        summaries_table([(c, digests(c, seed)) for c, seed in zip(short, (1, 2), strict=True)], overhead)
        sweep(short, overhead, triggers=False, long_cache=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
