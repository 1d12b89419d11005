"""Swaps cut short by a crash: what their ``begin`` records name is removed at the next start
(or, with a shared store that committed one, journaled committed here too)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from liminal import log
from liminal.harness.base import MoveHarness, Rewritten
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.sessionfiles import is_session_id

if TYPE_CHECKING:
    from liminal.kernel.storejournal import StoreJournal

logger = log.get("liminal.swap")


async def committed_in_store(journal: SwapJournal, shared: StoreJournal | None) -> set[str] | None:
    """Of this home's attempts that never ended, those the shared store committed (liminal
    stopped between the store's commit and its own journal's); None when the store could
    not be read (nothing is removed then: whether it committed is not known)."""
    if shared is None:
        return set()
    unfinished = await anyio.to_thread.run_sync(journal.unfinished, abandon_on_cancel=True)
    found: set[str] = set()
    try:
        for begun in unfinished:
            place = await shared.place(begun.thread_id)
            if place is not None and begun.new_backing_id in place.lineage:
                found.add(begun.new_backing_id or "")
    except Exception as exc:
        logger.warning("unfinished swaps left for the next start: the shared store could not "
                       "be read", error=f"{type(exc).__name__}: {exc}", swaps=len(unfinished))
        return None
    return found


def recover(journal: SwapJournal, harness_named: Callable[[str], MoveHarness],
            in_store: Collection[str] | None = frozenset()) -> list[SwapRecord]:
    """Remove what swaps cut short by a crash left: each ``begin`` without an end names the
    file its rewrite wrote (or was about to). Nothing else is touched: not the session the
    thread was on, not a file that a committed swap made the thread's session, not a file
    whose name (by the CLI's own naming, the record's harness's) is not the rewrite's id.
    With a shared store (``in_store``: the attempts it committed; None: not known), one the
    store committed is journaled committed here too, and its file kept. Returns the
    records of the attempts taken as abandoned."""
    if in_store is None:
        return []
    abandoned: list[SwapRecord] = []
    records = journal.records(begins=True)
    # Ids that are, or were, a thread's session: never a rewrite to remove, whatever a
    # damaged or hand-edited ``begin`` says.
    kept: set[str | None] = {r.new_backing_id for r in records if r.outcome == "committed"}
    kept |= {r.old_backing_id for r in records} | {r.thread_id for r in records}
    for begun in journal.unfinished():
        new_id = begun.new_backing_id
        if not new_id or not begun.new_path:
            continue
        path = Path(begun.new_path)
        harness = harness_named(begun.harness)
        if (not is_session_id(new_id) or new_id in kept
                or new_id in (begun.old_backing_id, begun.thread_id)
                or harness.names(path) != new_id):
            logger.warning("swap journal names an unexpected file; left alone", path=str(path),
                           new=new_id)
            continue
        # Another liminal on this home (an editor's second window, a connection of
        # ``liminal serve``) may be in the middle of this swap: only a dead one's is removed.
        with journal.abandon(new_id) as leftover:
            if not leftover:
                logger.debug("swap under way in another liminal; left alone", new=new_id)
                continue
            if new_id in in_store:
                journal.append(dataclasses.replace(
                    begun, outcome="committed", new_path=None,
                    reason=f"{begun.reason} (committed in the shared store; liminal stopped "
                           "before its journal heard)"))
                logger.info("unfinished swap committed in the shared store", thread=begun.thread_id,
                            new=new_id)
                continue
            harness.discard(Rewritten(new_id, path, 0, 0))
            record = SwapRecord(
                thread_id=begun.thread_id, old_backing_id=begun.old_backing_id,
                new_backing_id=new_id, outcome="abandoned",
                reason="liminal ended during the swap (it was killed, or its stop was cut short): its "
                       "rewrite was removed at the next start, and the thread's next load decides again",
                started_at=begun.started_at, duration_s=0.0, tokens_before=begun.tokens_before,
                tokens_after=None, harness=begun.harness, cwd=begun.cwd, move=begun.move)
            journal.append(record)
            abandoned.append(record)
        logger.info("unfinished swap cleaned up", thread=begun.thread_id, removed=str(path))
    return abandoned
