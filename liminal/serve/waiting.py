"""What waits in a WebSocket connection, counted in bytes (``liminal.serve.leg``).

``Inbox``: the client's messages received and not yet handed on, in order: at most
``serve.max_message_bytes`` per connection (and ``SMALL_ROOM`` more of messages of
``SMALL_MESSAGE`` or less: a cancel behind a large prompt still goes), and within the server's
``ByteBudget`` (``serve.buffer_bytes``; small messages always pass). A message past either is
refused, never kept.

``Outbox``: the lines the proxy wrote for the client, sent in order as text frames by one task,
counted in the connection and in the server's budget. Past ``serve.queue_bytes`` the agent is
paused (a client that reads slowly must not make liminal hold everything the agent writes)
until the client has taken three quarters of it; a client that has gone takes nothing, so its
outbox is dropped and the agent goes on.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection

SMALL_MESSAGE = 64 * 1024  # never refused for the server's budget (a cancel must get through)
SMALL_ROOM = 1024 * 1024  # and a connection has this much beyond its limit for such messages


class ByteBudget:
    """What all connections of one server hold in messages on their way (``serve.buffer_bytes``):
    a client's message reserves its bytes and is refused past the limit; what is queued for a
    client is counted too (and bounded per connection, by pausing its agent)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def reserve(self, size: int) -> bool:
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def add(self, size: int) -> None:
        self.used += size

    def release(self, size: int) -> None:
        self.used = max(0, self.used - size)


class Inbox:
    def __init__(self, budget: ByteBudget, max_bytes: int) -> None:
        self.messages: deque[bytes] = deque()
        self.bytes = 0
        self.budget = budget
        self.max_bytes = max_bytes

    def take(self, message: bytes) -> str | None:
        """Keep ``message`` (counted until ``done_with``); or why not, and it is not kept."""
        size = len(message)
        limit = self.max_bytes + (SMALL_ROOM if size <= SMALL_MESSAGE else 0)
        if self.bytes and self.bytes + size > limit:
            return "serve.max_message_bytes waits in this connection already"
        if size > SMALL_MESSAGE:
            if not self.budget.reserve(size):
                return "the server holds serve.buffer_bytes for its connections"
        else:
            self.budget.add(size)
        self.messages.append(message)
        self.bytes += size
        return None

    def done_with(self, message: bytes) -> None:
        """A message taken from ``messages`` has been handed on (or refused)."""
        self.bytes -= len(message)
        self.budget.release(len(message))

    def hand_to(self, other: Inbox) -> None:
        """What waits here waits in ``other`` from now on, after what waits there."""
        other.messages.extend(self.messages)
        other.bytes += self.bytes
        self.messages.clear()
        self.bytes = 0


class Outbox:
    def __init__(self, budget: ByteBudget, queue_bytes: int) -> None:
        self.lines: deque[bytes] = deque()
        self.bytes = 0
        self.budget = budget
        self.queue_bytes = queue_bytes
        self.paused_agent = False
        self.sent_all = asyncio.Event()  # nothing waits to be sent
        self.sent_all.set()
        self.on_flow: Callable[[bool], None] = lambda pause: None  # the proxy's: pause the agent
        self._ready = asyncio.Event()

    def put(self, line: bytes) -> None:
        self.lines.append(line)
        self.bytes += len(line)
        self.budget.add(len(line))
        self.sent_all.clear()
        self._ready.set()
        if not self.paused_agent and self.bytes > self.queue_bytes:
            self.paused_agent = True
            self.on_flow(True)

    def sent(self, size: int) -> None:
        """A line of ``size`` bytes has left (or failed to: the connection went)."""
        self.bytes -= size
        self.budget.release(size)
        if self.paused_agent and self.bytes <= self.queue_bytes // 4:
            self.unpause()

    def drop(self) -> None:
        """Nothing queued goes out (the client left, or another connection takes over)."""
        dropped = sum(len(line) for line in self.lines)  # a line being sent is the sender's to count
        self.bytes -= dropped
        self.budget.release(dropped)
        self.lines.clear()
        self.sent_all.set()

    def unpause(self) -> None:
        if self.paused_agent:
            self.paused_agent = False
            self.on_flow(False)

    async def send(self, connection: ServerConnection, current: Callable[[], ServerConnection]) -> None:
        """Send the lines, in order, on ``connection`` for as long as it is ``current()`` (a
        connection that takes over has a sender of its own); raises ``ConnectionClosed``."""
        while connection is current():
            while not self.lines:
                self.sent_all.set()
                self._ready.clear()
                await self._ready.wait()
                if connection is not current():
                    return
            line = self.lines.popleft()
            try:
                await connection.send(line.decode("utf-8", "replace"))
            finally:
                self.sent(len(line))
