"""Where a thread is, by the store's word: asked for a bounded time, compared with where this
liminal has it.

Which session carries a thread has two witnesses: this liminal's swap journal (its own moves)
and the store's lineage (every sidecar's moves on that store: ``Thread.backing_ids``, which the
index derives a little after each move, and in a shared store the thread's place, which every
move commits first: ``store_lineage``). When
another sidecar on the same store moved the thread since this one bound it (``liminal serve``
on two hosts), the store is further along, and acting on the local binding would
take the thread back to an older context: a client's load binds it where the store has it
(``liminal.kernel.commands``, ``liminal.kernel.restore``); a command that cuts or rewrites the
context is refused (``moved_elsewhere``). A store down or slow leaves the local view.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import anyio
import anyio.to_thread

from liminal import log
from liminal.store.records import DELETED

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from liminal.acp.port import ThreadControl, ThreadView

    class Rebinding(ThreadView, ThreadControl, Protocol):
        """What ``bind_further`` reads of a thread and does to it."""
    from liminal.store.base import Store

logger = log.get("liminal.whereabouts")
T = TypeVar("T")
# How long a client's load waits for the store's word on where the thread is before it goes on
# with the local view: a fraction of what the CLI takes to read a session, so a store that is
# down costs a load little.
STORE_WAIT_SECONDS = 2.0


@dataclass(slots=True)
class Asked:
    """What the store said of a thread (``ask_store``): the store and the thread's lineage in it,
    or nothing (``lineage`` None: the local view stands)."""

    store: Store | None = None
    lineage: list[str] | None = None


async def store_lineage(store: Store, thread: str) -> list[str]:
    """The sessions the store has the thread on, oldest first, the last its current one (empty:
    it does not know it): the index's lineage, and, in a shared store, the thread's place (every
    move's commit: the authority, ahead of the index, which derives the lineage a little after
    each move)."""
    known = await store.thread(thread)
    if known is not None and known.state == DELETED:
        return []  # its tombstone's sessions are gone: a client that loads it finds nothing
    lineage = list(known.backing_ids) if known is not None else []
    place = await store.moves.place(thread) if store.moves is not None else None
    if place is not None:  # (a thread's first session is its own id)
        lineage += [b for b in dict.fromkeys([thread, *place.lineage]) if b not in lineage]
        lineage = [b for b in lineage if b != place.backing_id] + [place.backing_id]
    return lineage


async def ask_store(open_store: Callable[[], Awaitable[Store]], thread: str,
                    tasks: TaskGroup | None, seconds: float | None = None) -> Asked:
    """The store's word on where ``thread`` is, waited for at most ``seconds`` (``within_wait``):
    a store that is down or slow (a MongoDB across a network) must not hold up the client's load,
    which then goes on with the local view. Its late answer is dropped (a thread bound after its
    load went to the agent would have its prompts sent to a session the agent never opened)."""
    async def question() -> Asked:
        store = await open_store()
        return Asked(store, await store_lineage(store, thread))

    return await within_wait(tasks, question, Asked(), f"where thread {thread} is", seconds)


def further_along(port: ThreadView, thread: str, lineage: list[str]) -> str | None:
    """The session the store's lineage ends in, when that is further along than where this
    liminal has the thread (its swap journal's last commit, or the thread's own id): another
    sidecar on the same store moved it (``liminal serve`` on two hosts). None when the
    store does not know where the thread is here (the index runs a little behind this liminal's
    own moves) or has nothing past it."""
    here = port.backing_of(thread)
    if not thread or here not in lineage or lineage.index(here) == len(lineage) - 1:
        return None
    return lineage[-1]


async def moved_elsewhere(open_store: Callable[[], Awaitable[Store]], port: ThreadView, thread: str,
                          tasks: TaskGroup | None) -> str | None:
    """Why a command must not act on the context where this liminal has ``thread``: another
    sidecar on the store has moved it since this one opened it (both had it open), and a cut or
    a rewrite of the session here would take the thread back to its older context. None to go
    on: the store agrees, knows nothing newer, or does not answer in time (``ask_store``)."""
    asked = await ask_store(open_store, thread, tasks)
    later = further_along(port, thread, asked.lineage) if asked.lineage is not None else None
    if later is None:
        return None
    logger.warning("a command on a thread another sidecar moved since; refused", thread=thread,
                   here=port.backing_of(thread), store=later)
    return (f"another liminal on the same store has moved this thread on (to session {later}) "
            "since it was opened here: load the thread again to go on from where it is")


def bind_further(port: Rebinding, thread: str, lineage: list[str]) -> str | None:
    """Bind ``thread`` to the store's session if it is further along (``further_along``).
    Returns the session bound to, else None."""
    later = further_along(port, thread, lineage)
    if later is None:
        return None
    here = port.backing_of(thread)
    for backing in lineage:  # every session it was on names the thread towards the client
        port.adopt(backing, thread)
    port.bind(thread, later)
    logger.info("thread moved by a sidecar on the same store; opened on its current session",
                thread=thread, was=here, backing=later)
    return later


async def within_wait(tasks: TaskGroup | None, read: Callable[[], Awaitable[T]], otherwise: T,
                      what: str, seconds: float | None = None) -> T:
    """``read()``'s answer if it comes within ``seconds`` (``STORE_WAIT_SECONDS``), else
    ``otherwise``: a store read on a load's path (``ask_store``, the shared journal's word), run
    on in ``tasks`` past the wait so that a store half opened is never cancelled (its late answer
    is dropped; without ``tasks`` the caller's store is open already and its read may be cut
    short). An error is ``otherwise`` too, said once."""
    seconds = STORE_WAIT_SECONDS if seconds is None else seconds
    found: list[T] = []
    done = anyio.Event()

    async def question() -> None:
        try:
            found.append(await read())
        except Exception as exc:  # the store down: as without it
            logger.warning("the store not read", what=what, error=f"{type(exc).__name__}: {exc}")
        finally:
            done.set()

    if tasks is None:
        with anyio.move_on_after(seconds):
            await question()
    else:
        tasks.start_soon(question)
        with anyio.move_on_after(seconds):
            await done.wait()
    if not found and not done.is_set():
        logger.warning("the store did not answer in time", what=what, seconds=seconds)
    return found[0] if found else otherwise


async def caught_up(store: Store, frame_id: str | None, spool_behind: Callable[[], bool],
                    seconds: float) -> bool:
    """Whether, within ``seconds``, the store came to hold everything said before a request
    (a command counting turns, a search of what was said):

    - no spool of a liminal that stopped is left to store (``spool_behind``, a look at the
      spools under the home: ``liminal.ingest.spool.behind``): right after a restart a thread's
      last turns may be the previous process's, its worker draining them or a replay under way;
    - the store holds the frame ``frame_id`` (the request's own) or a later one of its
      connection: the index stores a connection's frames in order, each with the messages it
      ends, so every turn the client was sent before the request is in the store then."""
    connection, _, seq = (frame_id or "").rpartition(":")

    async def indexed() -> bool:
        return frame_id is None or bool(await store.frames(
            connection_id=connection, after_seq=int(seq) - 1, limit=1, max_bytes=1))

    deadline = time.monotonic() + seconds
    said = False
    while await anyio.to_thread.run_sync(spool_behind) or not await indexed():
        if time.monotonic() > deadline:
            return False
        if not said:
            logger.info("waiting for the store to hold the thread's last turns", frame=frame_id)
            said = True
        await anyio.sleep(0.02)
    return True
