"""The one wiring root: the components that hang off a proxy, and one proxy run with them.

``liminal acp`` runs one on stdio and ``liminal serve`` one per WebSocket connection; both ask
here. It lived in the ``acp`` command's file, so the server imported a command (a loop between
``commands`` and ``serve``). Nothing imports this but those two: it is the one place that knows
every component (the indexer, the kernel's, liminal's MCP server) and which settings turn each on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from liminal.config import Settings

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from liminal.ingest.shared import SharedWorker
    from liminal.proxy import Component, Proxy
    from liminal.transport.legs import ClientSide


def components(settings: Settings, config_file: Path | None = None,
               argv: list[str] | None = None) -> list[Component]:
    """The components that hang off the proxy, as the settings ask; ``argv``, the agent's
    command, helps choose its harness."""
    from liminal.harness.base import HarnessChoice
    from liminal.harness.known import known_harnesses
    from liminal.kernel.journal import SwapJournal
    from liminal.kernel.swap import SwapManager

    # Always, swapping on or off: the journal says which session carries each thread that was
    # swapped before (with swapping off the manager only binds them, and cleans up after a
    # swap a crash cut short); a thread must never resume on its stale original.
    journal = SwapJournal(settings.journal_path)
    from liminal.kernel.commands import CommandCenter
    from liminal.store.configured import open_store

    forced = None if settings.harness.name == "auto" else settings.harness.name
    harness = HarnessChoice(known_harnesses(settings.gradient), forced=forced, argv=argv or [])
    from liminal.store.cache import redis_url_of
    from liminal.store.leases import MoveLeases

    # Sidecars sharing a Redis (and a store) take a thread's lease there to move it. Its life
    # outlasts any move: the hold's bound, the undo's after it, and a margin.
    redis = redis_url_of(settings.cache.url)
    leases = None if redis is None else MoveLeases(redis, 2 * settings.swap.hold_timeout_seconds + 30)
    # The running liminal writes the store (memos, summaries), so it makes it when the index
    # worker has not yet: a `/memo` as the first words to a new install was "no store".
    opener = (lambda: open_store(settings, create=True)) if settings.store.index else None
    shared = None
    if opener is not None:
        # Any store may be shared by several sidecars (MongoDB across machines, one SQLite file
        # by two homes): where a thread is, is its word, and a move commits only from the
        # session the store has the thread on (docs/architecture.md, "Where a thread is"); a
        # claim older than a lease's life is a dead sidecar's.
        from liminal.ingest import quarantine
        from liminal.kernel.storejournal import StoreJournal

        shared = StoreJournal(opener, 2 * settings.swap.hold_timeout_seconds + 30,
                              quarantine.folder(settings.home))
    swaps = SwapManager(settings.swap, journal, harness, gradient=settings.gradient, leases=leases,
                        shared=shared, stop_grace=settings.proxy.stop_grace_seconds)
    swaps.policy.memory = settings.memory  # what rides a summary's request, priced with it
    from liminal.store.cache import open_cache

    # liminal's slash commands (/mark, /clear, /fork, /undo ...): answered by liminal.
    commands = CommandCenter(swaps.model, swaps.mover, journal, swaps.policy, harness, opener,
                             lambda: open_cache(settings))
    commands.home = settings.home
    from liminal.kernel.memory import Memory

    # The thread's scratchpad, read from the command center's store for every move's preamble.
    memory = Memory(settings.memory, commands.store if opener is not None else None, lambda: commands.tasks)
    swaps.memory = commands.memory = memory
    zone = None
    if opener is not None and settings.gradient.zone_tokens:
        from liminal.kernel.zone import ZoneSource

        # Memos, other conversations' lessons, summaries and titles for the dynamic zone of
        # each rewrite: a swap's, /optimise's.
        zone = swaps.zone = commands.zone = ZoneSource(opener, settings.memory)
    found: list[Component] = [swaps, commands]
    if settings.swap.summaries and settings.swap.enabled:
        from liminal.kernel.summaries import SideSummaries, side_root

        summaries = SideSummaries(settings.swap, harness, swaps.model, swaps.policy, settings.home, opener)
        # Lessons and the review of the zone's candidates ride each summary's request.
        summaries.memory, summaries.zone = settings.memory, zone
        swaps.summarizer_for = summaries.summarizer
        swaps.summary_asked = summaries.asked_on
        summaries.settle = swaps.mover.settle
        commands.anchor_of = summaries.anchor
        commands.rebuild_anchor = summaries.rebuild
        commands.side_root = side_root(settings.home)
        found.append(summaries)
    if settings.mcp.enabled:
        # liminal's MCP server (recall, search_history, slash, memos) in every session.
        from liminal.kernel.modeltools import ModelTools

        found.append(ModelTools(settings.home, config_file, commands.slash_requested,
                                threads=swaps.model))
    if opener is not None:
        # A moved thread's load replays its history from the store, not the compressed one.
        from liminal.kernel.replay import ReplayManager

        found.append(ReplayManager(opener))
        # session/rewind and session/edit_prompt, for an agent without its own: the store finds
        # the message, the mover moves the thread onto a cut ending there.
        from liminal.kernel.commands import parse
        from liminal.kernel.rewind import Rewinder

        rewinder = Rewinder(swaps.model, swaps.mover, harness, opener,
                            is_command=lambda text: parse(text) is not None)
        rewinder.memory = memory
        found.append(rewinder)
    # After the swap manager: it sees each turn end first (see liminal.kernel.recycle). Also
    # what starts the agent again after it died, where the proxy asks for that (liminal serve).
    from liminal.kernel.recycle import Recycler

    found.append(Recycler(swaps.model, swaps.mover, harness, settings.swap))
    # A thread this process did not start has its pace learned again from the journal and its file.
    from liminal.kernel.recalibrate import Recalibrator

    recalibrator = Recalibrator(swaps.model, swaps.policy, journal, harness)
    commands.recalibrated = recalibrator.settled
    found.append(recalibrator)
    return found


async def run_proxy(argv: list[str], settings: Settings, config_file: Path | None = None,
                    client: ClientSide | None = None, *, connection_id: str | None = None,
                    watch_signals: bool = True, restart_agent: bool = False,
                    leading: Sequence[Component] = (),
                    on_proxy: Callable[[Proxy], None] | None = None,
                    index_worker: SharedWorker | None = None,
                    take_thread: Callable[[str], Awaitable[bool]] | None = None) -> int:
    """One proxy with its components in front of one agent process, until the client leaves or
    the agent dies: ``liminal acp`` on stdio, and ``liminal serve`` per WebSocket connection
    (``on_proxy`` is told of the proxy before it runs). ``leading``: the caller's components,
    put first, so that they close before the index worker drains (``liminal serve``'s
    thread locks: ``liminal.serve.locks.LockRelease``). ``index_worker``: the one index worker
    this proxy's spool goes to (``liminal serve``'s, shared by its connections); without it,
    the proxy starts a worker of its own. ``take_thread``: takes the lock of each thread a
    client opens (``liminal acp``'s ``thread_locks``; ``liminal serve`` locks them per connection
    itself)."""
    from liminal.proxy import Proxy

    extra = components(settings, config_file, argv)
    if take_thread is not None:
        from liminal.kernel.commands import CommandCenter

        for component in extra:
            if isinstance(component, CommandCenter):
                component.take_thread = take_thread
    options: dict[str, Any] = {"client": client, "connection_id": connection_id,
                               "watch_signals": watch_signals, "restart_agent": restart_agent}
    def made(proxy: Proxy) -> Proxy:
        if on_proxy is not None:
            on_proxy(proxy)
        return proxy

    if not settings.store.index:
        return await made(Proxy(argv, settings.proxy, components=[*leading, *extra], **options)).run()
    from liminal.ingest.configured import open_indexer

    # The indexer is a component like the others: the proxy runs it, offers it every frame and
    # closes it (which flushes it).
    async with open_indexer(settings, run=False, shared=index_worker) as indexer:
        return await made(Proxy(argv, settings.proxy, components=[*leading, indexer, *extra],
                                **options)).run()
