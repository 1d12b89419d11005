"""The router: liminal's protocol object. Bytes in, lines and events out; no I/O.

Everything that decides where a frame goes is decided in this file; what the rules remember is
kept by objects the router drives (all in ``liminal.acp``): ``moved_loads`` (rule 8),
``takeover`` (rule 9), ``holds`` (rule 5), ``owed`` (who owes whom an answer), ``message_ids``
(rule 10), ``side_sessions`` (rule 11); rule 2's byte rewriting is ``session_ids``, what
components plug in is ``hooks``, and a read's run of streamed updates is found by ``runs``.
The rules:

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
7. **The agent gone.** Every request the client is still waiting on gets an error, and so does
   every one it sends after, until a new process stands in (``agent_restarted``); one that could
   not start is gone from the first (``agent_gone`` before any frame).
8. **Loading a moved thread.** With ``replay_from_store`` on, a client's ``session/load`` of a
   thread whose backing id differs from it (liminal moved it) captures the backing id until the
   agent answers: its replay is the *compressed* history, which the client must not see. A
   successful answer is parked (``Output.replays``); ``finish_replay`` sends the history it is
   given, the agent's replayed lines that are not history (commands, mode, usage), then the
   answer; given none, the agent's own replay. An error answer is forwarded at once. A load
   that waited in a hold gets the same when it is released.
9. **A new client takes over.** After ``client_replaced`` (``liminal serve``: a connection takes
   over the proxy of one that dropped mid-turn), the requests the old client is still owed are
   *orphans*: their answers are dropped, never taken for the new client's, which counts its ids
   from 1 too. A request of the new client that reuses an orphan's id goes to the agent under
   one of liminal's own ids, and its answer comes back under the client's id.
10. **Message ids.** A user, agent or thought chunk the agent sends without a ``messageId``
   reaches the client with liminal's (``liminal.acp.message_ids``: the store's id of the
   message, the same in a replay from the store); one it sends with its own keeps it. liminal's
   own chunks get one the same way, and the answer to a ``session/prompt`` carries
   ``_meta.userMessageId``, the id of the prompt's user message. The taps get what the agent sent.
11. **Side sessions.** A session a ``private`` own request creates (liminal's summaries,
   ``liminal.acp.side_sessions``) is liminal's alone: none of its frames reaches the client or
   the taps; its notifications are kept for liminal (``take_side``), its requests answered here,
   refused (no tool of it runs), until ``end_side``. An agent may speak of a session before it
   answers the request that creates it (codex-zed announces its commands first), so while a
   private create is unanswered, a notification or request of the agent's naming a session no
   one has placed (the client has not named it nor been told it, no rule holds it) waits here
   until an answer places it: the private create's (the side session's: kept or refused as
   above; another's: forwarded, in order) or the client's own create. It waits at most
   ``max_unplaced_seconds`` and ``max_held_bytes``; past either it goes on as the client's.

Every line, whichever way it goes and whether or not it is forwarded, becomes a ``FrameEvent``
for the taps (``Output.events``) when ``tapping`` is on. The agent's streamed updates of one
session and kind that arrive in one read (a run: ``liminal.acp.runs``) are routed as one: one
pass over their bytes forwards them, one ``FrameRun`` stands for their events, and what reaches
the client and the taps is exactly what routing them one by one would give.
"""

from __future__ import annotations

import itertools
import secrets
from typing import Any

import orjson

from liminal.acp import jsonrpc, message_ids
from liminal.acp.events import (
    UPDATE_KIND_AT,
    UPDATE_PREFIX,
    Direction,
    FrameRun,
    Kind,
    make_event,
    make_lazy_event,
)
from liminal.acp.framing import LineFramer, Oversized
from liminal.acp.holds import Holds
from liminal.acp.hooks import LOCAL, Hooks, Local, LocalRequest, RequestHook, ResultHook, UpdateHook
from liminal.acp.message_ids import CHUNK_KINDS, MessageIds, with_user_message_id
from liminal.acp.moved_loads import Load, MovedLoads, ReplayRequest
from liminal.acp.output import Output
from liminal.acp.owed import Owed, Pending
from liminal.acp.runs import find_run, spliced
from liminal.acp.session_ids import map_all, rewrite, rewrite_lines
from liminal.acp.side_sessions import Placement, SideSessions, refusal
from liminal.acp.takeover import TakeOver

__all__ = ["LOCAL", "OWN_ID_PREFIX", "Local", "LocalRequest", "Output", "ReplayRequest",
           "RequestHook", "ResultHook", "Router", "UpdateHook"]

OWN_ID_PREFIX = "liminal-"
_UPDATE_PREFIX_LEN = len(UPDATE_PREFIX)
_CHUNK_KINDS = {kind.encode(): kind for kind in CHUNK_KINDS}
_A2C = Direction.AGENT_TO_CLIENT.value
_CREATES_SESSION = frozenset({"session/new", "session/fork"})


class Router:
    def __init__(self, *, max_frame_bytes: int, connection_id: str = "", tapping: bool = True,
                 max_held_per_thread: int = 64, max_held_bytes: int | None = None,
                 replay_from_store: bool = False, message_ids: bool = False) -> None:
        self.connection_id = connection_id
        # Rule 8: someone (``liminal.kernel.replay``) answers ``Output.replays``.
        self.replay_from_store = replay_from_store
        self.tapping = tapping
        self.max_held_per_thread = max_held_per_thread
        # Held frames are bounded in bytes too (one message of the longest size may wait).
        self.max_held_bytes = max_frame_bytes if max_held_bytes is None else max_held_bytes
        self.agent_alive = True
        self._gone_why = ""  # rule 7: what a request sent to a dead agent is told
        # When the agent last wrote anything (the ``now`` it was fed with): a caller that waits
        # for an agent to finish can tell a busy one from one that has gone quiet.
        self.agent_heard = 0.0
        self._client_framer = LineFramer(max_frame_bytes)
        self._agent_framer = LineFramer(max_frame_bytes)
        self._out = Output()
        self._now = 0.0  # the time of the last bytes fed: for what a release sends
        # Rule 2.
        self._backing_of: dict[str, str] = {}  # thread -> backing, only where they differ
        self._thread_of: dict[str, str] = {}  # backing -> thread, only where they differ
        self._owed = Owed()
        # Rule 3. A client may use ids like ours (another liminal in front of this one counts its
        # own from 1 too): a random part per router keeps an agent's answer from reaching the
        # wrong asker whichever request came first. One namespace: liminal's own requests' ids
        # and those rule 9 renames a client's to.
        self._own_ids = map(f"{OWN_ID_PREFIX}{secrets.token_hex(6)}-{{}}".format, itertools.count(1))
        self._captured: set[str] = set()  # rule 4
        self._side = SideSessions()  # rule 11
        self._places = Placement()  # rule 11, before a private create is answered
        self._held = Holds()  # rule 5
        self._loads = MovedLoads()  # rule 8
        self._takeover = TakeOver(self._own_ids)  # rule 9
        # Notifications of liminal's own waiting for their thread's next turn (``notify_in_next_turn``).
        self._turn_notices: dict[str, list[tuple[str, Any]]] = {}
        self._hooks = Hooks()
        self._hooked_kinds: tuple[bytes, ...] = ()  # ``Hooks.update_markers``, kept at hand
        # Rule 10, stamped when asked for (the proxy does; the router's own tests see bytes untouched).
        self._ids = MessageIds(connection_id, stamping=message_ids)

    @property
    def max_unplaced_seconds(self) -> float:
        """Rule 11: how long a line about a session no answer placed waits."""
        return self._places.max_seconds

    @max_unplaced_seconds.setter
    def max_unplaced_seconds(self, seconds: float) -> None:
        self._places.max_seconds = seconds

    # ----------------------------------------------------------------- feeding

    def receive_from_client(self, data: bytes, now: float) -> None:
        self._now = now
        for line in self._client_framer.feed(data):
            self._client_line(line, now)
        if self._places.lines:
            self._settle(now)

    def receive_from_agent(self, data: bytes, now: float) -> None:
        self._now = now
        self.agent_heard = now
        lines = self._agent_framer.feed(data)
        at, count = 0, len(lines)
        while at < count:
            line = lines[at]
            if count - at > 1 and isinstance(line, bytes) and line.startswith(UPDATE_PREFIX):  # a run may start
                ended = self._agent_run(lines, at, now)
                if ended > at:
                    at = ended
                    continue
            self._agent_line(line, now)
            at += 1
        if self._places.lines:
            self._settle(now)

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
        self._hooks.add_request_hook(methods, hook)

    def add_update_hook(self, kinds: tuple[str, ...], hook: UpdateHook) -> None:
        """Let ``hook`` amend every ``session/update`` of these kinds (see ``UpdateHook``)."""
        self._hooks.add_update_hook(kinds, hook)
        self._hooked_kinds = self._hooks.update_markers

    def add_result_hook(self, methods: tuple[str, ...], hook: ResultHook) -> None:
        """Let ``hook`` amend the agent's result for every client request of these methods."""
        self._hooks.add_result_hook(methods, hook)

    def answer_local(self, key: Any, result: Any = None, *, error: tuple[int, str] | None = None,
                     now: float | None = None) -> bool:
        """Answer a request a hook kept (``Output.local``), once; False if it was answered."""
        pending = self._owed.local.pop(key, None)
        if pending is None:
            return False
        id_json = pending.id_json if pending.id_json is not None else jsonrpc.encode_id(key)
        if error is not None:
            line = jsonrpc.error_frame(id_json, error[0], error[1])
        else:
            if pending.message_id is not None and isinstance(result, dict) and message_ids.user_message_id_of(result) is None:
                result = message_ids.with_user_message_id_in(result, pending.message_id)
            line = jsonrpc.result_frame(id_json, orjson.dumps(result if result is not None else {}))
        when = self._now if now is None else now
        self._answer_from_liminal(key, line, when, pending.method, pending.thread_id)
        return True

    def local_pending(self) -> list[Any]:
        return list(self._owed.local)

    def forward_local(self, key: Any, method: str, params: dict[str, Any], now: float | None = None) -> bool:
        """Send a request a hook kept on to the agent as ``method`` with ``params`` (thread ids),
        under the client's id: the agent's answer is the answer to it (``session/edit_prompt``
        goes on as the ``session/prompt`` it comes to; a load liminal asked the store about
        first goes on as the client's own, rule 8 included). False if it was answered."""
        pending = self._owed.local.pop(key, None)
        if pending is None:
            return False
        when = self._now if now is None else now
        id_json = pending.id_json if pending.id_json is not None else jsonrpc.encode_id(key)
        line = (b'{"jsonrpc":"2.0","id":' + id_json + b',"method":' + orjson.dumps(method)
                + b',"params":' + orjson.dumps(params) + b"}")
        thread = pending.thread_id
        backing = self.backing_of(thread) if thread is not None else None
        forwarded = Pending(method, thread, pending.id_json)
        self._owed.client[key] = forwarded
        message = {"jsonrpc": "2.0", "id": orjson.loads(id_json), "method": method, "params": params}
        if method == "session/prompt" and self._ids.stamping:
            forwarded.message_id = self._ids.next_id()
        self._tap(Direction.CLIENT_TO_AGENT, Kind.REQUEST, when, line, message, thread, backing, method,
                  message["id"])
        if thread is not None and thread in self._held:
            self._hold_back(thread, line, message)
            return True
        if method == "session/load" and thread is not None:  # rule 8, as for the client's own
            self._start_load(message["id"], thread, backing or thread)
        self._out.to_agent.append(line if thread is None or backing == thread else rewrite(line, thread, backing or thread))
        if method == "session/prompt" and thread is not None:
            self._turn_started(thread, when)
        return True

    def notify_agent(self, method: str, params: Any, now: float, *, thread_id: str | None = None) -> None:
        """A notification of liminal's own to the agent (``params`` in backing ids): the cancel
        of a turn that ``session/rewind`` cuts short, or of a side session's given up."""
        line = jsonrpc.notification_frame(method, params)
        self._out.to_agent.append(line)
        backing = params.get("sessionId") if isinstance(params, dict) else None
        if self._side and backing in self._side:
            return  # rule 11: about a side session (its cancel), never tapped
        thread = thread_id if thread_id is not None else (self.thread_of(backing) if isinstance(backing, str) else None)
        self._tap(Direction.LIMINAL_TO_AGENT, Kind.NOTIFICATION, now, line, None, thread,
                  backing if isinstance(backing, str) else None, method, None)

    # --------------------------------------------------------- liminal's own frames

    def send_request(self, method: str, params: Any, now: float, *, thread_id: str | None = None,
                     private: bool = False) -> str:
        """Queue a request of liminal's own to the agent; its answer comes in ``own_responses``.
        ``private``: about a side session (rule 11), or creating one: never tapped."""
        rpc_id = next(self._own_ids)
        line = jsonrpc.request_frame(rpc_id, method, params)
        backing = params.get("sessionId") if isinstance(params, dict) else None
        private = private or (isinstance(backing, str) and backing in self._side)
        self._owed.own[rpc_id] = Pending(method, thread_id, None, private=private)
        if private and method in _CREATES_SESSION:
            self._places.creates[rpc_id] = (now, False)
        self._out.to_agent.append(line)
        if private:
            return rpc_id
        if thread_id is None and isinstance(backing, str):
            # A session a thread was on (the close of the one a move left) is the thread's.
            thread_id = self.thread_of(backing)
        self._tap(Direction.LIMINAL_TO_AGENT, Kind.REQUEST, now, line, None, thread_id, backing, method, rpc_id)
        return rpc_id

    def cancel_own(self, rpc_id: str) -> None:
        """Forget an own request (its answer, if one ever comes, is then dropped quietly; a
        private create's still makes its session liminal's, ended: rule 11)."""
        self._owed.own.pop(rpc_id, None)
        self._places.cancel(rpc_id)

    def notify_client(self, method: str, params: Any, now: float) -> None:
        """A notification of liminal's own to the client (``params`` already in thread ids)."""
        thread = params.get("sessionId") if isinstance(params, dict) else None
        if method == "session/update" and isinstance(thread, str) and isinstance(params, dict):
            params = self._ids.own_chunk(thread, params, Direction.LIMINAL_TO_CLIENT.value)
        line = jsonrpc.notification_frame(method, params)
        self._out.client.append(line)
        self._tap(Direction.LIMINAL_TO_CLIENT, Kind.NOTIFICATION, now, line, None,
                  thread, self.backing_of(thread) if thread else None, method, None)

    def notify_in_next_turn(self, thread_id: str, method: str, params: Any) -> None:
        """A notification of liminal's own for the thread's next turn: sent to the client right
        after the thread's next ``session/prompt`` goes to the agent, so that it arrives inside
        that turn. Sent between turns, after a prompt was answered, a headless client (one that
        prints a turn's updates) glued it to the previous answer."""
        self._turn_notices.setdefault(thread_id, []).append((method, params))

    def note(self, method: str, params: dict[str, Any], now: float, *, thread_id: str) -> None:
        """Record what liminal did (``liminal/swap``) as a notification frame that only the taps
        see: the store keeps it with the conversation's frames, in order."""
        line = jsonrpc.notification_frame(method, params)
        self._tap(Direction.LIMINAL_NOTE, Kind.NOTIFICATION, now, line, {"jsonrpc": "2.0", "method": method,
                  "params": params}, thread_id, self.backing_of(thread_id), method, None)

    # ------------------------------------------------------- captures and holds

    def take_side(self, session_id: str) -> list[bytes]:
        """Rule 11: what the agent said in a side session since the last take."""
        return self._side.take(session_id)

    def end_side(self, session_id: str) -> None:
        self._side.end(session_id)

    def capture(self, backing_id: str) -> None:
        self._captured.add(backing_id)

    def uncapture(self, backing_id: str) -> None:
        self._captured.discard(backing_id)

    def hold(self, thread_id: str) -> None:
        self._held.hold(thread_id)

    def is_held(self, thread_id: str) -> bool:
        return thread_id in self._held

    def held_threads(self) -> list[str]:
        return self._held.threads()

    def held_count(self, thread_id: str) -> int:
        return self._held.count(thread_id)

    def release(self, thread_id: str) -> int:
        """Stop holding the thread and forward what waited, for its backing id as of now."""
        waiting = self._held.take(thread_id)
        backing = self.backing_of(thread_id)
        for held in waiting:
            method = held.message.get("method")
            if method == "session/load" and "id" in held.message:
                self._start_load(held.message["id"], thread_id, backing)
            self._out.to_agent.append(rewrite(held.line, thread_id, backing))
            if method == "session/prompt":
                self._turn_started(thread_id, self._now)
        return len(waiting)

    # ------------------------------------------------------- what is under way

    def prompt_in_flight(self, thread_id: str) -> bool:
        """A client prompt for the thread is still waiting for the agent's answer."""
        return self._owed.prompt_in_flight(thread_id)

    def agent_idle(self) -> bool:
        """Nothing is under way at the agent: it owes no answer to the client (held requests
        have not reached it) nor to liminal, the client owes it none, no session is captured or
        being loaded, and its output stands at a line boundary. Only then can its sessions be
        handed to another process of the agent (``liminal.kernel.recycle``)."""
        return (self.agent_alive and len(self._owed.client) == self._held.requests()
                and not self._owed.agent and not self._owed.own and not self._captured
                and not self._loads.under_way() and self._agent_framer.buffered == 0
                and not self._places.lines)

    def pending_client_ids(self) -> set[Any]:
        """The ids (``jsonrpc.id_key``) of the client's requests the agent has not answered."""
        return self._owed.client_ids()

    @property
    def pending_client_requests(self) -> int:
        return len(self._owed.client)

    def owed_to_client(self) -> list[str]:
        """The methods of the client's requests that nothing has answered yet, oldest first."""
        return self._owed.client_methods()

    def open_agent_requests(self) -> list[tuple[Any, str]]:
        """The agent's requests the client has not answered yet: (id, method), oldest first."""
        return self._owed.agent_requests()

    def agent_request_open(self, thread_id: str) -> bool:
        """The agent asked the client something about the thread that is still unanswered."""
        return self._owed.agent_request_open(thread_id)

    # ------------------------------------------------------- loads of moved threads

    @property
    def replays_waiting(self) -> int:
        """Loads of moved threads that the agent has answered and ``finish_replay`` has not."""
        return len(self._loads.parked)

    def finish_replay(self, token: int, history: list[dict[str, Any]] | None, now: float) -> bool:
        """Answer a parked load (``Output.replays``): ``history`` (``session/update`` updates,
        oldest first) goes to the client as the thread's, then the agent's replayed lines that
        are not history, then the agent's answer. ``None``: the agent's own replay instead.
        False if the token is unknown (already finished)."""
        done = self._loads.finish(token, history is not None)
        if done is None:
            return False
        load = done.load
        for update in history or ():
            self.notify_client("session/update", {"sessionId": load.thread, "update": update}, now)
        for line in done.lines:
            out_line = rewrite(line, load.backing, load.thread)
            self._out.client.append(out_line)
            self._tap(Direction.LIMINAL_TO_CLIENT, Kind.NOTIFICATION, now, out_line, None, load.thread,
                      load.backing, "session/update", None)
        self._answer_client(load.key, load.answer)
        self._tap(Direction.AGENT_TO_CLIENT, Kind.RESPONSE, now, load.raw, load.message, load.thread,
                  load.backing, "session/load", load.rpc_id)
        return True

    def _start_load(self, rpc_id: Any, thread: str, backing: str) -> None:
        """Rule 8: a client's load of ``thread``, on its way to ``backing``."""
        if self.replay_from_store and backing != thread:
            self._loads.start(jsonrpc.id_key(rpc_id), thread, backing)
            self._captured.add(backing)

    def _end_load(self, load: Load) -> None:
        if self._loads.end(load):
            self._captured.discard(load.backing)

    # ------------------------------------------------------- either side gone

    def agent_gone(self, now: float, reason: str, *, said: str = "", why: str | None = None) -> None:
        """Rule 7: answer every client request still waiting on the agent with an error ("the
        agent exited before answering METHOD (``reason``); its stderr last said: ``said``"), and
        every one the client sends from now on ("the agent exited (``reason``); ...");
        ``why``, when given, is the whole message for both (an agent that never started)."""
        self.agent_alive = False
        last = f"; its stderr last said: {said}" if said else ""
        self._gone_why = why or f"the agent exited ({reason}){last}"
        for key, pending in list(self._owed.client.items()):
            told = why or f"the agent exited before answering {pending.method} ({reason}){last}"
            line = jsonrpc.error_frame(pending.id_json or jsonrpc.encode_id(key), jsonrpc.INTERNAL_ERROR, told)
            self._answer_from_liminal(key, line, now, pending.method, None)
        self._owed.client.clear()
        self._held.clear()  # held prompts are pending client requests too: answered above
        for load in self._loads.unanswered():  # answered above
            self._end_load(load)
        for token in self._loads.parked:  # the agent did answer these: let them through
            self.finish_replay(token, None, now)

    def agent_restarted(self) -> None:
        """A new process of the agent stands in for the one that died (``agent_gone`` answered
        what the old one owed): what the old one owed or was asked is forgotten, threads and
        their backing sessions are kept."""
        self.agent_alive = True
        self._agent_framer = LineFramer(self._client_framer.max_size)
        self._owed.agent.clear()
        self._owed.own.clear()
        self._captured.clear()
        self._side.clear()
        self._places.creates.clear()
        if self._places.lines:  # the old process's, about sessions no one was told of: no one's now
            self._out.problems.append(f"{len(self._places.lines)} lines of the agent's about sessions "
                                      "it never placed dropped at its restart")
            self._places.lines.clear()
        self._loads.forget_unanswered()

    def client_replaced(self) -> None:
        """Rule 9: a new client goes on from here; what the old one is owed becomes orphans."""
        self._takeover.begin(self.pending_client_ids())

    # ------------------------------------------------------------ client -> agent

    def _client_line(self, line: bytes | Oversized, now: float) -> None:
        if isinstance(line, Oversized):
            self._oversized(line, now, from_client=True)
            return
        message = jsonrpc.parse(line)
        kind = jsonrpc.classify(message)
        if kind is Kind.INVALID or message is None:
            if line.strip():
                self._out.problems.append(f"client sent a line that is not JSON-RPC: {line[:200]!r}")
            self._out.to_agent.append(line)
            self._tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, None, None, None, None)
            return
        if kind is Kind.RESPONSE:  # to a request of the agent's
            asked, about = self._owed.agent.pop(jsonrpc.id_key(message["id"]), (None, None))
            self._out.to_agent.append(line)
            self._tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, about,
                      self.backing_of(about) if about else None, asked, message["id"])
            return
        if kind is Kind.REQUEST and self._takeover.active:
            line, message = self._takeover.incoming(line, message)
        method: str = message["method"]
        if not self.agent_alive and kind is Kind.REQUEST:  # rule 7: nothing can answer it
            self._refuse_dead(line, message, now)
            return
        thread = _session_in(message)
        if thread is not None:
            self._places.known.add(thread)  # rule 11: the client's, whatever the agent says of it
        if kind is Kind.REQUEST:
            kept = self._client_request(line, message, thread, now)
            if kept is None:
                return  # for liminal to answer
            line, message = kept
        # Read after the request hooks: one may bind the thread first (``liminal.kernel.swap``,
        # at a load of a thread another liminal on the home moved since this one read the journal).
        backing = self._backing_of.get(thread, thread) if thread is not None else None
        # While a thread is held, what the client sends about it, and what it sends about
        # no session at all, waits in the thread's queue: the agent sees the client's order
        # (a set_mode sent after a prompt still arrives after it). Other threads pass.
        holder = self._held.holder(thread)
        if holder is not None:
            if method != "session/cancel":
                self._hold_back(holder, line, message)
                self._prompt_tapped(method, kind, message)
                self._tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, thread, backing, method,
                          message.get("id"))
                return
            self._cancel_held(holder, now)
        if thread is not None and method == "session/load" and kind is Kind.REQUEST:
            self._start_load(message["id"], thread, backing or thread)
        forwarded = line if thread is None or backing == thread else rewrite(line, thread, backing or thread)
        self._out.to_agent.append(forwarded)
        self._prompt_tapped(method, kind, message)
        self._tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, thread, backing, method,
                  message.get("id"))
        if method == "session/prompt" and thread is not None:
            self._turn_started(thread, now)

    def _refuse_dead(self, line: bytes, message: dict[str, Any], now: float) -> None:
        rpc_id = message["id"]
        thread = _session_in(message)
        self._tap(Direction.CLIENT_TO_LIMINAL, Kind.REQUEST, now, line, message, thread, None,
                  message["method"], rpc_id)
        self._answer_from_liminal(jsonrpc.id_key(rpc_id), jsonrpc.error_frame(
            jsonrpc.encode_id(rpc_id, line), jsonrpc.INTERNAL_ERROR, self._gone_why), now,
            message["method"], thread)

    def _prompt_tapped(self, method: str, kind: Kind, message: dict[str, Any]) -> None:
        """Rule 10: a client's prompt is about to be tapped; its frame's id is its user message's."""
        if method == "session/prompt" and kind is Kind.REQUEST and self._ids.stamping:
            pending = self._owed.client.get(jsonrpc.id_key(message["id"]))
            if pending is not None:
                pending.message_id = self._ids.next_id()

    def _client_request(self, line: bytes, message: dict[str, Any], thread: str | None,
                        now: float) -> tuple[bytes, dict[str, Any]] | None:
        """Record what the agent owes the client, after the request hooks: the line and message
        to go on with, or None when a hook kept the request for liminal (``LOCAL``)."""
        method: str = message["method"]
        rpc_id = message["id"]
        key = jsonrpc.id_key(rpc_id)
        # A string or an integer id is written back exactly from its parsed value; any other (a
        # float that may be a rounded big integer, an object or array id that JSON-RPC does not
        # allow but a client sent) keeps its bytes for the answer.
        exact = None if isinstance(rpc_id, (str, int)) else jsonrpc.encode_id(rpc_id, line)
        pending = Pending(method, thread, exact)
        local, amended_line, amended = self._hooks.request(method, message, thread, line, self._out.problems)
        if local:
            backing = self._backing_of.get(thread, thread) if thread is not None else None
            self._owed.local[key] = pending
            if method == "session/prompt" and self._ids.stamping:
                pending.message_id = self._ids.next_id()
            self._out.local.append(LocalRequest(key, method, thread, amended))
            self._tap(Direction.CLIENT_TO_LIMINAL, Kind.REQUEST, now, line, message, thread, backing, method,
                      rpc_id)
            return None
        self._owed.client[key] = pending
        return amended_line, amended

    def _hold_back(self, thread: str, line: bytes, message: dict[str, Any]) -> None:
        if not self._held.add(thread, line, message, self.max_held_per_thread, self.max_held_bytes):
            self._out.problems.append(f"too many frames held for {thread}; releasing them")
            self.release(thread)

    def _cancel_held(self, thread: str, now: float) -> None:
        """A cancel for a held thread: its held prompts never reached the agent; answer them."""
        for held in self._held.take_prompts(thread):
            rpc_id = held.message.get("id")
            key = jsonrpc.id_key(rpc_id)
            self._owed.client.pop(key, None)
            line = jsonrpc.result_frame(jsonrpc.encode_id(rpc_id, held.line), b'{"stopReason":"cancelled"}')
            self._answer_from_liminal(key, line, now, "session/prompt", thread)

    def _turn_started(self, thread_id: str, now: float) -> None:
        for method, params in self._turn_notices.pop(thread_id, ()) if self._turn_notices else ():
            self.notify_client(method, params, now)

    # ------------------------------------------------------------ agent -> client

    def _agent_run(self, lines: list[bytes | Oversized], at: int, now: float) -> int:
        """The agent's streamed updates from ``lines[at]`` on that form a run
        (``liminal.acp.runs``) about a session no rule but 2 and 10 touches: forwarded and
        tapped whole, as ``_agent_line`` would one by one. Returns where the run ends (``at``
        when there is none)."""
        run = None if self._places.creates else find_run(lines, at, self._hooked_kinds)
        if run is None or run.backing in self._captured or (self._side and run.backing in self._side):
            return at
        backing = run.backing
        thread = self._thread_of.get(backing, backing)
        kind = _CHUNK_KINDS.get(run.kind)
        member = b"" if kind is None else self._ids.run(run.lines, run.joined, thread, kind, _A2C)
        if member is None:  # the agent's own ids on some of them only: line by line
            return at
        if kind is None:
            self._ids.others(thread, len(run.lines))
        out = spliced(run, thread, member)  # rule 10's id, and rule 2 for the id the head spells
        if thread != backing and run.joined.count(b'"sessionId"') != len(run.lines):  # named again further on
            out = rewrite_lines(out, backing, thread)
        self._out.client.append(out)
        if self.tapping:
            self._out.taps.append(FrameRun(Direction.AGENT_TO_CLIENT, now, self.connection_id, thread, backing,
                                           run.lines))
        return at + len(run.lines)

    def _agent_line(self, line: bytes | Oversized, now: float) -> None:
        """Every line of the agent's. A notification (every streamed chunk is one) goes its one
        way here, without a further call; anything else in ``_agent_message``."""
        if isinstance(line, Oversized):
            self._oversized(line, now, from_client=False)
            return
        message: dict[str, Any] | None = None
        end = line.find(b'"', _UPDATE_PREFIX_LEN) if line.startswith(UPDATE_PREFIX) else -1
        raw_id = line[_UPDATE_PREFIX_LEN:end] if end > 0 else None
        # A session/update in the canonical form all four pinned adapters write is read from its
        # bytes (the session id is the first member of the top-level params: no ambiguity); the
        # parse is left to whoever asks for the event's message (``LazyFrameEvent``). One that
        # only looks canonical is still forwarded untouched, its message None. A hooked kind is
        # parsed, and so is any update when there are hooks and its kind is not where expected.
        if raw_id is not None and b"\\" not in raw_id and raw_id.isascii() and not (
                self._hooked_kinds and (line.startswith(self._hooked_kinds, end)
                                        or not line.startswith(UPDATE_KIND_AT, end))):
            backing: str | None = raw_id.decode()
            method: Any = "session/update"
        else:
            message = jsonrpc.parse(line)
            # ``jsonrpc.classify`` and ``_session_in`` inlined: a string method and no id.
            method = message.get("method") if message is not None else None
            if method.__class__ is not str or "id" in message:  # type: ignore[operator]
                self._agent_message(line, message, now)
                return
            params = message.get("params")  # type: ignore[union-attr]
            backing = params.get("sessionId") if params.__class__ is dict else None
            if backing.__class__ is not str:
                backing = None
        thread: str | None = None
        direction = Direction.AGENT_TO_CLIENT
        if self._places.creates and backing is not None and not self._placed(backing):
            self._wait_unplaced(line, backing, now)  # rule 11: maybe a side session's, not yet answered
            return
        if self._side and backing is not None and backing in self._side:
            self._side.keep(backing, line)  # rule 11: liminal's alone, not even tapped nor stamped
            return
        if backing is None:
            self._ids.other(None)
            self._out.client.append(line)
        else:
            thread = self._thread_of.get(backing, backing)
            forwarded = backing not in self._captured
            if forwarded:
                out_line = self._hooks.update(line, message, thread, self._out.problems) if (
                    self._hooked_kinds and message is not None) else line
            else:
                direction = Direction.AGENT_TO_LIMINAL  # rule 4: a replay the client must not see
                self._loads.keep(backing, line)
                out_line = line
            out_line = self._ids.agent_update(line, out_line, message, end, thread, direction.value, forwarded)
            if forwarded:
                self._out.client.append(out_line if thread == backing else rewrite(out_line, backing, thread))
        if self.tapping:
            self._out.taps.append(
                make_lazy_event(direction, Kind.NOTIFICATION, now, line, self.connection_id, thread, backing,
                                method, len(line)) if message is None else
                make_event(direction, Kind.NOTIFICATION, now, line, message, self.connection_id, thread, backing,
                           method, None, len(line)))

    def _placed(self, backing: str) -> bool:
        """Rule 11: whose the session is, is known (a thread's, the client's, a side session's)."""
        return (backing in self._places.known or backing in self._thread_of or backing in self._side
                or backing in self._captured or backing in self._backing_of)

    def _wait_unplaced(self, line: bytes, backing: str, now: float) -> None:
        if not self._places.wait(line, backing, now, self.max_held_bytes):
            self._settle(now, overflow=True)

    def _settle(self, now: float, *, overflow: bool = False) -> None:
        """Rule 11: the agent's lines about sessions no one had placed go their way once an
        answer places them; past the bounds, as the client's."""
        self._places.settle(now, self._placed, self._agent_line, self._out.problems, overflow)

    def _agent_message(self, line: bytes, message: dict[str, Any] | None, now: float) -> None:
        """A line of the agent's that is not a notification."""
        kind = jsonrpc.classify(message)
        if kind is Kind.RESPONSE:
            assert message is not None
            self._agent_response(line, message, now)
        elif kind is Kind.REQUEST:
            assert message is not None
            self._agent_request(line, message, now)
        else:
            if line.strip():
                self._out.problems.append(f"agent sent a line that is not JSON-RPC: {line[:200]!r}")
            self._out.client.append(line)
            self._tap(Direction.AGENT_TO_CLIENT, kind, now, line, message, None, None, None, None)

    def _agent_request(self, line: bytes, message: dict[str, Any], now: float) -> None:
        rpc_id = message["id"]
        backing = _session_in(message)
        if self._places.creates and backing is not None and not self._placed(backing):
            self._wait_unplaced(line, backing, now)  # rule 11: maybe a side session's, not yet answered
            return
        if self._side and backing in self._side:
            self._out.to_agent.append(refusal(message))  # rule 11: no tool of it runs
            return
        thread = self.thread_of(backing) if backing is not None else None
        self._owed.agent[jsonrpc.id_key(rpc_id)] = (message["method"], thread)
        self._out.client.append(line if backing is None else rewrite(line, backing, thread or backing))
        self._tap(Direction.AGENT_TO_CLIENT, Kind.REQUEST, now, line, message, thread, backing,
                  message["method"], rpc_id)

    def _agent_response(self, line: bytes, message: dict[str, Any], now: float) -> None:
        rpc_id = message["id"]
        key = jsonrpc.id_key(rpc_id)
        if isinstance(rpc_id, str) and rpc_id.startswith(OWN_ID_PREFIX) and rpc_id in self._owed.own:
            self._own_response(line, message, now)
            return
        if isinstance(rpc_id, str) and rpc_id in self._places.creates:
            # A private create given up on (``cancel_own``): its session is still liminal's, ended.
            del self._places.creates[rpc_id]
            created = _session_in(message, "result")
            if created is not None:
                self._side.open(created)
                self._side.end(created)
            if self._places.lines:
                self._settle(now)
            return
        pending = self._owed.client.pop(key, None)
        load = self._loads.answered(key) if pending is not None else None
        if load is not None:
            self._end_load(load)
        method = pending.method if pending else None
        thread = pending.thread_id if pending else None
        backing = self.backing_of(thread) if thread else None
        if method in _CREATES_SESSION:
            created = _session_in(message, "result")
            if created is not None:
                backing = created
                thread = self._thread_of.get(created, created)
                self._places.known.add(created)
                if self._places.lines:  # what the agent said of it first goes first (rule 11)
                    self._settle(now)
        out_line = map_all(line, self._thread_of) if self._thread_of and b'"sessionId"' in line else line
        result = message.get("result")
        if pending is not None and isinstance(result, dict):
            id_json = pending.id_json if pending.id_json is not None else jsonrpc.encode_id(rpc_id, line)
            amended = self._hooks.result(pending.method, result, self._out.problems)
            if amended is not result:
                # The agent's order of members kept (Codex's Rust adapter writes the id last).
                out_line = orjson.dumps({**message, "result": amended}) if isinstance(
                    rpc_id, (str, int)) else jsonrpc.result_frame(id_json, orjson.dumps(amended))
                if self._thread_of and b'"sessionId"' in out_line:
                    out_line = map_all(out_line, self._thread_of)
            if pending.message_id is not None and message_ids.user_message_id_of(amended) is None:
                out_line = with_user_message_id(out_line, id_json, amended, pending.message_id)  # rule 10
        if load is not None and "error" not in message:
            self._out.replays.append(self._loads.park(load, out_line, line, message, rpc_id))
            return  # tapped when it reaches the client, after the history
        self._answer_client(key, out_line)
        self._tap(Direction.AGENT_TO_CLIENT, Kind.RESPONSE, now, line, message, thread, backing, method, rpc_id)

    def _own_response(self, line: bytes, message: dict[str, Any], now: float) -> None:
        rpc_id = message["id"]
        own = self._owed.own.pop(rpc_id)
        created = _session_in(message, "result")
        if own.private:
            if created is not None and own.method in _CREATES_SESSION:
                self._side.open(created)
            if self._places.creates.pop(rpc_id, None) is not None and self._places.lines:
                self._settle(now)  # the side session's early lines kept, others forwarded
            self._out.own_responses.append((rpc_id, message))
            return
        if created is not None and own.method in _CREATES_SESSION and own.thread_id is not None:
            # A session liminal opened for a thread (``/clear``): what the agent says of it from
            # now on reaches the client under the thread's id, even before the component that
            # asked binds the thread to it.
            self.adopt(created, own.thread_id)
        if created is not None and own.method in _CREATES_SESSION:
            self._places.known.add(created)  # liminal's, for a thread: not a side session (rule 11)
            if self._places.lines:
                self._settle(now)
        self._out.own_responses.append((rpc_id, message))
        self._tap(Direction.AGENT_TO_LIMINAL, Kind.RESPONSE, now, line, message, own.thread_id,
                  created or (self.backing_of(own.thread_id) if own.thread_id else None), own.method, rpc_id)

    def _oversized(self, line: Oversized, now: float, *, from_client: bool) -> None:
        """Rule 6: a line over the cap is dropped; a request's sender gets an error, and so does
        the client for an answer of the agent's to it (the agent's answers to liminal, dropped)."""
        found = jsonrpc.recover_top_level(line.head, line.tail)
        id_json, method, cap = found.get("id"), _loaded(found.get("method")), self._client_framer.max_size
        method = method if isinstance(method, str) else None
        self._out.problems.append(f"{'client' if from_client else 'agent'} sent a {line.size}-byte line, "
                                  f"over the {cap}-byte cap; dropped")
        self._tap(Direction.CLIENT_TO_AGENT if from_client else Direction.AGENT_TO_CLIENT, Kind.OVERSIZED, now,
                  line.head, None, None, None, method, None, size=line.size)
        if id_json is None or (from_client and method is None):
            return
        key = jsonrpc.id_key(_loaded(id_json))
        if method is not None:
            error = jsonrpc.error_frame(id_json, jsonrpc.INVALID_REQUEST,
                                        f"request of {line.size} bytes exceeds liminal's limit of {cap} bytes")
            if from_client:
                self._answer_from_liminal(key, error, now, method, None)
            else:
                self._out.to_agent.append(error)
                self._tap(Direction.LIMINAL_TO_AGENT, Kind.RESPONSE, now, error, None, None, None, method, None)
            return
        pending = self._owed.client.pop(key, None)
        if pending is not None:
            load = self._loads.answered(key)
            if load is not None:
                self._end_load(load)
            error = jsonrpc.error_frame(id_json, jsonrpc.INTERNAL_ERROR, f"the agent's answer of {line.size} "
                                        f"bytes exceeds liminal's limit of {cap} bytes")
            self._answer_from_liminal(key, error, now, pending.method, None)

    # ----------------------------------------------------------------- helpers

    def _answer_client(self, key: Any, line: bytes) -> None:
        """Every answer to a client request leaves through here (rule 9 applies to all)."""
        out = self._takeover.outgoing(key, line) if self._takeover.active else line
        if out is not None:  # None: the answer to a request of the client that left
            self._out.client.append(out)

    def _answer_from_liminal(self, key: Any, line: bytes, now: float, method: str | None,
                             thread: str | None) -> None:
        self._answer_client(key, line)
        self._tap(Direction.LIMINAL_TO_CLIENT, Kind.RESPONSE, now, line, None, thread,
                  self.backing_of(thread) if thread else None, method, None)

    def _tap(self, direction: Direction, kind: Kind, now: float, raw: bytes, message: dict[str, Any] | None,
             thread: str | None, backing: str | None, method: str | None, rpc_id: Any, *,
             size: int | None = None) -> None:
        # Rule 10: every event counts (its sequence number is its frame id's).
        self._ids.tapped(method, kind is Kind.NOTIFICATION, thread, direction.value, raw, message)
        if self.tapping:
            self._out.taps.append(make_event(direction, kind, now, raw, message, self.connection_id, thread,
                                               backing, method, rpc_id, len(raw) if size is None else size))


def _session_in(message: dict[str, Any], member: str = "params") -> str | None:
    """``message[member].sessionId`` when it is a string (``params`` or ``result``)."""
    part = message.get(member)
    session = part.get("sessionId") if isinstance(part, dict) else None
    return session if isinstance(session, str) else None


def _loaded(raw_json: bytes | None) -> Any:
    """A scalar recovered from an oversized line (``jsonrpc.recover_top_level``), or None."""
    try:
        return orjson.loads(raw_json) if raw_json is not None else None
    except orjson.JSONDecodeError:
        return None
