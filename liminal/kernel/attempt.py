"""One move of a thread as a record (``MoveAttempt``), and how its end is written down.

A move (a swap, a context command's, a reopen) is one ``MoveAttempt``: the mover
(``liminal.kernel.mover``) is given it with what the mover needs to start (the thread, the
session it leaves, why, when, the size before, the swap's decision, what kind of move) and gives
the same record back with what the move came to (its outcome and why, the new session, the
rewrite, how it was opened, when each step ended). ``MoveRecords`` turns an attempt into the
journal's ``SwapRecord`` and writes it: the local journal is the authority, a ``liminal/swap``
note in the store keeps it with the conversation, and a shared store (MongoDB) hears of the ends
of moves that did not commit after the hold (``flush``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import anyio

from liminal.errors import in_words
from liminal.harness.base import Rewritten
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.policy import Decision
from liminal.kernel.storejournal import Refused, StoreJournal
from liminal.kernel.threads import ThreadState

if TYPE_CHECKING:
    from liminal.acp.port import Port

UNDO_CLOSE_SECONDS = 2.0  # closing the new session of a move that failed (the agent may be going)

# The outcomes of a move's end record: only a committed move moved the thread.
COMMITTED, FAILED, ABANDONED, SKIPPED = "committed", "failed", "abandoned", "skipped"


@dataclass(slots=True)
class MoveAttempt:
    """One move of a thread, from its start to its end record."""

    state: ThreadState
    old_backing: str  # the session the thread is on, and stays on unless the move commits
    reason: str  # why it was asked (journaled with a committed move)
    kind: str = "swap"  # journaled as ``move``: ``swap``, a command as given, ``reopen``
    started: float = 0.0  # wall clock, as journaled
    t0: float = 0.0  # ``time.monotonic()`` at the start: what the duration is measured from
    tokens_before: int | None = None  # the context before, as known when the move was asked
    decision: Decision | None = None  # the swap's (None for a command's move)
    # What it came to (the mover's): an end record's outcome and why, once there is one.
    outcome: str = ABANDONED
    said: str = "stopped during the move"
    new_backing: str | None = None
    rewritten: Rewritten | None = None  # the file written (None: an empty session, or none)
    opened_by: str | None = None  # session/resume, session/load or session/new
    t_rewritten: float = 0.0  # ``time.monotonic()`` when written, and when opened
    t_moved: float = 0.0

    @property
    def committed(self) -> bool:
        return self.outcome == COMMITTED

    @property
    def new_backing_id(self) -> str | None:
        return self.new_backing

    def ended(self, record: SwapRecord) -> MoveAttempt:
        """The attempt as its end record says it ended."""
        self.outcome, self.said = record.outcome, record.reason
        return self

    def seconds(self) -> float:
        return round(time.monotonic() - self.t0, 4)


class SwapError(Exception):
    """Why a move did not happen, worded for the person who asked for it."""


def failure(exc: BaseException, step: str | None = None) -> str:
    """A failed move's reason, as journaled and shown, in words (``liminal.errors``):
    a ``SwapError`` or the shared store's refusal says it already; any other error is said by
    the step it broke (``step``: "the rewrite could not be made") and what it means, never by
    its class's name."""
    if isinstance(exc, (SwapError, Refused)):
        return str(exc)
    return f"{step}: {in_words(exc)}" if step else in_words(exc)


Priced = Callable[[ThreadState, Decision, int], dict[str, Any]]


class MoveRecords:
    """Writes moves' records: to the journal, as a note in the store, and to a shared store."""

    def __init__(self, journal: SwapJournal, harness_name: Callable[[], str], *,
                 priced: Priced | None = None, shared: StoreJournal | None = None) -> None:
        self.journal = journal
        self.harness_name = harness_name
        # What a committed swap costs and saves, for its journal record (the swap's policy).
        self.priced = priced
        # A store several sidecars share (MongoDB): every move's claim and commit are its writes
        # (``liminal.kernel.storejournal``); None: the local journal alone (SQLite).
        self.shared = shared
        self.port: Port | None = None
        self._unshared: list[SwapRecord] = []  # end records for the shared store, not written yet

    def begun(self, attempt: MoveAttempt, new_path: str) -> SwapRecord:
        """The ``begin`` of an attempt whose rewrite goes to ``new_path``."""
        state, decision = attempt.state, attempt.decision
        return SwapRecord(
            thread_id=state.thread_id, old_backing_id=attempt.old_backing,
            new_backing_id=attempt.new_backing, outcome="begin", reason=attempt.reason,
            started_at=attempt.started, duration_s=0.0, tokens_before=attempt.tokens_before,
            tokens_after=None, harness=self.harness_name(), cwd=state.cwd, new_path=new_path,
            cost=decision.as_dict() if decision is not None else None, move=attempt.kind)

    def made(self, attempt: MoveAttempt, outcome: str, reason: str, *, before: int | None,
             after: int | None, decision: Decision | None = None,
             zone: list[dict[str, Any]] | None = None, size: int | None = None) -> SwapRecord:
        """The end record of ``attempt``: ``outcome`` and why, the sizes before and after,
        priced by ``decision`` (when given), what the zone placed and the file's size. A move
        onto a session the agent opened empty (``session/new``) is journaled ``opened: empty``:
        the CLI writes its file only at its first turn."""
        cost = None
        if decision is not None:
            cost = decision.as_dict()
            if after is not None and outcome == COMMITTED and self.priced is not None:
                cost.update(self.priced(attempt.state, decision, after))
        state = attempt.state
        return SwapRecord(
            thread_id=state.thread_id, old_backing_id=attempt.old_backing,
            new_backing_id=attempt.new_backing, outcome=outcome, reason=reason,
            started_at=attempt.started, duration_s=attempt.seconds(), tokens_before=before,
            tokens_after=after, harness=self.harness_name(), cwd=state.cwd, cost=cost,
            opened="empty" if attempt.opened_by == "session/new" else None, move=attempt.kind,
            zone=zone, size=size)

    def ended(self, attempt: MoveAttempt, outcome: str, reason: str, *, after: int | None = None,
              decision: Decision | None = None, before: int | None = None) -> MoveAttempt:
        """An end without a move, journaled and noted (and, with a shared store, kept for it:
        ``flush``); the attempt as it says. ``before``: the size before as the rewrite measured
        it (else the attempt's)."""
        record = self.made(attempt, outcome, reason,
                           before=attempt.tokens_before if before is None else before,
                           after=after, decision=decision)
        self.written(record)
        if self.shared is not None and outcome != COMMITTED:
            self._unshared.append(record)
        return attempt.ended(record)

    def written(self, record: SwapRecord) -> None:
        self.journal.append(record)  # the authority here (see journal.py)
        if self.port is not None:  # and a note in the store, with the conversation
            self.port.note("liminal/swap", asdict(record), thread_id=record.thread_id)

    async def flush(self) -> None:
        """The end records of moves that did not commit, into the shared store, and their
        claims released there (shielded, bounded: the store may be down; a claim left behind
        is taken over once stale)."""
        if self.shared is None or not self._unshared:
            return
        records, self._unshared = self._unshared, []
        with anyio.CancelScope(shield=True), anyio.move_on_after(UNDO_CLOSE_SECONDS):
            for record in records:
                await self.shared.ended(record)
