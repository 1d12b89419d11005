"""liminal's own frames, as the router (``liminal.acp.router``) sends them: requests to the agent
(rule 3: ids ``liminal-<random>-N``, answers consumed, never the client's), notifications to the
agent and to the client, notes only the taps see, and what waits for a thread's next turn. A
``private`` request is about a side session or creates one (rule 11): never tapped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from liminal.acp import jsonrpc
from liminal.acp.emitter import Emitter
from liminal.acp.events import Direction, Kind
from liminal.acp.message_ids import MessageIds
from liminal.acp.owed import Owed, Pending
from liminal.acp.side_sessions import Placement, SideSessions
from liminal.acp.threads import ThreadMap

CREATES_SESSION = frozenset({"session/new", "session/fork"})


def session_in(message: dict[str, Any], member: str = "params") -> str | None:
    """``message[member].sessionId`` when it is a string (``params`` or ``result``)."""
    part = message.get(member)
    session = part.get("sessionId") if isinstance(part, dict) else None
    return session if isinstance(session, str) else None


class OwnFrames:
    def __init__(self, *, emit: Emitter, owed: Owed, threads: ThreadMap, ids: MessageIds, side: SideSessions,
                 places: Placement, own_ids: Iterator[str], settle: Callable[[float], None]) -> None:
        self._emit = emit
        self._owed = owed
        self._threads = threads
        self._ids = ids
        self._side = side
        self._places = places
        self._own_ids = own_ids
        self._settle = settle  # rule 11: the agent's lines waiting for an answer to place them
        # Notifications waiting for their thread's next turn (``notify_in_next_turn``).
        self._turn_notices: dict[str, list[tuple[str, Any]]] = {}

    def send_request(self, method: str, params: Any, now: float, *, thread_id: str | None = None,
                     private: bool = False) -> str:
        """Queue a request of liminal's own to the agent; its answer comes in ``own_responses``.
        ``private``: about a side session (rule 11), or creating one: never tapped."""
        rpc_id = next(self._own_ids)
        line = jsonrpc.request_frame(rpc_id, method, params)
        backing = params.get("sessionId") if isinstance(params, dict) else None
        private = private or (isinstance(backing, str) and backing in self._side)
        self._owed.own[rpc_id] = Pending(method, thread_id, None, private=private)
        if private and method in CREATES_SESSION:
            self._places.creates[rpc_id] = (now, False)
        self._emit.out.to_agent.append(line)
        if private:
            return rpc_id
        if thread_id is None and isinstance(backing, str):
            # A session a thread was on (the close of the one a move left) is the thread's.
            thread_id = self._threads.thread_of(backing)
        self._emit.tap(Direction.LIMINAL_TO_AGENT, Kind.REQUEST, now, line, None, thread_id, backing, method, rpc_id)
        return rpc_id

    def cancel_own(self, rpc_id: str) -> None:
        """Forget an own request (its answer, if one ever comes, is then dropped quietly; a
        private create's still makes its session liminal's, ended: rule 11)."""
        self._owed.own.pop(rpc_id, None)
        self._places.cancel(rpc_id)

    def response(self, line: bytes, message: dict[str, Any], now: float) -> None:
        """The agent's answer to an own request (its id is in ``Owed.own``)."""
        rpc_id = message["id"]
        own = self._owed.own.pop(rpc_id)
        created = session_in(message, "result") if own.method in CREATES_SESSION else None
        if own.private:
            if created is not None:
                self._side.open(created)
            if self._places.creates.pop(rpc_id, None) is not None and self._places.lines:
                self._settle(now)  # the side session's early lines kept, others forwarded
            self._emit.out.own_responses.append((rpc_id, message))
            return
        if created is not None:
            if own.thread_id is not None:
                # A session liminal opened for a thread (``/clear``): what the agent says of it
                # from now on reaches the client under the thread's id, even before the
                # component that asked binds the thread to it.
                self._threads.adopt(created, own.thread_id)
            self._places.known.add(created)  # liminal's, for a thread: not a side session (rule 11)
            if self._places.lines:
                self._settle(now)
        self._emit.out.own_responses.append((rpc_id, message))
        backing = session_in(message, "result") or (
            self._threads.backing_of(own.thread_id) if own.thread_id else None)
        self._emit.tap(Direction.AGENT_TO_LIMINAL, Kind.RESPONSE, now, line, message, own.thread_id, backing,
                       own.method, rpc_id)

    def notify_agent(self, method: str, params: Any, now: float, *, thread_id: str | None = None) -> None:
        """A notification of liminal's own to the agent (``params`` in backing ids): the cancel
        of a turn that ``session/rewind`` cuts short, or of a side session's given up."""
        line = jsonrpc.notification_frame(method, params)
        self._emit.out.to_agent.append(line)
        backing = params.get("sessionId") if isinstance(params, dict) else None
        if self._side and backing in self._side:
            return  # rule 11: about a side session (its cancel), never tapped
        thread = thread_id if thread_id is not None else (
            self._threads.thread_of(backing) if isinstance(backing, str) else None)
        self._emit.tap(Direction.LIMINAL_TO_AGENT, Kind.NOTIFICATION, now, line, None, thread,
                       backing if isinstance(backing, str) else None, method, None)

    def notify_client(self, method: str, params: Any, now: float) -> None:
        """A notification of liminal's own to the client (``params`` already in thread ids)."""
        thread = params.get("sessionId") if isinstance(params, dict) else None
        if method == "session/update" and isinstance(thread, str) and isinstance(params, dict):
            params = self._ids.own_chunk(thread, params, Direction.LIMINAL_TO_CLIENT.value)
        line = jsonrpc.notification_frame(method, params)
        self._emit.out.client.append(line)
        self._emit.tap(Direction.LIMINAL_TO_CLIENT, Kind.NOTIFICATION, now, line, None,
                       thread, self._threads.backing_of(thread) if thread else None, method, None)

    def notify_in_next_turn(self, thread_id: str, method: str, params: Any) -> None:
        """A notification of liminal's own for the thread's next turn: sent to the client right
        after the thread's next ``session/prompt`` goes to the agent, so that it arrives inside
        that turn. Sent between turns, after a prompt was answered, a headless client (one that
        prints a turn's updates) glues it to the previous answer."""
        self._turn_notices.setdefault(thread_id, []).append((method, params))

    def turn_started(self, thread_id: str, now: float) -> None:
        """A prompt of the thread went to the agent: what waited for its next turn goes now."""
        for method, params in self._turn_notices.pop(thread_id, ()) if self._turn_notices else ():
            self.notify_client(method, params, now)

    def note(self, method: str, params: dict[str, Any], now: float, *, thread_id: str) -> None:
        """Record what liminal did (``liminal/swap``) as a notification frame that only the taps
        see: the store keeps it with the conversation's frames, in order."""
        line = jsonrpc.notification_frame(method, params)
        self._emit.tap(Direction.LIMINAL_NOTE, Kind.NOTIFICATION, now, line,
                       {"jsonrpc": "2.0", "method": method, "params": params}, thread_id,
                       self._threads.backing_of(thread_id), method, None)
