"""``liminal serve``: ACP over WebSocket, after the ACP transport RFD.

One endpoint, ``/acp``: each text frame one JSON-RPC message, ``initialize`` first. Every
connection gets an ``Acp-Connection-Id`` (a response header, also the proxy's connection id in
the store) and, once it sends ``initialize``, its own proxy with the same components as
``liminal acp``, in front of its own agent process; one that sends none within
``serve.initialize_seconds`` is closed (1008). ``GET /healthz`` answers ``ok``.

Refused before the WebSocket opens (the handshake's HTTP answer), each with one log line:

- a header that must come once (``SINGLE_HEADERS``) given twice: 400;
- more than one credential (two ``token`` parameters, a header and a parameter ...): 400, before
  any is compared: which of two would count is a question no answer of ours should settle;
- no token, or a wrong one (``liminal.access``): 401;
- an ``Origin`` that is not in ``serve.origins`` (a web page the user happens to visit must not
  drive their agent): 403;
- more than ``serve.max_connections`` at once: 503;
- any path but ``/acp``, ``/healthz`` and ``/dashboard/...``: 404. (The dashboard's paths are
  answered by ``liminal.dashboard.app``, read-only, under the same token and Origin rules.)

A message longer than ``serve.max_message_bytes`` (or four times ``proxy.max_frame_bytes``)
closes the connection (1009) before it is held whole; one longer than ``max_frame_bytes`` but
within that reaches the router like an oversized line on stdio and is answered with a JSON-RPC
error; the server goes on either way. What connections hold is bounded in bytes (``leg``).

SIGTERM (or SIGINT) stops the server within ``serve.shutdown_seconds``, all of it (``_shutdown``):
no new connections; one with nothing under way is closed at once, one with a turn under way
when its turn ends or when only the time its closing needs is left (``closing_seconds``); all
close at the same time, each client given ``CLOSE_ANSWER_SECONDS`` to answer the close frame;
closing stops each agent and flushes each spool. At the deadline, or at a second signal, what is
left is killed (every agent's process group) and the server exits, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.typing import Data, Subprotocol

from liminal import access as tokens
from liminal import log
from liminal.acp import jsonrpc
from liminal.config import Settings
from liminal.dashboard import app as dashboard
from liminal.ingest.shared import SharedWorker
from liminal.serve import frames
from liminal.serve.leg import WebSocketClientLeg
from liminal.serve.locks import LockRelease, ThreadLocks
from liminal.serve.waiting import ByteBudget
from liminal.store.cache import redis_url_of
from liminal.transport import reaper

if TYPE_CHECKING:
    from liminal.proxy import Proxy

logger = log.get("liminal.serve")
ENDPOINT = "/acp"
HEALTH = "/healthz"
SUBPROTOCOL = "acp"
# Headers a request carries once (RFC 9112 for Host, RFC 6454 for Origin, RFC 6455 for the key
# and the version; Authorization holds one credential). Given twice, the request means two
# things, and which one a reader takes is up to the reader. websockets refuses a second key or
# version itself, but after ``process_request`` has read the others.
SINGLE_HEADERS = ("Host", "Origin", "Authorization", "Sec-WebSocket-Key", "Sec-WebSocket-Version")
# At shutdown, how long a client gets to answer the close frame before its TCP connection is
# dropped (the library's own 10 s, waited for each client in turn, made a stop take minutes).
CLOSE_ANSWER_SECONDS = 2.0
# How long the proxy lets an agent exit on its own once its input ends, before SIGTERM
# (``Proxy.run``: ``wait_first``).
AGENT_EOF_SECONDS = 2.0
# What is left is killed this long before the deadline, to unwind (a spool's last flush).
UNWIND_SECONDS = 1.0
LOOK_SECONDS = 0.1




class ListenError(Exception):
    """The listen address cannot be bound (said as one line, exit 2)."""


def closing_seconds(settings: Settings) -> float:
    """The end of ``serve.shutdown_seconds`` kept for closing a connection whose turn is cut: its
    client's answer to the close frame, its agent's exit on the end of its input, then on
    SIGTERM (``proxy.kill_grace_seconds``). At most half: the other half is the turn's."""
    wanted = CLOSE_ANSWER_SECONDS + min(AGENT_EOF_SECONDS, settings.proxy.kill_grace_seconds) \
        + settings.proxy.kill_grace_seconds
    return min(wanted, settings.serve.shutdown_seconds / 2)


def unwind_seconds(settings: Settings) -> float:
    """The very end of ``serve.shutdown_seconds``: what was killed at the deadline unwinds."""
    return min(UNWIND_SECONDS, settings.serve.shutdown_seconds / 4)


class AcpServer:
    def __init__(self, settings: Settings, agent_argv: Sequence[str], token: str, *,
                 config_file: Path | None = None) -> None:
        self.settings = settings
        self.argv = list(agent_argv)
        self.token = token
        log.secret(token)  # whatever logs it, at any level (liminal.log)
        self.config_file = config_file
        self.origins = tokens.origins(settings.serve.origins)
        self.connections: dict[ServerConnection, str] = {}
        self.legs: dict[ServerConnection, WebSocketClientLeg] = {}
        self._ids: dict[int, str] = {}  # id(connection) -> its Acp-Connection-Id, from the handshake
        self.server: Server | None = None
        self._stopping = False  # a SIGTERM came: a connection that initializes now starts nothing
        self._hurried = asyncio.Event()  # a second signal came: no more waiting
        self.budget = ByteBudget(settings.serve.buffer_bytes)  # shared by every connection's leg
        self.dashboard = dashboard.Dashboard(settings, token)
        # One index worker for every connection's spool, started at the first initialize (so
        # nothing before one) and kept until the server stops (``liminal.ingest.shared``).
        self.index_worker = (SharedWorker(settings)
                             if settings.store.index and settings.store.indexer == "worker" else None)
        self._deadline: float | None = None  # the shutdown's, once a signal came
        # A message is at most serve.max_message_bytes either way: the router's cap for lines
        # from the agent too, or one line would be past what a connection may hold for its client.
        frame = min(settings.proxy.max_frame_bytes, settings.serve.max_message_bytes)
        self.proxy_settings = dataclasses.replace(
            settings, proxy=dataclasses.replace(settings.proxy, max_frame_bytes=frame))

    # -- the handshake ------------------------------------------------------------------------

    def _refuse(self, connection: ServerConnection, status: HTTPStatus, why: str) -> Response:
        logger.warning("connection refused", status=int(status), why=why,
                       peer=str(connection.remote_address))
        return connection.respond(status, why + "\n")

    def process_request(self, connection: ServerConnection,
                        request: Request) -> Response | Awaitable[Response] | None:
        # The headers read here as one are in SINGLE_HEADERS: given twice, they are refused
        # first (``Headers.get`` would raise MultipleValuesError).
        twice = [name for name in SINGLE_HEADERS if len(request.headers.get_all(name)) > 1]
        if twice:
            return self._refuse(connection, HTTPStatus.BAD_REQUEST, f"the {twice[0]} header is given more than once")
        path = urlsplit(request.path).path
        if path == HEALTH:
            return connection.respond(HTTPStatus.OK, "ok\n")
        if dashboard.handles(path):  # read-only pages and data, under the same token (docs/dashboard.md)
            return self.dashboard.answer(request)
        if path != ENDPOINT:
            return self._refuse(connection, HTTPStatus.NOT_FOUND, f"no such endpoint; ACP is at {ENDPOINT}")
        protocols = [p for value in request.headers.get_all("Sec-WebSocket-Protocol") for p in value.split(",")]
        refused = tokens.refusal(self.token, self.origins, request.headers.get("Origin"),
                                 request.headers.get("Authorization"), protocols, request.path)
        if refused is not None:
            return self._refuse(connection, *refused)
        if len(self.connections) >= self.settings.serve.max_connections:
            return self._refuse(connection, HTTPStatus.SERVICE_UNAVAILABLE, "too many connections")
        self._ids[id(connection)] = uuid.uuid4().hex
        return None

    def process_response(self, connection: ServerConnection, request: Request,
                         response: Response) -> Response:
        connection_id = self._ids.get(id(connection))
        if connection_id is not None and response.status_code == 101:
            response.headers["Acp-Connection-Id"] = connection_id
        elif connection_id is not None:
            # Let through here, refused by the library's own checks (a malformed key, no
            # Upgrade): one line like ours, and no id kept for a connection that never opens.
            del self._ids[id(connection)]
            logger.warning("connection refused", status=response.status_code,
                           why=(response.body or b"").decode("utf-8", "replace").strip()[:200],
                           peer=str(connection.remote_address))
        return response

    def select_subprotocol(self, connection: ServerConnection,
                           subprotocols: Sequence[Subprotocol]) -> Subprotocol | None:
        """``acp`` when offered; else the token protocol a browser offered (it must get one of
        its offers back, and the token is its own)."""
        if SUBPROTOCOL in subprotocols:
            return Subprotocol(SUBPROTOCOL)
        return next((p for p in subprotocols if p.startswith(tokens.PROTOCOL_PREFIX)), None)

    # -- a connection ---------------------------------------------------------------------------

    async def handle(self, connection: ServerConnection) -> None:
        from liminal.wiring import Served, run_proxy

        connection_id = self._ids.pop(id(connection), None) or uuid.uuid4().hex
        self.connections[connection] = connection_id
        logger.info("connection opened", connection=connection_id, peer=str(connection.remote_address))
        locks: ThreadLocks | None = None
        try:
            initialize = await self._initialize_of(connection, connection_id)
            if initialize is None or self._stopping:
                return
            locks = ThreadLocks(self.settings.home, redis_url_of(self.settings.cache.url))
            leg = WebSocketClientLeg(connection, locks=locks, settings=self.settings.serve, budget=self.budget,
                                     first=initialize, find_detached=self._detached_holder)
            self.legs[connection] = leg
            code = await run_proxy(self.argv, self.proxy_settings, self.config_file, Served(
                leg, connection_id, leading=[LockRelease(locks)],
                on_proxy=lambda proxy: self._bind(leg, proxy), index_worker=self.index_worker))
            logger.info("connection closed", connection=connection_id, exit_code=code)
            if leg.handover is not None:
                await leg.handed_over()
                # This connection's own threads are free while it goes on with another proxy
                # (it, or another client, may open them again).
                await locks.release_all()
                await self._take_over(connection, *leg.handover)
        except Exception:
            logger.exception("connection failed", connection=connection_id)
        finally:
            if locks is not None:
                await locks.release_all()
            self.legs.pop(connection, None)
            self.connections.pop(connection, None)
            with contextlib.suppress(Exception):
                await connection.close()

    @staticmethod
    def _bind(leg: WebSocketClientLeg, proxy: Proxy) -> None:
        leg.proxy = proxy

    async def _initialize_of(self, connection: ServerConnection, connection_id: str) -> Data | None:
        """The connection's ``initialize``, the message its agent starts with; None when it
        closes, or sends none within ``serve.initialize_seconds`` (then it is closed).

        Nothing is started before it: an agent process, its CLI and an index worker for every
        socket that connects (a probe, a client that never gets going) would cost hundreds of
        megabytes each. A request before it is answered with an error, as an agent that was not
        initialized would; a notification is dropped.
        """
        deadline = time.monotonic() + self.settings.serve.initialize_seconds
        try:
            while True:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    message = await connection.recv()
                data = message.encode() if isinstance(message, str) else bytes(message)
                # Read as the leg reads every frame after it (``frames.read``): what the leg
                # would refuse starts nothing here either.
                verdict = frames.read(data)
                if isinstance(verdict, frames.Refusal):
                    if verdict.answer is not None:
                        await connection.send(verdict.answer.decode())
                    continue
                if verdict.method == "initialize" and verdict.rpc_id is not None:
                    return message
                if verdict.method is not None and verdict.rpc_id is not None:
                    await connection.send(jsonrpc.error_frame(
                        jsonrpc.encode_id(verdict.rpc_id, data), jsonrpc.INVALID_REQUEST,
                        "send initialize first: the agent starts when the connection initializes").decode())
        except TimeoutError:
            logger.info("connection closed: no initialize", connection=connection_id,
                        seconds=self.settings.serve.initialize_seconds)
            await connection.close(1008, "no initialize within serve.initialize_seconds")
        except ConnectionClosed:
            pass
        return None

    def _detached_holder(self, thread: str, asker: WebSocketClientLeg) -> WebSocketClientLeg | None:
        """The connection of this process whose client left while the thread's turn runs."""
        for leg in self.legs.values():
            if (leg is not asker and leg.detached and leg.claimed is None and not leg.finished.is_set()
                    and leg.locks is not None and leg.locks.holds(thread)):
                return leg
        return None

    async def _take_over(self, connection: ServerConnection, holder: WebSocketClientLeg,
                         load: dict[str, Any]) -> None:
        """This connection goes on with ``holder``'s proxy, until that proxy ends."""
        thread = str((load.get("params") or {}).get("sessionId"))
        history: list[dict[str, Any]] = []
        if self.settings.store.index:
            from liminal.kernel.replay import history_updates
            from liminal.store.base import StoreError
            from liminal.store.configured import open_store
            from liminal.store.records import conversation

            try:
                async with open_store(self.settings, create=False) as store:
                    history = history_updates(conversation(await store.messages(thread)))
            except StoreError as exc:
                logger.warning("no history for the take-over; the rest of the turn only", error=str(exc))
        await holder.adopt(connection, load, history)
        await holder.finished.wait()

    # -- running --------------------------------------------------------------------------------

    async def run(self, host: str, port: int,
                  ready: Callable[[int], Awaitable[None] | None] | None = None) -> int:
        # Past max_size the library closes the connection (1009) before it holds the message
        # whole; between the router's cap and it, the router answers with an error. The leg
        # takes each message as it comes, so a few frames queued are all the library holds.
        frame = self.settings.proxy.max_frame_bytes
        max_size = min(4 * frame + 1024, self.settings.serve.max_message_bytes)
        try:
            listening = await serve(self.handle, host, port, process_request=self.process_request,
                                    process_response=self.process_response,
                                    select_subprotocol=self.select_subprotocol,
                                    max_size=max_size, max_queue=4, ping_interval=20, ping_timeout=20,
                                    server_header="liminal")
        except OSError as exc:  # the port is taken, the host is not this machine's
            raise ListenError(exc.strerror or str(exc)) from exc
        async with listening as server, contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(self.dashboard.aclose)
            if self.index_worker is not None:
                index_worker = await stack.enter_async_context(self.index_worker)
                # Every connection's spool is drained by now (or left for the next start):
                # its stdin closed, the worker exits; waited for within the deadline.
                stack.push_async_callback(lambda: index_worker.aclose(self._time_left()))
            self.server = server
            bound = server.sockets[0].getsockname()[1] if server.sockets else port
            logger.info("serving ACP over WebSocket", url=f"ws://{host}:{bound}{ENDPOINT}",
                        agent=self.argv)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                if ready is not None:
                    result = ready(bound)
                    if result is not None:
                        await result
                signum = int(await anext(aiter(signals)))
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._hurry_on_another, signals)
                    await self._shutdown(server, signum)
                    tg.cancel_scope.cancel()
        return 128 + signum

    async def _hurry_on_another(self, signals: AsyncIterator[signal.Signals]) -> None:
        """A second SIGTERM or SIGINT (Ctrl-C again) during the stop: what is left is killed now."""
        async for _ in signals:
            self._hurried.set()
            return

    async def _shutdown(self, server: Server, signum: int) -> None:
        """Every wait of the stop inside one deadline, ``serve.shutdown_seconds`` from the
        signal; connections close all at once; what is left at the end is killed."""
        budget = self.settings.serve.shutdown_seconds
        started = time.monotonic()
        deadline = started + budget
        self._deadline = deadline
        kill_at = deadline - unwind_seconds(self.settings)
        turns_end = kill_at - closing_seconds(self.settings)
        logger.warning("signal received; closing connections", signal=signum,
                       connections=len(self.connections),
                       turns=sum(1 for leg in self.legs.values() if leg.under_way()), seconds=budget)
        self._stopping = True
        server.close(close_connections=False)
        closing: dict[ServerConnection, asyncio.Task[None]] = {}
        closed = asyncio.ensure_future(server.wait_closed())  # every handler has returned
        hurried = asyncio.ensure_future(self._hurried.wait())
        # Looked at until every handler has returned: a connection with nothing under way (or
        # no agent yet) is closed at once, one with a turn when the turn ends or when only its
        # closing's time is left (the turn is cut, with its agent); closing stops the agent and
        # flushes the spool. All of them at the same time.
        while True:
            if self._hurried.is_set():
                kill_at = turns_end = min(kill_at, time.monotonic())
                deadline = min(deadline, kill_at + UNWIND_SECONDS)
            late = time.monotonic() >= turns_end
            for leg in list(self.legs.values()):
                if leg.proxy is not None:
                    leg.proxy.restart_agent = False  # an agent that dies now is not started again
                if late or not leg.under_way():
                    leg.give_up()  # nor does a connection whose client left wait for its turn
            for connection in list(self.connections):
                serving = self._serving(connection)
                if connection not in closing and (late or serving is None or not serving.under_way()):
                    closing[connection] = self._close(connection, kill_at)
            if closed.done() or time.monotonic() >= kill_at:
                break
            await asyncio.wait({closed, hurried}, timeout=max(0.0, min(LOOK_SECONDS, kill_at - time.monotonic())),
                               return_when=asyncio.FIRST_COMPLETED)
        hurried.cancel()
        if not closed.done():
            self._kill_what_is_left(budget, self._hurried.is_set())
            await asyncio.wait({closed}, timeout=max(0.0, deadline - time.monotonic()))
        logger.info("liminal serve stopped", signal=signum, seconds=round(time.monotonic() - started, 1),
                    unfinished=0 if closed.done() else len(self.connections))
        if not closed.done():
            # A wait no kill ends (an index worker's drain, a store that does not answer) would
            # hold the event loop's exit past the deadline. What is lost: nothing the spools do
            # not hold; the index workers drain them on their own, or the next start does.
            sys.stderr.flush()
            os._exit(128 + signum)

    def _time_left(self) -> float:
        return 0.0 if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def _serving(self, connection: ServerConnection) -> WebSocketClientLeg | None:
        """The leg whose proxy the connection talks to: its own, or the one it took over."""
        leg = self.legs.get(connection)
        return leg.handover[0] if leg is not None and leg.handover is not None else leg

    def _close(self, connection: ServerConnection, until: float) -> asyncio.Task[None]:
        """Close with 1001 in a task of its own, its client's answer awaited at most
        ``CLOSE_ANSWER_SECONDS`` (and never past ``until``)."""
        connection.close_timeout = max(0.0, min(CLOSE_ANSWER_SECONDS, until - time.monotonic()))

        async def close() -> None:
            with contextlib.suppress(Exception):
                await connection.close(1001, "liminal is shutting down")

        return asyncio.get_running_loop().create_task(close())

    def _kill_what_is_left(self, budget: float, hurried: bool) -> None:
        """SIGKILL to every agent's process group still there, and every connection dropped."""
        agents = [group for group in reaper.watched() if _signal_group(group, signal.SIGKILL)]
        for connection in list(self.connections):
            connection.transport.abort()
        logger.error("another signal; killing what is left" if hurried
                     else "shutdown deadline reached; killing what is left", seconds=budget,
                     connections=len(self.connections), agent_groups=agents)


def _signal_group(group: int, sig: int) -> bool:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
