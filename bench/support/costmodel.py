"""What a conversation's model calls cost, as made and as a context policy would make them.

Two uses: ``measure`` prices the requests a model server saw (a prefix shared with the previous
request is read from the cache, the rest written), and ``replay`` replays a conversation's growth
under a policy (liminal's own ``CostPolicy``, the very code the swap manager runs) or under
Claude Code's auto-compact. ``bench/cost.py`` prints both; the acceptance test of issue 12 holds
liminal's measured cost against the auto-compact replay of the same conversation.

Cost is in input-token equivalents (``Prices``). Tokens are estimated at four bytes each, as the
fake model servers count them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from liminal.config import GradientSettings
from liminal.gradient.bands import preamble_budget, recent_budget
from liminal.gradient.summarize import TurnDigest, summary_request
from liminal.kernel.policy import PRICES, CostPolicy, Pace, Prices, auto_compact, still_cached


@dataclass(frozen=True, slots=True)
class Call:
    growth: int  # tokens this call's prompt adds over the previous call's
    output: int
    t: float  # seconds since the start
    turn_end: bool  # the last call of a turn: where a policy may act


@dataclass(frozen=True, slots=True)
class SidePrice:
    """How a summary by the model (issue 24) is paid for, beside liminal's request (the range's
    digests, ``summary_request``) and the summary's output:

    - a fresh **side session** (``fork`` False): its CLI's own prompt on a session of its own
      (``fixed`` tokens: the system prompt, tools, context messages, and a title request where
      the CLI makes one), all of it written to the cache with the request;
    - a **fork** of the live session (``fork`` True): the live context read from the cache (the
      fork sends it byte for byte, if the cache still holds it), the request written."""

    name: str
    fixed: int = 0
    output: int | None = None  # tokens; None: as the policy prices it (``summary_output``)
    fork: bool = False


@dataclass(slots=True)
class Result:
    name: str
    swaps: int = 0
    idle_swaps: int = 0
    cost: float = 0.0
    summaries: int = 0  # side sessions (or forks) run
    summary_cost: float = 0.0  # what they cost, in the cost above
    summary_request_tokens: int = 0  # liminal's requests in them, added up
    consolidated: int = 0  # turns the swaps took into the preamble
    covered: int = 0  # of them, the turns a model's summary covered
    context_sum: int = 0
    calls: int = 0
    peak: int = 0

    @property
    def mean_context(self) -> float:
        return self.context_sum / max(self.calls, 1)

    def add_call(self, context: int, cached: int, output: int, prices: Prices) -> None:
        self.cost += prices.input(context, cached) + prices.output * output
        self.context_sum += context
        self.calls += 1
        self.peak = max(self.peak, context)


# What the model reviews in a summary's request (``memory.review``), at its most: the first
# stage's five choices, a short lesson placed whole and four tickles, each as long as the kernel
# writes one (``liminal.kernel.zone``).
_LESSON = ("lesson:0123456789", "The release codename is PLOVER-8812, because the staging port moved to "
           "6543; deploys go through the blue pool first. (from the conversation \"Release prep for the "
           "spring train\" (2026-12-07))")
_TICKLE = ("summary-7a1b2c3d-0000-4000-8000-000000000001", "reminds of the conversation \"Fix the flaky "
           "listing test in CI\" (2026-12-05), about: The goal was to make the listing stable; the model "
           "found the sort order depended on the… (recall summary-7a1b2c3d-0000-4000-8000-000000000001 "
           "for the rest)")
REVIEW_NOTES = (_LESSON, *[_TICKLE] * 4)


def tokens(size: int) -> int:
    return max(1, size // 4)


@dataclass(frozen=True, slots=True)
class Request:
    """One model request: when, its parts in order (tools and system first, then each message),
    and the output it was answered with."""

    t: float
    parts: tuple[tuple[bytes, int], ...]  # (digest, tokens) of each part
    output: int
    starts_turn: bool  # its last message is the person's (not tool results)

    @classmethod
    def from_body(cls, t: float, body: dict[str, Any], output: int) -> Request:
        head = {k: body.get(k) for k in ("tools", "system")}
        parts = [head, *(body.get("messages") or [])]
        seen = []
        for part in parts:
            raw = orjson.dumps(_without_cache_marks(part), option=orjson.OPT_SORT_KEYS)
            seen.append((hashlib.blake2b(raw, digest_size=16).digest(), tokens(len(raw))))
        last = parts[-1] if len(parts) > 1 else {}
        content = last.get("content") if isinstance(last, dict) else None
        results = isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        return cls(t, tuple(seen), output, not results)

    @property
    def size(self) -> int:
        return sum(n for _, n in self.parts)


def _without_cache_marks(value: Any) -> Any:
    """The CLI moves its ``cache_control`` marks along as the conversation grows; they are not
    part of what the cache matches."""
    if isinstance(value, dict):
        return {k: _without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_marks(v) for v in value]
    return value


def measure(requests: Sequence[Request], name: str = "as made", *, prices: Prices = PRICES,
            cache_life: float = 300.0) -> Result:
    """The cost of requests as made: each part of a request that repeats the previous request's
    parts from the start is read from the cache (if that request is within the cache's life)."""
    result = Result(name)
    previous: Request | None = None
    for request in requests:
        cached = common = 0
        if previous is not None:
            for (a, n), (b, _) in zip(request.parts, previous.parts, strict=False):
                if a != b:
                    break
                cached += n
                common += 1
            # Shorter, and not a continuation (which repeats all but perhaps the last message):
            # a swap or a compaction.
            if common < len(previous.parts) - 1 and request.size < previous.size:
                result.swaps += 1
            cached = still_cached(cached, request.t - previous.t, cache_life)
        result.add_call(request.size, cached, request.output, prices)
        previous = request
    return result


def growth(requests: Sequence[Request], turn_ends: Iterable[bool] | None = None) -> list[Call]:
    """The conversation the requests made, as growth per call over the CLI's own prompt
    (``requests[0].parts[0]``): what each later request added is its last two messages (the answer to the previous call, and the new prompt or tool results),
    whatever a swap did to the history before them."""
    # A call ends its turn when the next one brings the person's next prompt.
    ends = list(turn_ends) if turn_ends is not None else \
        [later.starts_turn for later in requests[1:]] + [True]
    calls: list[Call] = []
    for n, request in enumerate(requests):
        # The first: all of it but the CLI's own prompt (``replay`` starts from that).
        added = request.size - request.parts[0][1] if n == 0 else sum(size for _, size in request.parts[-2:])
        calls.append(Call(added, request.output, request.t, ends[n]))
    return calls


def replay(calls: Sequence[Call], name: str, policy: CostPolicy | None, *, overhead: int,
           auto_compact_at: int | None = None, prices: Prices = PRICES,
           cache_life: float = 300.0, recent_tokens: int = 0, summary_tokens: int = 0,
           side: SidePrice | None = None, turns: Sequence[TurnDigest] = ()) -> Result:
    """Replay the growth under a policy: ``CostPolicy`` as the swap manager runs it (it sees
    turn ends and their context, and idle spells past the cache's life), or Claude Code's
    auto-compact at ``auto_compact_at``, or neither. A liminal rewrite cannot go below the
    CLI's prompt, the recent band (whole turns, at least the last) and the preamble. The policy
    learns the cache's life (``cache_life``) from the first turn, as the swap manager does from
    the CLI's records, and keeps the recent band it chooses by it (``CostPolicy.recent``);
    ``recent_tokens`` is the band of a policy that sets a target (fitted under it).

    ``side``: summaries by the model (issue 24), as ``liminal.kernel.summaries`` makes them: at
    a turn end that does not swap, when the policy says a swap is near (``summary_due``) and the
    thread has had none since its last swap, the turns a swap would consolidate now that no
    summary covers yet are sent as ``summary_request`` of their digests (``turns``, one per turn
    end), priced as ``side`` says. Each range once; the turns that fall out of the recent band
    after it are left to the extractive preamble. The request asks for the range's lessons and
    reviews ``REVIEW_NOTES`` as the policy's ``memory`` settings say (docs/memory.md)."""
    result = Result(name)
    context = overhead
    cached = 0
    last_t = calls[0].t if calls else 0.0
    pace = Pace()
    turn_calls = 0
    turn_growth = 0
    recent: list[tuple[int, int]] = []  # (turn, growth) of the turns since the last cut, newest last
    summarised: set[int] = set()  # turns a summary covers
    summary_this_cycle = False
    turn = -1
    first_turn = True
    limit, reserve = recent_tokens, summary_tokens
    by_policy = policy is not None and not policy.aim  # the floor: the band by the cache's life
    if policy is not None and policy.aim:
        budgets = GradientSettings(recent_tokens=recent_tokens, summary_tokens=summary_tokens)
        reserve = preamble_budget(policy.aim - overhead, budgets)
        limit = recent_budget(policy.aim - overhead, reserve, budgets, floor=False)

    def kept_whole() -> int:
        """How many of the newest turns a rewrite now keeps whole (the recent band)."""
        limit_now = policy.recent(pace) if by_policy and policy is not None else limit
        kept, whole = 0, 0
        for _, size in reversed(recent):
            if whole and kept + size > limit_now:
                break
            kept += size
            whole += 1
        return whole

    for n, call in enumerate(calls):
        context += call.growth
        turn_growth += call.growth
        turn_calls += 1
        cached = still_cached(cached, call.t - last_t, cache_life)
        result.add_call(context, cached, call.output, prices)
        cached = context
        last_t = call.t
        if not call.turn_end:
            continue
        turn += 1
        recent.append((turn, turn_growth))
        if first_turn:
            pace.overhead = context
            first_turn = False
            if policy is not None:
                policy.learned(pace, cache_life)  # the CLI's records say it from the first call
        else:
            pace.observe(turn_growth, turn_calls)
        turn_growth = turn_calls = 0
        if auto_compact_at is not None:
            if context > auto_compact_at:
                cost, context = auto_compact(context, overhead, prices)
                result.cost += cost
                cached = 0
                result.swaps += 1
            continue
        if policy is None:
            continue
        idle = n + 1 < len(calls) and calls[n + 1].t - call.t > cache_life
        decision = policy.decide(context, pace, idle=idle)
        if not decision.swap and idle:
            decision = policy.decide(context, pace)
        taken = False
        whole = kept_whole()
        after = context
        if decision.swap:
            kept = sum(size for _, size in recent[len(recent) - whole:])
            after = min(context, max(policy.aim, overhead + kept + reserve))
            taken = policy.worth_it(decision, after, pace) is None
            policy.rewritten(pace, after, committed=taken)  # as the swap manager learns it
        if taken:
            gone = [t for t, _ in recent[:len(recent) - whole]]
            result.consolidated += len(gone)
            result.covered += sum(t in summarised for t in gone)
            context, cached = after, 0
            recent = recent[len(recent) - whole:]
            summary_this_cycle = False
            result.swaps += 1
            result.idle_swaps += decision.idle
            continue
        if side is None or summary_this_cycle or not policy.summary_due(context, pace):
            continue
        todo = [t for t, _ in recent[:len(recent) - whole] if t not in summarised and t < len(turns)]
        if not todo:
            continue  # nothing to summarise yet: asked again at the next turn end
        summary_this_cycle = True
        memory = policy.memory
        review = REVIEW_NOTES if memory.review and policy.gradient.zone_tokens > 0 else ()
        request = tokens(len(summary_request([turns[t] for t in todo], lessons=memory.lessons,
                                             review=review).encode()))
        output = side.output if side.output is not None else policy.summary_output()
        if side.fork:  # the live context from the cache, its last answer and the request written
            cost = prices.input(context + call.output + request, cached) + prices.output * output
        else:
            cost = prices.write * (side.fixed + request) + prices.output * output
        summarised.update(todo)
        result.cost += cost
        result.summary_cost += cost
        result.summaries += 1
        result.summary_request_tokens += request
    return result
