"""``session/delete``, answered by liminal for every CLI (``liminal.kernel.delete`` does the
deleting): ``{}`` once the thread is gone, or the error that says why not."""

from __future__ import annotations

from typing import Any

from liminal.acp.router import LocalRequest
from liminal.kernel import delete
from liminal.kernel.commands.shared import CommandContext, logger
from liminal.kernel.owned import Holdings

METHOD = delete.METHOD


def keeps(c: CommandContext, message: dict[str, Any], thread: str | None) -> bool:
    return True  # for every CLI, whether the agent deletes sessions or not


async def answer(c: CommandContext, request: LocalRequest) -> None:
    from liminal.acp import jsonrpc

    port = c.port
    params = request.message.get("params")
    thread = params.get("sessionId") if isinstance(params, dict) else None
    if not isinstance(thread, str) or not thread:
        port.answer_local(request.key, error=(jsonrpc.INVALID_PARAMS, "session/delete needs a sessionId"))
        return
    try:
        store = await c.store() if c.stores.configured else None
        holdings = Holdings(store, await c.cache(), [c.harness], c.home, c.journal, c.lock_root)
        gone = await delete.delete(port, c.model, c.mover, c.harness, holdings, thread,
                                   c.model.capabilities or {})
    except delete.DeleteRefused as exc:
        port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, f"not deleted: {exc}"))
        return
    except Exception as exc:  # a bug or the store down: answered all the same
        logger.exception("session/delete failed", thread=thread)
        port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, f"session/delete failed: {exc}"))
        return
    port.answer_local(request.key, {})
    c.deleted.append(gone)
    if c.tasks is not None:
        c.tasks.start_soon(delete.sweep, gone)
