"""Components run supervised: one that fails never takes the proxy down.

Forwarding is the one job that must go on whatever else breaks. A component (the indexer's spool
writer, the swap manager, the recycle, the replay manager, every later one) can fail in three
places, and each is contained here:

- ``offer(event)``, on the forwarding path: the exception is logged once with its traceback;
  after ``OFFER_FAILURES`` failures the component is switched off (its offer is no longer
  called, its ``run`` is stopped), which is said once. Frames it missed are its loss alone.
  A component whose offer has nothing to do with notifications (nearly every frame is one: a
  streamed chunk) says so with ``frames = Frames.NO_NOTIFICATIONS`` and is not called for them
  (``liminal.acp.port.Component``: each hook is typed there, and does nothing unless overridden).
- ``run(port)``: the exception is logged with its traceback, every thread a hold kept waiting
  is released (a component that dies while holding a thread would otherwise keep the client's
  prompts forever), and the component is started again after a pause, at most ``RESTARTS``
  times; then it is switched off. A ``run`` that returns is simply done.
- ``stopping()``, ``aclose()``, ``restart_agent(port, code)``: logged; the next component is
  called all the same (``Supervisor.each``, which ``Proxy`` calls).
- ``prepare(port)``, awaited before the client's first byte is read (what must be in the
  router before any request passes: the swap journal's bindings): logged, and the proxy starts
  all the same after at most ``PREPARE_SECONDS`` (the component's ``run`` tries again).

Why restart and not only log: the swap manager's run is a loop over turn ends; one bad turn
(a journal write that fails, a bug outside its own try) should cost that turn's swap, not every
swap for the rest of the day. Why stop restarting: a failure at start (an unreadable journal)
fails again at once, and a loop of tracebacks helps nobody.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from liminal import log
from liminal.acp.events import FrameRun, Kind, expand
from liminal.acp.port import Component, Frames
from liminal.acp.taps import RunSubscriber

logger = log.get("liminal.supervise")

RESTARTS = 3
RESTART_PAUSE_SECONDS = (0.5, 2.0, 5.0)
OFFER_FAILURES = 10
PREPARE_SECONDS = 10.0


@dataclass(slots=True)
class Supervised:
    component: Component
    name: str
    offer: Callable[[Any], None] | None
    run: Callable[[Any], Awaitable[None]] | None
    skips_notifications: bool = False
    offer_run: Callable[[Any], None] | None = None  # a ``RunSubscriber``'s
    offer_failures: int = 0
    crashes: int = 0
    off: bool = False
    # Made when the run starts: a cancel scope needs a running event loop, and a proxy (with its
    # supervisor) may be built before there is one (``anyio.run(proxy.run)``).
    scope: anyio.CancelScope | None = None


def name_of(component: Any) -> str:
    return type(component).__name__


class Supervisor:
    """Holds the components of one proxy and calls them the way that cannot hurt it."""

    def __init__(self, components: Sequence[Component], *, release_holds: Callable[[], None]) -> None:
        self.members = [
            Supervised(c, name_of(c), None if c.frames is Frames.NONE else c.offer, c.run,
                       c.frames is Frames.NO_NOTIFICATIONS,
                       c.offer_run if c.frames is Frames.ALL and isinstance(c, RunSubscriber) else None)
            for c in components
        ]
        self._offering = [m for m in self.members if m.offer is not None]
        self._release_holds = release_holds

    @property
    def tapping(self) -> bool:
        return bool(self._offering)

    # ----------------------------------------------------------------- offer

    def offer(self, taps: list[Any]) -> None:
        """Give every frame to every component that takes frames (on the forwarding path).
        ``taps``: the router's events and runs of streamed lines (``liminal.acp.events.FrameRun``):
        a component with ``offer_run`` takes a run whole, any other each of its lines' events."""
        events: list[Any] | None = None  # every line an event, made once if needed
        others: list[Any] | None = None  # the events but notifications (a run is all notifications)
        for member in self._offering:
            offer = member.offer
            assert offer is not None
            if member.offer_run is not None:
                batch = taps
            elif member.skips_notifications:
                if others is None:
                    notification = Kind.NOTIFICATION
                    others = [t for t in taps if t.kind is not notification]
                batch = others
            else:
                if events is None:
                    events = expand(taps)
                batch = events
            offer_run = member.offer_run
            for tap in batch:
                try:
                    if tap.__class__ is FrameRun:
                        offer_run(tap)  # type: ignore[misc]
                    else:
                        offer(tap)
                except Exception:
                    self._offer_failed(member)
                    if member.off:
                        break

    def _offer_failed(self, member: Supervised) -> None:
        member.offer_failures += 1
        if member.offer_failures == 1:
            logger.exception("component failed to take a frame; forwarding goes on",
                             component=member.name)
        if member.offer_failures >= OFFER_FAILURES:
            logger.error("component switched off: it failed to take frames too often",
                         component=member.name, failures=member.offer_failures)
            self.switch_off(member)

    def switch_off(self, member: Supervised) -> None:
        member.off = True
        self._offering = [m for m in self._offering if m is not member]
        if member.scope is not None:
            member.scope.cancel()

    # --------------------------------------------------------------- prepare

    async def prepare(self, port: Any) -> None:
        """Each component's ``prepare``, in order, before the client is read."""
        await self.each(lambda c: c.prepare(port), PREPARE_SECONDS,
                        "component failed to prepare; forwarding goes on")

    async def each(self, hook: Callable[[Component], Awaitable[object]], seconds: float | None,
                   failed: str) -> Component | None:
        """``hook`` on each component in order, each given ``seconds`` at most (None: no bound);
        one that fails is logged with ``failed`` and the next is called all the same. Stops at
        the first whose hook returns True (``restart_agent``) and returns that component."""
        for member in self.members:
            try:
                with anyio.fail_after(seconds):
                    if await hook(member.component) is True:
                        return member.component
            except Exception:
                logger.exception(failed, component=member.name)
        return None

    # ------------------------------------------------------------------- run

    async def run(self, member: Supervised, port: Any) -> None:
        """Run one component's ``run`` until it returns, restarting it after a failure."""
        assert member.run is not None
        member.scope = anyio.CancelScope()
        if member.off:  # switched off before it started (its offer kept failing)
            member.scope.cancel()
        with member.scope:
            while True:
                try:
                    await member.run(port)
                    return
                except Exception:
                    member.crashes += 1
                    logger.exception("component failed; forwarding goes on", component=member.name,
                                     failures=member.crashes)
                    # A hold left by a component that is no longer running would keep the
                    # thread's prompts forever: let them through to the session they were for.
                    self._release_holds()
                if member.crashes > RESTARTS:
                    logger.error("component switched off after failing repeatedly",
                                 component=member.name, failures=member.crashes)
                    self.switch_off(member)
                    return
                await anyio.sleep(RESTART_PAUSE_SECONDS[member.crashes - 1])
                logger.info("component restarted", component=member.name)
        if member.off:  # switched off while it ran (its offer kept failing)
            self._release_holds()
