"""The thread model: what liminal knows of each thread, read once from the router's events.

A proxy component, fed every frame (``offer``). It owns each thread's ``ThreadState`` (its cwd
and MCP servers, its mode and config options, its context size from the agent's usage, its
model calls, the prompt of its last turn), the agent's capabilities and the client's
``initialize`` and ``authenticate``, and tells the components that care what happened, instead
of each parsing frames of its own:

- ``on_turn_end(thread, ok)``: the agent answered a thread's ``session/prompt`` (``ok``: with a
  result, the turn's end a swap may follow; else an error). The one turn-end detector: the swap manager decides a swap there, the recycle takes
  its quiet moment, the model tools hand over the model's slash commands.
- ``on_opened(thread, method, key, by_liminal)``: the agent opened a session for a thread
  (``session/new``, ``fork``, ``load`` or ``resume`` with a result; ``key``: the client's request
  id, or None for liminal's own); ``on_open_failed(method, key)`` for a client's that failed.
- ``on_quiet(thread)``: awaited by the swap task once it has finished with a turn end it took
  (the thread still held if it was): a quiet moment for the recycle, told through the model
  rather than by patching the swap manager.

Subscribers are called in the order they subscribed, inside the flush that delivered the frame
(so a hold they place is in before the client's next bytes are read); one that raises is
logged and the others are still called.

The swap's own bookkeeping (its pace, back-off, whether a move holds the thread) is the swap
machine's ``SwapBook`` (``liminal.kernel.swapping.book``), which each ``ThreadState`` carries
as ``swap`` so that one object per thread is what everyone reads; only the machine and the
moves it asks for write it. Two things every mover of a thread shares are here too:

- ``moves``, the per-thread move lock (``MoveLocks``): one move of a thread at a time (a swap, a
  command's), while two threads move at once; the recycle and the agent restart, which move
  every thread, take every thread's lock together.
- ``marks``, the marks set in this process (``Mark``): the store has them too, a little later
  (its index runs behind), so ``/clear MARK`` right after ``/mark`` reads them here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from liminal import faults, log
from liminal.acp import jsonrpc
from liminal.acp.events import Direction, FrameEvent, FrameRun, Kind, LazyFrameEvent, kind_markers
from liminal.acp.hooks import RequestHook
from liminal.acp.port import Component, Frames
from liminal.kernel.policy import Pace
from liminal.kernel.swapping.book import SwapBook
from liminal.kernel.version import asked_for_spoken

logger = log.get("liminal.threads")
# The streamed updates the model reads: tool calls (it counts model calls from them), the
# context size and the mode. Every other kind (text, thoughts, plans) it never looks at.
_WATCHED = kind_markers("tool_call", "tool_call_update", "usage_update", "current_mode_update")
# Client requests whose parameters the model keeps until the agent answers them.
_REMEMBERED = frozenset({"initialize", "authenticate", "session/new", "session/fork", "session/load",
                         "session/resume", "session/set_mode", "session/set_config_option"})
OPENS = frozenset({"session/new", "session/fork", "session/load", "session/resume"})
USAGE = "liminal/usage"  # the context read from the session file of a CLI that tells none
RESTORED = "liminal/restored"  # the note ``liminal.kernel.restore`` writes once a load it kept opened
# No model's window comes near this many tokens: a reading past it is not a context size.
MAX_CONTEXT_TOKENS = 100_000_000


@dataclass(slots=True)
class ThreadState:
    """What the thread model observed of a thread, and (``swap``) what its swaps keep."""

    thread_id: str
    cwd: str | None = None
    mcp_servers: list[Any] = field(default_factory=list)
    mode_id: str | None = None
    config_options: dict[str, Any] = field(default_factory=dict)
    context_tokens: int | None = None  # from usage_update
    context_window: int | None = None  # the window the agent's last usage_update gave (its size)
    last_prompt: str | None = None  # the text of the newest session/prompt, to find it on disk
    # Model calls since the thread's last move here (a swap, /clear, /undo ...): what a swap's
    # payback is measured against (``CostPolicy.losing_money``). None until this liminal has
    # moved the thread: the calls before it saw the thread are not known.
    calls_since_move: int | None = None
    results_since_call: bool = False  # a result of the current round of tool calls came back
    new: bool = False  # opened by session/new here: its first context is the CLI's own prompt
    idle_since: float | None = None  # monotonic time of the turn end, until the next prompt
    # The swap machine's (``liminal.kernel.swapping``): its pace, back-off, whether it is moving.
    swap: SwapBook = field(default_factory=SwapBook)

    @property
    def pace(self) -> Pace:
        return self.swap.pace

    @property
    def file_tokens(self) -> int | None:
        """The context last read from the session file (when the agent's usage says none)."""
        return self.swap.file_tokens

    @property
    def swapping(self) -> bool:
        """A move holds the thread (a swap's or a command's)."""
        return self.swap.swapping

    @property
    def calls(self) -> int:
        """Model calls since the last turn end whose size was known."""
        return self.swap.calls

    def called(self) -> None:
        """A model call: counted since the last turn end and since the last move."""
        self.swap.calls += 1
        if self.calls_since_move is not None:
            self.calls_since_move += 1


@dataclass(frozen=True, slots=True)
class Mark:
    """A named point of a thread (``/mark NAME``): the session it was on and the byte offset of
    that session's file there."""

    name: str
    backing_id: str
    offset: int
    at: float


class MoveLocks:
    """The per-thread move lock. A thread is taken by one move at a time; several threads are
    taken together (``take`` waits until every one is free, then takes them all in one step,
    with no await between: two movers of overlapping threads cannot each hold half). Not an
    ``anyio.Lock`` per thread: the recycle takes them in the flush that saw its quiet moment and
    gives them back from its own task, and an ``anyio.Lock`` belongs to the task that took it."""

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._freed = anyio.Event()

    def taken(self, thread_id: str | None = None) -> bool:
        """``thread_id`` is moving; with none, any thread is."""
        return thread_id in self._taken if thread_id is not None else bool(self._taken)

    def try_take(self, threads: Iterable[str]) -> bool:
        """Take every one of ``threads`` now, or none (False: one is moving)."""
        wanted = set(threads)
        if wanted & self._taken:
            return False
        self._taken |= wanted
        return True

    async def take(self, threads: Iterable[str]) -> None:
        wanted = set(threads)
        while not self.try_take(wanted):
            await self._freed.wait()

    def give(self, threads: Iterable[str]) -> None:
        self._taken -= set(threads)
        self._freed.set()
        self._freed = anyio.Event()

    @contextlib.asynccontextmanager
    async def moving(self, *threads: str) -> AsyncIterator[None]:
        """Hold the move lock of ``threads`` for the block."""
        await self.take(threads)
        try:
            yield
        finally:
            self.give(threads)

    async def none_taken(self) -> None:
        """Until no thread is moving."""
        while self._taken:
            await self._freed.wait()


def context_reading(update: dict[str, Any]) -> int | None:
    """The context size a ``usage_update`` tells, or None when it tells none a window could hold:
    not a whole number, negative, past ``MAX_CONTEXT_TOKENS``, or more than twice the window the
    update names (the count may take in the answer's tokens, so a little past it is real). One
    such reading taken for a context would cost a swap at once, and as the biggest turn ever seen
    it would push the thread's trigger down to its target for good: a swap at every turn."""
    used, size = update.get("used"), update.get("size")
    if not isinstance(used, int) or isinstance(used, bool) or not 0 <= used <= MAX_CONTEXT_TOKENS:
        return None
    if isinstance(size, int) and not isinstance(size, bool) and size > 0 and used > 2 * size:
        return None
    return used


TurnEnd = Callable[[str, bool], None]
Opened = Callable[[str, str, Any, bool], None]
Quiet = Callable[[str], Awaitable[None]]


class ThreadModel(Component):
    frames = Frames.ALL  # usage, mode and tool calls come as notifications

    def __init__(self) -> None:
        self.threads: dict[str, ThreadState] = {}
        # The agent's ``agentCapabilities`` (None until it answered the client's ``initialize``).
        self.capabilities: dict[str, Any] | None = None
        self.agent_info: Any = None
        # The client's ``initialize`` and ``authenticate`` params, for a new agent process.
        self.initialize: Any = None
        self.authenticate: Any = None
        # The client declared ACP's ``session.compaction`` capability (in ``initialize``): it
        # shows compactions itself, and the swap notice is one. ``session.notices``: it shows
        # live notices that are not history, and the swap notice is one of those.
        self.client_compaction = False
        self.client_notices = False
        self.on_turn_end: list[TurnEnd] = []
        self.on_opened: list[Opened] = []
        self.on_open_failed: list[Callable[[str, Any], None]] = []  # (method, the client's key)
        self.on_quiet: list[Quiet] = []
        self.on_agent_info: list[Callable[[Any], None]] = []
        self._asked: dict[Any, tuple[str, dict[str, Any]]] = {}  # client requests in flight
        self.moves = MoveLocks()  # one move of a thread at a time
        self.marks: dict[str, dict[str, Mark]] = {}  # thread -> name -> mark set in this process

    def mark(self, thread_id: str, mark: Mark) -> None:
        """A mark set in this process, until the store has it (and after: the later wins)."""
        self.marks.setdefault(thread_id, {})[mark.name] = mark

    def marks_of(self, thread_id: str) -> dict[str, Mark]:
        return dict(self.marks.get(thread_id, {}))

    def state(self, thread_id: str) -> ThreadState:
        """The thread's state, made if liminal had not seen it yet."""
        state = self.threads.get(thread_id)
        if state is None:
            state = self.threads[thread_id] = ThreadState(thread_id)
        return state

    async def quiet(self, thread_id: str) -> None:
        """The swap task is done with a turn end of ``thread_id``: ``on_quiet``, each in turn.
        Must not raise."""
        for subscriber in self.on_quiet:
            try:
                await subscriber(thread_id)
            except Exception:
                logger.exception("a thread model subscriber failed", thread=thread_id)

    def _tell(self, subscribers: list[Any], *args: Any) -> None:
        for subscriber in subscribers:
            try:
                subscriber(*args)
            except Exception:  # one subscriber's bug is not the others' (nor the model's)
                logger.exception("a thread model subscriber failed")

    def request_hooks(self) -> list[tuple[tuple[str, ...], RequestHook]]:
        # The agent is asked for the ACP version liminal speaks (``liminal.kernel.version``);
        # what ``_request`` records of the client's ``initialize``, for a new agent process, is
        # that request too.
        return [(("initialize",), asked_for_spoken)]

    # ------------------------------------------------------------ observation

    def offer(self, event: FrameEvent) -> None:
        # Nearly every frame is a streamed chunk the router recognised from its bytes: decided
        # from the kind's place in the line, before anything else (searching each chunk for
        # the kinds read here cost more than all the rest of this component).
        if isinstance(event, LazyFrameEvent) and event.update_kind_in(_WATCHED) is False:
            return
        if event.kind is Kind.NOTIFICATION:
            if event.direction is Direction.AGENT_TO_CLIENT:
                self._update(event)
            elif event.direction is Direction.LIMINAL_NOTE and event.method == RESTORED and event.thread_id:
                # The client's load of a thread whose file was gone, which liminal answered by
                # opening the session itself (``liminal.kernel.restore``): the client's open as
                # far as anyone is concerned (the recycle counts the thread live from here).
                self._tell(self.on_opened, event.thread_id, "session/load", None, False)
            return
        message = event.message
        if message is None:
            return
        if event.direction is Direction.CLIENT_TO_AGENT:
            if event.kind is Kind.REQUEST:
                params = message.get("params")
                if isinstance(params, dict):
                    self._request(event, params)
            return
        if event.kind is not Kind.RESPONSE:
            return
        if event.direction is Direction.AGENT_TO_LIMINAL:
            # A move opened a thread's next session (``liminal.kernel.mover``).
            if "result" in message and event.method in ("session/resume", "session/load"):
                self._tell(self.on_opened, event.thread_id or "", event.method, None, True)
            return
        if event.direction is Direction.AGENT_TO_CLIENT:
            self._answer(event, message)

    def offer_run(self, run: FrameRun) -> None:
        """The router's run of streamed lines of one kind (``liminal.acp.taps.RunSubscriber``):
        nothing to read in most (chunks), else each line as ``offer`` would."""
        if run.update_kind_in(_WATCHED):
            for event in run.events():
                self.offer(event)

    def _update(self, event: FrameEvent) -> None:
        raw = event.raw
        if b'"tool_call' in raw:
            self._tool_frame(event.thread_id, raw)
        if b'"usage_update"' not in raw and b'"current_mode_update"' not in raw:
            return
        message = event.message
        if message is None or event.method != "session/update" or not event.thread_id:
            return
        update = (message.get("params") or {}).get("update") or {}
        kind = update.get("sessionUpdate")
        state = self.threads.get(event.thread_id)
        if state is None:
            return
        if kind == "usage_update":
            used = context_reading(update)
            if used is not None:
                state.context_tokens = used
            size = update.get("size")
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                state.context_window = size
            elif "used" in update:
                logger.warning("a context size no window holds; ignored", thread=event.thread_id,
                               used=str(update.get("used"))[:40], size=str(update.get("size"))[:40])
        elif kind == "current_mode_update" and isinstance(update.get("currentModeId"), str):
            state.mode_id = update["currentModeId"]

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
                state.called()
            state.results_since_call = True

    def _request(self, event: FrameEvent, params: dict[str, Any]) -> None:
        method = event.method or ""
        if method == "initialize":
            caps = params.get("clientCapabilities")
            session = caps.get("session") if isinstance(caps, dict) else None
            declared = session if isinstance(session, dict) else {}
            self.client_compaction = isinstance(declared.get("compaction"), dict)
            self.client_notices = isinstance(declared.get("notices"), dict)
        if method in _REMEMBERED:
            # Its answer names the thread (new, fork), or says the agent took the setting (a
            # mode or option it refused must not reach the next session).
            self._asked[jsonrpc.id_key(event.rpc_id)] = (method, params)
        thread = params.get("sessionId")
        if not isinstance(thread, str):
            return
        if method in ("session/load", "session/resume"):
            state = self.state(thread)
            state.cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else state.cwd
            state.mcp_servers = list(params.get("mcpServers") or [])
        elif method == "session/prompt" and thread in self.threads:
            blocks = params.get("prompt")
            texts = [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"] \
                if isinstance(blocks, list) else []
            text = "\n".join(t for t in texts if isinstance(t, str))
            # A slash command reaches the file as the CLI rewrites it: each harness knows how
            # (``turn_settled``), and a turn end before the command's records are on disk is
            # not its end (a swap then would leave the CLI's own /compact behind).
            state = self.threads[thread]
            state.last_prompt = text or None
            state.called()
            state.results_since_call = False
            state.idle_since = None

    def _answer(self, event: FrameEvent, message: dict[str, Any]) -> None:
        key = jsonrpc.id_key(event.rpc_id) if event.rpc_id is not None else None
        method, params = self._asked.pop(key, ("", {})) if key is not None else ("", {})
        if event.method == "session/prompt":
            if event.thread_id:
                ended = isinstance(message.get("result"), dict) and "error" not in message
                state = self.threads.get(event.thread_id)
                if ended and state is not None:
                    state.idle_since = faults.monotonic()
                self._tell(self.on_turn_end, event.thread_id, ended)
            return
        if "result" not in message or "error" in message:
            if method in OPENS:
                self._tell(self.on_open_failed, method, key)
            return
        result = message.get("result")
        if method in ("session/set_mode", "session/set_config_option"):
            self._setting_taken(method, params)
            return
        if method == "initialize":
            self.initialize = params
            caps = result.get("agentCapabilities") if isinstance(result, dict) else None
            self.capabilities = caps if isinstance(caps, dict) else {}
            if isinstance(result, dict):
                self.agent_info = result.get("agentInfo")
                self._tell(self.on_agent_info, self.agent_info)
            return
        if method == "authenticate":
            self.authenticate = params
            return
        if method not in OPENS or not event.thread_id:
            return
        if method in ("session/new", "session/fork") and isinstance(result, dict):
            state = self.state(event.thread_id)
            state.new = method == "session/new"
            state.cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else state.cwd
            state.mcp_servers = list(params.get("mcpServers") or [])
            modes = result.get("modes")
            if isinstance(modes, dict) and isinstance(modes.get("currentModeId"), str):
                state.mode_id = modes["currentModeId"]
        self._tell(self.on_opened, event.thread_id, method, key, False)

    def _setting_taken(self, method: str, params: dict[str, Any]) -> None:
        """The agent accepted the client's mode or config option for a thread: re-applied to
        every session the thread moves to from now on."""
        state = self.threads.get(params.get("sessionId"))  # type: ignore[arg-type]
        if state is None:
            return
        if method == "session/set_mode" and isinstance(params.get("modeId"), str):
            state.mode_id = params["modeId"]
        elif method == "session/set_config_option" and isinstance(params.get("configId"), str):
            state.config_options[params["configId"]] = params.get("value")
