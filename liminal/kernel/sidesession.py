"""One prompt in a side session of liminal's own (``SideAsker.ask``), for the model's summaries
(``liminal.kernel.summaries``): a ``session/new`` in a folder of its own under
``$LIMINAL_HOME/side`` (never the person's project), with no MCP server, whose frames the router
keeps from the client and the store and whose requests it refuses (its rule 11). The session is
closed and its files removed through the harness, whatever happened. An agent that cannot close
a session (each session a CLI process, alive until the adapter exits) is asked in a process of
the agent command of its own, stopped once the answer is in; where there is none to be had
(liminal in a conductor's chain), in the agent itself.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Protocol

import anyio
import anyio.to_thread

from liminal import log
from liminal.acp.port import AgentLife, AgentLink, AgentProcess, OwnRequestError, ThreadView
from liminal.acp.side_sessions import text_of
from liminal.config import SwapSettings
from liminal.gradient.summarize import SUMMARY_REQUEST
from liminal.harness.base import SideSessions
from liminal.kernel.threads import ThreadModel
from liminal.sessionfiles import make_private_folder

logger = log.get("liminal.summaries")
PROMPT_SECONDS = 600.0  # the model reading a long range may take minutes
CLOSE_SECONDS = 2.0  # closing a side session (the agent may be going)
RETRY = (f"{SUMMARY_REQUEST}: no tool may run in this session (the call was refused). Write the "
         "two sections now, in text only.")


class SidePort(ThreadView, AgentLink, AgentLife, Protocol):
    """What the summaries read of a thread, and how they talk to the agent: in a side session of
    the agent, or of a process of its command of their own."""


class SideAsker:
    def __init__(self, settings: SwapSettings, harness: SideSessions, model: ThreadModel,
                 root: Path) -> None:
        self.settings = settings
        self.harness = harness
        self.model = model
        self.root = root  # the side sessions' folders are made under it
        # Every side session this process opened: Claude Code writes a few lines of a session
        # (its last prompt, its cost) again when it ends it, after the close was answered, so
        # its files are removed once more when the agent has gone (``forget_opened``).
        self._opened: list[tuple[str, Path]] = []
        self._prompting: str | None = None  # the side session whose prompt is unanswered

    async def ask(self, port: SidePort, request: str) -> str:
        """One prompt in a side session of liminal's own; the agent's answer text. The session
        is closed and every file of it removed, whatever happened. An agent that cannot close a
        session would keep it (a CLI process, for the older Claude adapter) until it exits: the
        side session runs in a process of the agent command of its own, stopped after it."""
        folder = self.root / str(uuid.uuid4())
        await anyio.to_thread.run_sync(make_private_folder, folder)
        session: str | None = None
        process: AgentProcess | None = None
        try:
            await anyio.to_thread.run_sync(self.harness.prepare_side, folder)
            agent: AgentLink | AgentProcess = port
            if not self._agent_closes():
                try:
                    process = agent = await port.start_agent()
                except OwnRequestError as exc:
                    # None to be had (a conductor runs the agent): the side session runs in the
                    # agent itself, and stays open there like the sessions swaps leave.
                    logger.info("side session in the agent itself", why=str(exc))
                else:
                    await self._ready(process)
            params = {**self.harness.side_params(), "cwd": str(folder), "mcpServers": []}
            opened = await agent.request("session/new", params,
                                         timeout=self.settings.hold_timeout_seconds, private=True)
            session = opened.get("sessionId") if isinstance(opened, dict) else None
            if not isinstance(session, str):
                raise RuntimeError("the agent opened no side session")
            self._opened.append((session, folder))
            text = await self._prompt(agent, session, request)
            if not text:
                # Codex ends the turn when a tool is refused ("cancelled"): asked once more, in
                # the same session (the range already read), for the text alone.
                text = await self._prompt(agent, session, RETRY)
            return text
        finally:
            with anyio.CancelScope(shield=True):
                await self._forget(port, process, session, folder)

    def _agent_closes(self) -> bool:
        return "close" in ((self.model.capabilities or {}).get("sessionCapabilities") or {})

    async def _ready(self, process: AgentProcess) -> None:
        """The side session's own process, told what the agent was (the client's
        ``initialize``, and ``authenticate`` if it sent one), as the recycle tells a new one."""
        if self.model.initialize is None:
            raise RuntimeError("the client's initialize is not known: no process to ask in")
        timeout = self.settings.hold_timeout_seconds
        await process.request("initialize", self.model.initialize, timeout=timeout)
        if self.model.authenticate is not None:
            await process.request("authenticate", self.model.authenticate, timeout=timeout)

    async def _prompt(self, agent: AgentLink | AgentProcess, session: str, text: str) -> str:
        self._prompting = session
        ended = await agent.request("session/prompt", {"sessionId": session,
                                                       "prompt": self.harness.side_prompt(text)},
                                    timeout=PROMPT_SECONDS, private=True)
        self._prompting = None
        answer = text_of(agent.take_side(session))
        if not answer:
            logger.info("the side session answered no text", stop=(ended or {}).get("stopReason"))
        return answer

    async def _forget(self, port: SidePort, process: AgentProcess | None, session: str | None,
                      folder: Path) -> None:
        closed = False  # in an agent that goes on, which may still be tearing the session down
        if process is not None:
            port.discard_agent(process)  # its process group, the session's CLI process with it
        elif session is not None:
            if self._prompting == session and port.agent_alive:
                # Given up mid-turn (liminal stops, a timeout): the turn is ended before the
                # session is closed and its files removed, or the CLI goes on writing to a
                # rollout that is gone (Codex: "reconcile_rollout extraction failed").
                port.notify_agent("session/cancel", {"sessionId": session})
            if self._agent_closes() and port.agent_alive:
                try:
                    await port.request("session/close", {"sessionId": session},
                                       timeout=CLOSE_SECONDS, private=True)
                    closed = True
                except Exception as exc:  # left open: memory, not a session anyone sees
                    logger.info("side session not closed", session=session, error=str(exc))
            port.end_side(session)
        self._prompting = None
        if session is not None:
            try:
                await anyio.to_thread.run_sync(
                    lambda: self.harness.forget(session, str(folder), closed=closed))
            except Exception as exc:
                logger.warning("side session's files not removed", session=session, error=str(exc))
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))

    async def forget_opened(self) -> None:
        """Every side session's files removed once more (the agent has gone)."""
        opened, self._opened = self._opened, []
        for session, folder in opened:
            try:
                await anyio.to_thread.run_sync(self.harness.forget, session, str(folder))
            except Exception as exc:
                logger.warning("side session's files not removed", session=session, error=str(exc))
