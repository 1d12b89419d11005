"""A thread's swap bookkeeping: what the swap machine keeps of a thread between its swaps.

The machine (``liminal.kernel.swapping.machine``) is its one writer, but for two things the
steps it asks for do: the mover marks the thread moving while it holds it, and starts the book
over when the thread lands on a new session (``restart``). The thread model counts the model
calls (``ThreadState.called``) the pace is measured by.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from liminal.kernel.policy import Pace

# A failed swap skips twice as many turn ends as the last one did, at most this many.
MOST_TURNS_SKIPPED = 32


@dataclass(slots=True)
class SwapBook:
    pace: Pace = field(default_factory=Pace)
    turns_since_swap: int = 0
    file_tokens: int | None = None  # the context last read from the session file (no usage_update)
    last_context: int | None = None  # the context at the last turn end whose size was known
    calls: int = 0  # model calls since then (one a turn, one more per round of tool results)
    # A move holds the thread: a swap's from the turn end that queued it, a command's from its
    # claim, until the hold is released. No second move starts meanwhile.
    swapping: bool = False
    # After a failed swap, skip this many turn ends before trying again (doubling per failure),
    # so a session that cannot be rewritten does not pay for a rewrite at every turn.
    skip_turns: int = 0
    failures: int = 0
    said_above_target: bool = False  # the log said once that the target is below its floor
    trigger_backed_off: bool = False  # the swap just skipped moved the trigger instead (policy)
    cache_looks: int = 0  # reads of the session file for its cache's life
    # The idle spell (its start, monotonic) already looked at: one look per spell.
    idle_looked: float | None = None

    def back_off(self) -> None:
        """After a failed swap, skip twice as many turn ends as the last time (at most 32)."""
        self.failures += 1
        self.skip_turns = min(2 ** self.failures, MOST_TURNS_SKIPPED)

    def restart(self, tokens: int | None) -> None:
        """The thread is on a new session whose context is ``tokens`` (None: not known until its
        next turn, as for an empty one): the turns and calls are counted from here."""
        self.turns_since_swap = 0
        self.file_tokens = self.last_context = tokens
        self.calls = 0

    def observe(self, context: int, *, new: bool) -> None:
        """A turn end's context is known: what the turns since the last one added, per call.
        ``new``: the thread was opened by ``session/new`` here (its first context is the CLI's
        own prompt)."""
        if self.pace.overhead is None and new:
            self.pace.overhead = context
        if self.last_context is not None:
            self.pace.observe(context - self.last_context, self.calls)
        self.last_context = context
        self.calls = 0
