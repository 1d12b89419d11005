"""``/fork [MARK]``, and ``session/fork`` for an agent without one: a new session with this
thread's context (or with what followed MARK), written by the harness as a cut (``SessionHarness.cut``)
and recorded as a thread of its own in the store; the thread stays where it is.

``/fork`` writes the session for the person to open from the session list; ``session/fork`` opens
it on the agent too (resumed, else loaded) and answers with the agent's answer under the new id
(the unstable schema's ``ForkSessionResponse``).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio.to_thread

from liminal import moves
from liminal.acp.router import LocalRequest
from liminal.kernel.commands.shared import CommandContext, CommandError, logger
from liminal.kernel.journal import SwapRecord, committed
from liminal.kernel.mover import SwapError
from liminal.kernel.threads import Mark
from liminal.store.records import Batch, ThreadUpdate

Parts = list[tuple[Path, int, "int | None"]]  # (file, from byte, to byte or its end): a cut's sources


async def fork(c: CommandContext, thread: str, args: str) -> str:
    port = c.port
    if port.prompt_in_flight(thread):
        raise CommandError("a prompt is running: fork between turns")
    _, path = await c.settled_path(thread)
    end = await anyio.to_thread.run_sync(c.harness.position, path)
    new_id = str(uuid.uuid4())
    if args:
        mark = await c.known_mark(thread, args)
        cut = taken_out_since(await c.moves(thread), mark)
        if cut is not None:
            raise CommandError(
                f"turns were taken out of the context after mark {mark.name} ({cut}): a fork of "
                "what followed the mark would bring them back. /fork with no mark forks the "
                "context as it is")
        parts = await after(c, thread, mark)
        what = f"what followed mark {mark.name}"
    else:
        parts = [(path, 0, None)]
        what = "this thread's context"
    if port.prompt_in_flight(thread):  # came while the file settled
        raise CommandError("a prompt started: fork between turns")
    # The thread's own file up to where it stood once settled: a prompt that starts now
    # appends past that, and its half-written turn stays out of the fork.
    parts = [(p, start, end if p == path and stop is None else stop) for p, start, stop in parts]
    await anyio.to_thread.run_sync(c.harness.cut, parts, path, new_id)
    await record(c, thread, new_id, args)
    return f"Forked {what} as session {new_id}: open it from the session list."


def keeps(c: CommandContext, message: dict[str, Any], thread: str | None) -> bool:
    """``session/fork`` is liminal's to answer when the agent has none."""
    has = "fork" in ((c.model.capabilities or {}).get("sessionCapabilities") or {})
    return not has and thread is not None


async def answer(c: CommandContext, request: LocalRequest) -> None:
    """``session/fork``: the thread's context as it is (``/fork``'s cut) written as a new session,
    a thread of its own in the store, opened on the agent with the client's cwd and MCP servers."""
    from liminal.acp import jsonrpc
    from liminal.acp.port import OwnRequestError
    from liminal.kernel.threads import RESTORED

    port = c.port
    params = request.message.get("params")
    params = params if isinstance(params, dict) else {}
    thread, cwd = request.thread_id or "", params.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        port.answer_local(request.key, error=(jsonrpc.INVALID_PARAMS, "session/fork needs a cwd"))
        return
    try:
        if port.prompt_in_flight(thread):
            raise CommandError("a prompt is running: fork between turns")
        await c.not_moved_elsewhere(thread)
        _, path = await c.settled_path(thread)
        end = await anyio.to_thread.run_sync(c.harness.position, path)
        new_id = str(uuid.uuid4())
        parts: Parts = [(path, 0, end)]
        await anyio.to_thread.run_sync(c.harness.cut, parts, path, new_id)
    except (CommandError, SwapError) as exc:
        port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, f"not forked: {exc}"))
        return
    await record(c, thread, new_id, "")
    sessions = (c.model.capabilities or {}).get("sessionCapabilities") or {}
    method = "session/resume" if "resume" in sessions else "session/load"
    opened = {**{k: v for k, v in params.items() if k in ("mcpServers", "additionalDirectories")},
              "sessionId": new_id, "cwd": cwd}
    opened.setdefault("mcpServers", [])
    try:
        result = await port.request(method, opened, timeout=120, thread_id=new_id)
    except OwnRequestError as exc:
        said = exc.error if isinstance(exc.error, dict) else {}
        port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR,
                                              f"the fork {new_id} is written but did not open: {said.get('message') or exc}"))
        return
    # For the store and the thread model, as a client's open of it: liminal's own request
    # names the session to no one (``liminal.kernel.restore`` does the same).
    port.note(RESTORED, {"backing_id": new_id, "cwd": cwd, "harness": c.harness.name, "written": True},
              thread_id=new_id)
    answered = dict(result) if isinstance(result, dict) else {}
    answered["sessionId"] = new_id
    port.answer_local(request.key, answered)


async def record(c: CommandContext, thread: str, new_id: str, mark: str) -> None:
    """The fork is a thread of its own in the store, so ``session/list`` shows it whatever the
    agent's own listing knows yet (an agent may list a file another process wrote only after it
    has looked at its folder again)."""
    try:
        store = await c.store()
        parent = await store.thread(thread)
        title = f"Fork of {parent.title if parent and parent.title else thread}" + (f" after {mark}" if mark else "")
        await store.write(Batch(threads=[ThreadUpdate(
            new_id, time.time(), title=title, cwd=c.cwd(thread) or "",
            harness=parent.harness if parent else "", backing_ids=(new_id,))]))
    except Exception as exc:  # the fork exists on disk all the same
        logger.warning("the fork could not be recorded in the store", fork=new_id, error=str(exc))


def taken_out_since(records: list[SwapRecord], mark: Mark) -> str | None:
    """The commands that took turns out of the thread's context after ``mark`` was set
    (``/undo``, ``/clear``, ``/clear MARK``), said by the latest, if one did. ``after`` reads
    what the CLI wrote after the mark, file by file, and cannot leave such turns out; a gradient
    swap only compresses, so the fork has those turns whole."""
    taken = [move for r in records if r.outcome == "committed" and r.started_at >= mark.at
             and (move := moves.what(asdict(r))).split(" ", 1)[0] in ("/undo", "/clear")]
    if not taken:
        return None
    # The latest names it (``/clear A`` after an ``/undo``: the /clear is what the person
    # has in mind), and how many did.
    return taken[-1] if len(taken) == 1 else f"the latest of {len(taken)}: {taken[-1]}"


async def after(c: CommandContext, thread: str, mark: Mark) -> Parts:
    """The byte ranges that hold the turns after ``mark``: the rest of its file, then what the
    CLI appended to each session the thread moved to since."""
    cwd = c.cwd(thread)
    source = await c.session_file(mark.backing_id, cwd)
    if source is None:
        raise CommandError(f"the session file of mark {mark.name} is gone")
    parts: Parts = [(source, mark.offset, None)]
    # Every session the thread moved to, by any sidecar on a shared store; a file another
    # machine wrote is written here from the store.
    moved = committed(await c.moves(thread))
    lineage = [r.new_backing_id or "" for r in moved]
    sizes = {r.new_backing_id: r.size for r in moved}
    if mark.backing_id in lineage:
        later = lineage[lineage.index(mark.backing_id) + 1:]
    else:
        later = lineage if mark.backing_id == thread else []
    for backing in later:
        path = await c.session_file(backing, cwd)
        if path is not None:  # liminal's own bytes (the rewrite) hold nothing new
            own = c.journal.own_bytes(backing) or sizes.get(backing) or 0
            parts.append((path, own, None))
    return parts
