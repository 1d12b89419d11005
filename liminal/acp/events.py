"""What the router tells the rest of liminal about the frames it sees.

A ``FrameEvent`` is offered to every tap subscriber for every frame, in both directions,
including liminal's own requests and the frames they cause. It carries the raw bytes exactly as
they crossed the wire (without the line terminator) and, when the line was a JSON object, a
parsed copy. Subscribers must treat both as read-only: the router shares them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Direction(enum.Enum):
    CLIENT_TO_AGENT = "c2a"
    AGENT_TO_CLIENT = "a2c"
    # liminal's own traffic with the agent: requests it sends, the answers and the
    # notifications they cause (which the client never sees).
    LIMINAL_TO_AGENT = "l2a"
    AGENT_TO_LIMINAL = "a2l"
    # Frames liminal itself writes to the client (errors for refused or orphaned requests).
    LIMINAL_TO_CLIENT = "l2c"


class Kind(enum.Enum):
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    INVALID = "invalid"  # not JSON, not an object, or not JSON-RPC
    OVERSIZED = "oversized"  # over the frame cap; ``raw`` holds only the head


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
