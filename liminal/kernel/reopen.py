"""Opening a thread whose session has no file: the client's load or resume answered by liminal.

``/clear`` moves a thread onto a new, empty session of the agent, and the CLI writes a session's
file only at its first turn. Until that turn the session lives only in the agent process that
made it: a liminal started again meanwhile (the editor closed and opened, a ``liminal serve``
connection back) would pass the client's load to a session the agent cannot find ("Resource not
found"), and the thread could never be opened again. So such a load is kept (a request hook of
the command center) and answered here: the thread goes onto a new empty session (the mover's
``reopen_empty``, journaled as any move), the client gets its history from the store, then the
answer. The model's context was empty at that point, and stays so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from liminal import log
from liminal.acp import jsonrpc
from liminal.acp.router import LocalRequest
from liminal.kernel.replay import send_history

if TYPE_CHECKING:
    from liminal.acp.port import ClientVoice, ThreadView
    from liminal.harness.base import SessionFiles
    from liminal.kernel.journal import SwapJournal
    from liminal.kernel.mover import ThreadMover
    from liminal.store.base import Store

    class Reopening(ThreadView, ClientVoice, Protocol):
        """What ``reopen`` reads of the thread and says to the client."""

logger = log.get("liminal.reopen")
OPENS = ("session/load", "session/resume")


def params_of(message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def without_file(port: ThreadView | None, harness: SessionFiles, journal: SwapJournal, thread: str | None,
                 message: dict[str, Any]) -> bool:
    """The thread is on a session liminal opened empty for it, and that session has no file
    yet. (Any other session the agent cannot find is the agent's to say so.)"""
    if thread is None or port is None:
        return False
    backing = port.backing_of(thread)
    if backing == thread or not journal.opened_empty(thread, backing):
        return False
    cwd = params_of(message).get("cwd")
    return harness.locate(backing, cwd if isinstance(cwd, str) else None) is None


async def reopen(port: Reopening, mover: ThreadMover, store: Store | None, request: LocalRequest) -> None:
    """Answer the kept load or resume (``request``) on a new empty session."""
    thread = request.thread_id or ""
    params = params_of(request.message)
    try:
        result = await mover.reopen_empty(thread, params)
    except Exception as exc:
        logger.warning("thread not reopened", thread=thread, error=f"{type(exc).__name__}: {exc}")
        port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, f"liminal could not open the thread: {exc}"))
        return
    if request.method == "session/load" and store is not None:
        await send_history(port, store, thread)
    answer = {k: v for k, v in result.items() if k != "sessionId"}
    port.answer_local(request.key, answer)
    logger.info("thread reopened on an empty session (its session had no file)", thread=thread,
                backing=port.backing_of(thread))

