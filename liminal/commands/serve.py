"""``liminal serve [--listen HOST:PORT] [--allow-remote] -- AGENT_COMMAND [ARGS...]``: ACP over
WebSocket, for UIs that connect to a long-running sidecar (``liminal.serve.server``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from liminal.config import Settings

HELP = "serve ACP over WebSocket on loopback (a bearer token in $LIMINAL_HOME/serve-token)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", help="HOST:PORT to listen on (serve.listen; port 0: any free one)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a host other than loopback (anyone who can reach it and has "
                             "the token drives your agent)")
    parser.add_argument("--print-port", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("agent", nargs=argparse.REMAINDER, help="-- AGENT_COMMAND [ARGS...]")


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {"serve.listen": args.listen}


def run(args: argparse.Namespace, settings: Settings) -> int:
    import anyio

    from liminal import access as tokens
    from liminal.access import is_loopback
    from liminal.commands._out import terminal
    from liminal.commands.acp import agent_command
    from liminal.commands.dashboard import address
    from liminal.config import _host_port
    from liminal.serve.server import AcpServer, ListenError

    argv = agent_command(args, "serve")
    if argv is None:
        return 2
    host_port = _host_port(settings.serve.listen)
    assert host_port is not None  # the setting was validated
    host, port = host_port
    if not is_loopback(host):
        if not args.allow_remote:
            print(f"liminal serve: serve.listen = {settings.serve.listen!r} is not accepted: a "
                  "loopback address (127.0.0.1, ::1, localhost), or add --allow-remote",
                  file=sys.stderr)
            return 2
        print(f"liminal serve: WARNING: listening on {host}, beyond this machine; anyone who can "
              "reach it with the token drives your agent. Put TLS in front of it.", file=sys.stderr)
    try:
        token = tokens.load_or_create(settings.home)
    except tokens.TokenError as exc:
        print(f"liminal serve: the token file {exc}", file=sys.stderr)
        return 2
    server = AcpServer(settings, argv, token, config_file=getattr(args, "config", None))

    def ready(bound: int) -> None:
        if args.print_port:  # for a program that starts it: the port, first
            print(bound, flush=True)
        shown = f"[{host}]" if ":" in host else host
        print(f"liminal serve: ws://{shown}:{bound}/acp (token in {settings.home / tokens.TOKEN_FILE})",
              flush=True)
        # The token in the address only for a person at a terminal: under a service manager
        # stdout is a log that others may read.
        print(f"liminal serve: the dashboard at {address(host, bound, token if terminal() else None)}"
              + ("" if terminal() else f" (the page asks for the token, in {settings.home / tokens.TOKEN_FILE})"),
              flush=True)

    try:
        return anyio.run(server.run, host, port, ready, backend="asyncio")
    except ListenError as exc:
        print(f"liminal serve: serve.listen = {settings.serve.listen!r} cannot be used: {exc}",
              file=sys.stderr)
        return 2
