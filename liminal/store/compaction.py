"""What compacting a store an older liminal wrote removes (``Store.compact``), decided without I/O.

Older liminals stored a thread's whole history again at every ``session/load``: the agent's
replay, as frames and as messages marked ``replayed``, and for a moved thread the compressed
session's replay liminal captured and liminal's own replay from the store. Through clients that
start liminal for every prompt (acpx), 3,134 of a store's 3,470 message rows were such copies,
and the store was 53 MB against 3.7 MB of session files. No reader shows them: a thread's
history keeps only its first load's replay, the conversation from before liminal
(``records.replays_kept``). So they go, with the history frames of the loads they came from;
the first load's replay and every live turn stay. A backend reads what these functions take,
and deletes what they name, a thread at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from liminal.store.records import HISTORY_UPDATES, LOAD, frame_id, replays_kept

# Where a store notes that it was compacted (SQLite's ``meta`` table, MongoDB's ``meta``).
MARKER = "loads_compacted"
# Frames a load's window is read from: its request, its answer, and a prompt that ends a load
# that had none (the process died during it).
WINDOW_METHODS = ("session/load", "session/prompt")
_REQUEST = ("c2a", "l2a")
_ANSWER = {"c2a": "a2c", "l2a": "a2l"}
_NO_END = 1 << 62


@dataclass(frozen=True, slots=True)
class Row:
    """A message, as much of it as compaction reads."""

    thread: str
    id: str
    order: str
    replayed: bool
    kind: str


@dataclass(frozen=True, slots=True)
class Plan:
    """What goes of the messages: ``repeated`` (ids, by thread), and the replayed rows each
    thread keeps (its first load's), whose loads keep their frames too."""

    repeated: dict[str, list[str]]
    kept: dict[str, set[str]]


def plan(rows: Iterable[Row]) -> Plan:
    """The replayed rows each thread's history does not show (``records.replays_kept``)."""
    first_live: dict[str, str] = {}
    replays: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        if row.replayed:
            replays.setdefault(row.thread, []).append((row.id, row.order))
        elif row.kind != LOAD and (row.thread not in first_live or row.order < first_live[row.thread]):
            first_live[row.thread] = row.order
    repeated: dict[str, list[str]] = {}
    kept: dict[str, set[str]] = {}
    for thread, found in replays.items():
        found.sort(key=lambda m: (m[1], m[0]))
        kept[thread] = replays_kept(found, first_live.get(thread))
        gone = [m[0] for m in found if m[0] not in kept[thread]]
        if gone:
            repeated[thread] = gone
    return Plan(repeated, kept)


@dataclass(frozen=True, slots=True)
class LoadFrame:
    """A frame of ``WINDOW_METHODS``, as much of it as finding the loads reads."""

    connection: str
    seq: int
    direction: str
    thread: str | None
    rpc_id: str | None
    method: str


@dataclass(frozen=True, slots=True)
class Window:
    """A load: the frames of ``thread`` on ``connection`` after ``start`` and before ``end``
    (its request's and its answer's sequence numbers) are its replay."""

    thread: str
    connection: str
    start: int
    end: int

    def ids(self) -> tuple[str, str]:
        """The frame ids just outside the window: its frames' ids sort between the two."""
        end = frame_id(self.connection, self.end) if self.end < 10**10 else self.connection + ";"
        return frame_id(self.connection, self.start), end

    def holds(self, message_id: str) -> bool:
        connection, _, seq = message_id.rpartition(":")
        return connection == self.connection and seq.isdigit() and self.start < int(seq) < self.end


def windows(frames: Iterable[LoadFrame]) -> list[Window]:
    """Every load in ``frames``: a ``session/load`` request (the client's, or liminal's own) to
    its answer on the same connection; one with no answer (the process died during it) ends at
    the thread's next prompt or load there, or with the connection."""
    by_connection: dict[str, list[LoadFrame]] = {}
    for frame in frames:
        by_connection.setdefault(frame.connection, []).append(frame)
    found: list[Window] = []
    for connection, run in by_connection.items():
        run.sort(key=lambda f: f.seq)
        for at, request in enumerate(run):
            if (request.method != "session/load" or request.direction not in _REQUEST
                    or not request.thread):
                continue
            end = _NO_END
            for later in run[at + 1:]:
                answer = (later.direction == _ANSWER[request.direction]
                          and later.method == "session/load" and later.rpc_id == request.rpc_id)
                again = (later.direction in _REQUEST and later.thread == request.thread
                         and later.method in WINDOW_METHODS)
                if answer or again:
                    end = later.seq
                    break
            found.append(Window(request.thread, connection, request.seq, end))
    return found


def repeated_loads(found: Sequence[Window], kept: dict[str, set[str]]) -> list[Window]:
    """The loads whose replay no thread keeps: every one but those holding a kept row."""
    return [w for w in found if not any(w.holds(m) for m in kept.get(w.thread, ()))]


def history_update(raw: bytes) -> bool:
    """Whether a ``session/update`` frame is a piece of the thread's history
    (``records.HISTORY_UPDATES``), not the session's state (commands, mode, usage, title)."""
    try:
        message: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    params = message.get("params") if isinstance(message, dict) else None
    update = params.get("update") if isinstance(params, dict) else None
    return isinstance(update, dict) and update.get("sessionUpdate") in HISTORY_UPDATES
