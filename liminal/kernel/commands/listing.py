"""``session/list``: the store's threads (``liminal.lookup.threadlist``) and what the agent lists
besides, each session a thread moved through shown as its thread, once.

The swap journal is read too: another liminal on this home (a second window, a serve connection)
may have moved a thread since this one read it at start, or be moving one now; its rewrites are
sessions to the agent, never threads of their own. With the store off the agent's listing and the
journal are all there is.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from liminal.acp.router import LocalRequest
from liminal.kernel.commands.shared import CommandContext, logger


def keeps(c: CommandContext, message: dict[str, Any], thread: str | None) -> bool:
    return True  # with the store off too: the journal maps the agent's sessions to threads


async def answer(c: CommandContext, request: LocalRequest) -> None:
    from liminal.acp import jsonrpc
    from liminal.acp.port import OwnRequestError
    from liminal.lookup.threadlist import listing

    port = c.port
    params = request.message.get("params")
    params = params if isinstance(params, dict) else {}
    cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else None
    agent: dict[str, Any] = {}
    # With the store off the agent's listing is all there is: asked as the client asked it,
    # whatever the agent advertises, its error the answer.
    if "list" in ((c.model.capabilities or {}).get("sessionCapabilities") or {}) or not c.stores.configured:
        try:
            found = await port.request("session/list", params, timeout=30)
            agent = found if isinstance(found, dict) else {}
        except OwnRequestError as exc:
            if params.get("cursor") is not None or not c.stores.configured:  # only the agent can page its own cursor
                said = exc.error if isinstance(exc.error, dict) else {}
                code, text = said.get("code"), said.get("message")
                port.answer_local(request.key, error=(
                    code if isinstance(code, int) else jsonrpc.INTERNAL_ERROR,
                    text if isinstance(text, str) else str(exc)))
                return
            logger.warning("the agent's session list failed; the store's threads only", error=str(exc))
    threads = []
    if c.stores.configured:
        try:
            threads = await (await c.store()).threads(limit=10_000, empty=True)
        except Exception as exc:  # the store down: the agent's listing, mapped
            logger.warning("thread list from the store failed; the agent's listing", error=str(exc))
    journal = c.journal
    lineage, moving = await anyio.to_thread.run_sync(
        lambda: (journal.lineage(), journal.unfinished()))
    carried = {backing: thread for thread, backing in lineage}
    sessions_of_threads = {t for t, _ in lineage} | {r.old_backing_id for r in moving}

    def thread_of(backing: str) -> str:
        mapped = port.thread_of(backing)
        return mapped if mapped != backing else carried.get(backing, backing)

    hide = {r.new_backing_id for r in moving if r.new_backing_id and r.new_backing_id not in sessions_of_threads}
    if c.side_root is not None:  # a summary's side session under way: liminal's alone
        side = str(c.side_root) + "/"
        hide |= {s["sessionId"] for s in agent.get("sessions") or [] if isinstance(s, dict)
                 and isinstance(s.get("sessionId"), str) and str(s.get("cwd") or "").startswith(side)}
    # A thread deleted here, and its sessions: a CLI may list a file it wrote again as its
    # process ended, until the sweep removes it (``liminal.kernel.delete``).
    hide |= {s for gone in c.deleted for s in (gone.thread, *gone.sessions)}
    sessions = listing(threads, agent.get("sessions") or [], thread_of, cwd,
                       first_page=params.get("cursor") is None, hide=hide, live=c.model.threads)
    result: dict[str, Any] = {"sessions": sessions}
    if agent.get("nextCursor") is not None:
        result["nextCursor"] = agent["nextCursor"]
    port.answer_local(request.key, result)
