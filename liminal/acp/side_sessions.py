"""Side sessions: sessions liminal opens on the agent for itself (rule 11 of the router).

liminal asks the agent it already runs for a summary of a range of a thread's older turns
(``liminal.kernel.summaries``) in a session of its own. Nothing of such a session may reach
the client or the store: it is no thread of the person's. The router opens one when a
``private`` own request creates a session (``session/new``) and from then on, for that session:

- the agent's notifications (the summary's text as it streams) are kept here, never forwarded
  nor tapped, until liminal takes them (``take``);
- the agent's requests (``session/request_permission``, a file read, a terminal) are answered
  here, refused: a permission with the agent's own reject option (else ``cancelled``),
  anything else with an error. The side session runs no tool, whatever the model asks for;
- liminal's own requests and notifications about it (the prompt holding the person's turns,
  the cancel of a turn given up) are not tapped.

This object only keeps the lines and words the refusals; the router decides where frames go.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from liminal.acp import jsonrpc

REFUSED = "liminal's side session runs no tools"


class SideSessions:
    def __init__(self) -> None:
        self._lines: dict[str, list[bytes]] = {}
        # Ended ones stay liminal's: an agent may speak of a side session after answering its
        # last prompt (a usage update), and the client never opened it.
        self._ended: set[str] = set()

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._lines or session_id in self._ended

    def __bool__(self) -> bool:
        return bool(self._lines) or bool(self._ended)

    def open(self, session_id: str) -> None:
        self._lines.setdefault(session_id, [])

    def keep(self, session_id: str, line: bytes) -> None:
        kept = self._lines.get(session_id)
        if kept is not None:  # an ended one's late lines go nowhere
            kept.append(line)

    def take(self, session_id: str) -> list[bytes]:
        """The notifications the agent sent for it since the last ``take``."""
        lines = self._lines.get(session_id)
        if lines is None:
            return []
        taken = list(lines)
        lines.clear()
        return taken

    def end(self, session_id: str) -> None:
        """liminal is done with it: its lines are dropped from now on (an id, not its lines,
        is kept for the life of the router)."""
        if self._lines.pop(session_id, None) is not None:
            self._ended.add(session_id)

    def clear(self) -> None:
        self._ended.update(self._lines)
        self._lines.clear()


@dataclass(slots=True)
class _Unplaced:
    line: bytes
    session: str
    at: float


class Placement:
    """Before a private create is answered: the session ids the client named or was told (the
    router knows the others: its thread map, captures, side sessions), the private creates
    unanswered (rpc id -> (sent at, cancelled); a cancelled one stays until answered or stale),
    and the agent's lines about a session no one has placed yet, waiting in order."""

    def __init__(self) -> None:
        self.known: set[str] = set()
        self.creates: dict[str, tuple[float, bool]] = {}
        self.lines: deque[_Unplaced] = deque()
        self.max_seconds = 30.0

    def wait(self, line: bytes, session: str, now: float, max_bytes: int) -> bool:
        """Keep a line; False when what waits is past ``max_bytes`` (settle with overflow)."""
        self.lines.append(_Unplaced(line, session, now))
        return sum(len(u.line) for u in self.lines) <= max_bytes

    def cancel(self, rpc_id: str) -> None:
        if rpc_id in self.creates:
            self.creates[rpc_id] = (self.creates[rpc_id][0], True)

    def settle(self, now: float, placed: Callable[[str], bool], forward: Callable[[bytes, float], None],
               problems: list[str], overflow: bool = False) -> None:
        """The lines whose session an answer has placed (or all, once no private create is left
        unanswered) go on to ``forward``, in order; past the bounds, as the client's."""
        for rpc_id, (since, cancelled) in list(self.creates.items()):
            if cancelled and now - since > self.max_seconds:
                del self.creates[rpc_id]  # its answer will not come now
        waiting, self.lines = self.lines, deque()
        for n, held in enumerate(waiting):
            if not self.creates or placed(held.session):
                forward(held.line, held.at)
                continue
            if (overflow and n == 0) or now - held.at > self.max_seconds:
                problems.append(f"the agent spoke of session {held.session}, which no answer "
                                "placed in time; forwarded as the client's")
                self.known.add(held.session)  # and what follows of it, in order
                forward(held.line, held.at)
                continue
            self.lines.append(held)


def refusal(message: dict[str, Any]) -> bytes:
    """liminal's answer to a request the agent made in a side session."""
    id_json = jsonrpc.encode_id(message["id"])
    if message.get("method") != "session/request_permission":
        return jsonrpc.error_frame(id_json, jsonrpc.INTERNAL_ERROR, REFUSED)
    params = message.get("params")
    options = params.get("options") if isinstance(params, dict) else None
    reject = None
    for option in options if isinstance(options, list) else []:
        if isinstance(option, dict) and str(option.get("kind", "")).startswith("reject") \
                and isinstance(option.get("optionId"), str):
            reject = option["optionId"]
            break
    outcome: dict[str, Any] = ({"outcome": "selected", "optionId": reject} if reject is not None
                               else {"outcome": "cancelled"})
    return jsonrpc.result_frame(id_json, orjson.dumps({"outcome": outcome}))


def text_of(lines: list[bytes]) -> str:
    """The agent's answer in a side session: its ``agent_message_chunk`` texts, in order."""
    parts: list[str] = []
    for line in lines:
        message = jsonrpc.parse(line)
        params = message.get("params") if message is not None else None
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict) or update.get("sessionUpdate") != "agent_message_chunk":
            continue
        content = update.get("content")
        if isinstance(content, dict) and content.get("type") == "text" and isinstance(content.get("text"), str):
            parts.append(content["text"])
    return "".join(parts)
