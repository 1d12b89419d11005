"""``session/delete`` of a thread, answered by liminal for every CLI (a part of the command center).

The client names the thread (its id, which stays the same however many sessions the thread moved
through); the person asked for it to go, so it goes, whole:

- the agent's own delete, where the agent advertises one (``sessionCapabilities.delete``), for
  every session of the thread's lineage: the CLI knows them only as sessions, and the newer
  adapters tear down a session they run before deleting it; without one, the session the thread
  is on is closed where the agent can close sessions;
- every file the CLI keeps of those sessions, its own and the ones liminal wrote (a swap's
  rewrites, the cuts of ``/clear`` and ``/undo``), removed through the harness: only it knows
  where a CLI files them (``SessionHarness.remove``);
- the thread in the store: everything recorded of it (the model's summaries of its turns too,
  kept under their own pseudo-thread: ``records.of_thread``), and a tombstone (``DELETED``) in
  its place, so that the frames and lines still on their way to the store do not bring it back, and
  ``session/list``, ``liminal threads`` and the dashboard never show it again.

Never another thread's: a session that another thread of the store has in its lineage (a thread
an older liminal recorded under it) is left, and so is its file. A fork (``/fork``) is a thread
of its own with its own file, which stays; what its recall markers name in the deleted thread's
sessions is gone with them (``docs/commands.md``, "session/delete").

A turn under way, or a move of the thread, is refused (``-32603``, nothing changed): the client
cancels first. Deleting a thread nobody knows succeeds, as ACP asks of an already deleted one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from liminal import log
from liminal.acp.port import OwnRequestError, Port
from liminal.harness.base import SessionHarness
from liminal.kernel.journal import SwapJournal
from liminal.kernel.mover import ThreadMover
from liminal.kernel.threads import ThreadModel
from liminal.store.records import DELETED, Batch, ThreadUpdate

if TYPE_CHECKING:
    from liminal.store.base import Store

logger = log.get("liminal.delete")
METHOD = "session/delete"
AGENT_SECONDS = 30.0  # for the agent's own delete of one session
# Claude Code writes its exit records (``last-prompt``, ``mode``, ``cost-state``) to a session's
# file as its process ends, which comes after the adapter has answered its delete: the file is
# there again, four lines long. So the files are removed again until none has come back for
# ``QUIET_SECONDS`` (the answer waits for that much), then swept in the background at these
# times after the delete, and once more when liminal stops (``CommandCenter.aclose``).
QUIET_SECONDS = 1.0
SWEEPS = (2.0, 5.0, 15.0, 60.0)


@dataclass(frozen=True, slots=True)
class Deleted:
    thread: str
    sessions: list[str]  # whose files went (the CLI may write one again: ``sweep``)
    cwd: str | None


class DeleteRefused(Exception):
    """Said to the client as the request's error; nothing changed."""


def advertise(result: dict[str, Any]) -> dict[str, Any] | None:
    """``initialize``'s answer with ``sessionCapabilities.delete`` (liminal answers it whatever
    the agent has) and ``fork`` (liminal answers it for an agent without one); None when the
    agent advertises both already."""
    caps = result.get("agentCapabilities")
    caps = caps if isinstance(caps, dict) else {}
    sessions = caps.get("sessionCapabilities")
    sessions = sessions if isinstance(sessions, dict) else {}
    # ``fork`` too where the agent has none: the command center answers it (``/fork``'s cut).
    added: dict[str, Any] = {name: {} for name in ("delete", "fork") if name not in sessions}
    if not added:
        return None
    return {**result, "agentCapabilities": {**caps, "sessionCapabilities": {**sessions, **added}}}


def remove_files(harness: SessionHarness, sessions: list[str], cwd: str | None) -> int:
    """Every file the CLI keeps of ``sessions`` removed (``SessionHarness.remove``); how many."""
    return sum(len(harness.remove(session, cwd)) for session in sessions)


async def settle(harness: SessionHarness, sessions: list[str], cwd: str | None) -> int:
    """Remove the sessions' files until none has come back for ``QUIET_SECONDS`` (see there)."""
    total = 0
    for _ in range(10):
        await anyio.sleep(QUIET_SECONDS)
        came_back = await anyio.to_thread.run_sync(remove_files, harness, sessions, cwd)
        total += came_back
        if not came_back:
            break
    return total


def lineage(thread: str, journal: SwapJournal, stored: tuple[str, ...], backing_now: str) -> list[str]:
    """Every session the thread was on, its own id first: the journal's moves (committed or not:
    an abandoned move's rewrite may be left), the store's lineage, the one it is on now."""
    found = [thread, backing_now, *stored]
    for record in journal.records(thread, begins=True):
        found += [record.old_backing_id, *([record.new_backing_id] if record.new_backing_id else [])]
    return list(dict.fromkeys(s for s in found if s))


async def delete(port: Port, model: ThreadModel, mover: ThreadMover, journal: SwapJournal,
                 harness: SessionHarness, store: Store | None, thread: str,
                 capabilities: dict[str, Any]) -> Deleted:
    """Delete ``thread`` (see the module's text); the sessions whose files went."""
    if mover.moves.taken(thread) or port.is_held(thread):
        raise DeleteRefused("the thread is moving to another session; try again in a moment")
    async with mover.moves.moving(thread):
        if port.prompt_in_flight(thread) or port.agent_request_open(thread):
            raise DeleteRefused("a prompt is running in this thread: cancel it first")
        state = model.threads.get(thread)
        record = await store.thread(thread) if store is not None else None
        cwd = (state.cwd if state is not None else None) or (record.cwd if record else None) or None
        sessions = await anyio.to_thread.run_sync(
            lineage, thread, journal, record.backing_ids if record else (), port.backing_of(thread))
        shared: set[str] = set()
        if store is not None:  # another thread's sessions stay, and their files
            for summary in await store.threads(limit=100_000, empty=True):
                if summary.thread.id != thread:
                    shared |= {summary.thread.id, *summary.thread.backing_ids}
        shared |= {b for t, b in await anyio.to_thread.run_sync(journal.lineage) if t != thread}
        mine = [s for s in sessions if s not in shared]
        session_caps = capabilities.get("sessionCapabilities") or {}
        if "delete" in session_caps:
            for session in mine:
                try:
                    await port.request(METHOD, {"sessionId": session}, timeout=AGENT_SECONDS,
                                       thread_id=thread)
                except OwnRequestError as exc:  # the files go all the same, below
                    logger.info("the agent's delete failed", session=session, error=str(exc))
        elif "close" in session_caps and state is not None:
            try:
                await port.request("session/close", {"sessionId": port.backing_of(thread)},
                                   timeout=AGENT_SECONDS, thread_id=thread)
            except OwnRequestError as exc:
                logger.info("the thread's session not closed", thread=thread, error=str(exc))

        files = await anyio.to_thread.run_sync(remove_files, harness, mine, cwd)
        records = 0
        if store is not None:
            records = await store.delete_thread(thread)
            await store.write(Batch(threads=[ThreadUpdate(thread, time.time(), state=DELETED, by_user=True)]))
        model.threads.pop(thread, None)
        files += await settle(harness, mine, cwd)
        logger.info("thread deleted", thread=thread, sessions=len(mine), files=files, records=records,
                    kept=len(sessions) - len(mine))
        return Deleted(thread, mine, cwd)


async def sweep(harness: SessionHarness, deleted: Deleted) -> None:
    """The files of a deleted thread's sessions removed again, at ``SWEEPS`` after the delete."""
    waited = 0.0
    for at in SWEEPS:
        await anyio.sleep(at - waited)
        waited = at
        try:
            came_back = await anyio.to_thread.run_sync(remove_files, harness, deleted.sessions, deleted.cwd)
        except OSError as exc:  # swept again when liminal stops
            logger.warning("a deleted thread's files not swept", thread=deleted.thread, error=str(exc))
            continue
        if came_back:
            logger.info("a deleted session's file came back; removed", thread=deleted.thread, files=came_back)
