"""Taps: how components see every frame without ever slowing forwarding down.

The proxy calls ``offer(event)`` on each subscriber for every frame, synchronously, on the
forwarding path. ``offer`` must therefore return at once and never raise: it may append to a
buffer, nothing more. The policy, per subscriber:

* ``TapChannel``, for a component that wants events as an async stream (none of liminal's own
  do: each implements ``offer``), holds up to ``maxsize`` events. A subscriber
  that keeps up loses nothing. One that falls ``maxsize`` events behind loses the newest events
  beyond that, and the next event it receives is preceded by a ``Gap`` saying how many it lost,
  so it never mistakes a hole for a complete record.
* A component that must lose nothing (the indexer) implements ``offer`` itself and spills to
  its own durable spool instead of dropping.

Forwarding never waits on a subscriber: that is the promise taps make to the user, and the
reason loss, when it happens, falls on the subscriber.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

import anyio

from liminal.acp.events import FrameEvent


class TapSubscriber(Protocol):
    def offer(self, event: FrameEvent) -> None:
        """Take the event without blocking; must not raise."""


@dataclass(frozen=True, slots=True)
class Gap:
    """``lost`` events were dropped before the next one because the subscriber fell behind."""

    lost: int


class TapChannel:
    """A bounded, drop-newest buffer between the proxy and one async consumer."""

    def __init__(self, maxsize: int = 65536) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self._items: deque[FrameEvent | Gap] = deque()
        self._queued = 0  # FrameEvents in _items (Gaps do not count against the bound)
        self._lost = 0  # dropped since the last Gap was queued
        self.lost_total = 0
        self._wakeup = anyio.Event()
        self._closed = False

    def offer(self, event: FrameEvent) -> None:
        if self._closed:
            return
        if self._queued >= self.maxsize:
            self._lost += 1
            self.lost_total += 1
            return
        if self._lost:
            self._items.append(Gap(self._lost))
            self._lost = 0
        self._items.append(event)
        self._queued += 1
        self._wakeup.set()

    def close(self) -> None:
        """No more events; the consumer drains what is queued, then iteration ends."""
        self._closed = True
        self._wakeup.set()

    def __aiter__(self) -> TapChannel:
        return self

    async def __anext__(self) -> FrameEvent | Gap:
        while not self._items:
            if self._closed:
                if self._lost:
                    lost, self._lost = self._lost, 0
                    return Gap(lost)
                raise StopAsyncIteration
            self._wakeup = anyio.Event()
            await self._wakeup.wait()
        item = self._items.popleft()
        if isinstance(item, FrameEvent):
            self._queued -= 1
        return item

    def drain(self) -> list[FrameEvent | Gap]:
        """Everything queued now, without waiting (for tests and shutdown)."""
        items = list(self._items)
        self._items.clear()
        self._queued = 0
        if self._lost:
            items.append(Gap(self._lost))
            self._lost = 0
        return items
