"""``liminal dashboard [--listen HOST:PORT]``: the dashboard alone, on loopback, for people who
run ``liminal acp`` from an editor and no ``liminal serve`` (which serves it at ``/dashboard/``
itself). Read-only: it opens the store without writing and starts no agent. The token is
``liminal serve``'s (``$LIMINAL_HOME/serve-token``); the address to open is printed on stdout
with it in its fragment (``#token=``), which the browser keeps to itself (docs/dashboard.md)."""

from __future__ import annotations

import argparse
import sys

from liminal.config import Settings

HELP = "a read-only web dashboard of threads, context, swaps and savings, on loopback"
DEFAULT_LISTEN = "127.0.0.1:8767"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", default=DEFAULT_LISTEN,
                        help=f"HOST:PORT on loopback (default {DEFAULT_LISTEN}; port 0: any free one)")
    parser.add_argument("--print-port", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace, settings: Settings) -> int:
    import anyio

    from liminal import access as tokens
    from liminal.access import is_loopback
    from liminal.config import _host_port
    from liminal.dashboard.server import serve_dashboard

    host_port = _host_port(args.listen)
    if host_port is None or not is_loopback(host_port[0]):
        print(f"liminal dashboard: --listen {args.listen!r} is not accepted: HOST:PORT on loopback "
              "(127.0.0.1, ::1, localhost), e.g. 127.0.0.1:8767", file=sys.stderr)
        return 2
    try:
        token = tokens.load_or_create(settings.home)
    except tokens.TokenError as exc:
        print(f"liminal dashboard: the token file {exc}", file=sys.stderr)
        return 2
    host, port = host_port

    def ready(bound: int) -> None:
        if args.print_port:  # for a program that starts it: the port, first
            print(bound, flush=True)
        print(f"liminal dashboard: {address(host, bound, token)}", flush=True)

    try:
        return anyio.run(serve_dashboard, settings, token, host, port, ready, backend="asyncio")
    except OSError as exc:
        print(f"liminal dashboard: --listen {args.listen!r} cannot be used: {exc.strerror or exc}",
              file=sys.stderr)
        return 2


def address(host: str, port: int, token: str | None) -> str:
    """Where a browser opens the dashboard, with the token in the fragment (which the browser
    keeps to itself) when ``token`` is given."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/dashboard/" + (f"#token={token}" if token else "")
