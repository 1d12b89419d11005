"""NDJSON framing with a mandatory size cap. No I/O.

ACP puts one JSON-RPC message on each line. The framer cuts a byte stream into lines and hands
them out exactly as they arrived, without the ``\\n`` (a ``\\r`` before it stays part of the
line, so writing ``line + b"\\n"`` reproduces the stream byte for byte).

A line longer than ``max_size`` is never buffered whole: once it passes the cap the framer keeps
only its head and tail, skips to the next newline, and returns an ``Oversized`` in its place so
the router can still answer the request it carried (see ``jsonrpc.recover_top_level``).
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 4 * 1024


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line that exceeded the cap: its first and last bytes, and its full length."""

    head: bytes
    tail: bytes
    size: int


class LineFramer:
    def __init__(self, max_size: int) -> None:
        if max_size < 1:
            raise ValueError("max_size must be positive")
        self.max_size = max_size
        self._parts: list[bytes] = []  # pieces of the unfinished line
        self._size = 0
        self._discarding = False
        self._head = b""
        self._tail = b""

    @property
    def buffered(self) -> int:
        """Bytes held for the unfinished line (never more than the cap plus one chunk)."""
        return self._size if not self._discarding else len(self._head) + len(self._tail)

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """Add bytes; return every line they complete, in order."""
        out: list[bytes | Oversized] = []
        if not data:
            return out
        if self._parts or self._discarding:
            newline = data.find(b"\n")
            if newline < 0:
                self._add(data)
                return out
            self._add(data[:newline])
            out.append(self._finish())
            data = data[newline + 1 :]
            if not data:
                return out
        lines = data.split(b"\n")
        rest = lines.pop()
        if len(data) > self.max_size:
            cap = self.max_size
            out.extend(
                Oversized(line[:HEAD_BYTES], line[-TAIL_BYTES:], len(line)) if len(line) > cap else line
                for line in lines
            )
        else:
            out.extend(lines)
        if rest:
            self._add(rest)
        return out

    def close(self) -> list[bytes | Oversized]:
        """End of stream: an unterminated last line is still a line."""
        if self._parts or self._discarding:
            return [self._finish()]
        return []

    def _add(self, piece: bytes) -> None:
        if self._discarding:
            self._size += len(piece)
            if len(self._head) < HEAD_BYTES:
                self._head += piece[: HEAD_BYTES - len(self._head)]
            self._tail = (self._tail + piece)[-TAIL_BYTES:]
            return
        self._parts.append(piece)
        self._size += len(piece)
        if self._size > self.max_size:
            joined = b"".join(self._parts)
            self._head = joined[:HEAD_BYTES]
            self._tail = joined[-TAIL_BYTES:]
            self._parts = []
            self._discarding = True

    def _finish(self) -> bytes | Oversized:
        result: bytes | Oversized
        if self._discarding:
            result = Oversized(self._head, self._tail, self._size)
            self._discarding = False
            self._head = self._tail = b""
        else:
            result = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
            self._parts = []
        self._size = 0
        return result
