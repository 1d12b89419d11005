"""When a thread swaps, and how deep: the prompt cache's economics. Pure.

A continuing conversation reads its prompt's prefix from the model's cache (0.10 of the input
price) and writes only what is new (1.25). A swap changes the prefix, so the first call after it
writes the whole new prompt: it costs ``write * T - read * H`` more than continuing at ``H``
would, and each later call saves ``read * (H - T)``. A policy that keeps the context between a
target ``T`` and a trigger ``H`` pays per model call, with ``g`` tokens added per call,

    write * T * g / (H - T)   (the rebuild, once per cycle of (H - T) / g calls)
  + read * (T + H) / 2        (the mean prefix read)

which falls as ``T`` falls (so the target is the floor: the recent band kept byte for byte, the
preamble and the CLI's own prompt) and is least over ``H`` at

    H = T + sqrt(2 * (write / read) * T * g)

capped by the ceiling (the model's window, or the CLI's own auto-compaction) less the biggest
turn seen. A swap while the thread is idle past the cache's life is nearly free: the next call
writes the whole prompt whatever liminal does, so it may as well write a smaller one.

Set ``swap.high_tokens`` / ``swap.target_tokens`` and they are obeyed as given (``fixed``); what
is not set, the cost model chooses. Figures behind the defaults: ``docs/gradient.md``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from liminal.config import GradientSettings, SwapSettings
from liminal.units import plural, tokens

# Before a thread has shown its pace: a model call of a coding session adds about this much
# (tool output, the answer), and the CLI's own prompt (system, tools) weighs about this.
DEFAULT_PER_CALL = 1_500
DEFAULT_OVERHEAD = 20_000
# An idle swap is taken once the context is this far from the target towards the trigger: a
# smaller cut saves little and sends history into the preamble early.
IDLE_SHARE = 0.5
# The trigger never comes closer to the target than this (a swap at every turn pays for
# nothing), unless the ceiling forces it.
MIN_GAP = 8_000


@dataclass(frozen=True, slots=True)
class Prices:
    """Input-token equivalents (Anthropic's ratios; OpenAI's cached reads are similar)."""

    read: float = 0.10
    write: float = 1.25
    output: float = 5.0


PRICES = Prices()


@dataclass(slots=True)
class Pace:
    """How a thread's context grows, from what its turn ends have shown."""

    per_call: float | None = None  # tokens a model call adds (moving average)
    biggest_turn: int = 0  # the most one turn has added
    overhead: int | None = None  # the first context seen on a new thread: the CLI's own prompt
    floor: int | None = None  # what the last rewrite to the floor left: the floor, measured

    def observe(self, grew: int, calls: int) -> None:
        """A turn (or several) added ``grew`` tokens over ``calls`` model calls."""
        if grew <= 0 or calls <= 0:
            return  # a swap or the CLI's compaction in between: says nothing about the pace
        sample = grew / calls
        self.per_call = sample if self.per_call is None else 0.7 * self.per_call + 0.3 * sample
        self.biggest_turn = max(self.biggest_turn, grew)

    @property
    def growth(self) -> float:
        return self.per_call if self.per_call is not None else DEFAULT_PER_CALL


@dataclass(frozen=True, slots=True)
class Decision:
    swap: bool
    why: str  # said in the log and the journal, in cost terms
    context: int
    target: int  # what the rewrite aims for
    trigger: int  # where a busy thread swaps
    rebuild: float  # what the first call after the swap costs beyond continuing (may be < 0)
    saves_per_call: float  # each later call's smaller prefix read
    payback_calls: float  # calls until the saving repays the rebuild
    calls_to_next: float  # calls until the next swap, at this pace
    idle: bool = False
    forced: bool = False  # the ceiling, not the economics, says swap
    every: bool = False  # swap.every_turns says swap

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 1) if isinstance(v, float) else v) for k, v in asdict(self).items()
                if k != "swap"}


class CostPolicy:
    def __init__(self, swap: SwapSettings, gradient: GradientSettings, ceiling: int,
                 prices: Prices = PRICES) -> None:
        self.swap = swap
        self.gradient = gradient
        self.ceiling = ceiling
        self.prices = prices

    @property
    def fixed(self) -> bool:
        """Both ends set by the person: obeyed as given, no idle swaps."""
        return self.swap.high_tokens is not None and self.swap.target_tokens is not None

    @property
    def idle_swaps(self) -> bool:
        return self.swap.high_tokens is None and self.swap.cache_life_seconds > 0

    def floor(self, pace: Pace) -> int:
        """The smallest context a rewrite leaves: the CLI's prompt, the recent band, the preamble;
        as the last rewrite to it measured it, or estimated before the first."""
        if pace.floor is not None:
            return pace.floor
        overhead = pace.overhead if pace.overhead is not None else DEFAULT_OVERHEAD
        return overhead + self.gradient.recent_tokens + self.gradient.summary_tokens

    def target(self, pace: Pace) -> int:
        """What a swap is expected to leave."""
        return self.swap.target_tokens if self.swap.target_tokens is not None else self.floor(pace)

    @property
    def aim(self) -> int:
        """What the rewrite is asked for: the target as set, else 0, the floor (the gradient keeps
        the recent band whole and the preamble at its budget, and cuts everything else)."""
        return self.swap.target_tokens if self.swap.target_tokens is not None else 0

    def trigger(self, pace: Pace) -> int:
        if self.swap.high_tokens is not None:
            return self.swap.high_tokens
        target = self.target(pace)
        ratio = self.prices.write / self.prices.read
        best = target + max(MIN_GAP, math.sqrt(2 * ratio * target * pace.growth))
        # Never let the next turn carry the context past the ceiling.
        limit = self.ceiling - max(pace.biggest_turn, 2 * int(pace.growth))
        return int(max(min(best, limit), target + 1))

    def cost(self, context: int, target: int, trigger: int, pace: Pace, *,
             idle: bool) -> tuple[float, float, float, float]:
        """(rebuild, saves per call, payback calls, calls to the next swap) of a swap now."""
        p = self.prices
        # Busy: the alternative reads ``context`` from the cache. Idle past the cache's life: the
        # alternative writes it all again anyway.
        rebuild = p.write * target - (p.write if idle else p.read) * context
        saves = p.read * max(context - target, 0)
        payback = max(rebuild, 0.0) / saves if saves > 0 else math.inf
        return rebuild, saves, payback, max(trigger - target, 0) / pace.growth

    def decide(self, context: int, pace: Pace, *, idle: bool = False, turns_since_swap: int = 0) -> Decision:
        target, trigger = self.target(pace), self.trigger(pace)
        rebuild, saves, payback, to_next = self.cost(context, target, trigger, pace, idle=idle)

        def decision(swap: bool, why: str, forced: bool = False, every: bool = False) -> Decision:
            return Decision(swap, why, context, target, trigger, rebuild, saves, payback, to_next,
                            idle, forced, every)

        if not self.swap.enabled:
            return decision(False, "swaps are off")
        if idle:
            if not self.idle_swaps:
                return decision(False, "idle swaps are off (swap.high_tokens is set)")
            floor = target + IDLE_SHARE * (trigger - target)
            if context < floor:
                return decision(False, f"idle, but {tokens(context)} tokens is below {tokens(floor)}")
            return decision(True, f"idle past the cache's life ({self.swap.cache_life_seconds:g}s): "
                                  f"the next call rewrites the prompt anyway; {tokens(context)} -> ~{tokens(target)} "
                                  f"tokens saves {tokens(-rebuild)} now and {tokens(saves)} a call")
        if context >= trigger:
            if self.fixed:
                return decision(True, f"context {tokens(context)} tokens >= {tokens(trigger)}")
            forced = trigger < target + MIN_GAP or payback > to_next
            return decision(True, f"context {tokens(context)} tokens >= {tokens(trigger)}"
                            + (" (the ceiling forces it)" if forced else
                               f": the rebuild ({tokens(rebuild)}) pays back in "
                               f"{_calls(payback)} of the {to_next:.0f} before the next swap"),
                            forced)
        if self.swap.every_turns and turns_since_swap >= self.swap.every_turns:
            return decision(True, f"{plural(turns_since_swap, 'turn')} since the last swap", every=True)
        return decision(False, f"context {tokens(context)} tokens < {tokens(trigger)}")

    def worth_it(self, decision: Decision, tokens_after: int, pace: Pace) -> str | None:
        """None if the rewrite as made still pays; else why it is skipped."""
        if decision.idle:  # the cache is gone either way: any cut is a saving
            return None if tokens_after < decision.context else \
                f"the rewrite leaves {tokens(tokens_after)} tokens, no fewer than {tokens(decision.context)}"
        if tokens_after >= decision.trigger:
            # The recent band alone is past the trigger: swapping would buy one turn at the
            # price of a full prompt-cache rebuild, then trigger again.
            return f"the rewrite leaves {tokens(tokens_after)} tokens, not below {tokens(decision.trigger)}"
        if self.fixed or decision.forced or decision.every:
            return None  # asked for as set, or the ceiling leaves no choice
        if tokens_after >= decision.context:
            return f"the rewrite leaves {tokens(tokens_after)} tokens, no fewer than {tokens(decision.context)}"
        _, _, payback, to_next = self.cost(decision.context, tokens_after, decision.trigger, pace,
                                           idle=False)
        if payback > to_next:
            return (f"the rewrite leaves {tokens(tokens_after)} tokens: it pays back in "
                    f"{_calls(payback)}, more than the {to_next:.0f} before the next swap")
        return None


def _calls(n: float) -> str:
    return plural(round(n), "call") if math.isfinite(n) else "no number of calls"
