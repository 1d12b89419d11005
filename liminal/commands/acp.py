"""``liminal acp [options] -- AGENT_COMMAND [ARGS...]``: be the agent the client launched.

The client starts liminal exactly as it would start the adapter; liminal starts the adapter and
relays every frame between them (see ``liminal.proxy``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from liminal.config import Settings

if TYPE_CHECKING:
    from collections.abc import Callable

    from liminal.proxy import Component, Proxy
    from liminal.transport.legs import ClientSide

HELP = "run as an ACP agent: spawn AGENT_COMMAND and proxy every frame"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-frame-bytes", type=int, help="longest line accepted (bytes)")
    parser.add_argument("--kill-grace", type=float, help="seconds from SIGTERM to SIGKILL")
    swap = parser.add_argument_group("swap", "when and how liminal compresses a live conversation")
    swap.add_argument("--no-swap", dest="swap_enabled", action="store_const", const=False,
                      help="never swap (record only)")
    swap.add_argument("--swap-high-tokens", type=int, help="swap once the context passes this")
    swap.add_argument("--swap-target-tokens", type=int, help="rewrite down to about this")
    swap.add_argument("--swap-every-turns", type=int, help="also swap every N turns (0: never)")
    swap.add_argument("--swap-notice", choices=("silent", "thought", "info"),
                      help="how the UI hears of a swap")
    parser.add_argument("--harness", choices=("auto", "claude", "codex"),
                        help="whose session files the agent writes (default: auto, from the agent)")
    parser.add_argument("agent", nargs=argparse.REMAINDER, help="-- AGENT_COMMAND [ARGS...]")


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "proxy.max_frame_bytes": args.max_frame_bytes,
        "proxy.kill_grace_seconds": args.kill_grace,
        "swap.enabled": args.swap_enabled,
        "swap.high_tokens": args.swap_high_tokens,
        "swap.target_tokens": args.swap_target_tokens,
        "swap.every_turns": args.swap_every_turns,
        "swap.notice": args.swap_notice,
        "harness.name": args.harness,
    }


def components(settings: Settings, config_file: Path | None = None,
               argv: list[str] | None = None) -> list[Component]:
    """The components that hang off the proxy, as the settings ask; ``argv``, the agent's
    command, helps choose its harness."""
    from liminal.harness.base import HarnessChoice, known_harnesses
    from liminal.kernel.journal import SwapJournal
    from liminal.kernel.swap import SwapManager

    # Always, swapping on or off: the journal says which session carries each thread that was
    # swapped before (with swapping off the manager only binds them, and cleans up after a
    # swap a crash cut short); a thread must never resume on its stale original.
    journal = SwapJournal(settings.journal_path)
    from liminal.kernel.commands import CommandCenter
    from liminal.store.base import open_store

    forced = None if settings.harness.name == "auto" else settings.harness.name
    harness = HarnessChoice(known_harnesses(settings.gradient), forced=forced, argv=argv or [])
    swaps = SwapManager(settings.swap, journal, harness, gradient=settings.gradient)
    from liminal.store.cache import open_cache

    opener = (lambda: open_store(settings, create=False)) if settings.store.index else None
    # liminal's slash commands (/mark, /clear, /fork, /undo ...): answered by liminal.
    commands = CommandCenter(swaps, harness, opener, lambda: open_cache(settings))
    found: list[Component] = [swaps, commands]
    if settings.mcp.enabled:
        # liminal's MCP server (recall, search_history, slash, memos) in every session.
        from liminal.kernel.modeltools import ModelTools

        found.append(ModelTools(settings.home, config_file, commands.slash_requested, threads=swaps.model))
    if opener is not None:
        # A moved thread's load replays its history from the store, not the compressed one.
        from liminal.kernel.replay import ReplayManager

        found.append(ReplayManager(opener))
    # After the swap manager: it sees each turn end first (see liminal.kernel.recycle). Also
    # what starts the agent again after it died, where the proxy asks for that (liminal serve).
    from liminal.kernel.recycle import Recycler

    found.append(Recycler(swaps))
    return found


def agent_command(args: argparse.Namespace, command: str) -> list[str] | None:
    """The agent command after ``--``; None (said in one line) when there is none."""
    argv = list(args.agent)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print(f"liminal {command}: give the agent command after --, e.g. "
              f"liminal {command} -- npx @agentclientprotocol/claude-agent-acp", file=sys.stderr)
        return None
    return argv


def run(args: argparse.Namespace, settings: Settings) -> int:
    import anyio

    from liminal.proxy import tune_gc

    argv = agent_command(args, "acp")
    if argv is None:
        return 2
    tune_gc()
    config_file = getattr(args, "config", None)
    return anyio.run(run_proxy, argv, settings, config_file, backend="asyncio")


async def run_proxy(argv: list[str], settings: Settings, config_file: Path | None = None,
                    client: ClientSide | None = None, *, connection_id: str | None = None,
                    watch_signals: bool = True, restart_agent: bool = False,
                    on_proxy: Callable[[Proxy], None] | None = None) -> int:
    """One proxy with its components in front of one agent process, until the client leaves or
    the agent dies: ``liminal acp`` on stdio, and ``liminal serve`` per WebSocket connection
    (``on_proxy`` is told of the proxy before it runs)."""
    from liminal.proxy import Proxy

    extra = components(settings, config_file, argv)
    options: dict[str, Any] = {"client": client, "connection_id": connection_id,
                               "watch_signals": watch_signals, "restart_agent": restart_agent}
    def made(proxy: Proxy) -> Proxy:
        if on_proxy is not None:
            on_proxy(proxy)
        return proxy

    if not settings.store.index:
        return await made(Proxy(argv, settings.proxy, components=extra, **options)).run()
    from liminal.ingest.indexer import open_indexer

    # The indexer is a component like the others: the proxy runs it, offers it every frame and
    # closes it (which flushes it).
    async with open_indexer(settings, run=False) as indexer:
        return await made(Proxy(argv, settings.proxy, components=[indexer, *extra], **options)).run()
