"""Opening a thread where the store has it: its session written again from the store if this
machine has no file of it, then loaded.

The store is the system of record of a thread; the CLI's session files are views of it that
anyone may delete (the CLI's own clean-up after 30 days, a person, another machine that never
had them), and a file still here may be an old view: a sidecar on another host, on the same
store, may have moved the thread since (``liminal serve`` on two hosts). The index
worker keeps every line of every session of a thread whole, liminal's own among them
(``liminal.lookup.sessionlines``), and the lineage of sessions the thread has been on. So when
a store is configured, a client's load or resume is kept (a request hook of the command center)
and the store asked first, for at most ``whereabouts.STORE_WAIT_SECONDS`` (``ask_store``: a store
down or slow leaves the local view, as without one):

- the store's lineage further along than this liminal's binding (``whereabouts``): the
  thread is bound to the store's session and opened as below, whether or not an older file of
  it is here;
- the session without a file here: opened as below;
- else the client's load goes on to the agent as it came (``ClientVoice.forward_local``), the router's
  rule 8 (the moved thread's replay from the store) included.

Opened here (``restore``):

1. the session's lines are read from the store; the harness writes them where the CLI looks
   (``StoredSessions.restore``: only it knows where and how), byte for byte, 0600, unless the
   file is there already;
2. the load goes to the agent for that session, as liminal's own request with the client's
   parameters. A thread liminal moved has its agent's replay captured and its real history
   sent from the store (as the router's rule 8 does); a thread on its own session gets the
   agent's replay as it comes;
3. a ``liminal/restored`` note names the session to the index worker and the thread model
   (liminal's own load names it to neither);
4. the client gets the agent's answer, under the thread's id.

A session the store does not hold whole is not written (a gap would make the CLI read another
conversation): the load goes to the agent as it is, and the agent says what it says. Older
sessions of the thread need no file: recall reads their lines from the store.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.from_thread
import anyio.to_thread

from liminal import log
from liminal.acp import jsonrpc
from liminal.acp.router import LocalRequest
from liminal.errors import in_words
from liminal.kernel.replay import send_history
from liminal.kernel.threads import RESTORED, ThreadState
from liminal.kernel.whereabouts import store_lineage
from liminal.lookup.sessionlines import Incomplete, named_beside, stored_beside_one, stored_lines

if TYPE_CHECKING:
    from liminal.acp.port import Conversation, ThreadView
    from liminal.harness.base import Beside, Rewriting, SessionFiles, StoredSessions

    class Restoring(SessionFiles, StoredSessions, Protocol):
        """What a restore asks of the harness: where the session's file is, and to write it
        back with the files beside it."""
    from liminal.kernel.mover import ThreadMover
    from liminal.store.base import Store

logger = log.get("liminal.restore")
OPENS = ("session/load", "session/resume")
LOAD_TIMEOUT_SECONDS = 120.0  # a long session takes the CLI a while to read


def _params(message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def cwd_of(message: dict[str, Any]) -> str | None:
    cwd = _params(message).get("cwd")
    return cwd if isinstance(cwd, str) else None


def file_missing(port: ThreadView | None, harness: SessionFiles, thread: str | None,
                 message: dict[str, Any]) -> bool:
    """The session the thread is on has no file on this machine."""
    if thread is None or port is None:
        return False
    return harness.locate(port.backing_of(thread), cwd_of(message)) is None


async def stored_whole(store: Store | None, backing: str) -> bool:
    """The store holds every line of ``backing`` (and can be read)."""
    if store is None:
        return False
    try:
        await stored_lines(store, backing)
    except Exception:  # incomplete, or the store down: as good as nothing here
        return False
    return True


async def write_session(store: Store, harness: Restoring, backing: str,
                        cwd: str | None) -> str | None:
    """Write ``backing``'s file from the store where the CLI looks for it, if it has none, with
    the files beside it that its lines name (Claude Code's large tool outputs); None when it is
    there, else why not."""
    if harness.locate(backing, cwd) is not None:
        return None  # this machine has it (a file of the session another sidecar moved onto)
    try:
        lines = await stored_lines(store, backing)
    except Incomplete as exc:
        return str(exc)
    except Exception as exc:  # the store down: the load goes on as it would have
        return f"the store could not be read: {type(exc).__name__}: {exc}"
    if harness.locate(backing, cwd) is not None:
        return None  # written meanwhile (the CLI, another load)
    refs, missing = named_beside(harness, lines), []

    def beside() -> Iterator[tuple[Beside, bytes]]:
        # Read from the store as the harness writes them: one file in memory at a time (each
        # up to 64 MiB, a session may name many).
        for ref in refs:
            data = anyio.from_thread.run(stored_beside_one, store, ref)
            if data is None:
                missing.append(ref)
            else:
                yield ref, data

    try:
        path = await anyio.to_thread.run_sync(harness.restore, backing, cwd, lines, beside())
    except Exception as exc:  # a file there already, an id of another CLI, the store gone
        return f"not written: {type(exc).__name__}: {exc}"
    if missing:  # the conversation opens; the model finds no file where a preview says
        logger.warning("files beside the session not in the store", session=backing,
                       files=[f"{m.session_id}/{m.name}" for m in missing][:20])
    logger.info("session file written from the store", session=backing, path=str(path),
                lines=len(lines), files_beside=len(refs) - len(missing))
    return None


async def prepare(harness: Rewriting, backing: str, cwd: str | None) -> None:
    """The harness's ``prepare_load`` of the file here, before a load: a failure is said, and the
    load goes on as it would have."""
    try:
        await anyio.to_thread.run_sync(harness.prepare_load, backing, cwd)
    except Exception as exc:
        logger.warning("session file not made ready for the load", session=backing,
                       error=f"{type(exc).__name__}: {exc}")


CATCH_UP_SECONDS = 10.0  # a load waits this long for the store's lines of an older file here


async def catch_up(store: Store, harness: SessionFiles, backing: str, cwd: str | None) -> str | None:
    """Bring ``backing``'s file here up to the store's: another sidecar on the store went on on
    this session since this machine last had it (the thread was open there, and nothing moved
    it), so the file here lacks its turns, and a load of it would open the thread without them
    (and this machine's next turn would be written where the store has the other's). The store's
    further lines are appended when the file here is the start of the store's; None when done or
    nothing was to do, else why not (the store down or slow, the file here not the start of the
    store's: left as it is, said)."""
    path = harness.locate(backing, cwd)
    if path is None:
        return None
    with anyio.move_on_after(CATCH_UP_SECONDS):
        try:
            if await store.session_file_end(backing) <= path.stat().st_size:
                return None  # nothing newer in the store (the index may lag this machine's own)
            lines = await stored_lines(store, backing)
        except Exception as exc:
            return f"the store could not be read: {type(exc).__name__}: {exc}"
        whole = b"".join(line + b"\n" for line in lines)
        return await anyio.to_thread.run_sync(_append_rest, path, whole)
    return f"the store did not answer within {CATCH_UP_SECONDS:g} s"


def _append_rest(path: Path, whole: bytes) -> str | None:
    with path.open("r+b") as f:
        here = f.read()
        if len(here) >= len(whole):
            return None
        if not whole.startswith(here):
            return "the file here is not the start of the store's: left as it is"
        f.write(whole[len(here):])
        f.flush()
        os.fsync(f.fileno())
    logger.info("session file brought up to the store's (another sidecar went on on it)",
                session=path.stem, path=str(path), added=len(whole) - len(here))
    return None


async def write_from_store(store: Store, harness: Restoring, thread: str, backing: str,
                           cwd: str | None) -> str | None:
    """Write ``backing``'s file from the store; None when written, else why not."""
    try:
        lineage = await store_lineage(store, thread)
        # ``bind_further`` has put the thread on the store's last session when that is
        # further along; a session the store's lineage does not end in (the store behind this
        # liminal, or never told of the move) is not written: the thread would open silently on
        # the context it had before the moves the store knows.
        later = lineage[-1] if lineage else backing
        if later != backing:
            return (f"the store has the thread on session {later}, not {backing}: not opened "
                    "on an older context")
    except Exception as exc:  # the store down: the load goes on as it would have
        return f"the store could not be read: {type(exc).__name__}: {exc}"
    return await write_session(store, harness, backing, cwd)


async def restore(port: Conversation, mover: ThreadMover, harness: Restoring, store: Store | None,
                  request: LocalRequest) -> None:
    """Answer the kept load or resume (``request``): its session written, then opened."""
    thread = request.thread_id or ""
    params = _params(request.message)
    backing = port.backing_of(thread)
    cwd = cwd_of(request.message)
    why = "no store" if store is None else await write_from_store(store, harness, thread, backing, cwd)
    if why is not None:
        logger.warning("session file not written from the store", thread=thread, session=backing,
                       reason=why)
    state = mover.threads.setdefault(thread, ThreadState(thread))
    if cwd is not None:
        state.cwd = cwd
    if isinstance(params.get("mcpServers"), list):
        state.mcp_servers = list(params["mcpServers"])
    moved = backing != thread
    if moved:  # the agent's replay is of the compressed session: the store's history instead
        port.capture(backing)
    try:
        result = await port.request(request.method, {**params, "sessionId": backing},
                                    timeout=LOAD_TIMEOUT_SECONDS, thread_id=thread)
    except Exception as exc:
        said = getattr(exc, "error", None)
        said = said if isinstance(said, dict) else {}
        code, text = said.get("code"), said.get("message")
        port.answer_local(request.key, error=(
            code if isinstance(code, int) else jsonrpc.INTERNAL_ERROR,
            text if isinstance(text, str) else f"liminal could not open the thread: {in_words(exc)}"))
        return
    finally:
        if moved:
            port.uncapture(backing)
    # For the store (``liminal.ingest.derive``) and the thread model: liminal's own load names
    # the session to no one, so this does; the index worker watches it again (the CLI's turns
    # from here on are indexed like any), and the thread is open as a client's load opens it.
    port.note(RESTORED, {"backing_id": backing, "cwd": cwd, "harness": harness.name,
                         "written": why is None}, thread_id=thread)
    if moved and request.method == "session/load" and store is not None:
        await send_history(port, store, thread)
    # A load's or resume's answer names no session in the schema; an agent's that does names
    # the backing session, which the client must never see: left out, as ``reopen`` does.
    answer = {k: v for k, v in result.items() if k != "sessionId"} if isinstance(result, dict) else {}
    port.answer_local(request.key, answer)
