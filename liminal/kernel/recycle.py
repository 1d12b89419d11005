"""The recycle: move the live sessions to a fresh agent process, so swaps do not leak.

An agent that cannot close sessions (the older Claude adapter: no ``sessionCapabilities.close``)
keeps every session a swap leaves, and with it a CLI process of a few hundred MB, until the agent
exits. A day of swaps is dozens of them. liminal owns the agent process, so once the sessions
left open pass ``swap.max_stale_sessions``, at a quiet moment it:

1. **Holds** every live thread and takes its move lock (``ThreadModel.moves``: no swap or
   command moves one meanwhile), synchronously, in the step that saw the moment, so no request
   can slip through, once nothing is under way at the agent (``Router.agent_idle``: no request
   either way unanswered, no permission asked, no replay, no own request) and no thread is
   moving. The holds are released through the mover's one sequence
   (``ThreadMover.holding_all``).
2. **Settles**: waits until each thread's session file holds its last turn (the CLI may write it
   after answering), as the swap does before a rewrite, for at most ``SETTLE_TIMEOUT``. A
   thread never prompted has no file and nothing to resume: the move waits for its first turn.
3. **Prepares** each thread's session file for a load (``ThreadMover.prepare_loads``: a CLI's
   start may act on its files, Gemini CLI's deletes those of loaded sessions), then a new
   process of the same command (argv, environment, cwd) through the port
   (``AgentLife.start_agent``), asked the way the agent is: the client's ``initialize`` (and
   ``authenticate``, if it sent one) as liminal's requests, then the mover opens each live
   thread on its current backing session (``ThreadMover.open_on``: ``session/resume`` or
   ``session/load`` with the thread's cwd and MCP servers, its mode and config options). What the process says meanwhile besides
   the answers (replays, command lists) goes nowhere, as a swap's capture does.
4. **Switches**: if every hold is still in place and the old process is still idle, the new
   process becomes the agent (``AgentLife.switch_agent``), the holds are released to it, and the old
   process group is stopped.

Any failure, or the move overrunning ``swap.hold_timeout_seconds``, stops the new process and
releases the holds to the old one, which keeps working; the next attempt waits 2, 4, 8 ... (at
most 32) turn ends. Session ids do not change, so nothing is journaled.

The quiet moments are turn ends, as the thread model (``liminal.kernel.threads``) tells them:
``ThreadModel.on_quiet`` once the swap task has finished with a turn end it looked at (the
thread still held when it was; right after a committed swap is when the count passes the
bound), and ``on_turn_end`` for a turn end the swap manager let by.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread

from liminal import log
from liminal.acp.port import (
    AgentLife,
    AgentProcess,
    ClientVoice,
    Component,
    ThreadControl,
    ThreadView,
)
from liminal.config import SwapSettings
from liminal.errors import in_words
from liminal.harness.base import SessionFiles
from liminal.kernel.mover import SETTLE_POLL_MAX, ThreadMover
from liminal.kernel.threads import ThreadModel

logger = log.get("liminal.recycle")
# Claude Code has a turn on disk about 0.1 s after answering; a file not settled in this
# long is not about to be (a cancelled turn), and the move fails rather than hold prompts longer.
SETTLE_TIMEOUT = 2.0


class RecycleError(Exception):
    pass


class Recycling(ThreadView, ThreadControl, ClientVoice, AgentLife, Protocol):
    """What the recycle reads of the threads, holds, tells the client in a thread's next turn,
    and does to the agent's process (its own requests go to the new process itself)."""


class Recycler(Component):
    """A port component beside the swap manager: given the thread model (the threads, their
    move locks, the agent's capabilities, the client's ``initialize``), the mover (the one
    hold -> release sequence, opening a thread on a process) and the harness (the session
    files)."""

    def __init__(self, model: ThreadModel, mover: ThreadMover, harness: SessionFiles,
                 settings: SwapSettings, *, max_stale_sessions: int | None = None) -> None:
        self.model = model
        self.mover = mover
        self.harness = harness
        self.max_stale = settings.max_stale_sessions if max_stale_sessions is None else max_stale_sessions
        self.timeout = settings.hold_timeout_seconds
        self.model.on_opened.append(self._opened)
        self.model.on_turn_end.append(self._turn_end)
        self.model.on_quiet.append(self.after_turn)
        self.live: list[str] = []  # threads the client opened on the agent, in order
        self.opened = 0  # sessions opened on the agent process in use (client's and liminal's)
        self._port: Recycling | None = None
        self._moving = False
        self._skip = 0  # turn ends to let pass after a failure
        self._failures = 0
        self.completed = 0  # moves that switched the agent (tests wait on it)
        self.failed = 0
        self.last_failure: str | None = None
        self._progress = anyio.Event()
        self._send, self._receive = anyio.create_memory_object_stream[list[str]](1)
        self._warned: set[str] = set()
        # Threads whose session has a file, or is about to: prompted, or opened from one.
        self._written: set[str] = set()

    @property
    def stale(self) -> int:
        """Sessions the agent process holds that no thread uses (each a CLI process, for the
        older Claude adapter)."""
        return self.opened - len(self.live)

    # ------------------------------------------------------------ observation

    def parts(self) -> list[ThreadModel]:
        return [self.model]

    @property
    def capabilities(self) -> dict[str, Any] | None:
        return self.model.capabilities

    def _opened(self, thread: str, method: str, key: Any, by_liminal: bool) -> None:
        """``ThreadModel.on_opened``: a session is open in the agent process."""
        self.opened += 1
        if by_liminal:
            # A swap opened the thread's next session: the one it leaves (or, failed, the one it
            # opened) stays open in the process.
            return
        if thread not in self.live:
            self.live.append(thread)
        if method in ("session/load", "session/resume"):
            self._written.add(thread)  # an existing session: it has a file

    def _turn_end(self, thread: str, ok: bool) -> None:
        """``ThreadModel.on_turn_end``: the thread's session has a file (or is about to), and a
        quiet moment may have come."""
        self._written.add(thread)
        self._turn_ended()

    def wanted(self) -> bool:
        """The sessions left open are past the bound, and a move could work."""
        if self.stale <= self.max_stale or self.capabilities is None or self.model.initialize is None:
            return False
        sessions = self.capabilities.get("sessionCapabilities") or {}
        if "close" in sessions:
            return False  # the swap closes what it leaves
        if "resume" not in sessions and not self.capabilities.get("loadSession"):
            self._warn("the agent can neither resume nor load sessions: the sessions swaps leave "
                       "stay open until it exits")
            return False
        return True

    def _turn_ended(self) -> None:
        """A turn end: a quiet moment to take, unless the swap task has it (it then calls
        ``after_turn`` when done). The backoff after a failure counts these."""
        if self._skip:
            self._skip -= 1
            return
        port = self._port
        if port is None or self._moving or not self.wanted():
            return
        if any(state.swapping for state in self.model.threads.values()):
            return  # the swap task has this turn end; it calls after_turn when done
        if any(port.is_held(thread) for thread in self.live) or not port.agent_idle():
            return
        live = list(self.live)
        if not self.model.moves.try_take(live):
            return  # a command moves a thread: the next quiet moment
        try:
            self._send.send_nowait(live)
        except anyio.WouldBlock:
            self.model.moves.give(live)
            return
        self._moving = True
        for thread in live:  # before the client's next bytes are read
            port.hold(thread)

    # ----------------------------------------------------------------- running

    async def run(self, port: Recycling) -> None:
        self._port = port
        # Not closed on the way out: ``run`` again after a failure (the supervisor) must find it open.
        async for held in self._receive:
            try:
                await self._recycle_safely(port, held)
            finally:
                self.model.moves.give(held)
                self._moving = False

    async def after_turn(self, thread_id: str) -> None:
        """From the swap task, at the end of a turn end it looked at (``thread_id`` still held
        if it was): a quiet moment, if nothing else is under way."""
        port = self._port
        if port is None or self._moving or self._skip or not self.wanted():
            return
        if not port.agent_idle():
            logger.debug("sessions to recycle, but the agent is busy", stale=self.stale)
            return
        live = list(self.live)
        if not self.model.moves.try_take(live):
            logger.debug("sessions to recycle, but a thread is moving", stale=self.stale)
            return
        mine = [thread for thread in live if not port.is_held(thread)]
        for thread in mine:
            port.hold(thread)
        self._moving = True
        try:
            await self._recycle_safely(port, mine)
        finally:
            self.model.moves.give(live)
            self._moving = False

    async def _recycle_safely(self, port: Recycling, held: list[str]) -> None:
        # A bug here must not end the port (this runs in the port's task group or the swap's).
        try:
            await self._recycle(port, held)
        except Exception:
            logger.exception("recycle went wrong; the sessions stay on the agent process in use")

    async def wait_for(self, attempts: int) -> None:
        """For tests: until ``attempts`` moves have finished, switched or failed."""
        while self.completed + self.failed < attempts:
            await self._progress.wait()

    async def _recycle(self, port: Recycling, held: list[str]) -> None:
        """Move every live thread to a fresh process; ``held`` are the threads held for it,
        released (to the new process, or back to the old one) by the mover's one sequence."""
        held_states = [self.model.state(thread) for thread in held]
        async with self.mover.holding_all(held_states):
            await self._move_all(port, held)

    async def _move_all(self, port: Recycling, held: list[str]) -> None:
        threads = list(self.live)
        old = port.agent_token()
        process: AgentProcess | None = None
        t0 = time.monotonic()
        switched = False
        try:
            paths = await self._session_files(port, threads)
            if paths is None:
                return  # not a failure: a thread not yet written waits for its first turn
            with anyio.fail_after(self.timeout):
                await self._settle(port, paths)
                t_settled = time.monotonic()
                await self.mover.prepare_loads(threads)
                process = await port.start_agent()
                result = await process.request("initialize", self.model.initialize, timeout=self.timeout)
                caps = result.get("agentCapabilities") if isinstance(result, dict) else None
                if caps != self.capabilities:
                    raise RecycleError("the new process offers other capabilities than the old one")
                if self.model.authenticate is not None:
                    await process.request("authenticate", self.model.authenticate, timeout=self.timeout)
                t_started = time.monotonic()
                await self.mover.open_on(process, threads, self.capabilities or {})
            # From here to the switch nothing awaits: what is checked still holds at the switch.
            if [thread for thread in held if not port.is_held(thread)]:
                raise RecycleError("a hold overflowed: the client's frames reached the old process")
            if not port.agent_idle() or not port.agent_running(old):
                raise RecycleError("the old process is no longer idle")
            if process.failure is not None:
                raise RecycleError(process.failure)
            port.switch_agent(process)  # the old process is stopped in the background
            switched = True
        except Exception as exc:
            self._failures += 1
            self._skip = min(2 ** self._failures, 32)
            self.failed += 1
            self.last_failure = in_words(exc)
            logger.warning("recycle failed; the sessions stay on the agent process in use",
                           error=f"{type(exc).__name__}: {exc}", seconds=round(time.monotonic() - t0, 3),
                           retry_after_turns=self._skip)
        finally:
            # Whatever happened, even the proxy going down: the process not in use is stopped.
            if process is not None and not switched:
                port.discard_agent(process)
            self._progress.set()
            self._progress = anyio.Event()
        if not switched:
            return
        assert process is not None
        self.opened = len(threads)
        self._failures = 0
        self.completed += 1
        logger.info("sessions moved to a fresh agent process", pid=process.pid,
                    threads=len(threads), settle_s=round(t_settled - t0, 4),
                    start_s=round(t_started - t_settled, 4),
                    open_s=round(time.monotonic() - t_started, 4), dropped=process.dropped)

    async def restart_agent(self, port: Recycling, exit_code: int) -> bool:
        """The agent died with the client connected (``Proxy.restart_agent``): start a new
        process of it, give it the client's ``initialize`` (and ``authenticate``), and resume
        every live thread that has a session file on its backing session, mode and options
        included. Each such thread's next turn says so, once. False (the proxy then ends as
        before) if the new process cannot be made ready."""
        if self.model.initialize is None:
            return False
        process: AgentProcess | None = None
        resumed: list[str] = []
        live = list(self.live)
        try:
            # Every live thread's move lock: a move under way when the agent died fails (its
            # requests fail with the agent) and ends before the threads are opened again.
            with anyio.fail_after(self.timeout):
                async with self.model.moves.moving(*live):
                    await self.mover.prepare_loads(live)
                    process = await port.start_agent()
                    result = await process.request("initialize", self.model.initialize, timeout=self.timeout)
                    caps = result.get("agentCapabilities") if isinstance(result, dict) else None
                    capabilities = self.model.capabilities = caps if isinstance(caps, dict) else {}
                    if self.model.authenticate is not None:
                        await process.request("authenticate", self.model.authenticate, timeout=self.timeout)
                    for thread in live:
                        state = self.model.threads.get(thread)
                        if state is None:
                            continue
                        path = await anyio.to_thread.run_sync(self.harness.locate, port.backing_of(thread),
                                                              state.cwd)
                        if path is not None:  # never written: the CLI has nothing to resume
                            resumed.append(thread)
                    await self.mover.open_on(process, resumed, capabilities)
            if process.failure is not None:
                raise RecycleError(process.failure)
        except Exception as exc:
            logger.error("the agent died and could not be started again", exit_code=exit_code,
                         error=f"{type(exc).__name__}: {exc}")
            if process is not None:
                port.discard_agent(process)
            return False
        port.agent_restarted()
        port.switch_agent(process)  # the dead one's group, and its transport, are stopped
        self.opened = len(resumed)
        self.live = resumed
        note = restart_note(exit_code, notices=self.model.client_notices)
        for thread in resumed:
            port.notify_in_next_turn(thread, "session/update", {"sessionId": thread, "update": note})
        logger.warning("agent restarted after it died", exit_code=exit_code, pid=process.pid,
                       threads=len(resumed))
        return True

    async def _session_files(self, port: Recycling, threads: list[str]) -> dict[str, Path | None] | None:
        """Each thread's session file, None for one the CLI is about to write; None in all if a
        thread has no file and none is coming (never prompted: nothing to resume)."""
        paths: dict[str, Path | None] = {}
        for thread in threads:
            state = self.model.threads.get(thread)
            if state is None:
                return None
            path = await anyio.to_thread.run_sync(self.harness.locate, port.backing_of(thread),
                                                  state.cwd)
            if path is None and thread not in self._written:
                self._warn(f"thread {thread} has no session file yet (no prompt?): sessions are "
                           "moved to a fresh agent process once it has one")
                return None
            paths[thread] = path
        return paths

    async def _settle(self, port: Recycling, paths: dict[str, Path | None]) -> None:
        """Until every thread's file holds its last turn (the CLI can write it, the first time
        the file itself, after answering).

        Bounded by ``SETTLE_TIMEOUT``, not the hold's: a file that does not end with a finished
        turn (one cancelled midway) will not within a hold, and the prompts waiting should not
        wait for it."""
        harness = self.harness
        with anyio.move_on_after(SETTLE_TIMEOUT):
            for thread, found in paths.items():
                state = self.model.threads[thread]
                path = found
                delay = 0.005
                while path is None or not await anyio.to_thread.run_sync(harness.turn_settled, path,
                                                                         state.last_prompt):
                    await anyio.sleep(delay)
                    delay = min(delay * 2, SETTLE_POLL_MAX)
                    if path is None:
                        path = await anyio.to_thread.run_sync(harness.locate, port.backing_of(thread),
                                                              state.cwd)
            return
        raise RecycleError(f"thread {thread}: its file does not end with a finished turn")

    def _warn(self, text: str) -> None:
        """Once per text: these are asked again at every turn end."""
        if text not in self._warned:
            self._warned.add(text)
            logger.info(text)


def restart_note(exit_code: int, *, notices: bool) -> dict[str, Any]:
    """The update that tells a thread's next turn the agent died and was started again: live
    information, not history, so a ``notice`` (severity ``warning``) to a client that declared
    ACP's ``session.notices``, which the protocol lets an agent send only to such a client; an
    agent thought to any other."""
    meta = {"liminal": {"agentRestarted": exit_code}}
    said = "The agent stopped unexpectedly; liminal started it again and the conversation goes on."
    if notices:
        return {"sessionUpdate": "notice", "severity": "warning", "title": said,
                "description": f"The agent's exit code was {exit_code}.", "_meta": meta}
    return {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": (
        f"The agent stopped unexpectedly (exit code {exit_code}); liminal started it again "
        "and the conversation goes on.")}, "_meta": meta}
