"""``liminal acp [options] -- AGENT_COMMAND [ARGS...]``: be the agent the client launched.

The client starts liminal exactly as it would start the adapter; liminal starts the adapter and
relays every frame between them (see ``liminal.proxy``). With no agent command, liminal is a
proxy component in an ACP conductor's chain (``agent-client-protocol-conductor agent "liminal
acp" ADAPTER``): the conductor runs the agent, and liminal reaches it as its successor
(``liminal.transport.chain``).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from liminal.config import Settings

if TYPE_CHECKING:
    from liminal.wiring import Locking

HELP = ("run as an ACP agent: spawn AGENT_COMMAND and proxy every frame "
        "(without one: a proxy component in a conductor's chain)")


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
    parser.add_argument("--harness", choices=("auto", "claude", "codex", "gemini"),
                        help="whose session files the agent writes (default: auto, from the agent)")
    parser.add_argument("agent", nargs=argparse.REMAINDER,
                        help="-- AGENT_COMMAND [ARGS...] (none: a proxy component, its conductor "
                             "runs the agent)")


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


def chain_component(args: argparse.Namespace) -> list[str] | None:
    """``[]`` (a proxy component: no agent command, and a program, not a person, on stdin: a
    conductor); None when there is an agent command, or a person at a terminal, who is told to
    give one (``agent_command``)."""
    given = args.agent[1:] if args.agent[:1] == ["--"] else args.agent
    return [] if not given and not sys.stdin.isatty() else None


def run(args: argparse.Namespace, settings: Settings) -> int:
    import anyio

    from liminal.proxy import tune_gc
    from liminal.wiring import run_proxy

    argv = chain_component(args)
    if argv is None:
        argv = agent_command(args, "acp")
    if argv is None:
        return 2
    tune_gc()
    if sys.stdin.isatty():  # a person at a terminal, not a client: what it waits for
        from liminal import log

        log.get("liminal.acp").info(
            "waiting for an ACP client on stdin: an editor starts liminal acp and speaks to it "
            "(to try it without one: README, \"Try it without an editor\"); Ctrl-D ends")
    config_file = getattr(args, "config", None)
    return anyio.run(run_proxy, argv, settings, config_file, None, thread_locks(settings),
                     backend="asyncio")


def thread_locks(settings: Settings) -> Locking | None:
    """One live sidecar per thread among those on one store: the command center takes the lock
    of each thread a client opens or makes, and a load of a thread another live liminal has open
    is refused, saying so (docs/operations.md, "Two sidecars, one thread"). The lock is
    ``liminal serve``'s (``liminal.serve.locks``): a file lock where every sidecar on the store
    finds it (the home, or beside a SQLite file the home does not hold) and, with a Redis
    ``cache.url``, a Redis lock (sidecars on several machines). Released as the proxy closes,
    ahead of its index worker. None without a store (nothing another sidecar could share)."""
    import contextlib

    from liminal.serve.locks import LockRelease, ThreadLocks
    from liminal.store.base import lock_root
    from liminal.store.cache import redis_url_of
    from liminal.wiring import Locking

    if not settings.store.index:
        return None
    folder = lock_root(settings)
    if folder != settings.home:  # homes that share a SQLite file find its locks beside it
        with contextlib.suppress(OSError):  # else taking a lock says why
            folder.mkdir(mode=0o700, exist_ok=True)
    locks = ThreadLocks(folder, redis_url_of(settings.cache.url))
    return Locking(locks.try_take, [LockRelease(locks)])
