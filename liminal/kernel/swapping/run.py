"""One swap, from the look at the session file to the commit, as a machine without I/O.

``SwapRun.start`` gives the first command; ``send(event)`` takes what came of the last one and
gives the next, until ``Finish``. The order it asks for things is the swap's:

1. ``Locate`` the session file (``AwaitFile`` for a held look: the CLI may write a new
   session's file only after answering its first turn).
2. ``Settle``: the turn is on disk. A look far below the trigger (not held) then only reads the
   cache's life and the size (``ReadCacheLife``, ``ReadSize``) and finishes: no swap.
3. ``ReadCacheLife``: priced at another life than the turn end's, the swap is decided again; an
   idle swap whose cache turns out to live on is dropped.
4. ``ReadSize`` when the agent's usage said none: the file's size decides.
5. ``Gather`` the zone's offer, the summaries and the scratchpad, then ``Rewrite`` with the
   thread's band (by its cache's life) and the plan's aim; the mover opens, journals, releases,
   and asks ``rewritten`` whether the rewrite still pays before it opens.
6. ``Announce`` a committed swap, and ``Finish``.

The run holds its swap's one ``Decision`` (``decision``), final once ``Rewrite`` is asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from liminal import log
from liminal.kernel.policy import Decision
from liminal.kernel.swapping.book import SwapBook
from liminal.kernel.swapping.machine import SwapMachine
from liminal.kernel.swapping.steps import (
    Announce,
    AwaitFile,
    CacheLifeRead,
    Command,
    Done,
    Event,
    Finish,
    Gather,
    Gathered,
    Journal,
    Locate,
    Located,
    Look,
    MoveEnded,
    ReadCacheLife,
    ReadSize,
    Rewrite,
    Settle,
    Settled,
    SizeRead,
)

logger = log.get("liminal.swap")

# How long a turn end far below the trigger (the thread not held) waits for the turn to reach the
# session file before its size is read: a CLI may write it a tenth of a second after answering.
UNHELD_SETTLE_SECONDS = 0.5
# How long a held look without a decision waits for the file and the turn.
UNDECIDED_SETTLE_SECONDS = 2.0


class UnexpectedEvent(Exception):
    """An event the run was not waiting for: the driver's bug."""


class SwapRun:
    def __init__(self, machine: SwapMachine, book: SwapBook, look: Look, *,
                 context_tokens: int | None, new: bool = False) -> None:
        """``context_tokens``: the size the agent's usage last said; ``new``: the thread was
        opened by ``session/new`` here."""
        self.machine = machine
        self.book = book
        self.look = look
        self.new = new
        self.decision: Decision | None = look.decision
        self.decided = look.decision is not None
        self.tokens = look.decision.context if look.decision is not None else context_tokens
        self.path: Path | None = None
        self._waited = False
        self._step: Callable[[Any], Command] = self._located

    @property
    def thread_id(self) -> str:
        return self.look.thread_id

    @property
    def _timeout(self) -> float:
        return self.machine.settle_timeout if self.decided else UNDECIDED_SETTLE_SECONDS

    def start(self) -> Command:
        return Locate()

    def send(self, event: Event) -> Command:
        return self._step(event)

    def _then(self, step: Callable[[Any], Command], command: Command) -> Command:
        self._step = step
        return command

    @staticmethod
    def _expect(event: Any, kind: type) -> None:
        if not isinstance(event, kind):
            raise UnexpectedEvent(f"{type(event).__name__} where {kind.__name__} was due")

    # ------------------------------------------------------------ the file

    def _located(self, event: Located) -> Command:
        self._expect(event, Located)
        path, look = event.path, self.look
        if path is None and look.loaded:
            return Finish(None)  # nothing on disk to read the size from: the first turn end will tell
        if path is None and look.held and not self._waited:
            # A CLI may create a new session's file when it writes the first turn, after
            # answering it: taken for a session no harness can rewrite, the thread would back
            # off two turn ends and its size (what swaps and summaries go by) stay unknown.
            self._waited = True
            return AwaitFile(self._timeout)
        if path is None:
            # Not a session this harness can rewrite (another CLI, or a file not written yet):
            # not a swap attempt worth journaling, but back off like a failure.
            logger.info("no session file to rewrite", thread=self.thread_id)
            return Finish(False)
        self.path = path
        if not look.held:
            # Far below the trigger: only refresh the size that decides whether the next turn end
            # is held, when the model's summary is due and how long the cache lives. The turn is
            # waited for a moment (read at once, the file would lack it and each size would be a
            # turn late); an unheld client may keep the CLI writing newer turns, so past the moment it
            # is read as is.
            return self._then(self._unheld_settled, Settle(path, look.prompt, UNHELD_SETTLE_SECONDS))
        if not look.loaded:
            # The CLI may write the turn after answering the prompt: its size is read, and the
            # file rewritten, only with the turn on disk (else the turn would be lost). A thread
            # just opened has no turn on its way to the disk.
            return self._then(self._settled, Settle(path, look.prompt, self._timeout))
        return self._cache_life()

    # ------------------------------------------------------------ far below the trigger

    def _unheld_settled(self, event: Settled) -> Command:
        self._expect(event, Settled)
        assert self.path is not None
        if self.machine.may_read_cache_life(self.book, decided=False):
            return self._then(self._unheld_life, ReadCacheLife(self.path))
        return self._then(self._unheld_size, ReadSize(self.path))

    def _unheld_life(self, event: CacheLifeRead) -> Command:
        self._expect(event, CacheLifeRead)
        assert self.path is not None
        self.machine.cache_life_read(self.book, self.thread_id, event.life)
        return self._then(self._unheld_size, ReadSize(self.path))

    def _unheld_size(self, event: SizeRead) -> Command:
        self._expect(event, SizeRead)
        self.book.file_tokens = event.tokens
        if event.tokens is not None:
            self.book.observe(event.tokens, new=self.new)
        logger.debug("context read from the session file", thread=self.thread_id, tokens=event.tokens,
                     held=False)
        return Finish(None)

    # ------------------------------------------------------------ held

    def _settled(self, event: Settled) -> Command:
        self._expect(event, Settled)
        if event.ok:
            return self._cache_life()
        if event.stopping:
            return Finish(None)  # liminal stops, and the grace is over: nothing was begun
        if self.decided:
            return self._then(lambda done: self._journaled(done, Finish(False)),
                              Journal("abandoned", "the turn did not reach the session file", self.tokens))
        logger.debug("turn not on disk in time; no check", thread=self.thread_id)
        return Finish(None)

    def _journaled(self, event: Done, then: Command) -> Command:
        self._expect(event, Done)
        return then

    def _cache_life(self) -> Command:
        assert self.path is not None
        if self.machine.may_read_cache_life(self.book, decided=self.decided):
            return self._then(self._life_read, ReadCacheLife(self.path))
        return self._priced(None)

    def _life_read(self, event: CacheLifeRead) -> Command:
        self._expect(event, CacheLifeRead)
        self.machine.cache_life_read(self.book, self.thread_id, event.life)
        return self._priced(event.now)

    def _priced(self, now: float | None) -> Command:
        """The cache's life is as known as it gets: the decision stands, is made again, or
        waits for the file's size."""
        machine, decision, policy = self.machine, self.decision, self.machine.policy
        life = policy.cache_life(self.book.pace)
        if decision is not None and not decision.idle and decision.cache_life != life:
            # Priced at the life the thread had; its records now say another: decided at that.
            decision = self.decision = machine.decide(self.book, decision.context)
            if not decision.swap:
                logger.debug("swap not taken at the thread's cache life", thread=self.thread_id,
                             why=decision.why)
                return Finish(None)
        idle_since = self.look.idle_since
        if (decision is not None and decision.idle and idle_since is not None and now is not None
                and now - idle_since < life):
            # Decided idle past a shorter life than the CLI's records now say: the cache is
            # still there, and a swap would throw it away. The spell goes on, looked at again.
            logger.debug("idle swap dropped: the thread's cache lives longer", thread=self.thread_id,
                         cache_life=self.book.pace.cache_life)
            self.book.idle_looked = None
            return Finish(None)
        if decision is None:
            assert self.path is not None
            return self._then(self._sized, ReadSize(self.path))
        return self._gather()

    def _sized(self, event: SizeRead) -> Command:
        self._expect(event, SizeRead)
        tokens = self.tokens = self.book.file_tokens = event.tokens
        if tokens is None:
            logger.debug("no context size in the session file", thread=self.thread_id)
            return Finish(None)
        self.book.observe(tokens, new=self.new)
        decision = self.machine.decide(self.book, tokens)
        logger.debug("context read from the session file", thread=self.thread_id, tokens=tokens,
                     decided=decision.swap, why=decision.why, loaded=self.look.loaded)
        if not decision.swap:
            return Finish(None)
        if self.look.loaded:
            decision = dataclasses.replace(
                decision, why=f"{decision.why} (when the thread was loaded, before its first prompt)")
        self.decision = decision
        return self._gather()

    # ------------------------------------------------------------ the move

    def _gather(self) -> Command:
        return self._then(self._gathered, Gather(zone=bool(self.machine.policy.gradient.zone_tokens)))

    def _gathered(self, event: Gathered) -> Command:
        self._expect(event, Gathered)
        assert self.decision is not None and self.path is not None
        decision = self.decision
        if decision.summary and not event.summary_asked:
            # The policy prices a summary in every cycle; this one had none (a thread whose
            # context jumped past the trigger before one was due): its record says so.
            decision = self.decision = dataclasses.replace(decision, summary=0.0)
        policy = self.machine.policy
        return self._then(self._moved, Rewrite(
            self.path, decision, decision.why, self.tokens, aim=policy.aim,
            band=policy.recent(self.book.pace),  # by the thread's cache life
            memos=event.memos, kept_out=event.kept_out, summarizer=event.summarizer,
            scratchpad=event.scratchpad))

    def rewritten(self, tokens_after: int) -> str | None:
        """The rewrite left ``tokens_after``: None to open it, else why the swap is skipped."""
        assert self.decision is not None
        return self.machine.worth_it(self.book, self.thread_id, self.decision, tokens_after)

    def _moved(self, event: MoveEnded) -> Command:
        self._expect(event, MoveEnded)
        if not event.committed:
            return Finish(False)
        assert event.after is not None and event.before is not None and event.new_id is not None
        self.machine.policy.rewritten(self.book.pace, event.after, committed=True)
        return self._then(lambda done: self._journaled(done, Finish(True)),
                          Announce(event.new_id, event.before, event.after))
