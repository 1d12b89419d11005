"""The proxy run in the test's own event loop, with the client side on OS pipes.

For kernel tests that need to reach into components (the swap manager) while a real agent
subprocess runs behind a real proxy.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from liminal.config import ProxySettings
from liminal.proxy import Component, Proxy
from liminal.transport.legs import AgentLeg, ClientLeg
from tests.support.proxy_process import LineClient, child_env


class PipeClient(LineClient):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.WriteTransport) -> None:
        super().__init__()
        self._reader = reader
        self._writer = writer

    async def pump(self) -> None:
        while True:
            line = await self._reader.readline()
            if not line:
                break
            self._received([line.rstrip(b"\n")])

    async def send(self, data: bytes) -> None:
        self.sent.extend(data.splitlines())
        self._writer.write(data)

    def close(self) -> None:
        self._writer.close()


@asynccontextmanager
async def proxy_in_process(
    agent: Sequence[str], tmp_path: Path, components: Sequence[Component], **env: str
) -> AsyncIterator[tuple[Proxy, PipeClient]]:
    loop = asyncio.get_running_loop()
    to_proxy_r, to_proxy_w = os.pipe()
    from_proxy_r, from_proxy_w = os.pipe()
    proxy = Proxy(agent, ProxySettings(kill_grace_seconds=2), components=components,
                  client=ClientLeg(stdin_fd=to_proxy_r, stdout_fd=from_proxy_w),
                  agent=AgentLeg(agent, env=child_env(tmp_path, **env)))
    reader = asyncio.StreamReader(limit=1 << 26)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(from_proxy_r, "rb", buffering=0))
    write_transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(to_proxy_w, "wb", buffering=0))
    client = PipeClient(reader, write_transport)
    try:
        finished = anyio.Event()

        async def run_proxy() -> None:
            try:
                await proxy.run()
            finally:
                finished.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_proxy)
            tg.start_soon(client.pump)
            yield proxy, client
            client.close()
            # proxy.run closes its own transports on the way out: wait for it rather than cancel,
            # or a later proxy reusing these fd numbers would find them still registered.
            with anyio.fail_after(30):
                await finished.wait()
            tg.cancel_scope.cancel()
    finally:
        read_transport.close()
        for fd in (to_proxy_r, from_proxy_w):
            try:
                os.close(fd)
            except OSError:
                pass
