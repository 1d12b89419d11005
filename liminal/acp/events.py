"""What the router tells the rest of liminal about the frames it sees.

A ``FrameEvent`` is offered to every tap subscriber for every frame, in both directions,
including liminal's own requests and the frames they cause. It carries the raw bytes exactly as
they crossed the wire (without the line terminator) and, when the line was a JSON object, a
parsed copy. Subscribers must treat both as read-only: the router shares them.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, ClassVar, cast

# ``Kind`` is JSON-RPC's word for a line; named here too, where every subscriber reads it.
from liminal.acp.jsonrpc import Kind as Kind
from liminal.acp.jsonrpc import parse


class Direction(enum.Enum):
    CLIENT_TO_AGENT = "c2a"
    AGENT_TO_CLIENT = "a2c"
    # liminal's own traffic with the agent: requests it sends, the answers and the
    # notifications they cause (which the client never sees).
    LIMINAL_TO_AGENT = "l2a"
    AGENT_TO_LIMINAL = "a2l"
    # Frames liminal itself writes to the client (errors for refused or orphaned requests).
    LIMINAL_TO_CLIENT = "l2c"
    # Client requests liminal answers itself (its commands): the agent never sees them, and
    # nothing that watches the agent's traffic may take them for its own.
    CLIENT_TO_LIMINAL = "c2l"
    # Notes liminal records about what it did (a swap), for the store; never on a wire.
    LIMINAL_NOTE = "note"


@dataclass(frozen=True, slots=True)
class FrameEvent:
    direction: Direction
    kind: Kind
    time: float  # wall clock (time.time()) at arrival
    raw: bytes  # the line as received, without its "\n"
    message: dict[str, Any] | None  # parsed copy; None for INVALID and OVERSIZED
    connection_id: str
    # The client-facing thread id and the agent's backing session id, when the frame has one.
    thread_id: str | None
    backing_id: str | None
    # For requests and notifications the method; for responses the method of the request.
    method: str | None
    rpc_id: Any  # JSON-RPC id, None for notifications
    # How long the frame actually was (raw may be just the head for OVERSIZED).
    size: int


# The same slots as FrameEvent, without the frozen ``__setattr__``. The router makes one event per
# frame, and a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
# which costs about 1.2 us for these eleven fields: more than parsing the frame. Filling this twin
# with plain slot stores and then giving the object FrameEvent's class (allowed because the two
# layouts are identical) takes about 0.4 us and yields an ordinary, frozen FrameEvent.
_Unfrozen = dataclasses.make_dataclass(
    "_Unfrozen", [(f.name, f.type) for f in dataclasses.fields(FrameEvent)], slots=True
)


def make_event(
    direction: Direction,
    kind: Kind,
    time: float,
    raw: bytes,
    message: dict[str, Any] | None,
    connection_id: str,
    thread_id: str | None,
    backing_id: str | None,
    method: str | None,
    rpc_id: Any,
    size: int,
) -> FrameEvent:
    """``FrameEvent(...)`` with the same arguments and result, for the per-frame path."""
    event: Any = _Unfrozen(direction, kind, time, raw, message, connection_id, thread_id,
                           backing_id, method, rpc_id, size)
    event.__class__ = FrameEvent
    return cast(FrameEvent, event)


_UNPARSED: Any = object()

# A streamed ``session/update`` as all four pinned adapters write it: these bytes, the session id,
# then the update's kind. The router routes such a line from its bytes (``LazyFrameEvent``).
UPDATE_PREFIX = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'
UPDATE_KIND_AT = b'","update":{"sessionUpdate":"'  # right after the session id, canonically
_UPDATE_PREFIX_LEN = len(UPDATE_PREFIX)


def kind_markers(*kinds: str) -> tuple[bytes, ...]:
    """Update kinds as a canonical line spells them from the end of its session id on: what
    ``LazyFrameEvent.update_kind_in`` and the router match (one ``startswith`` for them all)."""
    return tuple(UPDATE_KIND_AT + kind.encode() + b'"' for kind in kinds)


class LazyFrameEvent(FrameEvent):
    """A ``FrameEvent`` whose parsed copy is made when first asked for.

    The router's fast path (a streamed ``session/update`` recognised from its canonical first
    bytes) routes without parsing; a subscriber that reads ``message`` pays for the parse, one
    that does not (most of them, for most chunks) never does. Its fields, once read, are those
    of the eager event for the same line (both parse with ``jsonrpc.parse``).
    """

    __slots__ = ()

    @property
    def message(self) -> dict[str, Any] | None:
        value = _SLOT_MESSAGE.__get__(self, FrameEvent)
        if value is _UNPARSED:
            value = parse(self.raw)
            _SLOT_MESSAGE.__set__(self, value)
        return cast("dict[str, Any] | None", value)

    @message.setter
    def message(self, value: dict[str, Any] | None) -> None:  # only reached from __init__
        _SLOT_MESSAGE.__set__(self, value)

    def update_kind_in(self, markers: tuple[bytes, ...]) -> bool | None:
        """Whether the update's kind is one of ``markers`` (``kind_markers``), read from the
        bytes: two comparisons at a known place, where a search of the line (a few hundred
        bytes, for every streamed chunk) costs far more. None when the update does not follow
        the session id in this line; then only the parsed copy can say."""
        raw = self.raw
        at = _UPDATE_PREFIX_LEN + len(self.backing_id or "")  # the id is ASCII (the router's rule)
        if raw.startswith(markers, at):
            return True
        return False if raw.startswith(UPDATE_KIND_AT, at) else None


_SLOT_MESSAGE: Any = FrameEvent.__dict__["message"]


def make_lazy_event(
    direction: Direction,
    kind: Kind,
    time: float,
    raw: bytes,
    connection_id: str,
    thread_id: str | None,
    backing_id: str | None,
    method: str | None,
    size: int,
) -> FrameEvent:
    """Like ``make_event`` for a notification whose parsed copy is made on demand."""
    event: Any = _Unfrozen(direction, kind, time, raw, _UNPARSED, connection_id, thread_id,
                           backing_id, method, None, size)
    event.__class__ = LazyFrameEvent
    return cast(FrameEvent, event)


@dataclass(slots=True)
class FrameRun:
    """Consecutive streamed ``session/update`` lines of the agent's, from one read, for one session
    and of one update kind, in the canonical form (``UPDATE_PREFIX``): the frames' events differ
    only in ``raw`` and ``size``, so the router makes this one object for all of them and a
    subscriber that takes runs (``liminal.acp.taps.RunSubscriber``) never sees an event per line.
    ``events()`` makes an event of each line (a ``LazyFrameEvent``, as the router makes for
    one line) for a subscriber that takes events one by one (made once, shared)."""

    direction: Direction
    time: float
    connection_id: str
    thread_id: str
    backing_id: str
    raws: list[bytes]
    _events: list[FrameEvent] | None = None

    kind: ClassVar[Kind] = Kind.NOTIFICATION
    method: ClassVar[str] = "session/update"

    def __len__(self) -> int:
        return len(self.raws)

    def events(self) -> list[FrameEvent]:
        if self._events is None:
            d, t, c, th, b = self.direction, self.time, self.connection_id, self.thread_id, self.backing_id
            self._events = [make_lazy_event(d, Kind.NOTIFICATION, t, raw, c, th, b, "session/update", len(raw))
                            for raw in self.raws]
        return self._events

    def update_kind_in(self, markers: tuple[bytes, ...]) -> bool:
        """Whether the lines' update kind (one for all of them) is one of ``markers``
        (``kind_markers``), as ``LazyFrameEvent.update_kind_in`` reads it."""
        return self.raws[0].startswith(markers, _UPDATE_PREFIX_LEN + len(self.backing_id))


def expand(taps: list[FrameEvent | FrameRun]) -> list[FrameEvent]:
    """Every event of ``taps``, a run's lines each as their own."""
    if not any(tap.__class__ is FrameRun for tap in taps):
        return taps  # type: ignore[return-value]
    out: list[FrameEvent] = []
    for tap in taps:
        if tap.__class__ is FrameRun:
            out += tap.events()
        else:
            out.append(tap)  # type: ignore[arg-type]
    return out
