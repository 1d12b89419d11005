"""The swap journal in the store, which several sidecars may share (a MongoDB across machines,
one SQLite file by several homes): where a thread is, for all.

Without a store the local journal (``liminal.kernel.journal``) is the authority and this is not
used. With one, every move goes through it as well (``liminal.kernel.mover``):

1. **claim**: before anything is written, the thread's place in the store is marked as moving
   by this attempt (``MoveLog.claim``), and the ``begin`` record kept there. Refused when the
   store has the thread on another session than the one this sidecar would move it from
   (another sidecar moved it) or another attempt is under way; an attempt that began longer ago
   than a move's lease lives, or while this sidecar holds the thread's Redis lease, is a dead
   sidecar's: it is recorded ``abandoned`` and taken over.
2. **lines**: the rewrite's lines go into the store before the commit (while the agent opens
   the session: ``ThreadMover._open_keeping``), so another sidecar can write the session from
   the store if this one dies right after it.
3. **commit**: the store's write (``MoveLog.commit``), before the local journal and the router
   hear of it. A commit the store refused or could not take is no commit: the move fails and
   the thread stays on its session. A commit whose answer was lost may have been made: the
   session's lines are in the store, so another sidecar (or this one at the next load) opens
   the thread on it.
4. any other end: its record kept and the claim released (both best effort: a claim left
   behind is taken over once it is stale).

A store that is down means no move: a swap is optional, and not moving is always safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from liminal import log
from liminal.errors import in_words
from liminal.kernel.journal import SwapRecord

if TYPE_CHECKING:
    from liminal.store.base import MoveLog, Place, Store

logger = log.get("liminal.storejournal")
StoreOpener = Callable[[], AbstractAsyncContextManager["Store"]]


class Refused(Exception):
    """The shared store did not take a move's claim or its commit; said as the move's reason."""


class StoreJournal:
    def __init__(self, open_store: StoreOpener, stale_seconds: float, quarantine: Path) -> None:
        self._open_store = open_store
        self.stale_seconds = stale_seconds  # a claim older than this is a dead sidecar's
        self.quarantine = quarantine  # where a rewrite's line the store refuses is set aside
        self._cm: AbstractAsyncContextManager[Store] | None = None
        self._store: Store | None = None
        self._opening = anyio.Lock()  # two threads' first moves at once open it once

    async def store(self) -> Store:
        async with self._opening:
            if self._store is None:
                cm = self._open_store()
                self._store = await cm.__aenter__()
                self._cm = cm
        return self._store

    async def log(self) -> MoveLog:
        store = await self.store()
        if store.moves is None:  # a store that keeps no places (a read-only one): a bug here
            raise Refused("the store is not shared")
        return store.moves

    async def aclose(self) -> None:
        cm, self._cm, self._store = self._cm, None, None
        if cm is not None:
            await cm.__aexit__(None, None, None)

    async def claim(self, begin: SwapRecord, *, lease_held: bool) -> None:
        """Claim the thread for the attempt ``begin`` opens, and keep its record; ``Refused``
        saying why not (the store down among the reasons)."""
        assert begin.new_backing_id is not None
        now = time.time()
        # Holding the thread's Redis lease, no live sidecar is moving it: any claim is a dead one's.
        stale_before = now if lease_held else now - self.stale_seconds
        try:
            moves = await self.log()
            taken, said = await moves.claim(begin.thread_id, begin.old_backing_id, begin.new_backing_id,
                                            now=now, stale_before=stale_before)
        except Refused:
            raise
        except Exception as exc:
            raise Refused(f"the shared store could not be reached ({in_words(exc)})") from exc
        if not taken:
            raise Refused(said or "the shared store refused the move")
        if said is not None:  # a dead sidecar's attempt, taken over
            await self.abandoned_elsewhere(begin.thread_id, begin.old_backing_id, said)
        await self.keep(begin)

    async def abandoned_elsewhere(self, thread: str, old: str, attempt: str) -> None:
        """Record that ``attempt``, a sidecar's that died mid-move, ended: its rewrite is on
        that sidecar's disk (its own next start removes it), the thread stays on ``old``."""
        logger.warning("a move another liminal began and never ended is taken as abandoned",
                       thread=thread, attempt=attempt)
        await self.keep(SwapRecord(
            thread_id=thread, old_backing_id=old, new_backing_id=attempt, outcome="abandoned",
            reason="its liminal stopped during the move; found by another on the same store",
            started_at=time.time(), duration_s=0.0, tokens_before=None, tokens_after=None))

    async def abandon_dead(self, thread: str, *, lease_gone: bool = False) -> None:
        """At a load of ``thread``: a move of it that a sidecar began and never ended, whose
        lease is gone (``lease_gone``: not in Redis; else older than a lease lives), is recorded
        abandoned and its claim released, so the thread opens on its session (or on the one a
        commit put it on) and can move again. The store down: nothing to do, said."""
        try:
            place = await self.place(thread)
            if place is None or place.moving is None:
                return
            if not lease_gone and (place.since or 0.0) >= time.time() - self.stale_seconds:
                return  # its sidecar may be alive and moving it
            if await (await self.log()).release(thread, place.moving):
                await self.abandoned_elsewhere(thread, place.backing_id, place.moving)
        except Exception as exc:
            logger.warning("moves under way not looked at: the shared store could not be read",
                           thread=thread, error=f"{type(exc).__name__}: {exc}")

    async def keep(self, record: SwapRecord) -> None:
        """One record into the store's journal; a store that fails is logged (the local
        journal has it)."""
        try:
            await (await self.log()).append(asdict(record))
        except Exception as exc:
            logger.warning("swap record not kept in the shared store", thread=record.thread_id,
                           outcome=record.outcome, error=f"{type(exc).__name__}: {exc}")

    async def keep_lines(self, thread: str, new_id: str, path: Path, size: int) -> None:
        """The rewrite's lines into the store, as the index worker would have them (liminal's
        own), so the session can be written from the store on any machine."""
        from liminal.ingest.tail import SessionFileIndexer

        try:
            indexer = SessionFileIndexer(await self.store(), path, new_id, thread,
                                         quarantine=self.quarantine, own_bytes=size)
            await indexer.catch_up()
        except Exception as exc:
            raise Refused(f"the rewrite could not be kept in the shared store ({in_words(exc)})") from exc

    async def commit(self, record: SwapRecord) -> None:
        """The store's commit of the move ``record`` ends; ``Refused`` when it is none."""
        assert record.new_backing_id is not None
        try:
            done = await (await self.log()).commit(record.thread_id, record.old_backing_id,
                                                   record.new_backing_id)
        except Refused:
            raise
        except Exception as exc:
            raise Refused(f"the shared store did not take the commit ({in_words(exc)})") from exc
        if not done:
            raise Refused("the shared store has the thread elsewhere: another liminal moved it or "
                          "took this move over")
        await self.keep(record)

    async def ended(self, record: SwapRecord) -> None:
        """An attempt ended without a commit: its record kept, its claim released."""
        await self.keep(record)
        if record.new_backing_id:
            try:
                await (await self.log()).release(record.thread_id, record.new_backing_id)
            except Exception as exc:  # taken over once stale
                logger.warning("move's claim not released in the shared store", thread=record.thread_id,
                               error=f"{type(exc).__name__}: {exc}")

    async def place(self, thread: str) -> Place | None:
        return await (await self.log()).place(thread)

    async def records(self, thread: str | None = None) -> list[SwapRecord]:
        """The store's journal: every sidecar's moves, oldest first (damaged ones skipped)."""
        found = []
        for data in await (await self.log()).records(thread):
            try:
                found.append(SwapRecord.from_json(data))
            except (TypeError, ValueError) as exc:
                logger.warning("damaged swap record in the store skipped", error=str(exc)[:200])
        return found
