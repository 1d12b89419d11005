"""Where everything the router (``liminal.acp.router``) and the objects it drives send ends up:
the ``Output`` the shell takes, the taps' events, and the one door every answer to a client
request leaves through (rule 9 applies there)."""

from __future__ import annotations

from typing import Any

from liminal.acp.events import Direction, Kind, make_event
from liminal.acp.message_ids import MessageIds
from liminal.acp.output import Output
from liminal.acp.takeover import TakeOver
from liminal.acp.threads import ThreadMap


class Emitter:
    def __init__(self, *, connection_id: str, tapping: bool, ids: MessageIds, takeover: TakeOver,
                 threads: ThreadMap) -> None:
        self.out = Output()  # replaced at each take: hold ``self.out``, never a copy of it
        self.connection_id = connection_id
        self.tapping = tapping
        self._ids = ids
        self._takeover = takeover
        self._threads = threads
        self.now = 0.0  # the time of the last bytes fed: for what is sent without a time of its own

    def tap(self, direction: Direction, kind: Kind, now: float, raw: bytes, message: dict[str, Any] | None,
            thread: str | None, backing: str | None, method: str | None, rpc_id: Any, *,
            size: int | None = None) -> None:
        # Rule 10: every event counts, tapped or not (its sequence number is its frame id's).
        self._ids.tapped(method, kind is Kind.NOTIFICATION, thread, direction.value, raw, message)
        if self.tapping:
            self.out.taps.append(make_event(direction, kind, now, raw, message, self.connection_id, thread,
                                            backing, method, rpc_id, len(raw) if size is None else size))

    def answer_client(self, key: Any, line: bytes) -> None:
        """Every answer to a client request leaves through here (rule 9 applies to all)."""
        out = self._takeover.outgoing(key, line) if self._takeover.active else line
        if out is not None:  # None: the answer to a request of the client that left
            self.out.client.append(out)

    def answer_from_liminal(self, key: Any, line: bytes, now: float, method: str | None,
                            thread: str | None) -> None:
        self.answer_client(key, line)
        self.tap(Direction.LIMINAL_TO_CLIENT, Kind.RESPONSE, now, line, None, thread,
                 self._threads.backing_of(thread) if thread else None, method, None)
