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

The cache's life is the thread's, as the CLI's own records say (``Pace.cache_life``; until they
do, ``swap.cache_life_seconds``). Claude Code on a subscription writes a cache that lives an hour
at 2x the input price rather than 1.25x: every rebuild costs more, so the floor keeps a smaller
recent band (``gradient.long_cache_recent_tokens``), the trigger is priced at that write, and no
idle swap comes before the hour is out (one after 5 minutes would throw a live cache away).
Measured in ``docs/gradient.md`` ("Cache lives").

Set ``swap.high_tokens`` / ``swap.target_tokens`` and they are obeyed as given (``fixed``); what
is not set, the cost model chooses. Figures behind the defaults: ``docs/gradient.md``.

What a person sets cannot move the floor below the CLI's own prompt, the least preamble and the
last turn (whole): a target under that is landed above. A swap must leave room for the turns
until the next, at least half the leeway (``H - T``) under the trigger; one that cannot is
skipped, and the thread's trigger backs off to a whole leeway above what that rewrite left, so a
floor too high for the thresholds costs one swap per leeway of growth, not one at every turn
(without the back-off, a rewrite landing at 9k under a 9k trigger swaps at nearly every turn).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from liminal import moves
from liminal.config import GradientSettings, MemorySettings, SwapSettings
from liminal.gradient.bands import preamble_budget, recent_budget
from liminal.units import plural, tokens

if TYPE_CHECKING:
    from liminal.harness.base import SwapHarness

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
# A summary by the model (``swap.summaries``): one side session per swap cycle, which
# writes the CLI's own prompt there (``SideSessions.side_session_tokens``) and liminal's
# request (the digests of the turns the swap consolidates: about this share of their tokens,
# measured by ``bench/cost.py``) to the cache, and outputs about this much.
SUMMARY_DIGEST_SHARE = 0.1
SUMMARY_OUTPUT = 1_000
# The range's lessons and the model's review of the dynamic zone's candidates ride that request
# (``memory.lessons``, ``memory.review``): their instructions, and the notes to review (at most
# five, each clipped to 200 characters), written with it. With the lessons asked, the request
# bounds the whole answer (``summarize.summary_request``): the state in 8 lines (about 160
# tokens), the summary in 200 words (270), six lessons under 160 characters (270), a verdict of
# ten words a note (75): at most about 775 tokens, priced as ``BOUNDED_OUTPUT``. Without them
# the answer has no bound and is priced at ``SUMMARY_OUTPUT``.
BOUNDED_OUTPUT = 800
LESSONS_REQUEST = 120
REVIEW_REQUEST = 380
# Anthropic's prompt cache lives 5 minutes; the longer one, an hour, costs this much a written
# token (the input price is 1). A cache that lives longer than 5 minutes is priced so.
SHORT_CACHE_SECONDS = 300.0
LONG_CACHE_WRITE = 2.0


@dataclass(frozen=True, slots=True)
class Prices:
    """Input-token equivalents (Anthropic's ratios; OpenAI's cached reads are similar)."""

    read: float = 0.10
    write: float = 1.25
    output: float = 5.0

    def input(self, context: int, cached: int) -> float:
        """A call's input: what the prompt cache holds of it (``cached`` tokens, from the previous
        call) read, the rest written."""
        return self.read * min(cached, context) + self.write * max(0, context - cached)


PRICES = Prices()

# Claude Code's compaction, as simulated (bench/support/costmodel.py, and the dashboard's
# estimate of what it would have cost): one call reads the whole context and writes a summary of
# about this size; the conversation goes on from the CLI's prompt and that summary.
AUTO_COMPACT_SUMMARY = 8_000


def auto_compact(context: int, overhead: int, prices: Prices = PRICES) -> tuple[float, int]:
    """Claude Code's compaction of ``context``, as simulated: what it costs, and the context after
    (the CLI's own prompt, ``overhead``, and the summary; nothing of it in the cache)."""
    return prices.read * context + prices.output * AUTO_COMPACT_SUMMARY, overhead + AUTO_COMPACT_SUMMARY


def long_lived(cache_life: float | None) -> bool:
    """A cache the CLI's records say lives longer than 5 minutes (None: they do not say)."""
    return cache_life is not None and cache_life > SHORT_CACHE_SECONDS


def cache_prices(prices: Prices, cache_life: float | None) -> Prices:
    """What a thread's calls pay at the cache its records say: a longer-lived one writes at
    ``LONG_CACHE_WRITE``. (``swap.cache_life_seconds`` alone prices nothing: it is also a Codex
    thread's life, and OpenAI charges nothing more to write a cache however long it lives.)"""
    if long_lived(cache_life) and prices.write < LONG_CACHE_WRITE:
        return replace(prices, write=LONG_CACHE_WRITE)
    return prices


def recent_band(swap: SwapSettings, gradient: GradientSettings, cache_life: float | None) -> int:
    """The recent band a thread's rewrites keep whole: smaller when its cache lives long
    (``gradient.long_cache_recent_tokens``), unless a target sets the context (the band then
    only fits under it, and what it keeps costs nothing more)."""
    if swap.target_tokens is None and long_lived(cache_life):
        return gradient.long_cache_recent_tokens
    return gradient.recent_tokens


def still_cached(cached: int, idle: float, cache_life: float) -> int:
    """What the prompt cache still holds after ``idle`` seconds: nothing past its life."""
    return 0 if idle > cache_life else cached


@dataclass(slots=True)
class Pace:
    """How a thread's context grows, from what its turn ends have shown."""

    per_call: float | None = None  # tokens a model call adds (moving average)
    per_turn: float | None = None  # tokens a turn adds (moving average)
    biggest_turn: int = 0  # the most one turn has added
    overhead: int | None = None  # the first context seen on a new thread: the CLI's own prompt
    floor: int | None = None  # what the last rewrite to the floor left: the floor, measured
    landed: int | None = None  # what the last rewrite left (committed or skipped)
    # With swap.high_tokens set: the trigger this thread backed off to, because a rewrite could
    # not leave room under swap.high_tokens (``CostPolicy.rewritten``).
    backed_off_to: int | None = None
    # How long the thread's prompt cache lives unused, as the CLI's records of its model calls
    # say (``CostPolicy.learned``); None: not said yet.
    cache_life: float | None = None

    def observe(self, grew: int, calls: int) -> None:
        """A turn (or several) added ``grew`` tokens over ``calls`` model calls."""
        if grew <= 0 or calls <= 0:
            return  # a swap or the CLI's compaction in between: says nothing about the pace
        sample = grew / calls
        self.per_call = sample if self.per_call is None else 0.7 * self.per_call + 0.3 * sample
        self.per_turn = grew if self.per_turn is None else 0.7 * self.per_turn + 0.3 * grew
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
    summary: float = 0.0  # the model's summary for this swap's cycle (its side session), estimated
    cache_life: float = SHORT_CACHE_SECONDS  # the thread's prompt cache's life, as priced

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 1) if isinstance(v, float) else v) for k, v in asdict(self).items()
                if k != "swap"}


@dataclass(frozen=True, slots=True)
class FloorBounds:
    """What bounds the floor a swap lands on (``/context``, ``liminal config``): the recent band's
    and the preamble's budgets in force, and the setting that bounds the recent band."""

    recent: int  # the most the recent band keeps whole (at least the last turn, whatever this says)
    preamble: int  # the most the preamble takes
    limited_by: str  # the setting that bounds the recent band
    target: int | None  # swap.target_tokens
    overhead: int | None  # the CLI's own prompt, once a thread has shown it
    # The band on a thread whose prompt cache lives an hour, where it differs (said beside).
    long_cache: int | None = None

    def describe(self) -> str:
        prompt = (f"the CLI's own prompt (about {self.overhead:,} tokens)" if self.overhead is not None
                  else "the CLI's own prompt")
        less = "" if self.overhead is not None else " less the CLI's own prompt"
        if self.target is None:
            longer = (f"; {self.long_cache:,} on a thread whose prompt cache lives an hour, "
                      "gradient.long_cache_recent_tokens" if self.long_cache is not None else "")
            return (f"Swaps go down to the floor: {prompt}, the last {self.recent:,} tokens of the "
                    f"conversation kept whole ({self.limited_by}, at least the last turn{longer}) "
                    f"and a preamble of up to {self.preamble:,} (gradient.summary_tokens).")
        head = (f"Swaps aim at {self.target:,} tokens (swap.target_tokens): {prompt}, a preamble "
                f"of up to {self.preamble:,}, and the recent band kept whole, ")
        if self.limited_by == "gradient.recent_tokens":
            return head + f"up to {self.recent:,} tokens (gradient.recent_tokens); older turns cut to fit."
        if self.recent <= 0:
            return (head + "only the last turn: the CLI's own prompt and the preamble leave no room "
                    "under the target, so swaps land above it (raise swap.target_tokens).")
        return (head + f"fitted under the target: up to {self.recent:,} tokens{less}, never less "
                "than the last turn (swap.target_tokens bounds it; gradient.recent_tokens is larger).")


def floor_bounds(swap: SwapSettings, gradient: GradientSettings, overhead: int | None = None, *,
                 long_cache: bool | None = None) -> FloorBounds:
    """The floor's bounds as the gradients apply them (``liminal.gradient.bands``), on a thread
    whose prompt cache lives long (``long_cache``), short, or either (None: both are said)."""
    target = swap.target_tokens
    if target is None:
        if long_cache:
            return FloorBounds(gradient.long_cache_recent_tokens, gradient.summary_tokens,
                               "gradient.long_cache_recent_tokens", None, overhead)
        other = gradient.long_cache_recent_tokens
        return FloorBounds(gradient.recent_tokens, gradient.summary_tokens, "gradient.recent_tokens",
                           None, overhead, other if long_cache is None and other != gradient.recent_tokens else None)
    room = target - (overhead or 0)
    preamble = preamble_budget(room, gradient)
    recent = recent_budget(room, preamble, gradient, floor=False)
    limited = "gradient.recent_tokens" if recent >= gradient.recent_tokens else "swap.target_tokens"
    return FloorBounds(recent, preamble, limited, target, overhead)


class CostPolicy:
    def __init__(self, swap: SwapSettings, gradient: GradientSettings, ceiling: int,
                 prices: Prices = PRICES, side_session_tokens: int = 0, memory: MemorySettings | None = None) -> None:
        self.swap = swap
        self.gradient = gradient
        self.ceiling = ceiling
        self.prices = prices
        # The CLI's own prompt in a side session (``SideSessions.side_session_tokens``): what a
        # summary costs beside liminal's request and the summary (0: not known, not counted).
        self.side_session_tokens = side_session_tokens
        self.side_sessions = True  # the CLI allows side sessions (``SideSessions.side_sessions``)
        self.memory = memory or MemorySettings()  # what rides the summary's request

    @classmethod
    def of(cls, swap: SwapSettings, gradient: GradientSettings, harness: SwapHarness,
           memory: MemorySettings | None = None) -> CostPolicy:
        """The policy for the CLI ``harness`` stands for: its own compaction point as the
        ceiling unless ``swap.ceiling_tokens`` sets one, and what its side session costs."""
        made = cls(swap, gradient, swap.ceiling_tokens or harness.ceiling_tokens,
                   side_session_tokens=harness.side_session_tokens, memory=memory)
        made.follow(harness)
        return made

    def follow(self, harness: SwapHarness) -> None:
        """What the CLI ``harness`` stands for says of the costs: its side sessions, and its
        model's prices when they are not the default's."""
        self.side_session_tokens = harness.side_session_tokens
        self.side_sessions = harness.side_sessions
        ratios = harness.prices
        if ratios is not None:
            self.prices = Prices(read=ratios.read, write=ratios.write, output=ratios.output)

    @property
    def summaries(self) -> bool:
        return self.swap.summaries and self.swap.enabled and self.side_sessions

    def summary_cost(self, context: int, target: int, pace: Pace) -> float:
        """What the model's summary of a swap cycle costs (``swap.summaries``): its side
        session's prompt and liminal's request written to the cache, and its output, at the
        thread's prices. Paid once per cycle, like the rebuild."""
        if not self.summaries:
            return 0.0
        p = self.prices_for(pace)
        request = SUMMARY_DIGEST_SHARE * max(context - target, 0) + self.memory_request()
        return p.write * (self.side_session_tokens + request) + p.output * self.summary_output()

    def summary_output(self) -> int:
        """What the model's answer to a summary's request is priced at (tokens)."""
        return BOUNDED_OUTPUT if self.memory.lessons else SUMMARY_OUTPUT

    def memory_request(self) -> int:
        """What the lessons and the review add to a summary's request (tokens)."""
        review = self.memory.review and self.gradient.zone_tokens > 0
        return LESSONS_REQUEST * self.memory.lessons + REVIEW_REQUEST * review

    # -- the thread's prompt cache ----------------------------------------------------------

    def cache_life(self, pace: Pace) -> float:
        """How long this thread's prompt cache lives unused: as the CLI's records say, else as set."""
        return pace.cache_life if pace.cache_life is not None else self.swap.cache_life_seconds

    def long_cache(self, pace: Pace) -> bool:
        return long_lived(pace.cache_life)

    def prices_for(self, pace: Pace) -> Prices:
        return cache_prices(self.prices, pace.cache_life)

    def recent(self, pace: Pace) -> int:
        return recent_band(self.swap, self.gradient, pace.cache_life)

    def learned(self, pace: Pace, cache_life: float | None) -> bool:
        """The CLI's records say how long the thread's cache lives (None: they do not). True when
        that changes how the thread is priced; the floor the last rewrite measured was for the
        other recent band, so it is estimated again."""
        if cache_life is None or cache_life == pace.cache_life:
            return False
        was, band = self.long_cache(pace), self.recent(pace)
        pace.cache_life = cache_life
        if self.recent(pace) != band:
            pace.floor = None
        return self.long_cache(pace) != was

    def summary_due(self, context: int, pace: Pace) -> bool:
        """Time for the model's summary of what the coming swap consolidates: the context past
        ``swap.summary_at`` of the trigger and the swap within ``swap.summary_turns_ahead`` turns
        at the thread's pace: late enough that it covers most of what the swap consolidates,
        early enough to be ready for it. (One per cycle: ``liminal.kernel.summaries`` holds
        that.)"""
        trigger = self.trigger(pace)
        turn = pace.per_turn if pace.per_turn is not None else pace.growth
        ahead = self.swap.summary_turns_ahead
        return context >= self.swap.summary_at * trigger and context + ahead * turn >= trigger

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
        return overhead + self.recent(pace) + self.gradient.summary_tokens

    def target(self, pace: Pace) -> int:
        """What a swap is expected to leave."""
        return self.swap.target_tokens if self.swap.target_tokens is not None else self.floor(pace)

    @property
    def aim(self) -> int:
        """What the rewrite is asked for: the target as set, else 0, the floor (the gradient keeps
        the recent band whole and the preamble at its budget, and cuts everything else)."""
        return self.swap.target_tokens if self.swap.target_tokens is not None else 0

    def leeway(self, pace: Pace) -> int:
        """With ``swap.high_tokens`` set, the room a swap must leave under the trigger, half of it
        at least: ``H - T`` as set; with only the trigger set, it less the floor, at least
        ``MIN_GAP``."""
        high = self.swap.high_tokens if self.swap.high_tokens is not None else self.trigger(pace)
        return max(high - self.target(pace), 1 if self.fixed else MIN_GAP)

    def trigger(self, pace: Pace) -> int:
        if self.swap.high_tokens is not None:
            # Backed off, never past where the next turn would carry the context to the ceiling.
            backed = min(pace.backed_off_to or 0, self.ceiling - max(pace.biggest_turn, 2 * int(pace.growth)))
            return max(self.swap.high_tokens, backed)
        return self.chosen_trigger(pace)

    def chosen_trigger(self, pace: Pace) -> int:
        """The trigger the cost model chooses at the thread's target and pace, where the rebuild
        pays best: the trigger itself unless ``swap.high_tokens`` is set."""
        target = self.target(pace)
        prices = self.prices_for(pace)
        # The rebuild (and the summary's fixed part, when the model writes one per swap) paid
        # once per cycle against the prefix read at every call. (The summary's request grows
        # with the cycle's growth: the same per call whatever the trigger, so not in here.)
        once = prices.write * target + self.summary_cost(target, target, pace)
        best = target + max(MIN_GAP, math.sqrt(2 * once / prices.read * pace.growth))
        # Never let the next turn carry the context past the ceiling.
        limit = self.ceiling - max(pace.biggest_turn, 2 * int(pace.growth))
        return int(max(min(best, limit), target + 1))

    def cost(self, context: int, target: int, trigger: int, pace: Pace, *,
             idle: bool) -> tuple[float, float, float, float]:
        """(rebuild, saves per call, payback calls, calls to the next swap) of a swap now."""
        p = self.prices_for(pace)
        # Busy: the alternative reads ``context`` from the cache. Idle past the cache's life: the
        # alternative writes it all again anyway. (The model's summary is not in it: made ahead,
        # it is paid whether this swap goes on or not; the trigger counts it, once per cycle.)
        rebuild = p.write * target - (p.write if idle else p.read) * context
        saves = p.read * max(context - target, 0)
        payback = max(rebuild, 0.0) / saves if saves > 0 else math.inf
        return rebuild, saves, payback, max(trigger - target, 0) / pace.growth

    def decide(self, context: int, pace: Pace, *, idle: bool = False, turns_since_swap: int = 0) -> Decision:
        target, trigger = self.target(pace), self.trigger(pace)
        rebuild, saves, payback, to_next = self.cost(context, target, trigger, pace, idle=idle)

        def decision(swap: bool, why: str, forced: bool = False, every: bool = False) -> Decision:
            return Decision(swap, why, context, target, trigger, rebuild, saves, payback, to_next,
                            idle, forced, every, self.summary_cost(context, target, pace),
                            self.cache_life(pace))

        if not self.swap.enabled:
            return decision(False, "swaps are off")
        if idle:
            if not self.idle_swaps:
                return decision(False, "idle swaps are off (swap.high_tokens is set)")
            floor = target + IDLE_SHARE * (trigger - target)
            if context < floor:
                return decision(False, f"idle, but {tokens(context)} tokens is below {tokens(floor)}")
            return decision(True, f"idle past the cache's life ({self.cache_life(pace):g}s): "
                                  f"the next call rewrites the prompt anyway; {tokens(context)} -> ~{tokens(target)} "
                                  f"tokens saves {tokens(-rebuild)} now and {tokens(saves)} a call")
        if context >= trigger:
            high = self.swap.high_tokens
            if high is not None and trigger > high:
                return decision(True, f"context {tokens(context)} tokens >= {tokens(trigger)} (backed "
                                      f"off from {tokens(high)}: the last rewrite left "
                                      f"{tokens(pace.landed)})")
            if self.fixed:
                return decision(True, f"context {tokens(context)} tokens >= {tokens(trigger)}")
            forced = trigger < target + MIN_GAP or payback > to_next
            return decision(True, f"context {tokens(context)} tokens >= {tokens(trigger)}"
                            + (" (swap.high_tokens)" if high is not None else
                               " (the ceiling forces it)" if forced else
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
            # The floor alone is past the trigger: swapping would buy one turn at the price of a
            # full prompt-cache rebuild, then trigger again.
            return f"the rewrite leaves {tokens(tokens_after)} tokens, not below {tokens(decision.trigger)}"
        if decision.every:
            return None  # asked for as set
        if self.swap.high_tokens is not None:
            leeway = self.leeway(pace)
            room = decision.trigger - tokens_after
            if 2 * room < leeway:
                return (f"the rewrite leaves {tokens(tokens_after)} tokens, {tokens(room)} below the "
                        f"trigger {tokens(decision.trigger)}: less than half the leeway "
                        f"({tokens(leeway)}), so the next turns would swap again")
        if self.fixed or decision.forced:
            return None  # asked for as set, or the ceiling leaves no choice
        if tokens_after >= decision.context:
            return f"the rewrite leaves {tokens(tokens_after)} tokens, no fewer than {tokens(decision.context)}"
        _, _, payback, to_next = self.cost(decision.context, tokens_after, decision.trigger, pace,
                                           idle=False)
        if payback > to_next:
            return (f"the rewrite leaves {tokens(tokens_after)} tokens: it pays back in "
                    f"{_calls(payback)}, more than the {to_next:.0f} before the next swap")
        return None

    def rewritten(self, pace: Pace, tokens_after: int, *, committed: bool) -> None:
        """What a rewrite left tells of the thread: the floor, when one asked for it committed; and,
        with ``swap.high_tokens`` set, how far the trigger must back off so that the next swap
        has room to land. Committed, the trigger stays at least half the leeway above what the
        swap left; skipped, the thread waits until its context has grown a whole leeway past
        what the rewrite could reach, so the next attempt lands with room to spare."""
        pace.landed = tokens_after
        if committed and not self.aim:
            pace.floor = tokens_after  # the thread's floor, as it is now measured
        high = self.swap.high_tokens
        if high is None:
            return
        leeway = self.leeway(pace)
        wanted = tokens_after + ((leeway + 1) // 2 if committed else leeway)
        pace.backed_off_to = wanted if wanted > high else None

    def expected_payback(self, pace: Pace) -> tuple[float, float] | None:
        """A busy swap at the trigger as the policy's own arithmetic prices it at the thread's
        pace (``DEFAULT_PER_CALL`` before it has shown one): (its payback, the calls until the
        next swap), both in model calls; None where the target is not below the trigger."""
        target, trigger = self.target(pace), self.trigger(pace)
        if target >= trigger:
            return None
        _, _, payback, to_next = self.cost(trigger, target, trigger, pace, idle=False)
        return payback, to_next

    def losing_money(self, pace: Pace, measured: Payback | None, subject: str = "this thread") -> list[str]:
        """What ``/context``, ``liminal config`` and the dashboard say when swaps cost more than
        they save: the thread's measured swaps (``measure_payback``) if most did not repay before
        the next; before enough are measured, the settings' own arithmetic at the thread's pace
        (``expected_payback``); and what to change. Nothing when swaps pay."""
        if measured is not None and measured.swaps >= PAYBACK_LEAST:
            return [measured.describe(subject), self.advice(pace)] if measured.loses else []
        expected = self.expected_payback(pace)
        if expected is None or round(expected[0]) <= round(expected[1]):  # as said: in whole calls
            return []
        at = (f"this thread's pace ({tokens(pace.growth)} tokens a model call)" if pace.per_call is not None
              else f"a typical pace ({tokens(DEFAULT_PER_CALL)} tokens a model call)")
        said = (f"Swaps would lose money at {at}: one at {self.trigger(pace):,} tokens repays its "
                f"cache rebuild in {_calls(expected[0])}, but the next comes after {_calls(expected[1])}.")
        return [said, self.advice(pace)]

    def advice(self, pace: Pace) -> str:
        """What to change when swaps lose money, naming the settings."""
        swap = self.swap
        every = (f" swap.every_turns ({swap.every_turns}) swaps that often whatever it costs: set it "
                 "to 0." if swap.every_turns else "")
        high = swap.high_tokens
        if high is not None:
            best = round(self.chosen_trigger(pace), -3)
            hint = (f"; about {best:,} repays best at {tokens(pace.growth)} tokens a model call"
                    if best > high else "")
            unset = ("unset swap.high_tokens and swap.target_tokens" if swap.target_tokens is not None
                     else "unset swap.high_tokens")
            return (f"Raise swap.high_tokens ({high:,} now{hint}): the room between it and where "
                    f"swaps land is what each swap buys; or {unset} to let the cost policy "
                    f"choose.{every}")
        if swap.target_tokens is not None:
            return (f"The ceiling ({self.ceiling:,} tokens: swap.ceiling_tokens, else the CLI's "
                    "own auto-compact) leaves little room above swap.target_tokens "
                    f"({swap.target_tokens:,}): lower it, or unset it to let the cost policy "
                    f"choose.{every}")
        if every:
            return every.strip()
        return (f"The ceiling ({self.ceiling:,} tokens: swap.ceiling_tokens, else the CLI's own "
                "auto-compact) leaves little room above the floor swaps land on: lower "
                "gradient.recent_tokens, or raise swap.ceiling_tokens if it is set.")

    def bounds(self, pace: Pace) -> list[str]:
        """What bounds this thread's floor and trigger, in sentences (``/context``)."""
        known = pace.cache_life is not None
        said = [floor_bounds(self.swap, self.gradient, pace.overhead,
                             long_cache=self.long_cache(pace) if known else None).describe()]
        if known:
            said.append(f"This thread's prompt cache lives {_life(self.cache_life(pace))} (the CLI's "
                        "records say so)" + (f": writes cost {self.prices_for(pace).write:g}x the input "
                                             "price, and an idle swap waits out its life."
                                             if self.long_cache(pace) else "."))
        target = self.swap.target_tokens
        if pace.landed is not None and target is not None and pace.landed > target:
            said.append(f"The last rewrite left {pace.landed:,} tokens, above the target: what the "
                        "CLI's own prompt, the preamble and the last turn (kept whole) take.")
        high = self.swap.high_tokens
        if high is not None and pace.backed_off_to is not None:
            said.append(f"The trigger backed off from {high:,} (swap.high_tokens) to "
                        f"{self.trigger(pace):,}, so that each swap has room to land below it; a larger "
                        "leeway (swap.high_tokens - swap.target_tokens) keeps it where it is set.")
        return said


# -- settings that lose money ------------------------------------------------------------------

# The swaps a thread's payback is measured over: enough to see a habit, few enough that a change
# of settings shows within a few swaps.
PAYBACK_SWAPS = 6
# Fewer measured than this says nothing yet (one cycle may be a burst of tool output).
PAYBACK_LEAST = 2


@dataclass(frozen=True, slots=True)
class Payback:
    """A thread's last swaps against the model calls between them, as measured: each swap's
    payback (the calls its cache rebuild takes to repay from what each later call reads less:
    the journal's ``payback_calls``) beside the model calls until the thread's next swap. A swap
    the next one came before it repaid lost money: the thread would have paid less without it."""

    swaps: int  # the swaps measured: each followed by another swap, both figures known
    losing: int  # of them, those the next swap came before they repaid
    payback: float  # the median payback, in model calls
    between: float  # the median model calls from a swap to the next

    @property
    def loses(self) -> bool:
        """Most of the swaps measured (at least ``PAYBACK_LEAST``) did not repay."""
        return self.swaps >= PAYBACK_LEAST and 2 * self.losing > self.swaps

    def describe(self, subject: str = "this thread") -> str:
        return (f"Swaps lose money on {subject}: the last {plural(self.swaps, 'swap')} repaid "
                f"their cache rebuild in a median {_calls(self.payback)}, but the next swap came "
                f"after {_calls(self.between)} ({self.losing} of {self.swaps} never repaid).")


# A thread's committed moves, oldest first, as ``measure_payback`` reads them: whether the move is
# liminal's own swap, its payback in model calls (None: not priced, or no saving to repay it),
# and the model calls since the move before it (None: not counted).
Moved = tuple[bool, float | None, int | None]


def measure_payback(moved: Sequence[Moved]) -> Payback | None:
    """The thread's last ``PAYBACK_SWAPS`` swaps that the next move, a swap too, followed, each
    with its payback and the calls until that next swap (a person's move in between, ``/clear``
    or ``/undo``, ends the cycle: not measured). None: no swap measured."""
    cycles = [(payback, calls) for (swap, payback, _), (next_swap, _, calls) in itertools.pairwise(moved)
              if swap and next_swap and payback is not None and calls is not None]
    cycles = cycles[-PAYBACK_SWAPS:]
    if not cycles:
        return None
    return Payback(len(cycles), sum(1 for payback, calls in cycles if payback > calls),
                   statistics.median(p for p, _ in cycles), statistics.median(c for _, c in cycles))


def journal_moves(records: Iterable[Mapping[str, Any]]) -> list[Moved]:
    """A thread's committed moves from its journal records (``SwapRecord`` as a dict, or the
    data of the store's ``swap`` message), oldest first, as ``measure_payback`` reads them."""
    out: list[Moved] = []
    for record in records:
        if record.get("outcome") != "committed":
            continue
        cost = record.get("cost")
        cost = cost if isinstance(cost, dict) else {}
        out.append((moves.what(record) == "swap", _figure(0.0 if cost.get("idle") else cost.get("payback_calls")),
                    _count(cost.get("calls_since_move"))))
    return out


def _figure(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _life(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return plural(int(seconds // 3600), "hour")
    if seconds >= 60 and seconds % 60 == 0:
        return plural(int(seconds // 60), "minute")
    return f"{seconds:g} s"


def _calls(n: float) -> str:
    return plural(round(n), "call") if math.isfinite(n) else "no number of calls"
