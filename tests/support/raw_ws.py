"""A WebSocket client on a bare socket, for tests that must behave as no library would: send
a handshake with any headers (twice, conflicting), then frames of any opcode and payload (a
binary frame with invalid UTF-8, a batch, the head of a message larger than anything sensible),
never answer the server's close frame, never read at all, or vanish with a reset. Frames are
written by hand (RFC 6455, section 5.2)."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
from typing import Any

TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


def request(port: int, head: list[tuple[str, str]], *, path: str = "/acp", key: str = "",
            rcvbuf: int | None = None) -> socket.socket:
    """Send a WebSocket handshake with these header lines after the usual ones (``key``, if
    given, in place of a good one); the socket, its answer not read yet. ``rcvbuf``: a receive
    buffer that small, set before connecting (a client that reads slowly fills it soon)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    key = key or base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
             *(f"{name}: {value}" for name, value in head)]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    return sock


def answer_head(sock: socket.socket) -> tuple[int, bytes]:
    """The status code and the head of the server's answer to the handshake."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return status, data


def status_of(port: int, head: list[tuple[str, str]], *, path: str = "/acp") -> int:
    with request(port, head, path=path) as sock:
        return answer_head(sock)[0]


class Closed(ConnectionError):
    """The server closed the connection: ``code`` and ``reason`` from its close frame (None
    when the socket ended without one)."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        super().__init__(f"the server closed the connection: {code} {reason}")
        self.code = code
        self.reason = reason


class RawClient:
    """An open WebSocket connection that does only what the test says. Pings are answered
    only while the test reads, and only with ``answer_pings`` (a client that does not read,
    or does not answer, is dropped by the server's keepalive after 40 s)."""

    def __init__(self, port: int, token: str, *, rcvbuf: int | None = None, answer_pings: bool = False) -> None:
        self.sock = request(port, [("Authorization", f"Bearer {token}")], rcvbuf=rcvbuf)
        status, head = answer_head(self.sock)
        if status != 101:
            self.sock.close()
            raise ConnectionError(f"{status}: {head[:200]!r}")
        self._buffer = head.split(b"\r\n\r\n", 1)[1]
        self._deadline = time.monotonic() + 30
        self.answer_pings = answer_pings

    # -- out -----------------------------------------------------------------------------------

    def send_frame(self, opcode: int, payload: bytes) -> None:
        """One final frame, masked as a client's must be."""
        n = len(payload)
        if n < 126:
            length = bytes([0x80 | n])
        elif n < 65536:
            length = bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            length = bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        # XOR through integers: fast for payloads of many megabytes.
        masks = (mask * (n // 4 + 1))[:n]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(masks, "big")).to_bytes(n, "big")
        self.sock.sendall(bytes([0x80 | opcode]) + length + mask + masked)

    def send_header(self, opcode: int, n: int) -> None:
        """Only the head of a frame that says ``n`` bytes follow (none do): what a server that
        holds messages whole must refuse before it reads them."""
        self.sock.sendall(bytes([0x80 | opcode, 0x80 | 127]) + struct.pack("!Q", n) + os.urandom(4))

    def send_text(self, data: str | bytes) -> None:
        self.send_frame(TEXT, data.encode() if isinstance(data, str) else data)

    def send_binary(self, data: bytes) -> None:
        self.send_frame(BINARY, data)

    def send(self, message: Any) -> None:
        self.send_text(json.dumps(message))

    # -- in ------------------------------------------------------------------------------------

    def _take(self, n: int) -> bytes:
        while len(self._buffer) < n:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("nothing came in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Closed(None, "the socket ended")
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def recv_frame(self, timeout: float = 30) -> tuple[int, bytes]:
        """The next data frame, (opcode, payload) (the server's are not masked, nor
        fragmented); ``Closed`` at its close frame."""
        self._deadline = time.monotonic() + timeout
        while True:
            first, second = self._take(2)
            opcode, n = first & 0x0F, second & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._take(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._take(8))[0]
            payload = self._take(n)
            if opcode == CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise Closed(code, payload[2:].decode(errors="replace"))
            if opcode == PING:
                if self.answer_pings:
                    self.send_frame(PONG, payload)
                continue
            if opcode in (TEXT, BINARY):
                return opcode, payload

    def recv(self, timeout: float = 30) -> dict[str, Any]:
        """The next frame's message."""
        return dict(json.loads(self.recv_frame(timeout)[1]))

    def answer_to(self, rpc_id: Any, timeout: float = 30) -> dict[str, Any]:
        """The response with this id (what comes before it is passed over)."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.recv(max(0.1, deadline - time.monotonic()))
            if message.get("id") == rpc_id and "method" not in message:
                return message

    def rpc(self, rpc_id: Any, method: str, params: Any, timeout: float = 30) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
        return self.answer_to(rpc_id, timeout)

    # -- the end -------------------------------------------------------------------------------

    def reset(self) -> None:
        """Vanish: a TCP reset, no close frame (a client whose machine went away)."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
