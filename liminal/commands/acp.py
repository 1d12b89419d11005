"""``liminal acp [options] -- AGENT_COMMAND [ARGS...]``: be the agent the client launched.

The client starts liminal exactly as it would start the adapter; liminal starts the adapter and
relays every frame between them (see ``liminal.proxy``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from liminal.config import Settings

HELP = "run as an ACP agent: spawn AGENT_COMMAND and proxy every frame"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-frame-bytes", type=int, help="longest line accepted (bytes)")
    parser.add_argument("--kill-grace", type=float, help="seconds from SIGTERM to SIGKILL")
    parser.add_argument("agent", nargs=argparse.REMAINDER, help="-- AGENT_COMMAND [ARGS...]")


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "proxy.max_frame_bytes": args.max_frame_bytes,
        "proxy.kill_grace_seconds": args.kill_grace,
    }


def run(args: argparse.Namespace, settings: Settings) -> int:
    import anyio

    from liminal.proxy import Proxy

    argv = list(args.agent)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("liminal acp: give the agent command after --, e.g. "
              "liminal acp -- npx @agentclientprotocol/claude-agent-acp", file=sys.stderr)
        return 2
    async def main() -> int:
        if not settings.store.index:
            return await Proxy(argv, settings.proxy).run()
        from liminal.store.indexer import open_indexer

        # The indexer is a component: the proxy runs it, offers it every frame, closes it.
        async with open_indexer(settings, run=False) as indexer:
            return await Proxy(argv, settings.proxy, components=[indexer]).run()

    try:
        return anyio.run(main, backend="asyncio")
    except FileNotFoundError as exc:
        print(f"liminal acp: cannot start the agent: {exc}", file=sys.stderr)
        return 127
