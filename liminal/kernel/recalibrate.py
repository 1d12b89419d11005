"""A thread's pace, learned again when this liminal process opens a thread it did not start.

The cost policy reads what it knows of a thread from its ``Pace``: the CLI's own prompt
(``overhead``: the first context a new thread shows), the floor the last rewrite to it measured
(``floor``), what the last rewrite left and how far the trigger backed off for it (``landed``,
``backed_off_to``). A liminal learns them from the turn ends and the swaps it sees, so a new
process (an editor restarted, a client that starts liminal for every prompt) would open the
thread knowing none of them: ``/context`` would put the floor at a default prompt (20k tokens)
and the trigger back where it was set, and the swaps would be decided from those guesses until
the next rewrite. They outlive the process where the swaps are kept:

- the thread's rewrites in the swap journal (each swap committed or skipped: its
  ``tokens_after``), given to ``CostPolicy.rewritten`` again, in order, as when they were made;
- the CLI's own prompt, as the policy took it at the thread's first turn end: the context
  there, which the thread's first session file records (``SessionFiles.first_context_tokens``;
  liminal never rewrites that file, a swap writes another);
- how long the thread's prompt cache lives, as its current session file's records say
  (``SessionFiles.cache_life``), which the swap manager would otherwise look for only when a
  swap is decided.

Off the flush that told of the open: the journal and the file are read in a worker thread, by
this component's task, once per thread; what this process has learned itself is never replaced.
"""

from __future__ import annotations

import anyio
import anyio.to_thread

from liminal import log
from liminal.acp.port import Component, ThreadView
from liminal.harness.base import SessionFiles
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.policy import CostPolicy, Pace
from liminal.kernel.threads import ThreadModel

logger = log.get("liminal.recalibrate")


def rewrites(records: list[SwapRecord]) -> list[SwapRecord]:
    """The thread's swaps that wrote a rewrite and measured it (committed or skipped), oldest
    first, as ``CostPolicy.rewritten`` was told of each: a command's move (``/undo``,
    ``/optimise``, ...) is not."""
    return [r for r in records
            if (r.move == "swap" or (r.move is None and not r.reason.startswith("/")))
            and r.outcome in ("committed", "skipped") and r.tokens_after is not None]


def restore(policy: CostPolicy, pace: Pace, records: list[SwapRecord], own_prompt: int | None,
            cache_life: float | None = None) -> bool:
    """What ``records`` (the thread's, oldest first), ``own_prompt`` (its first turn end's
    context) and ``cache_life`` (what the CLI's records say of its prompt cache) say, into a
    ``pace`` that does not know it yet: the cache's life first (it sets the recent band each
    rewrite was measured with), the CLI's prompt, then each rewrite (the floor is the last
    committed one's, the back-off the last one's). True if anything was learned."""
    learned = pace.cache_life is None and policy.learned(pace, cache_life)
    if own_prompt is not None and pace.overhead is None:
        pace.overhead = own_prompt
        learned = True
    if pace.landed is None:
        for record in rewrites(records):
            assert record.tokens_after is not None
            policy.rewritten(pace, record.tokens_after, committed=record.outcome == "committed")
            learned = True
    return learned


class Recalibrator(Component):
    """Beside the swap manager, on the same thread model, policy and journal."""

    def __init__(self, model: ThreadModel, policy: CostPolicy, journal: SwapJournal,
                 harness: SessionFiles) -> None:
        self.model = model
        self.policy = policy
        self.journal = journal
        self.harness = harness
        self._seen: set[str] = set()
        self._pending: set[str] = set()  # opened, their pace not read yet
        self._port: ThreadView | None = None
        self._send, self._receive = anyio.create_memory_object_stream[str](64)
        self.attempts = 0  # opened threads looked at (tests wait on it)
        self.restored = 0  # of them, those whose pace learned something
        self._progress = anyio.Event()
        model.on_opened.append(self._opened)

    def parts(self) -> list[ThreadModel]:
        return [self.model]

    async def prepare(self, port: ThreadView) -> None:
        self._port = port

    def _opened(self, thread: str, method: str, key: object, by_liminal: bool) -> None:
        """``ThreadModel.on_opened``: the client opened an existing thread (a new one has its
        pace from its first turn end)."""
        if by_liminal or method not in ("session/load", "session/resume") or thread in self._seen:
            return
        self._seen.add(thread)
        try:
            self._send.send_nowait(thread)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._seen.discard(thread)  # asked again at its next open
            return
        self._pending.add(thread)

    async def run(self, port: ThreadView) -> None:
        self._port = port
        async for thread in self._receive:
            try:
                await self._restore(port, thread)
            except Exception as exc:  # the pace is learned from the turns, as a new thread's
                logger.warning("thread's pace not restored", thread=thread,
                               error=f"{type(exc).__name__}: {exc}")
            finally:
                self._pending.discard(thread)
                self.attempts += 1
                self._progress.set()
                self._progress = anyio.Event()

    async def settled(self, thread: str) -> None:
        """Until what is read of the opened thread's pace is in it (``/context`` waits)."""
        while thread in self._pending:
            await self._progress.wait()

    async def wait_for(self, attempts: int) -> None:
        while self.attempts < attempts:
            await self._progress.wait()

    async def _restore(self, port: ThreadView, thread: str) -> None:
        state = self.model.threads.get(thread)
        if state is None:
            return
        records = await anyio.to_thread.run_sync(self.journal.records, thread)
        # The thread's first session: its id is the thread's (a swap moves it to others).
        first = await anyio.to_thread.run_sync(self.harness.locate, thread, state.cwd)
        own = None if first is None else await anyio.to_thread.run_sync(self.harness.first_context_tokens, first)
        now = await anyio.to_thread.run_sync(self.harness.locate, port.backing_of(thread), state.cwd)
        life = None if now is None else await anyio.to_thread.run_sync(self.harness.cache_life, now)
        if restore(self.policy, state.pace, records, own, life):
            self.restored += 1
            logger.info("thread's pace restored", thread=thread, own_prompt=state.pace.overhead,
                        floor=state.pace.floor, landed=state.pace.landed,
                        trigger=self.policy.trigger(state.pace))
