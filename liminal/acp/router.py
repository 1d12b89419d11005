"""The router: liminal's protocol object. Bytes in, lines and events out; no I/O.

Everything that decides where a frame goes lives in this file. The rules:

1. **Forward untouched.** A line reaches the other side with exactly the bytes it arrived with,
   unless one of the rules below changes it. The router reads a parsed copy; it never
   re-serialises what it forwards.
2. **Two kinds of session id.** The client knows a *thread id*; the agent knows the *backing id*
   of the session that currently carries the thread. They start equal (nothing is stored for an
   identity pair). Once ``bind`` makes them differ, ``sessionId`` members are rewritten at the
   byte level: thread -> backing towards the agent, backing -> thread towards the client, in
   every frame that carries one (params of requests and notifications in both directions, and
   results such as ``session/new``, ``session/fork`` and ``session/list``).
3. **liminal's own requests** carry string ids ``liminal-<random per router>-N``. Their
   responses are consumed here and never reach the client; a client id that looks alike is
   the client's.
4. **Captured sessions.** While a backing id is captured (a swap loading a session whose replay
   the client must not see), the agent's notifications for it are not forwarded; they reach the
   taps as ``AGENT_TO_LIMINAL``.
5. **Held threads.** While a thread is held, every request and notification the client sends
   about it, or about no session at all, waits here, in order and bounded; ``release`` forwards
   them, rewritten for the thread's backing id at that moment (past ``max_held_per_thread``
   frames or ``max_held_bytes``, they are released at once). Responses and other threads'
   frames are never held. A ``session/cancel`` for a held thread answers its held
   prompts as cancelled (they never reached the agent); anything else held stays queued.
6. **Bad input.** A line that is not a JSON-RPC object is forwarded unchanged and reported. A
   line over the cap is dropped; if it was a request with a recoverable id, its sender gets an
   error, and if it was the agent's answer to a client request, the client gets an error.
7. **The agent gone.** Every request the client is still waiting on gets an error.
8. **Loading a moved thread.** With ``replay_from_store`` on, a client's ``session/load`` of a
   thread whose backing id differs from it (liminal moved it) captures the backing id until the
   agent answers: the agent's replay is the *compressed* history, so the client must not see it.
   Those lines are kept. A successful answer is parked and reported in ``Output.replays``;
   ``finish_replay`` then sends the client the history it is given (``session/update``
   notifications under the thread id), the agent's replayed notifications that are not history
   (commands, mode, usage), then the parked answer. Given no history, it sends the agent's own
   replay instead, rewritten to the thread id. An error answer is forwarded at once, and the
   captured lines dropped. Notifications after the answer are not held back. A load that waited
   in a hold gets the same treatment when it is released.

Every line, whichever way it goes and whether or not it is forwarded, becomes a ``FrameEvent``
for the taps (``Output.events``) when ``tapping`` is on.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from liminal.acp import jsonrpc
from liminal.acp.events import (
    UPDATE_KIND_AT,
    UPDATE_PREFIX,
    Direction,
    FrameEvent,
    Kind,
    kind_markers,
    make_event,
    make_lazy_event,
)
from liminal.acp.framing import LineFramer, Oversized

OWN_ID_PREFIX = "liminal-"
_UPDATE_PREFIX_LEN = len(UPDATE_PREFIX)
_CREATES_SESSION = frozenset({"session/new", "session/fork"})
_OPENS = frozenset({"session/load", "session/resume", "session/fork"})  # see ``Router.on_open``
_DIRECT = {True: Direction.CLIENT_TO_AGENT, False: Direction.AGENT_TO_CLIENT}


@dataclass(slots=True)
class Output:
    """What the shell must do after feeding the router: write these lines, offer these events."""

    to_client: list[bytes] = field(default_factory=list)  # lines without "\n"
    to_agent: list[bytes] = field(default_factory=list)
    events: list[FrameEvent] = field(default_factory=list)
    # Answers to liminal's own requests: (rpc id, the parsed response).
    own_responses: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # Human-readable reports of bad input, for the shell to log.
    problems: list[str] = field(default_factory=list)
    # Loads of moved threads the agent has answered, waiting for ``Router.finish_replay``.
    replays: list[ReplayRequest] = field(default_factory=list)
    # Client requests a hook kept for liminal to answer (``Router.answer_local``).
    local: list[LocalRequest] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    """The client loaded a moved thread and the agent has answered: its history is wanted."""

    token: int  # for ``Router.finish_replay``
    thread_id: str
    backing_id: str
    # The agent's own replay as it sent it (backing ids), for whoever wants to compare.
    agent_lines: tuple[bytes, ...]


# What a history replay is made of; anything else an agent sends during a load (available
# commands, mode, config options, usage, title) describes the session now and is passed on.
HISTORY_UPDATES = frozenset({"user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
                             "tool_call", "tool_call_update", "plan"})


@dataclass(slots=True)
class _Replay:
    token: int
    key: Any  # the client's load request, as ``jsonrpc.id_key``
    thread: str
    backing: str
    captured: list[bytes] = field(default_factory=list)
    # The agent's answer, once it came: the line for the client, and what the taps get.
    answer: bytes = b""
    raw: bytes = b""
    message: dict[str, Any] | None = None
    rpc_id: Any = None



@dataclass(frozen=True, slots=True)
class LocalRequest:
    """A client request a component answers itself (``Router.answer_local``); the agent never
    sees it."""

    key: Any  # ``jsonrpc.id_key`` of its id: what ``answer_local`` takes
    method: str
    thread_id: str | None
    message: dict[str, Any]  # as the request hooks left it (``RequestHook``)


class Local:
    """A request hook's verdict: liminal answers this request (see ``LocalRequest``)."""


LOCAL = Local()

# A request hook sees each client request whose method it registered for, before the router
# acts on it: it returns None (forward as sent), ``LOCAL``, or a new message to forward instead
# (``mcpServers`` amended, say). Hooks are called inside the flush that read the request, in the
# order added, each with the message as the ones before it left it; a ``LOCAL`` from any keeps
# the request for liminal, amended (a load liminal answers still carries liminal's MCP server).
RequestHook = Callable[[str, dict[str, Any], "str | None"], "Local | dict[str, Any] | None"]
# An update hook sees each ``session/update`` of its kind the agent sends the client, with the
# thread it is for; it returns None (forward as sent) or the update to forward instead (liminal's
# commands added to ``available_commands_update``). The taps get what the agent sent.
UpdateHook = Callable[[str, dict[str, Any]], "dict[str, Any] | None"]


@dataclass(slots=True)
class _Pending:
    method: str
    thread_id: str | None
    id_json: bytes | None  # exact id bytes, kept only when the parsed id cannot be trusted


@dataclass(slots=True)
class _Held:
    line: bytes
    message: dict[str, Any]  # as the request hooks left it (``RequestHook``)


class Router:
    def __init__(
        self,
        *,
        max_frame_bytes: int,
        connection_id: str = "",
        tapping: bool = True,
        max_held_per_thread: int = 64,
        max_held_bytes: int | None = None,
        replay_from_store: bool = False,
    ) -> None:
        self.connection_id = connection_id
        # Rule 8: someone (``liminal.kernel.replay``) answers ``Output.replays``.
        self.replay_from_store = replay_from_store
        self.tapping = tapping
        self.max_held_per_thread = max_held_per_thread
        # Held frames are bounded in bytes too (one message of the longest size may wait).
        self.max_held_bytes = max_frame_bytes if max_held_bytes is None else max_held_bytes
        # When the agent last wrote anything (the ``now`` it was fed with): a caller that waits
        # for an agent to finish can tell a busy one from one that has gone quiet.
        self.agent_heard = 0.0
        self._client_framer = LineFramer(max_frame_bytes)
        self._agent_framer = LineFramer(max_frame_bytes)
        self._out = Output()
        self._backing_of: dict[str, str] = {}  # thread -> backing, only where they differ
        self._thread_of: dict[str, str] = {}  # backing -> thread, only where they differ
        self._client_pending: dict[Any, _Pending] = {}  # client requests the agent owes
        self._agent_pending: dict[Any, str] = {}  # agent requests the client owes -> method
        self._agent_pending_threads: dict[Any, str | None] = {}  # ... -> the thread they concern
        self._own_pending: dict[str, _Pending] = {}
        self._own_ids = itertools.count(1)
        # A client may use ids like ours (another liminal in front of this one counts its own
        # from 1 too): a random part per router keeps an agent's answer from reaching the wrong
        # asker whichever request came first.
        self._own_prefix = f"{OWN_ID_PREFIX}{secrets.token_hex(6)}-"
        self._captured: set[str] = set()
        self._held: dict[str, deque[_Held]] = {}
        # Notifications of liminal's own waiting for their thread's next turn (``notify_in_next_turn``).
        self._turn_notices: dict[str, list[tuple[str, Any]]] = {}
        self._now = 0.0  # the time of the last bytes fed: for what a release sends
        self._loading: dict[Any, _Replay] = {}  # client request key -> its replay, until answered
        self._loading_backing: dict[str, deque[_Replay]] = {}  # backing -> its loads, in order
        self._parked: dict[int, _Replay] = {}  # answered, waiting for ``finish_replay``
        self._replay_tokens = itertools.count(1)
        self.agent_alive = True
        self._hooks: dict[str, list[RequestHook]] = {}  # method -> hooks, in the order added
        self._update_hooks: dict[str, list[UpdateHook]] = {}  # update kind -> hooks
        self._hooked_kinds: tuple[bytes, ...] = ()  # their ``kind_markers``, for canonical lines
        self._local_pending: dict[Any, _Pending] = {}  # requests kept for ``answer_local``
        # Called with the thread of a client's session/load, resume or fork before it is routed:
        # a component may bind the thread first (``liminal.kernel.swap``: another liminal on
        # the home moved it since this one read the swap journal).
        self.on_open: Callable[[str], None] | None = None

    # ----------------------------------------------------------------- feeding

    def receive_from_client(self, data: bytes, now: float) -> None:
        self._now = now
        for line in self._client_framer.feed(data):
            self._client_line(line, now)

    def receive_from_agent(self, data: bytes, now: float) -> None:
        self._now = now
        self.agent_heard = now
        for line in self._agent_framer.feed(data):
            self._agent_line(line, now)

    def client_eof(self, now: float) -> None:
        for line in self._client_framer.close():
            self._client_line(line, now)

    def agent_eof(self, now: float) -> None:
        for line in self._agent_framer.close():
            self._agent_line(line, now)

    def take(self) -> Output:
        out, self._out = self._out, Output()
        return out

    # ----------------------------------------------------------- the thread map

    def backing_of(self, thread_id: str) -> str:
        return self._backing_of.get(thread_id, thread_id)

    def thread_of(self, backing_id: str) -> str:
        return self._thread_of.get(backing_id, backing_id)

    def bind(self, thread_id: str, backing_id: str) -> None:
        """Make ``backing_id`` the session that carries ``thread_id`` from now on.

        Earlier backing ids of the thread keep pointing at it, so late frames of a session the
        thread has left still reach the client under the thread's id.
        """
        if backing_id == thread_id:
            self._backing_of.pop(thread_id, None)
            self._thread_of.pop(thread_id, None)
        else:
            self._backing_of[thread_id] = backing_id
            self._thread_of[backing_id] = thread_id

    def adopt(self, backing_id: str, thread_id: str) -> None:
        """``backing_id`` carried ``thread_id`` before (the swap journal remembers it across
        restarts): frames and listings that name it reach the client under the thread's id. The
        thread's current backing id is unchanged."""
        if backing_id != thread_id:
            self._thread_of.setdefault(backing_id, thread_id)

    # ------------------------------------------------------ hooks and local answers

    def add_request_hook(self, methods: tuple[str, ...], hook: RequestHook) -> None:
        """Let ``hook`` see every client request of these methods (see ``RequestHook``)."""
        for method in methods:
            self._hooks.setdefault(method, []).append(hook)

    def add_update_hook(self, kinds: tuple[str, ...], hook: UpdateHook) -> None:
        """Let ``hook`` amend every ``session/update`` of these kinds (see ``UpdateHook``)."""
        for kind in kinds:
            self._update_hooks.setdefault(kind, []).append(hook)
        self._hooked_kinds = kind_markers(*self._update_hooks)

    def _amended(self, line: bytes, message: dict[str, Any], thread: str) -> bytes:
        params = message.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        for hook in self._update_hooks.get(kind, ()) if isinstance(kind, str) else ():
            try:
                new = hook(thread, update)  # type: ignore[arg-type]
            except Exception as exc:  # a component's fault never stops a frame
                self._out.problems.append(f"update hook failed ({type(exc).__name__}: {exc}); "
                                          "the agent's update passed as sent")
                return line
            if new is not None:
                assert isinstance(params, dict)
                return orjson.dumps({**message, "params": {**params, "update": new}})
        return line

    def answer_local(self, key: Any, result: Any = None, *, error: tuple[int, str] | None = None,
                     now: float | None = None) -> bool:
        """Answer a request a hook kept (``Output.local``), once; False if it was answered."""
        pending = self._local_pending.pop(key, None)
        if pending is None:
            return False
        when = self._now if now is None else now
        id_json = pending.id_json if pending.id_json is not None else jsonrpc.encode_id(key)
        if error is not None:
            self._error_to_client(id_json, error[0], error[1], when, pending.method, pending.thread_id)
        else:
            self._result_to_client(id_json, orjson.dumps(result if result is not None else {}), when,
                                   pending.method, pending.thread_id)
        return True

    def local_pending(self) -> list[Any]:
        return list(self._local_pending)

    def _hooked(self, method: str, message: dict[str, Any], thread: str | None
                ) -> tuple[Local | dict[str, Any] | None, dict[str, Any]]:
        """The hooks' verdict (see ``RequestHook``) and the message as they amended it."""
        local = False
        current = message
        for hook in self._hooks.get(method, ()):
            try:
                verdict = hook(method, current, thread)
            except Exception as exc:  # a component's fault never stops a request
                self._out.problems.append(f"request hook failed ({type(exc).__name__}: {exc}); "
                                          f"{method} goes on without it")
                continue
            if verdict is LOCAL:
                local = True
            elif isinstance(verdict, dict):
                current = verdict
        if local:
            return LOCAL, current
        return (current if current is not message else None), current

    # --------------------------------------------------------- own requests

    def send_request(self, method: str, params: Any, now: float, *, thread_id: str | None = None) -> str:
        """Queue a request of liminal's own to the agent; its answer comes in ``own_responses``."""
        rpc_id = f"{self._own_prefix}{next(self._own_ids)}"
        line = jsonrpc.request_frame(rpc_id, method, params)
        self._own_pending[rpc_id] = _Pending(method, thread_id, None)
        self._out.to_agent.append(line)
        backing = params.get("sessionId") if isinstance(params, dict) else None
        if thread_id is None and isinstance(backing, str):
            # A session a thread was on (the close of the one a move left) is the thread's.
            thread_id = self.thread_of(backing)
        self._tap(Direction.LIMINAL_TO_AGENT, Kind.REQUEST, now, line, None, thread_id, backing, method, rpc_id)
        return rpc_id

    def notify_client(self, method: str, params: Any, now: float) -> None:
        """A notification of liminal's own to the client (``params`` already in thread ids)."""
        line = jsonrpc.notification_frame(method, params)
        self._out.to_client.append(line)
        thread = params.get("sessionId") if isinstance(params, dict) else None
        self._tap(Direction.LIMINAL_TO_CLIENT, Kind.NOTIFICATION, now, line, None,
                  thread, self.backing_of(thread) if thread else None, method, None)

    def notify_in_next_turn(self, thread_id: str, method: str, params: Any) -> None:
        """A notification of liminal's own for the thread's next turn: sent to the client right
        after the thread's next ``session/prompt`` goes to the agent, so that it arrives inside
        that turn. Sent between turns, after a prompt was answered, a headless client (one that
        prints a turn's updates) glued it to the previous answer."""
        self._turn_notices.setdefault(thread_id, []).append((method, params))

    def _turn_started(self, thread_id: str, now: float) -> None:
        for method, params in self._turn_notices.pop(thread_id, ()):
            self.notify_client(method, params, now)

    def note(self, method: str, params: dict[str, Any], now: float, *, thread_id: str) -> None:
        """Record what liminal did (``liminal/swap``) as a notification frame that only the taps
        see: the store keeps it with the conversation's frames, in order."""
        line = jsonrpc.notification_frame(method, params)
        self._tap(Direction.LIMINAL_NOTE, Kind.NOTIFICATION, now, line, {"jsonrpc": "2.0", "method": method,
                  "params": params}, thread_id, self.backing_of(thread_id), method, None)

    def cancel_own(self, rpc_id: str) -> None:
        """Forget an own request (its answer, if one ever comes, is then dropped quietly)."""
        self._own_pending.pop(rpc_id, None)

    # ------------------------------------------------------- captures and holds

    def capture(self, backing_id: str) -> None:
        self._captured.add(backing_id)

    def uncapture(self, backing_id: str) -> None:
        self._captured.discard(backing_id)

    def hold(self, thread_id: str) -> None:
        self._held.setdefault(thread_id, deque())

    def is_held(self, thread_id: str) -> bool:
        return thread_id in self._held

    def held_threads(self) -> list[str]:
        return list(self._held)

    def held_count(self, thread_id: str) -> int:
        return len(self._held.get(thread_id, ()))

    def release(self, thread_id: str) -> int:
        """Stop holding the thread and forward what waited, for its backing id as of now."""
        waiting = self._held.pop(thread_id, None)
        if not waiting:
            return 0
        backing = self.backing_of(thread_id)
        for held in waiting:
            line = held.line if backing == thread_id else _rewrite(held.line, thread_id, backing)
            if held.message.get("method") == "session/load" and "id" in held.message:
                self._maybe_replay(held.message["id"], thread_id, backing)
            self._out.to_agent.append(line)
            if self._turn_notices and held.message.get("method") == "session/prompt":
                self._turn_started(thread_id, self._now)
        return len(waiting)

    def prompt_in_flight(self, thread_id: str) -> bool:
        """A client prompt for the thread is still waiting for the agent's answer."""
        return any(
            p.method == "session/prompt" and p.thread_id == thread_id
            for p in self._client_pending.values()
        )

    def agent_idle(self) -> bool:
        """Nothing is under way at the agent: it owes no answer to the client (held requests
        have not reached it) nor to liminal, the client owes it none, no session is captured or
        being loaded, and its output stands at a line boundary. Only then can its sessions be
        handed to another process of the agent (``liminal.kernel.recycle``)."""
        held_requests = sum(1 for queue in self._held.values() for held in queue
                            if "id" in held.message and "method" in held.message)
        return (self.agent_alive and len(self._client_pending) == held_requests
                and not self._agent_pending and not self._own_pending and not self._captured
                and not self._loading and not self._parked and self._agent_framer.buffered == 0)

    def pending_client_ids(self) -> set[Any]:
        """The ids (``jsonrpc.id_key``) of the client's requests the agent has not answered."""
        return set(self._client_pending) | set(self._local_pending)

    def owed_to_client(self) -> list[str]:
        """The methods of the client's requests that nothing has answered yet, oldest first."""
        return [p.method for p in self._client_pending.values()] + [p.method for p in self._local_pending.values()]

    def open_agent_requests(self) -> list[tuple[Any, str]]:
        """The agent's requests the client has not answered yet: (id, method), oldest first."""
        return list(self._agent_pending.items())

    def agent_request_open(self, thread_id: str) -> bool:
        """The agent asked the client something about the thread that is still unanswered."""
        return any(t == thread_id for t in self._agent_pending_threads.values())

    # ------------------------------------------------------- loads of moved threads

    def _maybe_replay(self, rpc_id: Any, thread: str, backing: str) -> None:
        """Rule 8: a client's load of ``thread``, on its way to ``backing``."""
        if not self.replay_from_store or backing == thread:
            return
        replay = _Replay(next(self._replay_tokens), jsonrpc.id_key(rpc_id), thread, backing)
        self._loading[replay.key] = replay
        self._loading_backing.setdefault(backing, deque()).append(replay)
        self._captured.add(backing)

    def _keep_replayed(self, backing: str, line: bytes) -> None:
        loads = self._loading_backing.get(backing)
        if loads:  # an agent answers one load at a time: the replay is the oldest one's
            loads[0].captured.append(line)

    def _end_loading(self, replay: _Replay) -> None:
        self._loading.pop(replay.key, None)
        loads = self._loading_backing.get(replay.backing)
        if loads is not None:
            if replay in loads:
                loads.remove(replay)
            if not loads:
                del self._loading_backing[replay.backing]
                self._captured.discard(replay.backing)

    @property
    def replays_waiting(self) -> int:
        """Loads of moved threads that the agent has answered and ``finish_replay`` has not."""
        return len(self._parked)

    def finish_replay(self, token: int, history: list[dict[str, Any]] | None, now: float) -> bool:
        """Answer a parked load (``Output.replays``): ``history`` (``session/update`` updates,
        oldest first) goes to the client as the thread's, then the agent's replayed lines that
        are not history, then the agent's answer. ``None``: the agent's own replay instead.
        False if the token is unknown (already finished)."""
        replay = self._parked.pop(token, None)
        if replay is None:
            return False
        thread, backing = replay.thread, replay.backing
        if history is not None:
            for update in history:
                self.notify_client("session/update", {"sessionId": thread, "update": update}, now)
        for line in replay.captured:
            if history is not None and _update_kind(line) in HISTORY_UPDATES:
                continue
            out_line = _rewrite(line, backing, thread)
            self._out.to_client.append(out_line)
            self._tap(Direction.LIMINAL_TO_CLIENT, Kind.NOTIFICATION, now, out_line, None, thread, backing,
                      "session/update", None)
        self._out.to_client.append(replay.answer)
        self._tap(Direction.AGENT_TO_CLIENT, Kind.RESPONSE, now, replay.raw, replay.message, thread, backing,
                  "session/load", replay.rpc_id)
        return True

    # -------------------------------------------------------------- the agent gone

    def agent_gone(self, now: float, reason: str) -> None:
        """Answer every client request still waiting on the agent with an error."""
        self.agent_alive = False
        for key, pending in list(self._client_pending.items()):
            self._error_to_client(pending.id_json or jsonrpc.encode_id(key), jsonrpc.INTERNAL_ERROR,
                                  f"the agent exited before answering ({reason})", now, pending.method)
        self._client_pending.clear()
        self._held.clear()  # held prompts are pending client requests too: answered above
        for replay in list(self._loading.values()):  # answered above
            self._end_loading(replay)
        for token in list(self._parked):  # the agent did answer these: let them through
            self.finish_replay(token, None, now)

    def agent_restarted(self) -> None:
        """A new process of the agent stands in for the one that died (``agent_gone`` answered
        what the old one owed): what the old one owed or was asked is forgotten, threads and
        their backing sessions are kept."""
        self.agent_alive = True
        self._agent_framer = LineFramer(self._client_framer.max_size)
        self._agent_pending.clear()
        self._agent_pending_threads.clear()
        self._own_pending.clear()
        self._captured.clear()
        self._loading.clear()
        self._loading_backing.clear()

    @property
    def pending_client_requests(self) -> int:
        return len(self._client_pending)

    # ------------------------------------------------------------ client -> agent

    def _client_line(self, line: bytes | Oversized, now: float) -> None:
        if isinstance(line, Oversized):
            self._client_oversized(line, now)
            return
        message = jsonrpc.parse(line)
        kind = jsonrpc.classify(message)
        if kind is Kind.INVALID or message is None:
            if line.strip():
                self._out.problems.append(f"client sent a line that is not JSON-RPC: {line[:200]!r}")
            self._out.to_agent.append(line)
            self._tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, None, None, None, None)
            return
        method: str | None = message.get("method")
        rpc_id = message.get("id")
        thread = _session_of(message)
        if thread is not None and self.on_open is not None and method in _OPENS and kind is Kind.REQUEST:
            try:
                self.on_open(thread)
            except Exception as exc:  # the request goes on as the router knows the thread
                self._out.problems.append(f"binding {thread} before its {method} failed: {exc!r}")
        backing = self._backing_of.get(thread, thread) if thread is not None else None
        out_line = line
        if kind is Kind.RESPONSE:
            method = self._agent_pending.pop(jsonrpc.id_key(rpc_id), None)
            thread = self._agent_pending_threads.pop(jsonrpc.id_key(rpc_id), None)
            backing = self.backing_of(thread) if thread else None
        else:
            if thread is not None and backing != thread:
                assert backing is not None
                out_line = _rewrite(line, thread, backing)
            if kind is Kind.REQUEST:
                key = jsonrpc.id_key(rpc_id)
                # A string or an integer id is written back exactly from its parsed value; any
                # other (a float that may be a rounded big integer, an object or array id that
                # JSON-RPC does not allow but a client sent) keeps its bytes for the answer.
                exact = isinstance(rpc_id, (str, int))
                pending = _Pending(method or "", thread, None if exact else jsonrpc.encode_id(rpc_id, line))
                verdict, hooked = self._hooked(method or "", message, thread) if method in self._hooks else (None, message)
                if verdict is LOCAL:
                    self._local_pending[key] = pending
                    self._out.local.append(LocalRequest(key, method or "", thread, hooked))
                    self._tap(Direction.CLIENT_TO_LIMINAL, kind, now, line, message, thread, backing,
                              method, rpc_id)
                    return
                amended = _encoded(verdict, message, line) if isinstance(verdict, dict) else None
                if amended is not None:
                    message, line = verdict, amended  # type: ignore[assignment]
                    out_line = line if thread is None or backing == thread else _rewrite(line, thread, backing or thread)
                elif isinstance(verdict, dict):
                    self._out.problems.append(f"a request hook's {method} cannot be encoded; forwarded as sent")
                self._client_pending[key] = pending
            # While a thread is held, what the client sends about it, and what it sends about
            # no session at all, waits in the thread's queue: the agent sees the client's order
            # (a set_mode sent after a prompt still arrives after it). Other threads pass.
            holder = thread if thread is not None else next(iter(self._held), None)
            if holder is not None and holder in self._held:
                if method == "session/cancel":
                    self._cancel_held(holder, now)
                else:
                    queue = self._held[holder]
                    queue.append(_Held(line, message))
                    if (len(queue) > self.max_held_per_thread
                            or sum(len(h.line) for h in queue) > self.max_held_bytes):
                        self._out.problems.append(f"too many frames held for {holder}; releasing them")
                        self.release(holder)
                    self._tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, thread, backing, method, rpc_id)
                    return
            if method == "session/load" and kind is Kind.REQUEST and thread is not None:
                assert backing is not None
                self._maybe_replay(rpc_id, thread, backing)
        self._out.to_agent.append(out_line)
        self._tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, thread, backing, method, rpc_id)
        if self._turn_notices and method == "session/prompt" and thread is not None:
            self._turn_started(thread, now)

    def _cancel_held(self, thread: str, now: float) -> None:
        """A cancel for a held thread: its held prompts never reached the agent; answer them."""
        queue = self._held[thread]
        for held in [h for h in queue if h.message.get("method") == "session/prompt"]:
            queue.remove(held)
            self._client_pending.pop(jsonrpc.id_key(held.message.get("id")), None)
            self._result_to_client(jsonrpc.encode_id(held.message.get("id"), held.line),
                                   b'{"stopReason":"cancelled"}', now, "session/prompt", thread)

    def _client_oversized(self, line: Oversized, now: float) -> None:
        found = jsonrpc.recover_top_level(line.head, line.tail)
        id_json = found.get("id")
        method = _text(found.get("method"))
        self._out.problems.append(
            f"client sent a {line.size}-byte line, over the {self._client_framer.max_size}-byte cap; dropped"
        )
        self._tap(Direction.CLIENT_TO_AGENT, Kind.OVERSIZED, now, line.head, None, None, None,
                  method, None, size=line.size)
        if id_json is not None and method is not None:
            self._error_to_client(id_json, jsonrpc.INVALID_REQUEST,
                                  f"request of {line.size} bytes exceeds liminal's limit of "
                                  f"{self._client_framer.max_size} bytes", now, method)

    # ------------------------------------------------------------ agent -> client

    def _agent_line(self, line: bytes | Oversized, now: float) -> None:
        if isinstance(line, Oversized):
            self._agent_oversized(line, now)
            return
        if line.startswith(UPDATE_PREFIX):
            # The hottest path: a streamed session/update in the canonical form all four pinned
            # adapters write. The session id is read from the bytes (it is the first member of
            # the top-level params, so there is no ambiguity) and the parse is left to whoever
            # asks for the event's message. A line that only looks canonical but is cut short is
            # still forwarded untouched, as any unparsable line is; its message reads as None.
            end = line.find(b'"', _UPDATE_PREFIX_LEN)
            raw_id = line[_UPDATE_PREFIX_LEN:end]
            # A hooked kind takes the parsed path, and so does an update that does not follow
            # the session id when there are hooks (its kind is not where the bytes can tell).
            if end > 0 and b"\\" not in raw_id and raw_id.isascii() and not (
                    self._hooked_kinds and (line.startswith(self._hooked_kinds, end)
                                            or not line.startswith(UPDATE_KIND_AT, end))):
                fast_backing = raw_id.decode()
                fast_thread = self._thread_of.get(fast_backing, fast_backing)
                direction = Direction.AGENT_TO_CLIENT
                if fast_backing in self._captured:
                    direction = Direction.AGENT_TO_LIMINAL  # a replay the client must not see
                    if self._loading_backing:
                        self._keep_replayed(fast_backing, line)
                else:
                    self._out.to_client.append(
                        line if fast_thread == fast_backing else _rewrite(line, fast_backing, fast_thread))
                if self.tapping:
                    self._out.events.append(make_lazy_event(
                        direction, Kind.NOTIFICATION, now, line, self.connection_id,
                        fast_thread, fast_backing, "session/update", len(line)))
                return
        message = jsonrpc.parse(line)
        # The hot path (every streamed chunk is a notification): ``jsonrpc.classify`` and
        # ``_session_of`` inlined, events made inline. Same rules: a string method and no id.
        method = message.get("method") if message is not None else None
        if method.__class__ is str and "id" not in message:  # type: ignore[operator]
            assert message is not None
            kind = Kind.NOTIFICATION
            params = message.get("params")
            backing = params.get("sessionId") if params.__class__ is dict else None
            if backing.__class__ is not str:
                backing = None
            if backing is None:
                self._out.to_client.append(line)
                if self.tapping:
                    self._out.events.append(make_event(
                        Direction.AGENT_TO_CLIENT, kind, now, line, message, self.connection_id,
                        None, None, method, None, len(line)))
                return
            thread = self._thread_of.get(backing, backing)
            if backing in self._captured:
                if self._loading_backing:
                    self._keep_replayed(backing, line)
                self._tap(Direction.AGENT_TO_LIMINAL, kind, now, line, message, thread, backing,
                          message["method"], None)
                return
            out_line = self._amended(line, message, thread) if self._update_hooks else line
            self._out.to_client.append(out_line if thread == backing else _rewrite(out_line, backing, thread))
            if self.tapping:
                self._out.events.append(make_event(
                    Direction.AGENT_TO_CLIENT, kind, now, line, message, self.connection_id,
                    thread, backing, method, None, len(line)))
            return
        kind = jsonrpc.classify(message)
        if kind is Kind.RESPONSE:
            assert message is not None
            self._agent_response(line, message, now)
            return
        if kind is Kind.REQUEST:
            assert message is not None
            rpc_id = message["id"]
            asked_backing = _session_of(message)
            asked_thread = self.thread_of(asked_backing) if asked_backing is not None else None
            key = jsonrpc.id_key(rpc_id)
            self._agent_pending[key] = message["method"]
            self._agent_pending_threads[key] = asked_thread
            out_line = line
            if asked_backing is not None and asked_thread != asked_backing:
                out_line = _rewrite(line, asked_backing, asked_thread or asked_backing)
            self._out.to_client.append(out_line)
            self._tap(Direction.AGENT_TO_CLIENT, kind, now, line, message, asked_thread, asked_backing,
                      message["method"], rpc_id)
            return
        if line.strip():
            self._out.problems.append(f"agent sent a line that is not JSON-RPC: {line[:200]!r}")
        self._out.to_client.append(line)
        self._tap(Direction.AGENT_TO_CLIENT, kind, now, line, message, None, None, None, None)

    def _agent_response(self, line: bytes, message: dict[str, Any], now: float) -> None:
        rpc_id = message["id"]
        key = jsonrpc.id_key(rpc_id)
        if isinstance(rpc_id, str) and rpc_id.startswith(OWN_ID_PREFIX):
            own = self._own_pending.pop(rpc_id, None)
            if own is not None:
                created = _result_session(message) if own.method in _CREATES_SESSION else None
                if created is not None and own.thread_id is not None:
                    # A session liminal opened for a thread (``/clear``): what the agent says of
                    # it from now on reaches the client under the thread's id, even before the
                    # component that asked binds the thread to it.
                    self.adopt(created, own.thread_id)
                self._out.own_responses.append((rpc_id, message))
                self._tap(Direction.AGENT_TO_LIMINAL, Kind.RESPONSE, now, line, message, own.thread_id,
                          _result_session(message) or (self.backing_of(own.thread_id) if own.thread_id else None),
                          own.method, rpc_id)
                return
        pending = self._client_pending.pop(key, None)
        replay = self._loading.get(key) if self._loading and pending is not None else None
        if replay is not None:
            self._end_loading(replay)
        method = pending.method if pending else None
        thread = pending.thread_id if pending else None
        backing = self.backing_of(thread) if thread else None
        out_line = line
        if method in _CREATES_SESSION:
            created = _result_session(message)
            if created is not None:
                backing = created
                thread = self._thread_of.get(created, created)
        if self._thread_of and b'"sessionId"' in line:
            out_line = _map_session_ids(line, self._thread_of)
            if method == "session/list":
                out_line = self._one_entry_per_thread(line, message, out_line)
        if replay is not None and "error" not in message:
            replay.answer, replay.raw, replay.message, replay.rpc_id = out_line, line, message, rpc_id
            self._parked[replay.token] = replay
            self._out.replays.append(ReplayRequest(replay.token, replay.thread, replay.backing,
                                                   tuple(replay.captured)))
            return  # tapped when it reaches the client, after the history
        self._out.to_client.append(out_line)
        self._tap(Direction.AGENT_TO_CLIENT, Kind.RESPONSE, now, line, message, thread, backing, method, rpc_id)

    def _agent_oversized(self, line: Oversized, now: float) -> None:
        found = jsonrpc.recover_top_level(line.head, line.tail)
        id_json = found.get("id")
        method = _text(found.get("method"))
        cap = self._agent_framer.max_size
        self._out.problems.append(f"agent sent a {line.size}-byte line, over the {cap}-byte cap; dropped")
        self._tap(Direction.AGENT_TO_CLIENT, Kind.OVERSIZED, now, line.head, None, None, None,
                  method, None, size=line.size)
        if id_json is not None and method is not None:
            error = jsonrpc.error_frame(id_json, jsonrpc.INVALID_REQUEST,
                                        f"request of {line.size} bytes exceeds liminal's limit of {cap} bytes")
            self._out.to_agent.append(error)
            self._tap(Direction.LIMINAL_TO_AGENT, Kind.RESPONSE, now, error, None, None, None, method, None)
        elif id_json is not None:
            try:
                key = jsonrpc.id_key(orjson.loads(id_json))
            except orjson.JSONDecodeError:
                key = None
            pending = self._client_pending.pop(key, None)
            if pending is not None and key in self._loading:
                self._end_loading(self._loading[key])
            if pending is not None:
                self._error_to_client(id_json, jsonrpc.INTERNAL_ERROR,
                                      f"the agent's answer of {line.size} bytes exceeds liminal's limit "
                                      f"of {cap} bytes", now, pending.method)

    def _one_entry_per_thread(self, line: bytes, message: dict[str, Any], rewritten: bytes) -> bytes:
        """A ``session/list`` result in which a thread appears once, under its own id.

        The agent lists every session file it has, and a thread that liminal moved has several:
        its original and each rewrite. Listed as they are, the user would see the thread once per
        swap. So the entries of one thread become one: the current backing session's (newest
        content and time) under the thread's id, with the original session's title when it has
        one (a rewrite's first prompt can be a summary). Only then is the frame re-encoded;
        a listing without such duplicates is forwarded as rewritten byte for byte.
        """
        result = message.get("result")
        sessions = result.get("sessions") if isinstance(result, dict) else None
        if not isinstance(sessions, list):
            return rewritten
        groups: dict[str, list[dict[str, Any]]] = {}
        order: list[dict[str, Any] | str] = []  # entries, or a thread id at its first entry
        for entry in sessions:
            backing = entry.get("sessionId") if isinstance(entry, dict) else None
            if not isinstance(backing, str):
                order.append(entry)
                continue
            thread = self._thread_of.get(backing, backing)
            if thread not in groups:
                groups[thread] = []
                order.append(thread)
            groups[thread].append(entry)
        if all(len(group) == 1 for group in groups.values()):
            return rewritten
        merged: list[Any] = []
        for item in order:
            if not isinstance(item, str):
                merged.append(item)
                continue
            group = groups[item]
            current = self.backing_of(item)
            chosen = next((e for e in group if e["sessionId"] == current), group[0])
            entry = dict(chosen, sessionId=item)
            original = next((e for e in group if e["sessionId"] == item), None)
            if original is not None and original.get("title"):
                entry["title"] = original["title"]
            merged.append(entry)
        assert isinstance(result, dict)
        try:
            result_json = orjson.dumps(dict(result, sessions=merged))
        except TypeError:  # a value orjson cannot write: better duplicates than a broken frame
            return rewritten
        id_json = jsonrpc.encode_id(message.get("id"), line)
        return b'{"jsonrpc":"2.0","id":' + id_json + b',"result":' + result_json + b"}"

    # ----------------------------------------------------------------- helpers

    def _error_to_client(self, id_json: bytes, code: int, text: str, now: float, method: str | None,
                         thread: str | None = None) -> None:
        line = jsonrpc.error_frame(id_json, code, text)
        self._out.to_client.append(line)
        self._tap(Direction.LIMINAL_TO_CLIENT, Kind.RESPONSE, now, line, None, thread,
                  self.backing_of(thread) if thread else None, method, None)

    def _result_to_client(self, id_json: bytes, result_json: bytes, now: float, method: str,
                          thread: str | None) -> None:
        line = b'{"jsonrpc":"2.0","id":' + id_json + b',"result":' + result_json + b"}"
        self._out.to_client.append(line)
        self._tap(Direction.LIMINAL_TO_CLIENT, Kind.RESPONSE, now, line, None, thread,
                  self.backing_of(thread) if thread else None, method, None)

    def _tap(
        self,
        direction: Direction,
        kind: Kind,
        now: float,
        raw: bytes,
        message: dict[str, Any] | None,
        thread: str | None,
        backing: str | None,
        method: str | None,
        rpc_id: Any,
        *,
        size: int | None = None,
    ) -> None:
        if self.tapping:
            self._out.events.append(make_event(
                direction, kind, now, raw, message, self.connection_id, thread, backing, method, rpc_id,
                len(raw) if size is None else size,
            ))


def _session_in(message: dict[str, Any], member: str) -> str | None:
    """``message[member].sessionId`` when it is a string (``params`` or ``result``)."""
    part = message.get(member)
    if isinstance(part, dict):
        session = part.get("sessionId")
        if isinstance(session, str):
            return session
    return None


def _session_of(message: dict[str, Any]) -> str | None:
    return _session_in(message, "params")


def _result_session(message: dict[str, Any]) -> str | None:
    return _session_in(message, "result")


def _update_kind(line: bytes) -> str | None:
    """``params.update.sessionUpdate`` of a notification line, if it has one."""
    message = jsonrpc.parse(line)
    params = message.get("params") if message is not None else None
    update = params.get("update") if isinstance(params, dict) else None
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    return kind if isinstance(kind, str) else None


def _encoded(amended: dict[str, Any], parsed: dict[str, Any], line: bytes) -> bytes | None:
    """A hook's message as a line, or None when the parsed copy of the client's line lost
    something (a big integer read as a float, a number past a double's range), so that
    re-encoding would change what the client sent. Only for the few requests hooks amend."""
    try:
        if json.loads(line) != parsed:
            return None
        return orjson.dumps(amended)
    except (ValueError, TypeError):
        return None


def _text(raw_json: bytes | None) -> str | None:
    if raw_json is None:
        return None
    try:
        value = orjson.loads(raw_json)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


_SESSION_ID_MEMBER = re.compile(rb'("sessionId"\s*:\s*)("(?:[^"\\]|\\.)*")')


def _map_session_ids(line: bytes, mapping: dict[str, str]) -> bytes:
    """Every ``"sessionId": "<id>"`` whose id ``mapping`` knows, rewritten to its value, in one
    pass over the line, whatever the number of mappings (a journal of many swaps adopts every
    backing id it ever committed). The rest of the line is untouched, as in ``_rewrite``."""

    def swap(found: re.Match[bytes]) -> bytes:
        try:
            old = orjson.loads(found.group(2))
        except orjson.JSONDecodeError:
            return found.group(0)
        new = mapping.get(old) if isinstance(old, str) else None
        return found.group(0) if new is None else found.group(1) + orjson.dumps(new)

    return _SESSION_ID_MEMBER.sub(swap, line)


_REWRITE_CACHE: dict[tuple[str, str], tuple[re.Pattern[bytes], bytes]] = {}


def _rewrite(line: bytes, old: str, new: str) -> bytes:
    """Replace ``"sessionId": "<old>"`` by ``"sessionId": "<new>"`` anywhere in the line.

    Byte-level, so the rest of the frame (big integers, key order, whitespace) is untouched.
    Session ids are UUIDs in practice, so the quoted form is what orjson writes.
    """
    if old == new or not old:
        return line
    cached = _REWRITE_CACHE.get((old, new))
    if cached is None:
        pattern = re.compile(rb'("sessionId"\s*:\s*)' + re.escape(orjson.dumps(old)))
        cached = (pattern, orjson.dumps(new).replace(b"\\", b"\\\\"))
        if len(_REWRITE_CACHE) > 1024:
            _REWRITE_CACHE.clear()
        _REWRITE_CACHE[(old, new)] = cached
    pattern, replacement = cached
    return pattern.sub(rb"\g<1>" + replacement, line)
