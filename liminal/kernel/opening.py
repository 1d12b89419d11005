"""Opening sessions for a thread on the agent, closing those a move left, and waiting for a
session's file and its last turn: what every move (``liminal.kernel.mover``) and the recycle
(``liminal.kernel.recycle``) do on the agent and on disk.

A session a thread opens gets the thread's mode and config options (``carry_settings``), and is
opened by ``session/resume`` when the agent can, else ``session/load`` (``open_for_thread``).
While it opens, the agent's replay is captured: the client sees none of it, and what the agent
says of the session is recorded as the thread's.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from liminal import faults, log
from liminal.config import SwapSettings
from liminal.harness.base import MoveHarness, Rewritten
from liminal.kernel.attempt import UNDO_CLOSE_SECONDS, SwapError
from liminal.kernel.threads import ThreadState

if TYPE_CHECKING:
    from liminal.acp.port import AgentProcess, Port
    from liminal.kernel.storejournal import StoreJournal

logger = log.get("liminal.swap")
SETTLE_POLL_MAX = 0.02  # seconds between looks at the session file while the turn settles

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]


async def open_for_thread(request: Request, state: ThreadState, base: dict[str, Any],
                          capabilities: dict[str, Any]) -> str:
    """Open a session for a thread (``base``: its id, cwd and MCP servers) with ``request``, by
    ``session/resume`` when the agent can, else ``session/load``, and give it the thread's mode
    and config options. Returns the method that opened it. The swap does this on the agent, the
    recycle (``liminal.kernel.recycle``) on a fresh process of it."""
    caps = capabilities.get("sessionCapabilities") or {}
    if "resume" in caps:
        method = "session/resume"
    elif capabilities.get("loadSession"):
        method = "session/load"
    else:
        raise SwapError("the agent can neither resume nor load sessions")
    t = time.monotonic()
    await request(method, base)
    logger.debug("swap step", step=method, seconds=round(time.monotonic() - t, 4))
    await carry_settings(request, state, base["sessionId"])
    return method


async def carry_settings(request: Request, state: ThreadState, session_id: str) -> None:
    """Give a session the thread opens the mode and config options the client chose for it
    (a model, a reasoning effort): the UI still shows them."""
    t = time.monotonic()
    if state.mode_id:
        await request("session/set_mode", {"sessionId": session_id, "modeId": state.mode_id})
    for config_id, value in state.config_options.items():
        await request("session/set_config_option", {"sessionId": session_id, "configId": config_id, "value": value})
    logger.debug("swap step", step="mode and options", seconds=round(time.monotonic() - t, 4),
                 mode=state.mode_id, options=len(state.config_options))


class ThreadOpener:
    def __init__(self, settings: SwapSettings, harness: MoveHarness, threads: dict[str, ThreadState], *,
                 attached: Callable[[], Port], capabilities: Callable[[], dict[str, Any]],
                 stopping: Callable[[], bool], shared: StoreJournal | None = None) -> None:
        self.settings = settings
        self.harness = harness
        self.threads = threads
        self.attached = attached  # the port every move acts through
        self.capabilities = capabilities  # the agent's, from its ``initialize``
        self.stopping = stopping  # liminal stops and the moves' grace is over
        self.shared = shared  # a store several sidecars share: a rewrite's lines are kept there
        self._warned_no_close = False

    async def appeared(self, backing: str, cwd: str | None, timeout: float) -> Path | None:
        """The session's file, waited for up to ``timeout``: a CLI may create it only when a turn
        ends, and a cancelled turn can end a moment after its prompt was answered (a /undo
        sent at once would find no file)."""
        with anyio.move_on_after(timeout):
            if (path := self.harness.locate(backing, cwd)) is None:
                logger.debug("waiting for the session file", backing=backing, seconds=timeout)
            while path is None:
                await anyio.sleep(0.05)  # another process writes it: no event to wait on
                path = self.harness.locate(backing, cwd)
            return path
        return None

    async def settle(self, path: Path, prompt: str | None, timeout: float = 2.0) -> bool:
        """Until the CLI has written the finished turn; False if it has not within ``timeout``."""
        # A CLI may write the turn tens of milliseconds after answering the prompt, and
        # "settled" takes two looks at the same size: polls that start at 5 ms and are capped at
        # ``SETTLE_POLL_MAX`` see it soon after it lands, and the thread is held meanwhile, at
        # every turn end when the agent sends no usage. A look is a stat, and a read of the tail
        # only when the size held still.
        with anyio.move_on_after(timeout):
            delay = 0.005
            while not await anyio.to_thread.run_sync(self.harness.turn_settled, path, prompt):
                if self.stopping():  # the grace is over: no move starts now
                    return False
                await anyio.sleep(delay)
                delay = min(delay * 2, SETTLE_POLL_MAX)
            return True
        return False

    async def open_keeping(self, state: ThreadState, old_backing: str, new_id: str,
                           rewritten: Rewritten) -> str:
        """``open_session``, and with a shared store the rewrite's lines put there meanwhile (another
        sidecar can write the session if this one dies after the commit): the agent takes a
        second or more to open a session, and the lines as long on FerretDB (1.4 s for a rewrite
        of 329 KB, 148 lines, at load average 16), so the hold waits for the longer, not both.
        The open's error, else the store's, is the move's."""
        shared = self.shared
        if shared is None:
            return await self.open_session(state, old_backing, new_id)
        done: dict[str, Any] = {}

        async def keep() -> None:
            try:
                await shared.keep_lines(state.thread_id, new_id, rewritten.path, rewritten.size)
                done["keep"] = None
            except Exception as exc:
                done["keep"] = exc

        async def open_it() -> None:
            try:
                done["open"] = await self.open_session(state, old_backing, new_id)
            except Exception as exc:
                done["open"] = exc

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(keep)
            tasks.start_soon(open_it)
        for step in ("open", "keep"):
            if isinstance(done[step], Exception):
                raise done[step]
        return str(done["open"])

    async def open_session(self, state: ThreadState, old_backing: str, new_id: str) -> str:
        """Open ``new_id`` for the thread; returns the method that did it."""
        port = self.attached()
        base = {"sessionId": new_id, "cwd": state.cwd or ".", "mcpServers": state.mcp_servers}
        timeout = self.settings.hold_timeout_seconds
        if faults.value("swap.move") == "kill-agent":
            port.kill_agent()  # the adapter dying in the middle of a swap
        await faults.hit("swap.move")
        if faults.value("swap.resume") == "wrong-id":
            base = dict(base, sessionId=str(uuid.uuid4()))  # a session the agent cannot have

        async def request(method: str, params: dict[str, Any]) -> Any:
            return await port.request(method, params, timeout=timeout, thread_id=state.thread_id)

        # The thread's from the first frame: what the agent says of the session while it opens
        # (a title, its commands) is recorded as the thread's, not as a thread of its own.
        port.adopt(new_id, state.thread_id)
        port.capture(new_id)
        try:
            method = await open_for_thread(request, state, base, self.capabilities())
            await faults.hit("swap.moved")
            return method
        finally:
            port.uncapture(new_id)

    async def open_on(self, target: AgentProcess, threads: list[str], capabilities: dict[str, Any]) -> None:
        """Open each thread on its current backing session in ``target``, a fresh process of the
        agent (the recycle, the agent restart): the sessions do not change, so nothing is
        journaled; ``open_for_thread`` as for a swap, through the same request path."""
        port = self.attached()
        timeout = self.settings.hold_timeout_seconds
        for thread in threads:
            state = self.threads[thread]

            async def request(method: str, params: dict[str, Any], thread: str = thread) -> Any:
                return await target.request(method, params, timeout=timeout, thread_id=thread)

            base = {"sessionId": port.backing_of(thread), "cwd": state.cwd or ".",
                    "mcpServers": state.mcp_servers}
            await open_for_thread(request, state, base, capabilities)

    async def prepare_loads(self, threads: list[str]) -> None:
        """Before a fresh process of the agent starts and opens ``threads`` (``open_on``): each
        one's file made ready for it (``Rewriting.prepare_load``), before the process's start
        can act on them. A file not made ready is said, and opened as it is."""
        port = self.attached()
        for thread in threads:
            state = self.threads.get(thread)
            backing = port.backing_of(thread)
            try:
                await anyio.to_thread.run_sync(functools.partial(
                    self.harness.prepare_load, backing, state.cwd if state else None, started=False))
            except Exception as exc:
                logger.warning("session file not made ready for the load", session=backing,
                               error=f"{type(exc).__name__}: {exc}")

    async def close(self, old_backing: str) -> None:
        """Close the session a committed swap left, if the agent supports it."""
        if "close" not in (self.capabilities().get("sessionCapabilities") or {}):
            if not self._warned_no_close:
                self._warned_no_close = True
                logger.warning("the agent cannot close sessions: the process of each session a "
                               "swap leaves keeps running until the recycle moves the live ones to "
                               "a fresh agent process (swap.max_stale_sessions), or, in a "
                               "conductor's chain, until the chain ends", session=old_backing)
            return
        t = time.monotonic()
        try:
            await self.attached().request("session/close", {"sessionId": old_backing},
                                          timeout=self.settings.hold_timeout_seconds)
        except Exception as exc:  # the old session lingering costs memory, not correctness
            logger.info("old session not closed", session=old_backing, error=str(exc))
        logger.debug("swap step", step="session/close", seconds=round(time.monotonic() - t, 4))

    async def landed(self, state: ThreadState, rewritten: Rewritten) -> None:
        """After the commit: the CLI's name for the thread carried over, the thread's state
        reset to its new session."""
        try:
            await anyio.to_thread.run_sync(self.harness.adopted, rewritten)
        except Exception as exc:  # a name the CLI's picker misses, not a reason to undo the move
            logger.warning("the CLI's name for the thread not carried over", thread=state.thread_id,
                           error=str(exc))
        # The new session's file is whole as liminal wrote it: no turn of it is still to reach
        # the disk (the last prompt named one of the old session's).
        state.last_prompt = None
        state.context_tokens = None  # the next usage_update tells the new size
        state.swap.restart(rewritten.tokens_after)  # the file's size, until it says otherwise
        state.calls_since_move = 0
        # The client's context meter drops now, not at the next turn's first usage_update (ACP's
        # ``UsageUpdate``: ``used`` and ``size`` required; the size is the agent's last).
        if state.context_window is not None:
            self.attached().notify_client("session/update", {"sessionId": state.thread_id, "update": {
                "sessionUpdate": "usage_update", "used": rewritten.tokens_after, "size": state.context_window}})

    async def discard(self, new_path: Path, new_id: str, *, opened: bool) -> None:
        """Leave nothing of a swap that did not commit: its file (so the CLI's picker and the
        agent's ``session/list`` never show the thread twice) and, if the agent opened it, its
        session. Shielded: it runs when the swap was cancelled too (the client left)."""
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(self.harness.discard,
                                               Rewritten(new_id, new_path, 0, 0))
            except Exception as exc:
                logger.error("cannot remove an unused rewrite; remove it by hand", path=str(new_path),
                             error=str(exc))
            if opened and self.attached().agent_alive:
                with anyio.move_on_after(UNDO_CLOSE_SECONDS):
                    await self.close(new_id)

    async def open_empty(self, state: ThreadState) -> dict[str, Any]:
        """A new, empty session of the agent for the thread (``session/new``), given the thread's
        mode and config options; the agent's answer (its ``sessionId``, modes, models, options).
        Closed again if it cannot be made whole."""
        port, thread_id = self.attached(), state.thread_id
        timeout = self.settings.hold_timeout_seconds
        new_id = ""
        try:
            with anyio.fail_after(timeout):
                result = await port.request("session/new", {"cwd": state.cwd or ".", "mcpServers": state.mcp_servers},
                                            timeout=timeout, thread_id=thread_id)
            result = result if isinstance(result, dict) else {}
            new_id = str(result.get("sessionId") or "")
            if not new_id:
                raise SwapError("the agent opened no session")
            await carry_settings(functools.partial(port.request, timeout=timeout, thread_id=thread_id),
                                 state, new_id)
            return result
        except BaseException:
            if new_id:
                await self.close_unused(new_id)
            raise

    async def close_unused(self, session_id: str) -> None:
        """Close a session a move opened and will not use (shielded, bounded: the move may be
        cancelled, the agent going)."""
        if self.attached().agent_alive:
            with anyio.CancelScope(shield=True), anyio.move_on_after(UNDO_CLOSE_SECONDS):
                await self.close(session_id)
