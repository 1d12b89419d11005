"""The client's end as the ACP version it asked for (``liminal.acp.v2``'s shell).

``VersionedClient`` wraps any client end (stdio, a WebSocket, a conductor's predecessor) and
reads the client's first line. Unless it is an ``initialize`` asking for ACP 2 or later, every
byte passes both ways as it came, from then on without a look (one call more per read; writes
go straight to the inner end). For a v2 client each whole line is parsed and handed to
``V2Face``: what it makes for liminal goes on as lines, what it makes for the client is written.
A line that does not parse passes as it is: the router answers it as it answers any. A line
longer than the router's cap is not gathered: its bytes pass as they come, for the router's
framer to drop as it drops any (what waits for a newline is bounded by the cap).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from liminal.acp.v2 import Out, V2Face, asks_v2
from liminal.transport.legs import ClientSide, OnData, OnEof, OnFlow

FIRST_LINE_BYTES = 1 << 20  # undecided past this: not an ``initialize`` anyone sends


class Lines:
    """One direction's bytes as whole lines, at most ``max_line`` held: each piece ``feed``
    returns is a whole line to parse (True) or bytes of a line past the cap, to pass on (False)."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._rest = bytearray()
        self._long = False  # inside a line past the cap: passed on to its end

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        pieces: list[tuple[bytes, bool]] = []
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            if self._long:  # the rest of a line past the cap, as it comes
                stop = len(data) if end < 0 else end + 1
                pieces.append((data[start:stop], False))
                self._long, start = end < 0, stop
                continue
            if end < 0:
                self._rest += data[start:]
                if len(self._rest) > self.max_line:
                    pieces.append((bytes(self._rest), False))
                    self._rest.clear()
                    self._long = True
                break
            line = bytes(self._rest) + data[start:end] if self._rest else data[start:end]
            self._rest.clear()
            pieces.append((line, True) if len(line) <= self.max_line else (line + b"\n", False))
            start = end + 1
        return pieces


class VersionedClient:
    def __init__(self, inner: ClientSide, max_line: int = FIRST_LINE_BYTES) -> None:
        self.inner = inner
        self.face: V2Face | None = None  # set once a v2 client has asked
        self._deliver: OnData | None = None
        self._first: bytearray | None = bytearray()  # the first line, until it is whole
        self._read = Lines(max_line)  # a v2 client's lines
        self._written = Lines(max_line)  # liminal's lines to a v2 client
        self._max_first = min(max_line, FIRST_LINE_BYTES)

    @property
    def closed(self) -> bool:
        return self.inner.closed

    def interactive(self) -> bool:
        look = getattr(self.inner, "interactive", None)
        return bool(look()) if callable(look) else False

    async def open(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None:
        self._deliver = on_data
        await self.inner.open(self._received, on_eof, on_flow)

    def pause_reading(self, pause: bool) -> None:
        self.inner.pause_reading(pause)

    def close(self) -> None:
        self.inner.close()

    # -- the client's bytes -------------------------------------------------------------------

    def _received(self, data: bytes) -> None:
        assert self._deliver is not None
        if self._first is None:
            if self.face is None:
                self._deliver(data)
            else:
                self._read_lines(data)
            return
        self._first += data
        end = self._first.find(b"\n")
        if end < 0 and len(self._first) < self._max_first:
            return
        held, self._first = bytes(self._first), None
        if end >= 0 and asks_v2(_parse(held[:end])):
            self.face = V2Face()
            self._read_lines(held)
        else:
            self._deliver(held)

    def _read_lines(self, data: bytes) -> None:
        assert self.face is not None and self._deliver is not None
        out: list[bytes] = []
        for piece, whole in self._read.feed(data):
            message = _parse(piece) if whole else None
            if message is None:
                out.append(piece + b"\n" if whole else piece)
                continue
            made = self.face.from_client(message)
            self._write_messages(made.to_client)
            out += [orjson.dumps(m) + b"\n" for m in made.to_liminal]
        if out:
            self._deliver(b"".join(out))

    # -- liminal's bytes ------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.face is None:
            self.inner.write(data)
            return
        for piece, whole in self._written.feed(data):
            message = _parse(piece) if whole else None
            if message is None:
                self.inner.write(piece + b"\n" if whole else piece)
                continue
            made: Out = self.face.to_client(message)
            self._write_messages(made.to_client)
            if made.to_liminal:  # an answer of the face's own to the agent: after this write
                answer = b"".join(orjson.dumps(m) + b"\n" for m in made.to_liminal)
                asyncio.get_running_loop().call_soon(self._deliver_own, answer)

    def _deliver_own(self, data: bytes) -> None:
        if self._deliver is not None:
            self._deliver(data)

    def _write_messages(self, messages: list[dict[str, Any]]) -> None:
        if messages:
            self.inner.write(b"".join(orjson.dumps(m) + b"\n" for m in messages))


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
