"""The one wiring root: the components that hang off a proxy, and one proxy run with them.

``liminal acp`` runs one on stdio and ``liminal serve`` one per WebSocket connection; both ask
here, and nothing else imports this (a command's file would make a loop between ``commands``
and ``serve``). It is the one place that knows every component (the indexer, the kernel's,
liminal's MCP server) and which settings turn each on, and it hands each its collaborators in
its constructor: no component is amended after it is built.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from liminal.config import Settings

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from liminal.gradient.summarize import Summarizer
    from liminal.ingest.shared import SharedWorker
    from liminal.proxy import Component, Proxy
    from liminal.transport.legs import ClientSide


def components(settings: Settings, config_file: Path | None = None,
               argv: list[str] | None = None,
               take_thread: Callable[[str], Awaitable[bool]] | None = None) -> list[Component]:
    """The components that hang off the proxy, as the settings ask; ``argv``, the agent's
    command, helps choose its harness; ``take_thread``, the lock of each thread a client opens
    (``Locking.take``). Each gets its collaborators in its constructor; two
    pairs call each other at run time, and there the one built first reaches the other through
    a closure (the swap manager the summaries, the scratchpad the command center)."""
    from liminal.harness.base import HarnessChoice
    from liminal.harness.known import known_harnesses
    from liminal.kernel.aids import CommandAids, Preamble
    from liminal.kernel.commands import CommandCenter
    from liminal.kernel.journal import SwapJournal
    from liminal.kernel.memory import Memory
    from liminal.kernel.policy import CostPolicy
    from liminal.kernel.summaries import SideSummaries, side_root
    from liminal.kernel.swap import SwapManager
    from liminal.store.base import lock_root
    from liminal.store.cache import open_cache, redis_url_of
    from liminal.store.configured import open_store
    from liminal.store.leases import MoveLeases

    # Always, swapping on or off: the journal says which session carries each thread that was
    # swapped before (with swapping off the manager only binds them, and cleans up after a
    # swap a crash cut short); a thread must never resume on its stale original.
    journal = SwapJournal(settings.journal_path)
    forced = None if settings.harness.name == "auto" else settings.harness.name
    # What every component holds: the harness chosen now, and again once the agent names itself.
    harness = HarnessChoice(known_harnesses(settings.gradient), forced=forced, argv=argv or []).harness
    # Sidecars sharing a Redis (and a store) take a thread's lease there to move it. Its life
    # outlasts any move: the hold's bound, the undo's after it, and a margin.
    redis = redis_url_of(settings.cache.url)
    leases = None if redis is None else MoveLeases(redis, 2 * settings.swap.hold_timeout_seconds + 30)
    # The running liminal writes the store (memos, summaries), so it makes it when the index
    # worker has not yet: a `/memo` may be the first words to a new install.
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
    zone = None
    if opener is not None and settings.gradient.zone_tokens:
        from liminal.kernel.zone import ZoneSource

        # Memos, other conversations' lessons, summaries and titles for the dynamic zone of
        # each rewrite: a swap's, /optimise's.
        zone = ZoneSource(opener, settings.memory)
    # The thread's scratchpad, for every move's preamble: read from the command center's store
    # (one connection for both) on its task group. The center, built below on the swap
    # manager's parts, is there before the proxy runs, which is before any move reads it.
    memory = Memory(settings.memory, (lambda: commands.store()) if opener is not None else None,
                    lambda: commands.tasks)
    # The model's summaries, when on: built on the swap manager's model, policy and mover, and
    # asked by it for a thread's preamble at each swap.
    summaries: SideSummaries | None = None

    def summarizer_for(thread: str) -> Summarizer | None:
        return summaries.summarizer(thread) if summaries is not None else None

    def summary_asked(thread: str, backing: str) -> bool:
        return summaries is not None and summaries.asked_on(thread, backing)

    preamble = Preamble(memory, zone, summarizer_for, summary_asked)
    # What rides a summary's request is priced with it (``memory``).
    policy = CostPolicy.of(settings.swap, settings.gradient, harness, memory=settings.memory)
    swaps = SwapManager(settings.swap, journal, harness, policy=policy, leases=leases, shared=shared,
                        stop_grace=settings.proxy.stop_grace_seconds, preamble=preamble)
    if settings.swap.summaries and settings.swap.enabled:
        # The review of the zone's candidates rides each summary's request (the lessons: the
        # policy's memory settings).
        summaries = SideSummaries(settings.swap, harness, swaps.model, swaps.policy, settings.home, opener,
                                  settle=swaps.mover.settle, zone=zone)
    # A thread this process did not start has its pace learned again from the journal and its file.
    from liminal.kernel.recalibrate import Recalibrator

    recalibrator = Recalibrator(swaps.model, swaps.policy, journal, harness)
    # liminal's slash commands (/mark, /clear, /fork, /undo ...): answered by liminal.
    from liminal.ingest import spool

    spool_root = settings.home / "spool"

    def spool_behind() -> bool:  # a stopped liminal's spool still being stored
        return spool.behind(spool_root)

    aids = CommandAids(preamble, home=settings.home, lock_root=lock_root(settings),
                       recalibrated=recalibrator.settled, take_thread=take_thread,
                       spool_behind=spool_behind)
    if summaries is not None:
        aids = replace(aids, anchor_of=summaries.anchor, rebuild_anchor=summaries.rebuild,
                       side_root=side_root(settings.home))
    commands = CommandCenter(swaps.model, swaps.mover, journal, swaps.policy, harness, opener,
                             lambda: open_cache(settings), aids)
    found: list[Component] = [swaps, commands]
    if summaries is not None:
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
        # The cut waits for the spools of a liminal that stopped, which may hold the thread's
        # last turns.
        from liminal.kernel.commands import parse
        from liminal.kernel.rewind import Rewinder

        found.append(Rewinder(swaps.model, swaps.mover, harness, opener,
                              is_command=lambda text: parse(text) is not None, memory=memory,
                              spool_behind=spool_behind))
    in_a_chain = argv is not None and not argv  # liminal acp with no agent command
    if not in_a_chain:
        # After the swap manager: it sees each turn end first (see liminal.kernel.recycle). Also
        # what starts the agent again after it died, where the proxy asks for that (liminal
        # serve). Not in a conductor's chain (no agent command): the conductor runs the agent,
        # and the sessions swaps leave stay open in it until the chain ends.
        from liminal.kernel.recycle import Recycler

        found.append(Recycler(swaps.model, swaps.mover, harness, settings.swap))
    found.append(recalibrator)
    return found


@dataclass(frozen=True)
class Served:
    """What ``liminal serve`` gives one WebSocket connection's proxy: the connection as its
    client, its id, the caller's components put first (its thread locks, which must close before
    the index worker drains: ``liminal.serve.locks.LockRelease``), what is told of the proxy
    before it runs, and the one index worker its spool goes to (shared by the connections;
    without it the proxy starts one of its own). The server handles the signals, and the agent
    of a connection is started again if it dies."""

    client: ClientSide
    connection_id: str
    leading: Sequence[Component] = ()
    on_proxy: Callable[[Proxy], None] | None = None
    index_worker: SharedWorker | None = None


@dataclass(frozen=True)
class Locking:
    """What ``liminal acp`` gives its proxy to hold each thread it opens, as ``liminal serve``
    holds a connection's (``liminal.commands.acp.thread_locks``): ``take`` takes a thread's lock
    (False: another live liminal has it open), the command center's to call; ``release``, the
    component that lets them go, put first among the proxy's components so that it closes
    before the index worker drains."""

    take: Callable[[str], Awaitable[bool]]
    release: Sequence[Component] = ()


async def run_proxy(argv: list[str], settings: Settings, config_file: Path | None = None,
                    served: Served | None = None, locking: Locking | None = None) -> int:
    """One proxy with its components in front of one agent process, until the client leaves or
    the agent dies: ``liminal acp`` on stdio (``locking``: its thread locks), and ``liminal
    serve`` per WebSocket connection (``served``; the server locks a connection's threads).
    With no agent command (``argv`` empty), ``liminal acp`` is a proxy component in a
    conductor's chain: its stdio carries the predecessor and the successor
    (``liminal.transport.chain``), and the successor is its agent."""
    from liminal.proxy import Proxy

    extra = components(settings, config_file, argv, None if locking is None else locking.take)
    options: dict[str, Any] = {} if served is None else {
        "client": served.client, "connection_id": served.connection_id, "watch_signals": False,
        "restart_agent": True}
    if not argv and served is None:
        from liminal.transport.chain import ChainStdio

        chain = ChainStdio(settings.proxy.max_frame_bytes)
        options.update(client=chain.client, agent=chain.successor)
    leading = [*(served.leading if served is not None else ()),
               *(locking.release if locking is not None else ())]
    index_worker = served.index_worker if served is not None else None

    def made(proxy: Proxy) -> Proxy:
        if served is not None and served.on_proxy is not None:
            served.on_proxy(proxy)
        return proxy

    if not settings.store.index:
        return await made(Proxy(argv, settings.proxy, components=[*leading, *extra], **options)).run()
    from liminal.ingest.configured import open_indexer

    # The indexer is a component like the others: the proxy runs it, offers it every frame and
    # closes it (which flushes it).
    async with open_indexer(settings, run=False, shared=index_worker) as indexer:
        return await made(Proxy(argv, settings.proxy, components=[*leading, indexer, *extra],
                                **options)).run()
