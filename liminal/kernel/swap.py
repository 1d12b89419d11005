"""The swap manager: compress a thread's backing session and move the thread onto it, between turns.

A proxy component. It watches the taps for what it must know about each thread (cwd, MCP
servers, mode, config options, context size, model calls, turn ends), and when the cost policy
(``liminal.kernel.policy``) says a swap pays, at a turn end past the thread's trigger or once the
thread has been idle past the prompt cache's life, it runs one swap:

1. **Hold** the thread's next prompts in the router (synchronously, inside ``offer``, so no
   prompt can slip through between the decision and the hold).
2. **Settle**: wait until the CLI has finished writing the turn to its session file.
3. **Rewrite** the file with the gradient under a new id (in a worker thread; the original file
   is never modified).
4. **Move**: ``session/resume`` the new id when the agent advertises it, else ``session/load``;
   either way the new session's notifications are captured, so the UI sees no replay. Then
   re-apply the thread's mode and config options.
5. **Commit**: bind the thread to the new backing id, journal it, release the held prompts, and
   tell the UI briefly (``swap.notice``); then, outside the hold, close the old session if the
   agent supports ``session/close`` (if not, ``liminal.kernel.recycle`` bounds what is left).

Any failure, or the whole swap overrunning ``swap.hold_timeout_seconds``, releases the held
prompts to the old session, which keeps working; the journal records why.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import anyio
import anyio.to_thread

from liminal import faults, log
from liminal.acp.events import Direction, FrameEvent, Kind
from liminal.config import GradientSettings, SwapSettings
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.policy import CostPolicy, Decision, Pace

if TYPE_CHECKING:
    from liminal.proxy import Proxy

logger = log.get("liminal.swap")
SETTLE_POLL_MAX = 0.02  # seconds between looks at the session file while the turn settles
UNDO_CLOSE_SECONDS = 2.0  # closing the new session of a swap that failed (the agent may be going)


@dataclass(frozen=True, slots=True)
class Rewritten:
    new_id: str
    path: Path
    tokens_before: int
    tokens_after: int
    size: int = 0  # bytes liminal wrote; the CLI appends after them


class SessionHarness(Protocol):
    """What the swap needs from a CLI's session files (see ``liminal.harness``)."""

    name: str
    # The context no thread should reach: the CLI's own auto-compaction point.
    ceiling_tokens: int

    def locate(self, backing_id: str, cwd: str | None) -> Path | None: ...

    def context_tokens(self, path: Path) -> int | None: ...

    def turn_settled(self, path: Path, prompt: str | None) -> bool:
        """The turn whose prompt was ``prompt`` is completely written to the file."""

    def target_path(self, path: Path, new_id: str) -> Path:
        """Where ``rewrite(path, ..., new_id)`` writes: journaled before the file exists."""

    def rewrite(self, path: Path, target_tokens: int, new_id: str) -> Rewritten:
        """A compressed copy as ``new_id``; ``target_tokens`` 0: as deep as the recent band allows."""

    def discard(self, rewritten: Rewritten) -> None:
        """Remove a rewritten session that will not be used (it was never loaded)."""


@dataclass(slots=True)
class ThreadState:
    thread_id: str
    cwd: str | None = None
    mcp_servers: list[Any] = field(default_factory=list)
    mode_id: str | None = None
    config_options: dict[str, Any] = field(default_factory=dict)
    context_tokens: int | None = None  # from usage_update
    last_prompt: str | None = None  # the text of the newest session/prompt, to find it on disk
    file_tokens: int | None = None  # the context last read from the session file (no usage_update)
    turns_since_swap: int = 0
    pace: Pace = field(default_factory=Pace)
    last_context: int | None = None  # the context at the last turn end whose size was known
    calls: int = 0  # model calls since then (one a turn, one more per round of tool results)
    results_since_call: bool = False  # a result of the current round of tool calls came back
    new: bool = False  # opened by session/new here: its first context is the CLI's own prompt
    idle_since: float | None = None  # monotonic time of the turn end, until the next prompt
    swapping: bool = False
    # After a failed swap, skip this many turn ends before trying again (doubling per failure),
    # so a session that cannot be rewritten does not pay for a rewrite at every turn.
    skip_turns: int = 0
    failures: int = 0


class _TurnEnd(NamedTuple):
    """What the swap task is asked to look at when a thread's turn has ended."""

    thread_id: str
    decision: Decision | None  # the agent's usage says swap; None: the session file decides
    held: bool  # the thread's next frames wait (set in ``offer``, before the client's next bytes)
    prompt: str | None  # the prompt of the turn that ended, to find that turn on disk


class SwapError(Exception):
    pass


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
    t = time.monotonic()
    session_id = base["sessionId"]
    if state.mode_id:
        await request("session/set_mode", {"sessionId": session_id, "modeId": state.mode_id})
    for config_id, value in state.config_options.items():
        await request("session/set_config_option", {"sessionId": session_id, "configId": config_id, "value": value})
    logger.debug("swap step", step="mode and options", seconds=round(time.monotonic() - t, 4),
                 mode=state.mode_id, options=len(state.config_options))
    return method


class SwapManager:
    def __init__(
        self,
        settings: SwapSettings,
        journal: SwapJournal,
        harness: SessionHarness,
        *,
        clock: Callable[[], float] = time.time,
        settle_timeout: float = 10.0,
        gradient: GradientSettings | None = None,
    ) -> None:
        self.settings = settings
        self.policy = CostPolicy(settings, gradient or GradientSettings(),
                                 settings.ceiling_tokens or harness.ceiling_tokens)
        self.journal = journal
        self.harness = harness
        self.clock = clock
        self.settle_timeout = settle_timeout
        self.threads: dict[str, ThreadState] = {}
        self.capabilities: dict[str, Any] = {}
        # The client declared ACP's ``session.compaction`` capability (in ``initialize``): it
        # shows compactions itself, and the swap notice is one (``_notice``).
        self.client_compaction = False
        self._requests: dict[Any, dict[str, Any]] = {}  # session/new and fork in flight -> params
        self._proxy: Proxy | None = None
        self._send, self._receive = anyio.create_memory_object_stream[_TurnEnd](64)
        self.completed = 0  # swap attempts finished, committed or not (tests wait on it)
        self._left_behind = ""  # the backing id the last committed swap moved away from
        self._warned_no_close = False
        self._progress = anyio.Event()
        self._lock = anyio.Lock()  # one move at a time: a swap, or a command's
        # Called at the end of every turn end the swap task looked at, before it releases the
        # thread: the recycle (``liminal.kernel.recycle``) moves sessions to a fresh agent
        # process there, the thread's next prompt already waiting. Must not raise.
        self.after_turn: Callable[[str], Awaitable[None]] | None = None

    # ------------------------------------------------------------ observation

    def offer(self, event: FrameEvent) -> None:
        if event.kind is Kind.NOTIFICATION and event.direction is Direction.AGENT_TO_CLIENT:
            # Nearly every frame is a streamed chunk: decide from the bytes before parsing.
            raw = event.raw
            if b'"tool_call' in raw:
                self._tool_frame(event.thread_id, raw)
            if b'"usage_update"' not in raw and b'"current_mode_update"' not in raw:
                return
        message = event.message
        if message is None:
            return
        if event.direction is Direction.CLIENT_TO_AGENT:
            if event.kind is Kind.REQUEST:
                params = message.get("params")
                if isinstance(params, dict):
                    if event.method == "initialize":
                        caps = params.get("clientCapabilities")
                        session = caps.get("session") if isinstance(caps, dict) else None
                        compaction = session.get("compaction") if isinstance(session, dict) else None
                        self.client_compaction = isinstance(compaction, dict)
                    if event.method in ("session/new", "session/fork"):
                        self._requests[event.rpc_id] = params  # its answer names the thread
                    self._client_request(event.method or "", params)
            return
        if event.direction is not Direction.AGENT_TO_CLIENT:
            return
        if event.kind is Kind.NOTIFICATION and event.method == "session/update" and event.thread_id:
            update = (message.get("params") or {}).get("update") or {}
            kind = update.get("sessionUpdate")
            state = self.threads.get(event.thread_id)
            if state is None:
                return
            if kind == "usage_update" and isinstance(update.get("used"), int):
                state.context_tokens = update["used"]
            elif kind == "current_mode_update" and isinstance(update.get("currentModeId"), str):
                state.mode_id = update["currentModeId"]
        elif event.kind is Kind.RESPONSE:
            params = self._requests.pop(event.rpc_id, {}) if event.rpc_id is not None else {}
            result = message.get("result")
            if not isinstance(result, dict):
                return
            if event.method == "initialize":
                caps = result.get("agentCapabilities")
                self.capabilities = caps if isinstance(caps, dict) else {}
            elif event.method in ("session/new", "session/fork") and event.thread_id:
                state = self.threads.setdefault(event.thread_id, ThreadState(event.thread_id))
                state.new = event.method == "session/new"
                state.cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else state.cwd
                state.mcp_servers = list(params.get("mcpServers") or [])
                modes = result.get("modes")
                if isinstance(modes, dict) and isinstance(modes.get("currentModeId"), str):
                    state.mode_id = modes["currentModeId"]
            elif event.method == "session/prompt" and event.thread_id:
                self._turn_ended(event.thread_id)

    def _client_request(self, method: str, params: dict[str, Any]) -> None:
        thread = params.get("sessionId")
        if not isinstance(thread, str):
            return
        if method in ("session/load", "session/resume"):
            state = self.threads.setdefault(thread, ThreadState(thread))
            state.cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else state.cwd
            state.mcp_servers = list(params.get("mcpServers") or [])
        elif method == "session/prompt" and thread in self.threads:
            blocks = params.get("prompt")
            texts = [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"] \
                if isinstance(blocks, list) else []
            text = "\n".join(t for t in texts if isinstance(t, str))
            # Slash commands are rewritten by the CLI before they reach the file.
            state = self.threads[thread]
            state.last_prompt = text if text and not text.startswith("/") else None
            state.calls += 1
            state.results_since_call = False
            state.idle_since = None
        elif method == "session/set_mode" and thread in self.threads and isinstance(params.get("modeId"), str):
            self.threads[thread].mode_id = params["modeId"]
        elif (method == "session/set_config_option" and thread in self.threads
              and isinstance(params.get("configId"), str)):
            self.threads[thread].config_options[params["configId"]] = params.get("value")

    def _tool_frame(self, thread_id: str | None, raw: bytes) -> None:
        """Count model calls from the tool frames: the first result of a round of tool calls
        goes back to the model in a call of its own (parallel calls share one)."""
        state = self.threads.get(thread_id) if thread_id else None
        if state is None:
            return
        if b'"tool_call"' in raw:
            state.results_since_call = False
        elif b'"tool_call_update"' in raw and (b'"completed"' in raw or b'"failed"' in raw):
            if not state.results_since_call:
                state.calls += 1
            state.results_since_call = True

    def _observe(self, state: ThreadState, context: int) -> None:
        """A turn end's context is known: what the turns since the last one added, per call."""
        if state.pace.overhead is None and state.new:
            state.pace.overhead = context
        if state.last_context is not None:
            state.pace.observe(context - state.last_context, state.calls)
        state.last_context = context
        state.calls = 0

    def _turn_ended(self, thread_id: str) -> None:
        state = self.threads.get(thread_id)
        if state is not None:
            state.idle_since = time.monotonic()
        if state is None or self._proxy is None or state.swapping or not self.settings.enabled:
            logger.debug("turn ended; not considered", thread=thread_id,
                         swapping=state.swapping if state else None)
            return
        state.turns_since_swap += 1
        if state.context_tokens is not None:
            self._observe(state, state.context_tokens)
        if state.skip_turns:
            state.skip_turns -= 1
            return
        router = self._proxy.router
        if router.prompt_in_flight(thread_id) or router.agent_request_open(thread_id):
            logger.debug("turn ended with work in flight; no swap now", thread=thread_id,
                         prompt=router.prompt_in_flight(thread_id),
                         agent_request=router.agent_request_open(thread_id))
            return
        decision: Decision | None = None
        every_due = bool(self.settings.every_turns) and state.turns_since_swap >= self.settings.every_turns
        if state.context_tokens is not None or every_due:
            # Without usage, a swap that swap.every_turns asks for is decided all the same.
            known = state.context_tokens if state.context_tokens is not None else state.file_tokens or 0
            decision = self.policy.decide(known, state.pace, turns_since_swap=state.turns_since_swap)
            logger.debug("turn ended", thread=thread_id, tokens=known, decided=decision.swap,
                         why=decision.why)
            if not decision.swap:
                return
        # Without usage from the agent the session file decides, once the turn is on disk (about
        # 0.1 s after the answer with Claude Code 2.1.44). Near the trigger the thread is held
        # for that check, or a client that answers quickly would never let a swap start; far
        # below it an unheld read only updates the size, and a turn that jumps the whole way
        # is caught one turn late.
        trigger = self.policy.trigger(state.pace)
        near = trigger - max(2 * state.pace.biggest_turn, (trigger - self.policy.target(state.pace)) // 2)
        held = decision is not None or state.file_tokens is None or state.file_tokens >= near
        self._enqueue(state, _TurnEnd(thread_id, decision, held, state.last_prompt))

    def _enqueue(self, state: ThreadState, turn_end: _TurnEnd) -> None:
        assert self._proxy is not None
        try:
            # The prompt of the turn that just ended, taken now: by the time the task runs, an
            # unheld client may already have sent the next one.
            self._send.send_nowait(turn_end)
        except anyio.WouldBlock:
            return
        state.swapping = True
        if turn_end.held:
            # Inside the flush that delivered the turn's end (or, idle, with no prompt in
            # flight): the client's next prompt cannot have been read yet, so it is certain to wait.
            self._proxy.router.hold(state.thread_id)

    def _idle_check(self, now: float) -> None:
        """Threads idle past the cache's life: their next call rewrites the whole prompt anyway,
        so a swap now costs nothing more (``CostPolicy``), and the person is not waiting."""
        life = self.settings.cache_life_seconds
        router = self._proxy.router if self._proxy is not None else None
        if router is None or not self.policy.idle_swaps or not self.settings.enabled:
            return
        for state in list(self.threads.values()):
            if state.idle_since is None or state.swapping or now - state.idle_since < life:
                continue
            state.idle_since = None  # one look per idle spell
            context = state.context_tokens if state.context_tokens is not None else state.file_tokens
            thread_id = state.thread_id
            if (context is None or router.prompt_in_flight(thread_id) or router.agent_request_open(thread_id)
                    or router.is_held(thread_id) or not router.agent_alive):
                continue
            decision = self.policy.decide(context, state.pace, idle=True)
            logger.debug("thread idle past the cache's life", thread=thread_id, tokens=context,
                         decided=decision.swap, why=decision.why)
            if decision.swap:
                self._enqueue(state, _TurnEnd(thread_id, decision, True, state.last_prompt))

    async def _idle_watch(self) -> None:
        life = self.settings.cache_life_seconds
        if life <= 0:
            return
        while True:
            await anyio.sleep(min(life / 4, 15.0))
            self._idle_check(time.monotonic())

    # ----------------------------------------------------------------- running

    async def run(self, proxy: Proxy) -> None:
        self._proxy = proxy
        await anyio.to_thread.run_sync(self._recover)
        # Every session a thread has been on names the thread towards the client (a listing
        # shows the thread once); new frames go to the last one.
        lineage = self.journal.lineage()
        for thread_id, backing_id in lineage:
            proxy.router.adopt(backing_id, thread_id)
        for thread_id, backing_id in dict(lineage).items():  # the last committed of each thread
            proxy.router.bind(thread_id, backing_id)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._idle_watch)
            await self._swaps(proxy)
            tasks.cancel_scope.cancel()

    async def _swaps(self, proxy: Proxy) -> None:
        async with self._receive:
            async for turn_end in self._receive:
                thread_id = turn_end.thread_id
                state = self.threads[thread_id]
                committed: bool | None = None
                try:
                    async with self._lock:
                        committed = await self._maybe_swap(proxy, state, turn_end)
                    if committed is False:
                        state.failures += 1
                        state.skip_turns = min(2 ** state.failures, 32)
                    elif committed:
                        state.failures = 0
                    if self.after_turn is not None:
                        await self.after_turn(thread_id)
                finally:
                    state.swapping = False
                    if proxy.router.is_held(thread_id):
                        proxy.router.release(thread_id)
                        proxy.flush()
                    if committed:
                        # After the release: the held prompts need only the new session.
                        await self._close(proxy, self._left_behind)
                    if committed is not None:
                        self.completed += 1
                    self._progress.set()
                    self._progress = anyio.Event()

    def _recover(self) -> None:
        """Remove what swaps cut short by a crash left: each ``begin`` without an end names the
        file its rewrite wrote (or was about to). Nothing else is touched: not the session the
        thread was on, not a file that a committed swap made the thread's session."""
        committed = {r.new_backing_id for r in self.journal.records() if r.outcome == "committed"}
        for begun in self.journal.unfinished():
            new_id = begun.new_backing_id
            if not new_id or not begun.new_path or new_id in committed:
                continue
            path = Path(begun.new_path)
            if path.stem != new_id or new_id == begun.old_backing_id:
                logger.warning("swap journal names an unexpected file; left alone", path=str(path))
                continue
            self.harness.discard(Rewritten(new_id, path, 0, 0))
            self.journal.append(SwapRecord(
                thread_id=begun.thread_id, old_backing_id=begun.old_backing_id,
                new_backing_id=new_id, outcome="abandoned",
                reason="liminal stopped during the swap; its rewrite was removed at the next start",
                started_at=begun.started_at, duration_s=0.0, tokens_before=begun.tokens_before,
                tokens_after=None, harness=begun.harness, cwd=begun.cwd))
            logger.info("unfinished swap cleaned up", thread=begun.thread_id, removed=str(path))

    async def wait_for_swaps(self, count: int) -> None:
        """For tests: until ``count`` swaps have finished (committed or not)."""
        while self.completed < count:
            await self._progress.wait()

    async def _maybe_swap(self, proxy: Proxy, state: ThreadState, turn_end: _TurnEnd) -> bool | None:
        """True: committed; False: tried and failed; None: no swap was needed after all."""
        decision, held = turn_end.decision, turn_end.held
        decided = decision is not None
        router = proxy.router
        thread_id = state.thread_id
        old_backing = router.backing_of(thread_id)
        started = self.clock()
        t0 = time.monotonic()
        path = self.harness.locate(old_backing, state.cwd)
        tokens = decision.context if decision is not None else state.context_tokens
        if path is None:
            # Not a session this harness can rewrite (another CLI, or a file not written yet):
            # not a swap attempt worth journaling, but back off like a failure.
            logger.info("no session file to rewrite", thread=thread_id, backing=old_backing,
                        harness=self.harness.name)
            return False
        if not held:
            # Far below the trigger: only refresh the size that decides whether the next turn end
            # is held. No settling (an unheld client keeps the CLI writing newer turns), no swap.
            state.file_tokens = await anyio.to_thread.run_sync(self.harness.context_tokens, path)
            if state.file_tokens is not None:
                self._observe(state, state.file_tokens)
            logger.debug("context read from the session file", thread=thread_id, tokens=state.file_tokens,
                         held=False)
            return None
        # The CLI may write the turn after answering the prompt: wait for it to be on disk before
        # reading its size, and never rewrite a file that lacks it (the turn would be lost).
        if not await self._settle(path, turn_end.prompt, self.settle_timeout if decided else 2.0):
            if decided:
                self._journal(state, old_backing, None, "abandoned", "the turn did not reach the session file",
                              started, t0, tokens, None)
                return False
            logger.debug("turn not on disk in time; no check", thread=thread_id)
            return None
        t_settled = time.monotonic()
        if decision is None:
            tokens = await anyio.to_thread.run_sync(self.harness.context_tokens, path)
            state.file_tokens = tokens
            if tokens is None:
                logger.debug("no context size in the session file", thread=thread_id)
                return None
            self._observe(state, tokens)
            decision = self.policy.decide(tokens, state.pace, turns_since_swap=state.turns_since_swap)
            logger.debug("context read from the session file", thread=thread_id, tokens=tokens,
                         decided=decision.swap, why=decision.why)
            if not decision.swap:
                return None
        reason = decision.why
        t_rewrite = time.monotonic()

        def rewrite(new_id: str) -> Rewritten:
            return self.harness.rewrite(path, self.policy.aim, new_id)

        def check(rewritten: Rewritten) -> str | None:
            unpaid = self.policy.worth_it(decision, rewritten.tokens_after, state.pace)
            if unpaid is not None:
                logger.info("swap skipped", thread=thread_id, why=unpaid)
            return unpaid

        moved = await self._relocate(proxy, state, old_backing=old_backing, path=path, reason=reason,
                                     started=started, t0=t0, tokens=tokens, write=rewrite,
                                     check=check, decision=decision)
        if moved is None:
            return False
        rewritten, moved_by, t_rewritten, t_moved = moved
        # Where the hold went (bench/swap.py reads these): waiting for the file, reading the
        # context size when the agent sent none, the gradient rewrite, the resume or load.
        timing = {"settle_s": round(t_settled - t0, 4), "decide_s": round(t_rewrite - t_settled, 4),
                  "rewrite_s": round(t_rewritten - t_rewrite, 4),
                  "move_s": round(t_moved - t_rewritten, 4), "moved_by": moved_by}
        if not self.policy.aim:  # the rewrite went to the floor: now the floor is known
            state.pace.floor = rewritten.tokens_after
        self._notice(proxy, thread_id, rewritten)
        logger.info("swap committed", thread=thread_id, old=old_backing, new=rewritten.new_id,
                    tokens_before=rewritten.tokens_before, tokens_after=rewritten.tokens_after,
                    seconds=round(time.monotonic() - t0, 3), why=reason, **timing)
        return True

    def _known(self, thread_id: str) -> tuple[Proxy, ThreadState]:
        state = self.threads.get(thread_id)
        if self._proxy is None or state is None:
            raise SwapError("liminal has not seen this thread opened in this session")
        return self._proxy, state

    def _claim(self, state: ThreadState) -> None:
        """Hold a thread for a command's move, if nothing is under way on it."""
        assert self._proxy is not None
        router, thread_id = self._proxy.router, state.thread_id
        if state.swapping or router.is_held(thread_id):
            raise SwapError("a context swap is under way; try again in a moment")
        if router.prompt_in_flight(thread_id) or router.agent_request_open(thread_id):
            raise SwapError("a prompt is running")
        state.swapping = True
        router.hold(thread_id)

    async def move_thread(self, thread_id: str, reason: str,
                          write: Callable[[Path, str], Rewritten]) -> Rewritten:
        """Move a thread, between turns, onto a session ``write(current file, new_id)`` makes:
        the commands' step (``liminal.kernel.commands``). Holds the thread, waits for its last
        turn to be on disk, then ``_relocate``. Raises ``SwapError`` saying why the thread stayed."""
        proxy, state = self._known(thread_id)
        router = proxy.router
        async with self._lock:
            self._claim(state)
            committed = False
            old_backing = router.backing_of(thread_id)
            try:
                path = self.harness.locate(old_backing, state.cwd)
                if path is None:
                    raise SwapError("no session file for this thread yet")
                if not await self._settle(path, state.last_prompt, 2.0):
                    raise SwapError("the last turn is not on disk yet")
                moved = await self._relocate(
                    proxy, state, old_backing=old_backing, path=path, reason=reason,
                    started=self.clock(), t0=time.monotonic(), tokens=None,
                    write=lambda new_id: write(path, new_id))
                if moved is None:
                    last = self.journal.records(thread_id)
                    raise SwapError(last[-1].reason if last else "the move failed")
                committed = True
                return moved[0]
            finally:
                state.swapping = False
                if router.is_held(thread_id):
                    router.release(thread_id)
                    proxy.flush()
                if committed:
                    await self._close(proxy, old_backing)

    async def fresh_session(self, thread_id: str, reason: str) -> str:
        """Move a thread onto a new, empty session of the agent (``/clear``): its history stays
        with liminal, the model starts from nothing. Returns the new backing id."""
        proxy, state = self._known(thread_id)
        router = proxy.router
        async with self._lock:
            self._claim(state)
            old_backing = router.backing_of(thread_id)
            started, t0 = self.clock(), time.monotonic()
            new_id = ""
            try:
                with anyio.fail_after(self.settings.hold_timeout_seconds):
                    result = await proxy.request(
                        "session/new", {"cwd": state.cwd or ".", "mcpServers": state.mcp_servers},
                        timeout=self.settings.hold_timeout_seconds, thread_id=thread_id)
                new_id = str((result or {}).get("sessionId") or "")
                if not new_id:
                    raise SwapError("the agent opened no session")
                request = functools.partial(proxy.request, timeout=self.settings.hold_timeout_seconds,
                                            thread_id=thread_id)
                if state.mode_id:
                    await request("session/set_mode", {"sessionId": new_id, "modeId": state.mode_id})
                self._journal(state, old_backing, new_id, "committed", reason, started, t0, None, None)
                router.bind(thread_id, new_id)
            except BaseException:
                if new_id and router.agent_alive:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(UNDO_CLOSE_SECONDS):
                        await self._close(proxy, new_id)
                raise
            finally:
                state.swapping = False
                router.release(thread_id)
                proxy.flush()
            state.turns_since_swap = 0
            state.last_prompt = None
            state.context_tokens = state.file_tokens = state.last_context = None
            state.calls = 0
            await self._close(proxy, old_backing)
            return new_id

    async def _relocate(
        self, proxy: Proxy, state: ThreadState, *, old_backing: str, path: Path, reason: str,
        started: float, t0: float, tokens: int | None, write: Callable[[str], Rewritten],
        check: Callable[[Rewritten], str | None] | None = None, decision: Decision | None = None,
    ) -> tuple[Rewritten, str, float, float] | None:
        """Write the thread's next session with ``write(new_id)`` (in a worker thread) and move
        the held thread onto it: the step a swap and every command that rewrites a thread's
        context share. Journaled from before the file exists to the end; anything but a commit
        leaves no file and no open session behind (``_undo``). Returns (the rewrite, how it was
        opened, when written, when moved), or None: the thread stays where it was."""
        router = proxy.router
        thread_id = state.thread_id
        new_id = str(uuid.uuid4())
        new_path = self.harness.target_path(path, new_id)
        cost = decision.as_dict() if decision is not None else None
        # Journaled before the file exists: a liminal killed from here to the end record leaves
        # a ``begin`` alone, and the next start removes what it names (``_recover``).
        self.journal.begin(SwapRecord(
            thread_id=thread_id, old_backing_id=old_backing, new_backing_id=new_id,
            outcome="begin", reason=reason, started_at=started, duration_s=0.0,
            tokens_before=tokens, tokens_after=None, harness=self.harness.name, cwd=state.cwd,
            new_path=str(new_path), cost=cost))
        rewritten: Rewritten | None = None
        opened = False  # the agent has (or may have) the new session open
        ended = False  # an end record (committed, failed, abandoned, skipped) is journaled
        committed = False
        try:
            try:
                with anyio.fail_after(self.settings.hold_timeout_seconds):
                    rewritten = await anyio.to_thread.run_sync(write, new_id)
                    t_rewritten = time.monotonic()
                    unpaid = check(rewritten) if check is not None else None
                    if unpaid is not None:
                        ended = True
                        self._journal(state, old_backing, new_id, "skipped", unpaid, started, t0,
                                      rewritten.tokens_before, rewritten.tokens_after, decision)
                        return None
                    await anyio.to_thread.run_sync(self.journal.note_rewrite, new_id, rewritten.size)
                    opened = True
                    moved_by = await self._move(proxy, state, old_backing, new_id)
                    t_moved = time.monotonic()
            except TimeoutError:
                ended = True
                self._journal(state, old_backing, new_id, "abandoned",
                              f"overran {self.settings.hold_timeout_seconds}s", started, t0, tokens,
                              rewritten.tokens_after if rewritten else None)
                return None
            except Exception as exc:
                logger.warning("move failed; the thread stays on its session", thread=thread_id,
                               error=str(exc), reason=reason)
                ended = True
                self._journal(state, old_backing, new_id, "failed", f"{type(exc).__name__}: {exc}",
                              started, t0, tokens, rewritten.tokens_after if rewritten else None)
                return None
            if not router.is_held(thread_id):
                # The hold overflowed (the client sent more than the router keeps) and let the
                # thread's frames through to the old session: the new one lacks what they did.
                ended = True
                self._journal(state, old_backing, new_id, "abandoned",
                              "the hold overflowed; the thread went on on its old session", started,
                              t0, tokens, rewritten.tokens_after)
                return None
            # The journal first: a thread is on its new session only once that is on disk (a
            # journal that cannot be written fails the swap, and the thread stays).
            self._journal(state, old_backing, new_id, "committed", reason, started, t0,
                          rewritten.tokens_before, rewritten.tokens_after, decision)
            ended = True
            router.bind(thread_id, new_id)
            committed = True
        except BaseException as exc:
            # Cancelled (the client left, liminal is stopping) or an end record that could not
            # be written: the swap did not happen.
            if not ended:
                with contextlib.suppress(Exception):
                    self._journal(state, old_backing, new_id, "abandoned",
                                  f"stopped during the swap ({type(exc).__name__})", started, t0,
                                  tokens, None)
            raise
        finally:
            if not committed:  # whatever went wrong: no new file, no new session left open
                await self._undo(proxy, new_path, new_id, opened)
        self._left_behind = old_backing
        # The new session's file is whole as liminal wrote it: no turn of it is still to reach
        # the disk (the last prompt named one of the old session's).
        state.last_prompt = None
        state.turns_since_swap = 0
        state.context_tokens = None  # the next usage_update tells the new size
        state.file_tokens = rewritten.tokens_after  # until the file says otherwise
        state.last_context = rewritten.tokens_after
        state.calls = 0
        return rewritten, moved_by, t_rewritten, t_moved

    async def _undo(self, proxy: Proxy, new_path: Path, new_id: str, opened: bool) -> None:
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
            if opened and proxy.router.agent_alive:
                with anyio.move_on_after(UNDO_CLOSE_SECONDS):
                    await self._close(proxy, new_id)

    async def settle(self, path: Path, prompt: str | None, timeout: float = 2.0) -> bool:
        """Until the turn whose prompt was ``prompt`` is on disk (for the commands)."""
        return await self._settle(path, prompt, timeout)

    async def _settle(self, path: Path, prompt: str | None, timeout: float) -> bool:
        """Until the CLI has written the finished turn; False if it has not within ``timeout``."""
        # Claude Code 2.1.44 writes the turn 75-90 ms after answering the prompt, and "settled"
        # takes two looks at the same size: polls capped at 20 ms see it about 100 ms after the
        # answer (capped at 100 ms they saw it at 255 ms). The thread is held meanwhile, at every
        # turn end when the agent sends no usage. A look is a stat, and a read of the tail only
        # when the size held still.
        with anyio.move_on_after(timeout):
            delay = 0.005
            while not await anyio.to_thread.run_sync(self.harness.turn_settled, path, prompt):
                await anyio.sleep(delay)
                delay = min(delay * 2, SETTLE_POLL_MAX)
            return True
        return False

    async def _move(self, proxy: Proxy, state: ThreadState, old_backing: str, new_id: str) -> str:
        """Open ``new_id`` for the thread; returns the method that did it."""
        router = proxy.router
        base = {"sessionId": new_id, "cwd": state.cwd or ".", "mcpServers": state.mcp_servers}
        timeout = self.settings.hold_timeout_seconds
        if faults.value("swap.move") == "kill-agent":
            proxy.agent.signal_group(signal.SIGKILL)  # the adapter dying in the middle of a swap
        await faults.hit("swap.move")
        if faults.value("swap.resume") == "wrong-id":
            base = dict(base, sessionId=str(uuid.uuid4()))  # a session the agent cannot have

        async def request(method: str, params: dict[str, Any]) -> Any:
            return await proxy.request(method, params, timeout=timeout, thread_id=state.thread_id)

        router.capture(new_id)
        try:
            method = await open_for_thread(request, state, base, self.capabilities)
            await faults.hit("swap.moved")
            return method
        finally:
            router.uncapture(new_id)

    async def _close(self, proxy: Proxy, old_backing: str) -> None:
        """Close the session a committed swap left, if the agent supports it."""
        if "close" not in (self.capabilities.get("sessionCapabilities") or {}):
            if not self._warned_no_close:
                self._warned_no_close = True
                logger.warning("the agent cannot close sessions: the process of each session a "
                               "swap leaves keeps running until the recycle moves the live ones to "
                               "a fresh agent process (swap.max_stale_sessions)", session=old_backing)
            return
        t = time.monotonic()
        try:
            await proxy.request("session/close", {"sessionId": old_backing},
                                timeout=self.settings.hold_timeout_seconds)
        except Exception as exc:  # the old session lingering costs memory, not correctness
            logger.info("old session not closed", session=old_backing, error=str(exc))
        logger.debug("swap step", step="session/close", seconds=round(time.monotonic() - t, 4))

    def _notice(self, proxy: Proxy, thread_id: str, rewritten: Rewritten) -> None:
        if self.settings.notice == "silent":
            return
        text = (f"Context optimised by liminal: {rewritten.tokens_before // 1000}k -> "
                f"{rewritten.tokens_after // 1000}k tokens.")
        meta = {"liminal": {"swap": {"tokensBefore": rewritten.tokens_before,
                                     "tokensAfter": rewritten.tokens_after}}}
        if self.client_compaction:
            # A client that shows compactions gets the swap as one, in the protocol's own
            # updates (as the newer Claude adapter reports the CLI's compactions): started, then
            # completed with what it did as its summary.
            compaction = f"liminal-{rewritten.new_id}"
            steps: list[dict[str, Any]] = [
                {"sessionUpdate": "compaction_update", "compactionId": compaction,
                 "status": "in_progress"},
                {"sessionUpdate": "compaction_update", "compactionId": compaction,
                 "status": "completed", "summary": [{"type": "text", "text": text}], "_meta": meta}]
            for step in steps:
                proxy.router.notify_in_next_turn(thread_id, "session/update",
                                                 {"sessionId": thread_id, "update": step})
            proxy.flush()
            return
        if self.settings.notice == "thought":
            update: dict[str, Any] = {"sessionUpdate": "agent_thought_chunk",
                                      "content": {"type": "text", "text": text}, "_meta": meta}
        else:
            update = {"sessionUpdate": "session_info_update", "_meta": meta}
        # Inside the thread's next turn (its held prompt, or the next one the client sends),
        # never as a stray update after the last answer (``Router.notify_in_next_turn``).
        proxy.router.notify_in_next_turn(thread_id, "session/update",
                                         {"sessionId": thread_id, "update": update})
        proxy.flush()

    def _journal(self, state: ThreadState, old: str, new: str | None, outcome: str, reason: str,
                 started: float, t0: float, before: int | None, after: int | None,
                 decision: Decision | None = None) -> None:
        cost = None
        if decision is not None:
            cost = decision.as_dict()
            if after is not None and outcome == "committed":
                # What the swap as made costs and saves (the decision had only the plan's aim).
                done = self.policy.cost(decision.context, after, decision.trigger, state.pace,
                                        idle=decision.idle)
                cost.update(target=after, rebuild=round(done[0], 1), saves_per_call=round(done[1], 1),
                            payback_calls=round(done[2], 1), calls_to_next=round(done[3], 1))
        record = SwapRecord(
            thread_id=state.thread_id, old_backing_id=old, new_backing_id=new, outcome=outcome,
            reason=reason, started_at=started, duration_s=round(time.monotonic() - t0, 4),
            tokens_before=before, tokens_after=after, harness=self.harness.name, cwd=state.cwd,
            cost=cost,
        )
        self.journal.append(record)  # the authority (see journal.py)
        if self._proxy is not None:  # and a note in the store, with the conversation
            self._proxy.router.note("liminal/swap", asdict(record), self.clock(), thread_id=state.thread_id)
            self._proxy.flush()
