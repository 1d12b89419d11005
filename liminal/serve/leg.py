"""A WebSocket connection as the proxy's client leg (``liminal.transport.legs.ClientSide``):
each text frame is one JSON-RPC message, handed to the router as one line; each line the router
writes to the client goes out as one text frame, in order.

Two things stdio never needed:

- **Thread locks.** A request that names a thread (``session/load``, ``prompt`` ...) is let
  through only once this connection holds the thread's lock (``liminal.serve.locks``); while
  another connection holds it the request waits (at most ``busy_wait`` seconds, then it is
  answered with an error). Reading waits with it, so the client's order is kept.
- **A connection dropped mid-turn.** The proxy is not told the client left while anything is
  under way (a prompt, a swap, a command's move): the turn finishes, is recorded and swapped as
  usual, and what the agent sends meanwhile goes nowhere, its requests (a permission) answered
  as a client that has left would answer them (cancelled). Then the proxy ends, and a client
  that connects again and loads the thread gets it whole, from the store.

Flow control: while more than ``HIGH_WATER`` frames wait to be sent, the proxy is told to stop
reading the agent, and to go on at ``LOW_WATER``; while the proxy asks this leg to pause, no
further frame is read from the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.typing import Data

from liminal import log
from liminal.acp import jsonrpc

if TYPE_CHECKING:
    from liminal.proxy import Proxy
    from liminal.serve.locks import ThreadLocks

logger = log.get("liminal.serve")
HIGH_WATER = 1024
LOW_WATER = 256
THREAD_METHODS = frozenset({"session/load", "session/resume", "session/prompt", "session/fork",
                            "session/set_mode", "session/set_config_option", "session/set_model"})
IDLE_LOOKS = 4  # a detached proxy ends after this many looks in a row find nothing under way
LOOK_SECONDS = 0.25
BUSY_CODE = -32002
CLAIM_SECONDS = 30.0


class WebSocketClientLeg:
    def __init__(self, connection: ServerConnection, *, locks: ThreadLocks | None = None,
                 busy_wait: float = 120.0, detached_max: float = 3600.0,
                 first: Data | None = None) -> None:
        self.connection = connection
        # A message the server read before the proxy existed (``initialize``): read first.
        self._first: deque[Data] = deque([first] if first is not None else [])
        self.locks = locks
        self.busy_wait = busy_wait
        self.detached_max = detached_max
        self.proxy: Proxy | None = None  # set once the proxy exists: its router says what runs
        self.closed = False
        self.detached = False
        self._out: deque[bytes] = deque()
        self._ready = asyncio.Event()
        self._reading = asyncio.Event()
        self._reading.set()
        self._paused_agent = False
        self._tasks: list[asyncio.Task[None]] = []
        self._on_flow: Callable[[bool], None] = lambda pause: None
        self._on_data: Callable[[bytes], None] = lambda data: None
        self._closing: asyncio.Task[None] | None = None
        self._sent_all = asyncio.Event()
        self._sent_all.set()
        self._deadline = 0.0
        self._given_up = False
        self._pending_takes: set[asyncio.Task[bool]] = set()
        self._new_sessions: set[Any] = set()  # ids of session/new requests: their answers name threads
        # Taking over a detached connection's proxy (``adopt``).
        self.find_detached: Callable[[str, WebSocketClientLeg], WebSocketClientLeg | None] | None = None
        self.handover: tuple[WebSocketClientLeg, dict[str, Any]] | None = None
        self._adopted = asyncio.Event()
        self.claimed: float | None = None  # when a new connection chose to take this proxy over
        self.finished = asyncio.Event()  # the reading is over: the proxy is told the client left
        self._orphans: set[Any] = set()  # the gone client's requests still pending: answers dropped
        self._renames: dict[str, bytes] = {}  # our id for a new request whose id an orphan has -> its id
        self._rename_count = itertools.count(1)

    async def open(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None],
                   on_flow: Callable[[bool], None]) -> None:
        self._on_flow = on_flow
        self._on_data = on_data
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read(on_data, on_eof)), loop.create_task(self._send())]

    # -- from the client -------------------------------------------------------------------------

    async def _read(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        while True:
            try:
                while True:
                    await self._reading.wait()
                    message = self._first.popleft() if self._first else await self.connection.recv()
                    data = message.encode() if isinstance(message, str) else bytes(message)
                    # One frame is one message: a newline inside it would split it for the framer.
                    data = data.replace(b"\n", b" ").replace(b"\r", b" ")
                    if self.handover is not None:
                        break  # this connection goes on with another's proxy (``adopt``)
                    data = self._renamed_in(data)
                    if await self._admit(data):
                        on_data(data + b"\n")
                    if self.handover is not None:
                        break
            except ConnectionClosed:
                pass
            except Exception:
                logger.exception("reading the WebSocket failed")
            if self.handover is not None:
                break
            await self._finish_turns()
            if not self._adopted.is_set():
                break
            self._adopted.clear()  # a new connection took this proxy over: read from it
        self.closed = True
        self.detached = False
        self.finished.set()
        on_eof()

    async def _admit(self, data: bytes) -> bool:
        """Whether the message may go to the agent now; it waits while another connection
        holds its thread, and is answered here if that lasts past ``busy_wait``."""
        if self.locks is None:
            return True
        # Read as the router reads it (``jsonrpc.parse`` takes NaN and escaped keys, which a
        # byte test or orjson alone would wave through to the agent past the lock).
        message = jsonrpc.parse(data)
        if message is None:
            return True  # the router answers what does not parse
        method, params = message.get("method"), message.get("params")
        if method == "session/new" and "id" in message:
            self._new_sessions.add(jsonrpc.id_key(message["id"]))
            return True
        thread = params.get("sessionId") if isinstance(params, dict) else None
        if method not in THREAD_METHODS or not isinstance(thread, str):
            return True
        holder = self.find_detached(thread, self) if self.find_detached is not None else None
        if holder is not None and method in ("session/load", "session/resume") and "id" in message:
            # The thread's turn still runs in the proxy of a connection that dropped: this
            # connection takes that proxy over and gets the rest live (``adopt``). Claimed now,
            # in this step, so that proxy does not end while this one winds down; what this
            # connection asked its own proxy before is answered first.
            holder.claimed = time.monotonic()
            await self._own_requests_answered(CLAIM_SECONDS / 2)
            self.handover = (holder, message)
            return False
        deadline = time.monotonic() + self.busy_wait
        while not await self.locks.try_take(thread):
            if time.monotonic() >= deadline:
                logger.warning("thread in use by another connection", thread=thread, method=method)
                if "id" in message:
                    self.write(jsonrpc.error_frame(
                        jsonrpc.encode_id(message["id"]), BUSY_CODE,
                        "this thread is open in another connection of liminal; try again when it is closed"))
                return False
            await asyncio.sleep(0.1)
        return True

    async def _own_requests_answered(self, timeout: float) -> None:
        """Until this connection's proxy owes it nothing (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        while (self.proxy is not None and self.proxy.router.pending_client_ids()  # noqa: ASYNC110 - no event for it
               and time.monotonic() < deadline):
            await asyncio.sleep(0.02)

    async def _finish_turns(self) -> None:
        """The client left: let what is under way finish before the proxy hears of it."""
        if self._given_up or not self.under_way():
            return
        self.detached = True
        logger.info("connection dropped with a turn under way; it goes on", connection=self._connection_id())
        if self.proxy is not None:  # what the agent asked the client that left
            for rpc_id, method in self.proxy.router.open_agent_requests():
                self._on_data(self._answer(jsonrpc.encode_id(rpc_id), method) + b"\n")
        self._deadline = time.monotonic() + self.detached_max
        quiet = 0
        while ((quiet < IDLE_LOOKS or self._claim_holds()) and time.monotonic() < self._deadline
               and not self._given_up):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOOK_SECONDS):
                    await self._adopted.wait()
            if self._adopted.is_set():
                return  # live again, with another connection
            quiet = 0 if self.under_way() else quiet + 1
        logger.info("detached connection finished", connection=self._connection_id())

    def _claim_holds(self) -> bool:
        """A new connection is taking this proxy over (``adopt`` comes within 30 s)."""
        return self.claimed is not None and time.monotonic() - self.claimed < CLAIM_SECONDS

    def give_up(self) -> None:
        """Do not wait for a turn under way when the client leaves, or stop waiting for one
        (liminal is shutting down): the proxy ends now, which stops the agent."""
        self._given_up = True

    def under_way(self) -> bool:
        proxy = self.proxy
        if proxy is None or not proxy.router.agent_alive:
            return False
        if not proxy.router.agent_idle():
            return True
        return any(getattr(c, "busy", lambda: False)() for c in proxy.components)

    def _connection_id(self) -> str:
        return self.proxy.connection_id if self.proxy is not None else ""

    # -- to the client ---------------------------------------------------------------------------

    async def _send(self) -> None:
        try:
            while True:
                while not self._out:
                    self._sent_all.set()
                    self._ready.clear()
                    await self._ready.wait()
                line = self._out.popleft()
                if self._paused_agent and len(self._out) <= LOW_WATER:
                    self._paused_agent = False
                    self._on_flow(False)
                await self.connection.send(line.decode("utf-8", "replace"))
        except ConnectionClosed:
            self._out.clear()
            self._sent_all.set()

    def write(self, data: bytes) -> None:
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            if self._new_sessions and self.locks is not None and b'"sessionId"' in line:
                self._lock_new_session(line)
            if self.detached:
                self._answer_for_the_client(line)
            elif not self.closed:
                if self._orphans or self._renames:  # (an answer may hold the text "method")
                    line = self._renamed_out(line)
                    if not line:
                        continue
                self._out.append(line)
        self._sent_all.clear()
        self._ready.set()
        if not self._paused_agent and len(self._out) > HIGH_WATER:
            self._paused_agent = True
            self._on_flow(True)

    def _lock_new_session(self, line: bytes) -> None:
        message = jsonrpc.parse(line)
        if message is None or "id" not in message or "method" in message:
            return
        key = jsonrpc.id_key(message["id"])
        if key in self._new_sessions:
            self._new_sessions.discard(key)
            result = message.get("result")
            thread = result.get("sessionId") if isinstance(result, dict) else None
            if isinstance(thread, str) and self.locks is not None:
                # A new thread: free everywhere, unless an id repeats; taken before the client
                # can name it (its next message is read after this task has run).
                task = asyncio.get_running_loop().create_task(self.locks.try_take(thread))
                self._pending_takes.add(task)
                task.add_done_callback(self._pending_takes.discard)

    def _answer_for_the_client(self, line: bytes) -> None:
        """While detached, the agent's requests are answered as by a client that has left."""
        if b'"method"' not in line or b'"id"' not in line:
            return
        message = jsonrpc.parse(line)
        if message is None or "id" not in message or "method" not in message:
            return
        answer = self._answer(jsonrpc.encode_id(message["id"]), str(message["method"]))
        # Not from inside the proxy's flush that is writing this line.
        asyncio.get_running_loop().call_soon(self._on_data, answer + b"\n")

    @staticmethod
    def _answer(rpc_id: bytes, method: str) -> bytes:
        if method == "session/request_permission":
            return b'{"jsonrpc":"2.0","id":' + rpc_id + b',"result":{"outcome":{"outcome":"cancelled"}}}'
        return jsonrpc.error_frame(rpc_id, jsonrpc.INTERNAL_ERROR, "the client has disconnected")

    async def adopt(self, connection: ServerConnection, load: dict[str, Any],
                    history: list[dict[str, Any]]) -> None:
        """A new connection takes over this detached proxy: its ``load`` (or ``resume``) of the
        thread is answered here with the thread's history (from the store) and the rest of the
        running turn goes to it live; it can cancel it. The gone client's requests still
        pending are orphans: their answers are dropped, and a new request that reuses one of
        their ids is renamed on its way (and back)."""
        thread = str((load.get("params") or {}).get("sessionId"))
        self._orphans = set(self.proxy.router.pending_client_ids()) if self.proxy is not None else set()
        self.connection = connection
        self.closed = False
        self.detached = False
        self._out.clear()
        for update in history:
            self._out.append(orjson.dumps({"jsonrpc": "2.0", "method": "session/update",
                                           "params": {"sessionId": thread, "update": update}}))
        self._out.append(b'{"jsonrpc":"2.0","id":' + jsonrpc.encode_id(load["id"]) + b',"result":{}}')
        self._sent_all.clear()
        self._tasks.append(asyncio.get_running_loop().create_task(self._send()))
        self._ready.set()
        self.claimed = None
        self._adopted.set()
        logger.info("a new connection took over a detached turn", thread=thread, connection=self._connection_id())

    def _renamed_in(self, data: bytes) -> bytes:
        if not self._orphans:
            return data
        message = jsonrpc.parse(data)
        if message is None or "method" not in message or "id" not in message \
                or jsonrpc.id_key(message["id"]) not in self._orphans:
            return data
        # Never reused while the client runs: a count of what is still open could hand out an
        # id a request still waits under.
        ours = f"liminal-re-{next(self._rename_count)}"
        self._renames[ours] = jsonrpc.encode_id(message["id"])
        return orjson.dumps({**message, "id": ours})

    def _renamed_out(self, line: bytes) -> bytes:
        message = jsonrpc.parse(line)
        if message is None or "id" not in message or "method" in message:
            return line
        key = jsonrpc.id_key(message["id"])
        if isinstance(key, str) and key in self._renames:
            original = self._renames.pop(key)
            return orjson.dumps({**message, "id": orjson.loads(original)})
        if key in self._orphans:
            self._orphans.discard(key)
            return b""  # the answer to a request of the client that left
        return line

    def pause_reading(self, pause: bool) -> None:
        (self._reading.clear if pause else self._reading.set)()

    def close(self) -> None:
        """Send what is queued (for up to two seconds), then close the connection (unless it
        goes on with another connection's proxy: then ``handed_over`` once it is sent)."""
        if self.handover is not None:
            with contextlib.suppress(RuntimeError):
                self._closing = asyncio.get_running_loop().create_task(self._drain_for_handover())
            return
        with contextlib.suppress(RuntimeError):
            self._closing = asyncio.get_running_loop().create_task(self._drain_and_close())

    async def _drain_for_handover(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await self._sent_all.wait()
        for task in self._tasks:
            task.cancel()

    async def handed_over(self) -> None:
        """What this connection's own proxy answered went out; its sender is stopped."""
        if self._closing is not None:
            with contextlib.suppress(Exception):
                await self._closing

    async def _drain_and_close(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await self._sent_all.wait()
        for task in self._tasks:
            task.cancel()
        await self.connection.close()
