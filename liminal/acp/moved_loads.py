"""Rule 8 of the router (``liminal.acp.router``): a client's load of a thread liminal moved.

The agent replays the session the thread is on now, which is the *compressed* copy: a summary,
recall keys where tool output was. The client must see the thread's real history instead (from
the store, ``liminal.kernel.replay``). So, for each such load, from the request to its answer:

1. ``start``: the router forwards the load to the backing session and captures that session;
   what the agent sends for it meanwhile is kept here (``keep``), not sent.
2. ``answered``: the agent's answer came (or cannot come). ``end`` the load (the router stops
   capturing the session once no load of it is left). An error is forwarded and the captured
   lines dropped; a result is ``park``-ed and the router reports a ``ReplayRequest``.
3. ``finish``: whoever answers the request says whether it has the history. The router sends
   the history (if any), then ``Finished.lines``, then the parked answer.

An agent answers one load at a time, so the lines for a backing session belong to its oldest
load. No I/O here and nothing of the router's maps: session ids come in and go out as they are
given (``Finished.lines`` are in backing ids; the router rewrites them).
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from liminal.acp import jsonrpc

# What a history replay is made of; anything else an agent sends during a load (available
# commands, mode, config options, usage, title) describes the session now and is passed on.
HISTORY_UPDATES = frozenset({"user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
                             "tool_call", "tool_call_update", "plan"})


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    """The client loaded a moved thread and the agent has answered: its history is wanted."""

    token: int  # for ``Router.finish_replay``
    thread_id: str
    backing_id: str
    # The agent's own replay as it sent it (backing ids), for whoever wants to compare.
    agent_lines: tuple[bytes, ...]


@dataclass(slots=True)
class Load:
    """One load of a moved thread, from the client's request to the router's last line of it."""

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
class Finished:
    """What the router sends for a parked load, after the history it was given (if any)."""

    load: Load
    lines: tuple[bytes, ...]  # the agent's replayed lines to pass on, in backing ids


class MovedLoads:
    def __init__(self) -> None:
        self._loading: dict[Any, Load] = {}  # client request key -> its load, until answered
        self._by_backing: dict[str, deque[Load]] = {}  # backing -> its loads, oldest first
        self._parked: dict[int, Load] = {}  # answered, waiting for ``finish``
        self._tokens = itertools.count(1)

    def start(self, key: Any, thread: str, backing: str) -> None:
        """The client's load of ``thread`` goes to ``backing``: the router captures it now."""
        load = Load(next(self._tokens), key, thread, backing)
        self._loading[key] = load
        self._by_backing.setdefault(backing, deque()).append(load)

    def keep(self, backing: str, line: bytes) -> None:
        """A line the agent sent for a captured session: the replay of its oldest load, if any."""
        loads = self._by_backing.get(backing)
        if loads:
            loads[0].captured.append(line)

    def answered(self, key: Any) -> Load | None:
        """The load the agent answers with this id, if it is one; ``end`` or ``park`` it."""
        return self._loading.get(key) if self._loading else None

    def end(self, load: Load) -> bool:
        """The load waits for the agent no more. True: its backing session has no other load,
        so the router stops capturing it."""
        self._loading.pop(load.key, None)
        loads = self._by_backing.get(load.backing)
        if loads is None:
            return False
        if load in loads:
            loads.remove(load)
        if loads:
            return False
        del self._by_backing[load.backing]
        return True

    def park(self, load: Load, answer: bytes, raw: bytes, message: dict[str, Any],
             rpc_id: Any) -> ReplayRequest:
        """The agent's successful ``answer`` (as for the client; ``raw`` as it came) waits for
        ``finish``; the request says what to ask for."""
        load.answer, load.raw, load.message, load.rpc_id = answer, raw, message, rpc_id
        self._parked[load.token] = load
        return ReplayRequest(load.token, load.thread, load.backing, tuple(load.captured))

    def finish(self, token: int, with_history: bool) -> Finished | None:
        """The parked load's last lines: with a history given, the agent's replayed lines that
        are not history (the session's state now); without, all of them. None if unknown."""
        load = self._parked.pop(token, None)
        if load is None:
            return None
        lines = tuple(line for line in load.captured
                      if not (with_history and _update_kind(line) in HISTORY_UPDATES))
        return Finished(load, lines)

    @property
    def parked(self) -> list[int]:
        """Tokens of the loads the agent answered and ``finish`` has not, oldest first."""
        return list(self._parked)

    def under_way(self) -> bool:
        return bool(self._loading or self._parked)

    def unanswered(self) -> list[Load]:
        return list(self._loading.values())

    def forget_unanswered(self) -> None:
        """A new agent process: the old one's loads will never be answered (``agent_gone`` has
        answered the client); parked ones stay for ``finish``."""
        self._loading.clear()
        self._by_backing.clear()


def replayed(line: bytes, message: dict[str, Any] | None) -> bool:
    """The notification (``message``: its parse, when the router made one) is a history
    update: what a load's replay is made of."""
    if message is None:
        return _update_kind(line) in HISTORY_UPDATES
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    return isinstance(update, dict) and update.get("sessionUpdate") in HISTORY_UPDATES


def _update_kind(line: bytes) -> str | None:
    """``params.update.sessionUpdate`` of a notification line, if it has one."""
    message = jsonrpc.parse(line)
    params = message.get("params") if message is not None else None
    update = params.get("update") if isinstance(params, dict) else None
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    return kind if isinstance(kind, str) else None
