"""The router: liminal's protocol object. Bytes in, lines and events out; no I/O.

Everything that decides where a frame goes is decided in this file or in an object it drives
(all in ``liminal.acp``, none of them doing I/O). What the rules remember is kept by
``threads`` (rules 2 and 4), ``moved_loads`` (rule 8), ``takeover`` (rule 9), ``holds`` (rule
5), ``owed`` (who owes whom an answer), ``message_ids`` (rule 10) and ``side_sessions`` (rule
11); rule 2's byte rewriting is ``session_ids``, what components plug in is ``hooks``, and a
read's run of streamed updates is found by ``runs``. The agent's lines are routed here; the
client's in ``client_lines``. What liminal says of its own is sent by ``own_frames`` (rule 3,
notifications, notes), ``local_requests`` (what a hook kept), ``replays`` (rule 8's finished
loads) and ``oversized`` (rule 6), all through the ``emitter``, where every answer to a client
request leaves (rule 9).

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
   taps as ``AGENT_TO_LIMINAL``. After a capture ends, and until a prompt of that session goes
   to the agent, its history updates (``moved_loads.HISTORY_UPDATES``) are still the replay's
   (an agent may stream it after answering the load, as Gemini CLI does), and go the same way.
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

import functools
import itertools
import secrets
from typing import Any

import orjson

from liminal.acp import jsonrpc, message_ids
from liminal.acp.client_lines import Books, ClientLines
from liminal.acp.emitter import Emitter
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
from liminal.acp.local_requests import LocalRequests
from liminal.acp.message_ids import CHUNK_KINDS, MessageIds, with_user_message_id
from liminal.acp.moved_loads import MovedLoads, ReplayRequest, replayed
from liminal.acp.output import Output
from liminal.acp.oversized import drop_oversized
from liminal.acp.owed import Owed
from liminal.acp.own_frames import CREATES_SESSION, OwnFrames, session_in
from liminal.acp.replays import Replays
from liminal.acp.runs import find_run, spliced
from liminal.acp.session_ids import map_all, rewrite, rewrite_lines
from liminal.acp.side_sessions import Placement, SideSessions, refusal
from liminal.acp.takeover import TakeOver
from liminal.acp.threads import ThreadMap

__all__ = ["LOCAL", "OWN_ID_PREFIX", "Local", "LocalRequest", "Output", "ReplayRequest",
           "RequestHook", "ResultHook", "Router", "UpdateHook"]

OWN_ID_PREFIX = "liminal-"
_UPDATE_PREFIX_LEN = len(UPDATE_PREFIX)
_CHUNK_KINDS = {kind.encode(): kind for kind in CHUNK_KINDS}
_A2C = Direction.AGENT_TO_CLIENT.value


class Router:
    """The rules above, over the objects that keep what they remember and those that act for
    it. The agent's lines are routed here; the client's by ``ClientLines``. Where the router has
    nothing to add, its public methods are those objects' own, bound here (liminal's own frames:
    ``OwnFrames``; requests a hook kept: ``LocalRequests``; rule 8's replays: ``Replays``; the
    thread map: ``ThreadMap``; held threads, side sessions, hooks and who owes whom): one call,
    no forwarding."""

    def __init__(self, *, max_frame_bytes: int, connection_id: str = "", tapping: bool = True,
                 max_held_per_thread: int = 64, max_held_bytes: int | None = None,
                 replay_from_store: bool = False, message_ids: bool = False) -> None:
        self.connection_id = connection_id
        self.tapping = tapping
        self.max_held_per_thread = max_held_per_thread
        # Held frames are bounded in bytes too (one message of the longest size may wait).
        self.max_held_bytes = max_frame_bytes if max_held_bytes is None else max_held_bytes
        # When the agent last wrote anything (the ``now`` it was fed with): a caller that waits
        # for an agent to finish can tell a busy one from one that has gone quiet.
        self.agent_heard = 0.0
        self._client_framer = LineFramer(max_frame_bytes)
        self._agent_framer = LineFramer(max_frame_bytes)
        # Rules 2 and 4: the maps and the set are the ``ThreadMap``'s own, read here directly.
        threads = self._threads = ThreadMap()
        self._backing_of, self._thread_of, self._captured = threads.backing, threads.thread, threads.captured
        self._trailing = threads.trailing
        self.backing_of, self.thread_of, self.bind, self.adopt = (threads.backing_of, threads.thread_of,
                                                                  threads.bind, threads.adopt)
        self.capture, self.uncapture = threads.capture, threads.uncapture
        owed = self._owed = Owed()  # what is under way, asked of it directly
        self.prompt_in_flight, self.pending_client_ids, self.owed_to_client = (
            owed.prompt_in_flight, owed.client_ids, owed.client_methods)
        self.open_agent_requests, self.agent_request_open = owed.agent_requests, owed.agent_request_open
        # Rule 3. A client may use ids like ours (another liminal in front of this one counts its
        # own from 1 too): a random part per router keeps an agent's answer from reaching the
        # wrong asker whichever request came first. One namespace: liminal's own requests' ids
        # and those rule 9 renames a client's to.
        own_ids = map(f"{OWN_ID_PREFIX}{secrets.token_hex(6)}-{{}}".format, itertools.count(1))
        self._side = SideSessions()  # rule 11
        self.take_side, self.end_side = self._side.take, self._side.end
        self._places = Placement()  # rule 11, before a private create is answered
        held = self._held = Holds()  # rule 5
        self.hold, self.is_held, self.held_threads, self.held_count = (held.hold, held.__contains__,
                                                                       held.threads, held.count)
        self._loads = MovedLoads()  # rule 8
        self._takeover = TakeOver(own_ids)  # rule 9
        self._hooks = Hooks()
        self.add_request_hook, self.add_result_hook = self._hooks.add_request_hook, self._hooks.add_result_hook
        self._hooked_kinds: tuple[bytes, ...] = ()  # ``Hooks.update_markers``, kept at hand
        # Rule 10, stamped when asked for (the proxy does; the router's own tests see bytes untouched).
        self._ids = MessageIds(connection_id, stamping=message_ids)
        emit = self._emit = Emitter(connection_id=connection_id, tapping=tapping, ids=self._ids,
                                    takeover=self._takeover, threads=threads)
        self._out = emit.out  # the same object until ``take``, which replaces both
        self._tap, self._answer_client, self._answer_from_liminal = (emit.tap, emit.answer_client,
                                                                     emit.answer_from_liminal)
        own = self._own = OwnFrames(emit=emit, owed=self._owed, threads=threads, ids=self._ids, side=self._side,
                                    places=self._places, own_ids=own_ids, settle=self._settle)
        self.send_request, self.cancel_own, self.notify_agent = own.send_request, own.cancel_own, own.notify_agent
        self.notify_client, self.notify_in_next_turn, self.note = (own.notify_client, own.notify_in_next_turn,
                                                                   own.note)
        replays = self._replays = Replays(loads=self._loads, threads=threads, emit=emit,
                                          notify_client=own.notify_client, replay_from_store=replay_from_store)
        self.finish_replay = replays.finish
        self._books = Books(threads, owed, held, self._places, self._takeover, self._hooks, self._ids)
        def turn_started(thread_id: str, now: float) -> None:
            if self._trailing:
                threads.prompted(threads.backing_of(thread_id))
            own.turn_started(thread_id, now)

        client = ClientLines(books=self._books, emit=emit, start_load=replays.start, turn_started=turn_started,
                             oversized=functools.partial(self._oversized, from_client=True),
                             max_held_per_thread=max_held_per_thread, max_held_bytes=self.max_held_bytes)
        self._client_line, self.release = client.line, client.release
        local = LocalRequests(emit=emit, owed=self._owed, threads=threads, ids=self._ids,
                              forward=client.forward_kept)
        self.answer_local, self.forward_local, self.local_pending = (local.answer_local, local.forward_local,
                                                                     local.pending)

    @property
    def agent_alive(self) -> bool:
        """Rule 7: False from ``agent_gone`` until ``agent_restarted``."""
        return self._books.agent_alive

    @agent_alive.setter
    def agent_alive(self, alive: bool) -> None:
        self._books.agent_alive = alive

    @property
    def max_unplaced_seconds(self) -> float:
        """Rule 11: how long a line about a session no answer placed waits."""
        return self._places.max_seconds

    @max_unplaced_seconds.setter
    def max_unplaced_seconds(self, seconds: float) -> None:
        self._places.max_seconds = seconds

    # ----------------------------------------------------------------- feeding

    def receive_from_client(self, data: bytes, now: float) -> None:
        self._emit.now = now
        for line in self._client_framer.feed(data):
            self._client_line(line, now)
        if self._places.lines:
            self._settle(now)

    def receive_from_agent(self, data: bytes, now: float) -> None:
        self._emit.now = now
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
        self._emit.out = self._out
        return out

    # ------------------------------------------------------ hooks and local answers

    def add_update_hook(self, kinds: tuple[str, ...], hook: UpdateHook) -> None:
        """Let ``hook`` amend every ``session/update`` of these kinds (see ``UpdateHook``)."""
        self._hooks.add_update_hook(kinds, hook)
        self._hooked_kinds = self._hooks.update_markers


    # ------------------------------------------------------- captures and holds

    # ------------------------------------------------------- what is under way

    def agent_idle(self) -> bool:
        """Nothing is under way at the agent: it owes no answer to the client (held requests
        have not reached it) nor to liminal, the client owes it none, no session is captured or
        being loaded, and its output stands at a line boundary. Only then can its sessions be
        handed to another process of the agent (``liminal.kernel.recycle``)."""
        return (self.agent_alive and len(self._owed.client) == self._held.requests()
                and not self._owed.agent and not self._owed.own and not self._captured
                and not self._loads.under_way() and self._agent_framer.buffered == 0
                and not self._places.lines)

    @property
    def pending_client_requests(self) -> int:
        return len(self._owed.client)

    # ------------------------------------------------------- loads of moved threads

    @property
    def replays_waiting(self) -> int:
        return self._replays.waiting

    # ------------------------------------------------------- either side gone

    def agent_gone(self, now: float, reason: str, *, said: str = "", why: str | None = None) -> None:
        """Rule 7: answer every client request still waiting on the agent with an error ("the
        agent exited before answering METHOD (``reason``); its stderr last said: ``said``"), and
        every one the client sends from now on ("the agent exited (``reason``); ...");
        ``why``, when given, is the whole message for both (an agent that never started)."""
        self.agent_alive = False
        last = f"; its stderr last said: {said}" if said else ""
        self._books.gone_why = why or f"the agent exited ({reason}){last}"
        for key, pending in list(self._owed.client.items()):
            told = why or f"the agent exited before answering {pending.method} ({reason}){last}"
            line = jsonrpc.error_frame(pending.id_json or jsonrpc.encode_id(key), jsonrpc.INTERNAL_ERROR, told)
            self._answer_from_liminal(key, line, now, pending.method, None)
        self._owed.client.clear()
        self._held.clear()  # held prompts are pending client requests too: answered above
        self._replays.agent_gone(now)

    def agent_restarted(self) -> None:
        """A new process of the agent stands in for the one that died (``agent_gone`` answered
        what the old one owed): what the old one owed or was asked is forgotten, threads and
        their backing sessions are kept."""
        self.agent_alive = True
        self._agent_framer = LineFramer(self._client_framer.max_size)
        self._owed.agent.clear()
        self._owed.own.clear()
        self._captured.clear()
        self._trailing.clear()
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

    # ------------------------------------------------------------ agent -> client

    def _agent_run(self, lines: list[bytes | Oversized], at: int, now: float) -> int:
        """The agent's streamed updates from ``lines[at]`` on that form a run
        (``liminal.acp.runs``) about a session no rule but 2 and 10 touches: forwarded and
        tapped whole, as ``_agent_line`` would one by one. Returns where the run ends (``at``
        when there is none)."""
        run = None if self._places.creates else find_run(lines, at, self._hooked_kinds)
        if run is None or run.backing in self._captured or (self._side and run.backing in self._side) \
                or (self._trailing and run.backing in self._trailing):
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
            forwarded = backing not in self._captured and not (
                self._trailing and backing in self._trailing and replayed(line, message))
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
        backing = session_in(message)
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
            self._own.response(line, message, now)
            return
        if isinstance(rpc_id, str) and rpc_id in self._places.creates:
            # A private create given up on (``cancel_own``): its session is still liminal's, ended.
            del self._places.creates[rpc_id]
            created = session_in(message, "result")
            if created is not None:
                self._side.open(created)
                self._side.end(created)
            if self._places.lines:
                self._settle(now)
            return
        pending = self._owed.client.pop(key, None)
        load = self._replays.answered(key) if pending is not None else None
        method = pending.method if pending else None
        thread = pending.thread_id if pending else None
        backing = self.backing_of(thread) if thread else None
        if method in CREATES_SESSION:
            created = session_in(message, "result")
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

    def _oversized(self, line: Oversized, now: float, *, from_client: bool) -> None:
        drop_oversized(line, now, from_client=from_client, cap=self._client_framer.max_size, emit=self._emit,
                       owed=self._owed, answered=self._replays.answered)
