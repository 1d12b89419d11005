"""``session/delete`` of a thread, answered by liminal for every CLI (a part of the command center).

The client names the thread (its id, which stays the same however many sessions the thread moved
through); the person asked for it to go, so it goes, whole:

- the agent's own delete, where the agent advertises one (``sessionCapabilities.delete``), for
  every session of the thread's lineage: the CLI knows them only as sessions, and the newer
  adapters tear down a session they run before deleting it; without one, the session the thread
  is on is closed where the agent can close sessions;
- then everything the thread owns, part by part (``liminal.kernel.owned``, the one list both
  doors go through, ``liminal threads delete`` the other): the store's record of it and a
  tombstone (``DELETED``) in its place, so that the frames and lines still on their way to the
  store do not bring it back, and ``session/list``, ``liminal threads`` and the dashboard never
  show it again; every file the CLI keeps of its sessions, its own and the ones liminal wrote
  (a swap's rewrites, the cuts of ``/clear`` and ``/undo``), through the harness
  (``Removal.remove``); the recall cache's blobs of those sessions; what the store
  refused of it, its queued slash commands, its swap journal lines.

Never another thread's: a session that another thread has in its lineage (a thread an older
liminal recorded under it) is left, and so is what it holds. A fork (``/fork``) is a thread
of its own with its own file, which stays; what its recall markers name in the deleted thread's
sessions is gone with them (``docs/commands.md``, "session/delete").

A turn under way, or a move of the thread, is refused (``-32603``, nothing changed): the client
cancels first. Deleting a thread nobody knows succeeds, as ACP asks of an already deleted one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from liminal import log
from liminal.acp.port import AgentLink, OwnRequestError, ThreadView
from liminal.harness.base import Removal
from liminal.kernel.mover import ThreadMover
from liminal.kernel.owned import Holdings, Removed, Whose, claimed, whose
from liminal.kernel.threads import ThreadModel

if TYPE_CHECKING:
    pass

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
    whose: Whose  # the thread and the sessions whose files went (the CLI may write one again)
    holdings: Holdings  # where it was removed from, again at each ``sweep``
    removed: Removed

    @property
    def thread(self) -> str:
        return self.whose.thread

    @property
    def sessions(self) -> tuple[str, ...]:
        return self.whose.sessions


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


async def again(deleted: Deleted) -> int:
    """What may fill again of a deleted thread removed again (``Part.refills``: the CLI's files,
    the recall cache); how many came back."""
    removed = await deleted.holdings.remove(deleted.whose, refilling=True)
    return sum(removed.counts.values())


async def settle(deleted: Deleted) -> int:
    """Remove what came back until nothing has for ``QUIET_SECONDS`` (see there)."""
    total = 0
    for _ in range(10):
        await anyio.sleep(QUIET_SECONDS)
        came_back = await again(deleted)
        total += came_back
        if not came_back:
            break
    return total


class Deleting(ThreadView, AgentLink, Protocol):
    """What a delete reads of the thread (nothing under way in it) and asks of the agent."""


async def delete(port: Deleting, model: ThreadModel, mover: ThreadMover, harness: Removal,
                 holdings: Holdings, thread: str, capabilities: dict[str, Any]) -> Deleted:
    """Delete ``thread`` (see the module's text), run on ``harness``, from ``holdings`` (every
    part this process can reach): what went. Raises when the store's record of it could not be
    removed (it is still listed; the rest went, and a delete again finishes)."""
    store, journal = holdings.store, holdings.journal
    if mover.moves.taken(thread) or port.is_held(thread):
        raise DeleteRefused("the thread is moving to another session; try again in a moment")
    async with mover.moves.moving(thread):
        if port.prompt_in_flight(thread) or port.agent_request_open(thread):
            raise DeleteRefused("a prompt is running in this thread: cancel it first")
        state = model.threads.get(thread)
        one = await whose(thread, store, journal, await claimed(store, journal), now=port.backing_of(thread),
                          cwd=state.cwd if state is not None else None, harness=harness.name)
        session_caps = capabilities.get("sessionCapabilities") or {}
        if "delete" in session_caps:
            for session in one.sessions:
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

        removed = await holdings.remove(one)
        model.threads.pop(thread, None)
        gone = Deleted(one, holdings, removed)
        came_back = await settle(gone)
        logger.info("thread deleted", thread=thread, sessions=len(one.sessions), removed=removed.said(),
                    came_back=came_back, failed=removed.failed or None)
        if "records" in removed.failed:
            raise DeleteRefused(f"the store could not remove it ({removed.failed['records']}); "
                                "its files are gone: delete it again to finish")
        return gone


async def sweep(deleted: Deleted) -> None:
    """What may fill again of a deleted thread removed again, at ``SWEEPS`` after the delete."""
    waited = 0.0
    for at in SWEEPS:
        await anyio.sleep(at - waited)
        waited = at
        came_back = await again(deleted)  # a part that fails is logged, and swept again later
        if came_back:
            logger.info("a deleted thread's file or blob came back; removed", thread=deleted.thread,
                        count=came_back)
