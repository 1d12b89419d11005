"""Taps: how components see every frame without ever slowing forwarding down.

The proxy calls ``offer(event)`` on each subscriber for every frame, synchronously, on the
forwarding path. ``offer`` must therefore return at once: it may append to a buffer, nothing
more. A component that must lose nothing (the spool writer, the inline indexer) spills to its
own durable spool instead of dropping; one that raises is contained by the proxy
(``liminal.supervise``: logged once, switched off after repeated failures).

A subscriber that also has ``offer_run`` (``RunSubscriber``) is given the router's runs of
streamed lines (``FrameRun``: one object for the lines of one session and kind from one read)
whole, and events for the rest; any other gets one event per line, made only then.

Forwarding never waits on a subscriber: that is the promise taps make to the user, and the
reason loss, when it happens, falls on the subscriber.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from liminal.acp.events import FrameEvent, FrameRun


class TapSubscriber(Protocol):
    def offer(self, event: FrameEvent) -> None:
        """Take the event without blocking."""


@runtime_checkable
class RunSubscriber(Protocol):
    def offer_run(self, run: FrameRun) -> None:
        """Take the run's frames without blocking (``FrameRun.events`` are its lines' events)."""
