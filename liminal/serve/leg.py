"""A WebSocket connection as the proxy's client leg (``liminal.transport.legs.ClientLeg``'s
interface): each text frame is one JSON-RPC message, handed to the router as one line; each
line the router writes to the client goes out as one text frame, in order.

Flow control: while more than ``HIGH_WATER`` frames wait to be sent, the proxy is told to stop
reading the agent (``on_flow(True)``), and to go on once they are down to ``LOW_WATER``; while
the proxy asks this leg to pause, no further frame is read from the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from liminal import log

logger = log.get("liminal.serve")
HIGH_WATER = 1024
LOW_WATER = 256


class WebSocketClientLeg:
    def __init__(self, connection: ServerConnection) -> None:
        self.connection = connection
        self.closed = False
        self._out: deque[bytes] = deque()
        self._ready = asyncio.Event()
        self._reading = asyncio.Event()
        self._reading.set()
        self._paused_agent = False
        self._tasks: list[asyncio.Task[None]] = []
        self._on_flow: Callable[[bool], None] = lambda pause: None
        self._closing: asyncio.Task[None] | None = None
        self._sent_all = asyncio.Event()
        self._sent_all.set()

    async def open(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None],
                   on_flow: Callable[[bool], None]) -> None:
        self._on_flow = on_flow
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read(on_data, on_eof)), loop.create_task(self._send())]

    async def _read(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        try:
            while True:
                await self._reading.wait()
                message = await self.connection.recv()
                data = message.encode() if isinstance(message, str) else bytes(message)
                # One frame is one message: a newline inside it would split it for the framer.
                on_data(data.replace(b"\n", b" ").replace(b"\r", b" ") + b"\n")
        except ConnectionClosed:
            pass
        except Exception:
            logger.exception("reading the WebSocket failed")
        finally:
            self.closed = True
            on_eof()

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
            self.closed = True
            self._sent_all.set()

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        for line in data.split(b"\n"):
            if line.strip():
                self._out.append(line)
        self._sent_all.clear()
        self._ready.set()
        if not self._paused_agent and len(self._out) > HIGH_WATER:
            self._paused_agent = True
            self._on_flow(True)

    def pause_reading(self, pause: bool) -> None:
        (self._reading.clear if pause else self._reading.set)()

    def close(self) -> None:
        """Send what is queued (for up to two seconds), then close the connection."""
        with contextlib.suppress(RuntimeError):
            self._closing = asyncio.get_running_loop().create_task(self._drain_and_close())

    async def _drain_and_close(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await self._sent_all.wait()
        for task in self._tasks:
            task.cancel()
        await self.connection.close()
