"""``liminal dashboard``'s server: the dashboard's answers (``app.Dashboard``) through
``websockets``' handshake hook, as ``liminal serve`` gives them beside ``/acp``; no WebSocket is
ever accepted (every path is answered over HTTP), and SIGTERM or SIGINT stops it."""

from __future__ import annotations

import signal
from collections.abc import Callable
from http import HTTPStatus
from urllib.parse import urlsplit

import anyio
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from liminal import log
from liminal.config import Settings
from liminal.dashboard.app import Dashboard, handles

logger = log.get("liminal.dashboard")


async def serve_dashboard(settings: Settings, token: str, host: str, port: int,
                          ready: Callable[[int], None] | None = None) -> int:
    dashboard = Dashboard(settings, token)
    log.secret(token)

    async def answer(connection: ServerConnection, request: Request) -> Response:
        path = urlsplit(request.path).path
        if path == "/healthz":
            return connection.respond(HTTPStatus.OK, "ok\n")
        if not handles(path):
            return connection.respond(HTTPStatus.NOT_FOUND, "no such page; the dashboard is at /dashboard/\n")
        return await dashboard.answer(request)

    async def never(connection: ServerConnection) -> None:  # every request is answered above
        await connection.close(1008)

    try:
        async with serve(never, host, port, process_request=answer, server_header="liminal") as server:
            bound = server.sockets[0].getsockname()[1] if server.sockets else port
            logger.debug("serving the dashboard", url=f"http://{host}:{bound}/dashboard/")
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                if ready is not None:
                    ready(bound)
                signum = int(await anext(aiter(signals)))
    finally:
        await dashboard.aclose()
    return 128 + signum
