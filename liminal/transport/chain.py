"""liminal's stdio as a proxy component in a conductor's chain: one pipe pair, two ends.

A conductor speaks to a component on one stdin/stdout for both of its neighbours (the framing:
``liminal.acp.successor``). ``ChainStdio`` reads whole lines from stdin, sends each to the
proxy's client end (the predecessor) or to its agent end (the successor, unwrapped), and writes
both ends' output to stdout, wrapping what goes to the successor. The proxy runs over its two
ends as over ``ClientLeg`` and ``AgentLeg``, router and components unchanged: what a swap, a
command or a replay sends the agent reaches the successor through the conductor.

The successor is no process of liminal's: it cannot be signalled, restarted or replaced, and it
has no stderr. It is there until stdin ends (the conductor closed liminal's input, or exited),
which is the client's end too.
"""

from __future__ import annotations

import asyncio

from liminal.acp.successor import End, SuccessorFraming
from liminal.transport.agentlog import AgentLog
from liminal.transport.legs import ClientLeg, OnData, OnEof, OnFlow


def _ignore(_: object) -> None:
    pass


class ChainStdio:
    """The component's stdio: ``client`` (a ``ClientSide``: the predecessor) and ``successor``
    (an ``AgentSide``: what the proxy takes for its agent)."""

    def __init__(self, max_line: int, stdio: ClientLeg | None = None) -> None:
        self.stdio = stdio or ClientLeg()
        self.framing = SuccessorFraming()
        self.max_line = max_line
        self._buffer = bytearray()
        self._long = False  # inside a line past ``max_line``: the client end's framer drops it
        self.client = PredecessorEnd(self)
        self.successor = SuccessorLeg(self)
        self._to_client: OnData = _ignore
        self._to_agent: OnData = _ignore

    def write(self, data: bytes) -> None:
        self.stdio.write(data)

    def pause_reading(self, pause: bool) -> None:
        self.stdio.pause_reading(pause)

    async def open(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None:
        self._to_client = on_data
        await self.stdio.open(self._read, on_eof, on_flow)

    def _read(self, data: bytes) -> None:
        """Whole lines to the end each is for, consecutive lines for one end in one call."""
        if self._long:
            end = data.find(b"\n")
            if end < 0:
                self._to_client(data)
                return
            self._to_client(data[:end + 1])
            self._long = False
            data = data[end + 1:]
        self._buffer += data
        last = self._buffer.rfind(b"\n")
        if last >= 0:
            lines = bytes(self._buffer[:last + 1])
            del self._buffer[:last + 1]
            self._route(lines)
        if len(self._buffer) > self.max_line:
            self._long = True
            rest, self._buffer = bytes(self._buffer), bytearray()
            self._to_client(rest)

    def _route(self, lines: bytes) -> None:
        batch = bytearray()
        batch_end = End.CLIENT
        for line in lines.splitlines(keepends=True):
            end, out = self.framing.read(line)
            if end is End.REPLY:
                self.stdio.write(out)
                continue
            if end is not batch_end and batch:
                self._deliver(batch_end, bytes(batch))
                batch.clear()
            batch_end = end
            batch += out
        if batch:
            self._deliver(batch_end, bytes(batch))

    def _deliver(self, end: End, data: bytes) -> None:
        (self._to_agent if end is End.AGENT else self._to_client)(data)


class PredecessorEnd:
    """The proxy's client: the predecessor's plain ACP on the component's stdio."""

    def __init__(self, chain: ChainStdio) -> None:
        self._chain = chain

    @property
    def closed(self) -> bool:
        return self._chain.stdio.closed

    async def open(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None:
        await self._chain.open(on_data, on_eof, on_flow)

    def write(self, data: bytes) -> None:
        self._chain.write(data)

    def pause_reading(self, pause: bool) -> None:
        self._chain.pause_reading(pause)

    def close(self) -> None:
        self._chain.stdio.close()

    def interactive(self) -> bool:
        return self._chain.stdio.interactive()


class SuccessorLeg:
    """The proxy's agent: the successor, reached through ``proxy/successor`` envelopes on the
    component's stdio. It exits only when the proxy stops it (its stdin, the client's, ended)."""

    argv: list[str] = []
    env: dict[str, str] | None = None
    cwd: str | None = None
    pid: int | None = None

    def __init__(self, chain: ChainStdio) -> None:
        self._chain = chain
        self.exited = asyncio.Event()
        self.returncode: int | None = None
        self.stderr = AgentLog()  # none: the successor's stderr is the conductor's
        self.stderr_ended = asyncio.Event()
        self.stderr_ended.set()

    async def open(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None:
        self.connect(on_data, on_eof, on_flow)

    def connect(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None:
        self._chain._to_agent = on_data

    def write(self, data: bytes) -> None:
        self._chain.write(self._chain.framing.wrap(data))

    def pause_reading(self, pause: bool) -> None:
        self._chain.pause_reading(pause)

    def close_stdin(self) -> None:
        pass  # the conductor's to close: liminal's stdout carries the predecessor's answers too

    def close(self) -> None:
        pass

    def signal_group(self, sig: int) -> bool:
        return False  # no process of liminal's

    async def stop(self, grace: float, *, wait_first: float = 0.0) -> int:
        self.returncode = 0
        self.exited.set()
        return 0

    async def wait(self) -> int:
        await self.exited.wait()
        return self.returncode or 0

