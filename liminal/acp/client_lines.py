"""The client's lines, as the router's rules (``liminal.acp.router``) send them on: a response
goes back to the agent; a request is owed an answer (``Owed.client``), or kept for liminal by a
hook (``LOCAL``); a request to an agent that is gone is refused at once (rule 7); a client's id
like an orphan's is renamed (rule 9); a held thread's frames wait in its queue (rule 5), and a
cancel answers its held prompts; a load of a moved thread is captured (rule 8, through
``start_load``); the rest goes to the agent, its session id rewritten for the thread's backing
(rule 2). What the rules remember is the router's ``Books``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from liminal.acp import jsonrpc
from liminal.acp.emitter import Emitter
from liminal.acp.events import Direction, Kind
from liminal.acp.framing import Oversized
from liminal.acp.holds import Holds
from liminal.acp.hooks import Hooks, LocalRequest
from liminal.acp.message_ids import MessageIds
from liminal.acp.owed import Owed, Pending
from liminal.acp.own_frames import session_in
from liminal.acp.session_ids import rewrite
from liminal.acp.side_sessions import Placement
from liminal.acp.takeover import TakeOver
from liminal.acp.threads import ThreadMap


@dataclass(slots=True, eq=False)
class Books:
    """What the router's rules remember that its client side acts on too."""

    threads: ThreadMap  # rules 2 and 4
    owed: Owed
    held: Holds  # rule 5
    places: Placement  # rule 11
    takeover: TakeOver  # rule 9
    hooks: Hooks
    ids: MessageIds  # rule 10
    agent_alive: bool = True  # rule 7
    gone_why: str = ""  # rule 7: what a request sent to a dead agent is told


class ClientLines:
    def __init__(self, *, books: Books, emit: Emitter, start_load: Callable[[Any, str, str], None],
                 turn_started: Callable[[str, float], None], oversized: Callable[[Oversized, float], None],
                 max_held_per_thread: int, max_held_bytes: int) -> None:
        self._books = books
        self._threads, self._owed, self._held = books.threads, books.owed, books.held
        self._places, self._takeover, self._hooks, self._ids = books.places, books.takeover, books.hooks, books.ids
        self._emit = emit
        self._start_load = start_load  # rule 8: a client's load of a thread, on its way to a backing
        self._turn_started = turn_started  # a prompt went to the agent (``OwnFrames.turn_started``)
        self._oversized = oversized  # rule 6
        self._max_frames = max_held_per_thread
        self._max_bytes = max_held_bytes

    def release(self, thread_id: str) -> int:
        """Stop holding the thread and forward what waited, for its backing id as of now."""
        waiting = self._held.take(thread_id)
        backing = self._threads.backing_of(thread_id)
        for held in waiting:
            method = held.message.get("method")
            if method == "session/load" and "id" in held.message:
                self._start_load(held.message["id"], thread_id, backing)
            self._emit.out.to_agent.append(rewrite(held.line, thread_id, backing))
            if method == "session/prompt":
                self._turn_started(thread_id, self._emit.now)
        return len(waiting)

    def line(self, line: bytes | Oversized, now: float) -> None:
        if isinstance(line, Oversized):
            self._oversized(line, now)
            return
        message = jsonrpc.parse(line)
        kind = jsonrpc.classify(message)
        if kind is Kind.INVALID or message is None:
            if line.strip():
                self._emit.out.problems.append(f"client sent a line that is not JSON-RPC: {line[:200]!r}")
            self._emit.out.to_agent.append(line)
            self._emit.tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, None, None, None, None)
            return
        if kind is Kind.RESPONSE:  # to a request of the agent's
            asked, about = self._owed.agent.pop(jsonrpc.id_key(message["id"]), (None, None))
            self._emit.out.to_agent.append(line)
            self._emit.tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, about,
                      self._threads.backing_of(about) if about else None, asked, message["id"])
            return
        if kind is Kind.REQUEST and self._takeover.active:
            line, message = self._takeover.incoming(line, message)
        method: str = message["method"]
        if not self._books.agent_alive and kind is Kind.REQUEST:  # rule 7: nothing can answer it
            self._refuse_dead(line, message, now)
            return
        thread = session_in(message)
        if thread is not None:
            self._places.known.add(thread)  # rule 11: the client's, whatever the agent says of it
        if kind is Kind.REQUEST:
            kept = self._request(line, message, thread, now)
            if kept is None:
                return  # for liminal to answer
            line, message = kept
        # Read after the request hooks: one may bind the thread first (``liminal.kernel.swap``,
        # at a load of a thread another liminal on the home moved since this one read the journal).
        backing = self._threads.backing.get(thread, thread) if thread is not None else None
        # While a thread is held, what the client sends about it, and what it sends about
        # no session at all, waits in the thread's queue: the agent sees the client's order
        # (a set_mode sent after a prompt still arrives after it). Other threads pass.
        holder = self._held.holder(thread)
        if holder is not None:
            if method != "session/cancel":
                self._hold_back(holder, line, message)
                self._prompt_tapped(method, kind, message)
                self._emit.tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, thread, backing, method,
                          message.get("id"))
                return
            self._cancel_held(holder, now)
        if thread is not None and method == "session/load" and kind is Kind.REQUEST:
            self._start_load(message["id"], thread, backing or thread)
        forwarded = line if thread is None or backing == thread else rewrite(line, thread, backing or thread)
        self._emit.out.to_agent.append(forwarded)
        self._prompt_tapped(method, kind, message)
        self._emit.tap(Direction.CLIENT_TO_AGENT, kind, now, line, message, thread, backing, method,
                  message.get("id"))
        if method == "session/prompt" and thread is not None:
            self._turn_started(thread, now)

    def _refuse_dead(self, line: bytes, message: dict[str, Any], now: float) -> None:
        rpc_id = message["id"]
        thread = session_in(message)
        self._emit.tap(Direction.CLIENT_TO_LIMINAL, Kind.REQUEST, now, line, message, thread, None,
                  message["method"], rpc_id)
        self._emit.answer_from_liminal(jsonrpc.id_key(rpc_id), jsonrpc.error_frame(
            jsonrpc.encode_id(rpc_id, line), jsonrpc.INTERNAL_ERROR, self._books.gone_why), now,
            message["method"], thread)

    def _prompt_tapped(self, method: str, kind: Kind, message: dict[str, Any]) -> None:
        """Rule 10: a client's prompt is about to be tapped; its frame's id is its user message's."""
        if method == "session/prompt" and kind is Kind.REQUEST and self._ids.stamping:
            pending = self._owed.client.get(jsonrpc.id_key(message["id"]))
            if pending is not None:
                pending.message_id = self._ids.next_id()

    def _request(self, line: bytes, message: dict[str, Any], thread: str | None,
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
        local, amended_line, amended = self._hooks.request(method, message, thread, line, self._emit.out.problems)
        if local:
            backing = self._threads.backing.get(thread, thread) if thread is not None else None
            self._owed.local[key] = pending
            if method == "session/prompt" and self._ids.stamping:
                pending.message_id = self._ids.next_id()
            self._emit.out.local.append(LocalRequest(key, method, thread, amended, self._ids.next_id()))
            self._emit.tap(Direction.CLIENT_TO_LIMINAL, Kind.REQUEST, now, line, message, thread, backing, method,
                      rpc_id)
            return None
        self._owed.client[key] = pending
        return amended_line, amended

    def _hold_back(self, thread: str, line: bytes, message: dict[str, Any]) -> None:
        if not self._held.add(thread, line, message, self._max_frames, self._max_bytes):
            self._emit.out.problems.append(f"too many frames held for {thread}; releasing them")
            self.release(thread)

    def forward_kept(self, line: bytes, message: dict[str, Any], thread: str | None, now: float) -> None:
        """A request a hook kept goes on to the agent (``forward_local``) as the client's own would:
        held while its thread is (rule 5), a load of a moved thread captured (rule 8)."""
        if thread is not None and thread in self._held:
            self._hold_back(thread, line, message)
            return
        backing = self._threads.backing.get(thread, thread) if thread is not None else None
        if message["method"] == "session/load" and thread is not None:
            self._start_load(message["id"], thread, backing or thread)
        self._emit.out.to_agent.append(line if thread is None or backing == thread else rewrite(line, thread, backing or thread))
        if message["method"] == "session/prompt" and thread is not None:
            self._turn_started(thread, now)

    def _cancel_held(self, thread: str, now: float) -> None:
        """A cancel for a held thread: its held prompts never reached the agent; answer them."""
        for held in self._held.take_prompts(thread):
            rpc_id = held.message.get("id")
            key = jsonrpc.id_key(rpc_id)
            self._owed.client.pop(key, None)
            line = jsonrpc.result_frame(jsonrpc.encode_id(rpc_id, held.line), b'{"stopReason":"cancelled"}')
            self._emit.answer_from_liminal(key, line, now, "session/prompt", thread)
