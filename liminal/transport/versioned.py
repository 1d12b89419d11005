"""The client's end as the ACP version it asked for (``liminal.acp.v2``'s shell).

``VersionedClient`` wraps any client end (stdio, a WebSocket, a conductor's predecessor) and
reads the client's first line. Unless it is an ``initialize`` asking for ACP 2 or later, every
byte passes both ways as it came, from then on without a look (one call more per read; writes
go straight to the inner end). For a v2 client each whole line is parsed and handed to
``V2Face``: what it makes for liminal goes on as lines, what it makes for the client is written.
A line passes as it came (its bytes, not an encoding of them) unless the face changed its
message: one that does not parse, that the face leaves as it is, whose id is no string or
integer (a float may be an integer past 64 bits that orjson rounded), or whose translation
fails (a message nested past what orjson writes) goes on untouched, for the router to answer as
it answers any. A line longer than the router's cap is not gathered: its bytes pass as they
come, for the router's framer to drop as it drops any (what waits for a newline is bounded by
the cap), and an answer of the face's own waits for that line's end. At the end of the input,
what was held for a newline goes on first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson

from liminal import log
from liminal.acp.v2 import Out, V2Face, asks_v2
from liminal.transport.legs import ClientSide, OnData, OnEof, OnFlow

logger = log.get("liminal.v2")

FIRST_LINE_BYTES = 1 << 20  # undecided past this: not an ``initialize`` anyone sends


class Lines:
    """One direction's bytes as whole lines, at most ``max_line`` held: each piece ``feed``
    returns is a whole line to parse (True) or bytes of a line past the cap, to pass on (False)."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._rest = bytearray()
        self._long = False  # inside a line past the cap: passed on to its end

    @property
    def long(self) -> bool:
        return self._long

    @property
    def holding(self) -> bool:
        """Bytes of a line wait for its newline."""
        return bool(self._rest)

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
        self._own: list[bytes] = []  # the face's answers to the agent, held inside a long line

    @property
    def closed(self) -> bool:
        return self.inner.closed

    def interactive(self) -> bool:
        look = getattr(self.inner, "interactive", None)
        return bool(look()) if callable(look) else False

    async def open(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None:
        self._deliver = on_data

        def ended() -> None:  # what waited for a newline, then the end
            if self._first is not None:
                held, self._first = bytes(self._first), None
                if asks_v2(_parse(held)):  # the whole input was a v2 client's initialize
                    self.face = V2Face()
                    self._read_lines(held + b"\n")
                elif held:
                    on_data(held)
            elif self.face is not None:
                self._read_lines(b"\n" if self._read.holding else b"")
            on_eof()

        await self.inner.open(self._received, ended, on_flow)

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
            if not whole:
                out.append(piece)
                continue
            made = self._translate(self.face.from_client, piece)
            if made is None:
                out.append(piece + b"\n")
                continue
            for_liminal, for_client = made
            out += for_liminal
            if for_client:
                self.inner.write(b"".join(for_client))
        if self._own and not self._read.long:
            out += self._own
            self._own = []
        if out:
            self._deliver(b"".join(out))

    def _translate(self, turn: Callable[[dict[str, Any]], Out], line: bytes) -> tuple[list[bytes], list[bytes]] | None:
        """``line``'s message turned: the lines for liminal, the lines for the client; None: the
        line goes on as it came."""
        message = _parse(line)
        if message is None or not isinstance(message.get("id", 0), (str, int)):
            return None
        try:
            made = turn(message)
            return ([line + b"\n" if m is message else orjson.dumps(m) + b"\n" for m in made.to_liminal],
                    [line + b"\n" if m is message else orjson.dumps(m) + b"\n" for m in made.to_client])
        except Exception as exc:  # a message past what orjson writes, a bug: as it came
            logger.warning("a line passed on as it came: not translated", error=f"{type(exc).__name__}: {exc}")
            return None

    # -- liminal's bytes ------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.face is None:
            self.inner.write(data)
            return
        out: list[bytes] = []
        for piece, whole in self._written.feed(data):
            made = self._translate(self.face.to_client, piece) if whole else None
            if made is None:
                out.append(piece + b"\n" if whole else piece)
                continue
            for_liminal, for_client = made
            out += for_client
            if for_liminal:  # an answer of the face's own to the agent: after this write
                answer = b"".join(for_liminal)
                asyncio.get_running_loop().call_soon(self._deliver_own, answer)
        if out:
            self.inner.write(b"".join(out))

    def _deliver_own(self, data: bytes) -> None:
        if self._read.long:  # the router's framer is inside a line it drops: after its end
            self._own.append(data)
        elif self._deliver is not None:
            self._deliver(data)


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
