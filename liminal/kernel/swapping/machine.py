"""The swap machine: what a thread's turn end, idle spell or load calls for, and the rules
every swap of a thread shares (its decision, its cache's life, its back-off).

Sans-I/O: told what the router and the thread model saw (events as method calls with the facts
they need), it answers with commands (``steps.Cue``) and keeps each thread's ``SwapBook``. The
driver (``liminal.kernel.swap.SwapManager``) asks the port for the facts, carries out the
commands and runs each queued look as a ``SwapRun`` (``liminal.kernel.swapping.run``).

Every decision goes through ``decide``: the turn end's (the agent's usage said the size), the
idle spell's, a run's once the file said the size, and a run's again when the CLI's records
priced the cache's life otherwise than the turn end had.
"""

from __future__ import annotations

from liminal import log
from liminal.config import SwapSettings
from liminal.kernel.policy import CostPolicy, Decision
from liminal.kernel.swapping.book import SwapBook
from liminal.kernel.swapping.steps import Cue, Hold, Look, LookForCacheLife, Queue

logger = log.get("liminal.swap")

# Turn ends at which a thread's session file is read for its cache's life while the CLI's records
# have not said it (a CLI whose records never do keeps swap.cache_life_seconds).
CACHE_LOOKS = 3
# How long a look at a swap already decided waits for the turn to reach the session file (and
# for the file to appear): the thread is held meanwhile, and past it nothing is rewritten.
DECIDED_SETTLE_SECONDS = 10.0


class SwapMachine:
    def __init__(self, settings: SwapSettings, policy: CostPolicy, *,
                 settle_timeout: float = DECIDED_SETTLE_SECONDS) -> None:
        self.settings = settings
        self.policy = policy
        # How long a held look waits for the turn (and the file) when a swap is decided already;
        # an undecided one waits 2 s, a look far below the trigger ``UNHELD_SETTLE_SECONDS``.
        self.settle_timeout = settle_timeout

    def decide(self, book: SwapBook, context: int, *, idle: bool = False) -> Decision:
        """The one place a swap is decided. An idle spell's is by the cache alone:
        ``swap.every_turns`` counts turn ends, and an idle spell is none."""
        return self.policy.decide(context, book.pace, idle=idle,
                                  turns_since_swap=0 if idle else book.turns_since_swap)

    # ------------------------------------------------------------ cues

    def turn_ended(self, book: SwapBook, thread_id: str, *, context_tokens: int | None,
                   prompt: str | None, new: bool, busy: bool) -> list[Cue]:
        """A turn ended well. ``context_tokens``: the size the agent's usage said (None: it said
        none); ``prompt``: the turn's, to find it on disk; ``new``: opened by ``session/new``
        here; ``busy``: a prompt or an agent's request of the thread is in flight."""
        if book.swapping or not self.settings.enabled:
            logger.debug("turn ended; not considered", thread=thread_id, swapping=book.swapping)
            return []
        book.turns_since_swap += 1
        if context_tokens is not None:
            book.observe(context_tokens, new=new)
        if book.skip_turns:
            book.skip_turns -= 1
            return []
        if busy:
            logger.debug("turn ended with work in flight; no swap now", thread=thread_id)
            return []
        decision: Decision | None = None
        every_due = bool(self.settings.every_turns) and book.turns_since_swap >= self.settings.every_turns
        if context_tokens is not None or every_due:
            # Without usage, a swap that swap.every_turns asks for is decided all the same.
            known = context_tokens if context_tokens is not None else book.file_tokens or 0
            decision = self.decide(book, known)
            logger.debug("turn ended", thread=thread_id, tokens=known, decided=decision.swap,
                         why=decision.why)
            if not decision.swap:
                return self._cache_look(book, thread_id)
        # Without usage from the agent the session file decides, once the turn is on disk (a
        # tenth of a second after the answer). Near the trigger the thread is held for that
        # check, or a client that answers quickly would never let a swap start; far below it an
        # unheld read only updates the size, and a turn that jumps the whole way is caught one
        # turn late.
        pace = book.pace
        trigger = self.policy.trigger(pace)
        near = trigger - max(2 * pace.biggest_turn, (trigger - self.policy.target(pace)) // 2)
        held = decision is not None or book.file_tokens is None or book.file_tokens >= near
        return [Queue(Look(thread_id, decision, held, prompt))]

    def opened(self, book: SwapBook, thread_id: str, *, stopping: bool, busy: bool) -> list[Cue]:
        """The client loaded or resumed a thread: held, its size read from its session file,
        swapped before its first prompt if it is past its trigger. ``busy``: a prompt already
        sent with the load (or the thread held already) is not held up."""
        if book.swapping or not self.settings.enabled or stopping or busy:
            return []
        return [Queue(Look(thread_id, None, True, None, loaded=True))]

    @property
    def idle_swaps(self) -> bool:
        """Whether idle spells are looked at at all."""
        return self.policy.idle_swaps and self.settings.enabled

    def idle(self, book: SwapBook, thread_id: str, *, now: float, idle_since: float | None,
             context_tokens: int | None, prompt: str | None, busy: bool) -> list[Cue]:
        """A look at a thread's idle spell (``now``, ``idle_since``: monotonic). Past its cache's
        life the next call rewrites the whole prompt anyway, so a swap now costs nothing more,
        and the person is not waiting. One look per spell. ``busy``: work in flight, the thread
        held, or no agent to move it on."""
        life = self.policy.cache_life(book.pace)  # the thread's own: an hour's outlives 5 minutes
        if (idle_since is None or book.swapping or now - idle_since < life
                or book.idle_looked == idle_since):
            return []
        context = context_tokens if context_tokens is not None else book.file_tokens
        if context is None or busy:  # not a look: the spell is looked at once it can be
            return []
        book.idle_looked = idle_since
        decision = self.decide(book, context, idle=True)
        logger.debug("thread idle past the cache's life", thread=thread_id, tokens=context,
                     decided=decision.swap, why=decision.why)
        if not decision.swap:
            return []
        return [Queue(Look(thread_id, decision, True, prompt, idle_since))]

    def queued(self, book: SwapBook, look: Look) -> list[Cue]:
        """The look reached the swap task: the thread is moving from now on, held if the look
        is (in the flush that saw the cue, so the client's next prompt is certain to wait)."""
        book.swapping = True
        return [Hold(look.thread_id)] if look.held else []

    def _cache_look(self, book: SwapBook, thread_id: str) -> list[Cue]:
        """The agent's usage gave the size; how long the thread's cache lives is in the CLI's own
        records, read beside the turns, a few times at most while they do not say it."""
        if book.pace.cache_life is not None or book.cache_looks >= CACHE_LOOKS:
            return []
        return [LookForCacheLife(thread_id)]

    # ------------------------------------------------------------ a swap's shared rules

    def may_read_cache_life(self, book: SwapBook, *, decided: bool) -> bool:
        """Whether to read the CLI's records for the cache's life now: records that have not
        said it in ``CACHE_LOOKS`` reads are not asked again but for a swap decided (each read
        scans the file's tail)."""
        if book.pace.cache_life is None and not decided:
            if book.cache_looks >= CACHE_LOOKS:
                return False
            book.cache_looks += 1
        return True

    def cache_life_read(self, book: SwapBook, thread_id: str, life: float | None) -> bool:
        """The records said ``life`` (None: nothing): True when that changes how the thread is
        priced."""
        if not self.policy.learned(book.pace, life):
            return False
        logger.info("the thread's prompt cache life, from the CLI's records", thread=thread_id,
                    seconds=life, recent_tokens=self.policy.recent(book.pace),
                    trigger=self.policy.trigger(book.pace))
        return True

    def worth_it(self, book: SwapBook, thread_id: str, decision: Decision, tokens_after: int) -> str | None:
        """A rewrite left ``tokens_after``: None if the swap still pays, else why not (the
        trigger moves instead of the turn ends being skipped)."""
        unpaid = self.policy.worth_it(decision, tokens_after, book.pace)
        if unpaid is not None:
            self.policy.rewritten(book.pace, tokens_after, committed=False)
            # The trigger moved past what this rewrite could reach: that is the back-off;
            # skipping turn ends as well would let the context run on past it.
            book.trigger_backed_off = book.pace.backed_off_to is not None
            logger.info("swap skipped", thread=thread_id, why=unpaid,
                        trigger=self.policy.trigger(book.pace))
        self._above_target(book, thread_id, tokens_after)
        return unpaid

    def _above_target(self, book: SwapBook, thread_id: str, tokens_after: int) -> None:
        """Said once a thread: swap.target_tokens is below what this thread's floor takes (the
        CLI's own prompt, the least preamble, the last turn whole), which no rewrite can go under."""
        target = self.settings.target_tokens
        if target is None or tokens_after <= target or book.said_above_target:
            return
        book.said_above_target = True
        logger.warning("swap.target_tokens is below this thread's floor: the rewrite left more (the "
                       "CLI's own prompt, the preamble and the last turn, kept whole); raise "
                       "swap.target_tokens (and swap.high_tokens) above it to swap where you meant",
                       thread=thread_id, target=target, left=tokens_after, prompt=book.pace.overhead)

    def finished(self, book: SwapBook, outcome: bool | None) -> None:
        """A look ended: a failed swap backs off (unless the trigger moved instead), a committed
        one clears the failures."""
        if outcome is False and not book.trigger_backed_off:
            book.back_off()
        elif outcome:
            book.failures = 0

    def broke(self, book: SwapBook) -> None:
        """A look raised: the thread backs off as after any failed swap, rather than fail its
        next turn end the same way."""
        book.back_off()

    def left(self, book: SwapBook) -> None:
        """The swap task is done with the thread (after ``finished`` or ``broke``)."""
        book.trigger_backed_off = False
