"""A WebSocket client on a bare socket, for tests that must behave as no library would: send
a handshake with any headers (twice, conflicting), and then never answer the server's close
frame, or never read at all. Frames are written by hand (RFC 6455, section 5.2)."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
from typing import Any


def request(port: int, head: list[tuple[str, str]], *, path: str = "/acp", key: str = "") -> socket.socket:
    """Send a WebSocket handshake with these header lines after the usual ones (``key``, if
    given, in place of a good one); the socket, its answer not read yet."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
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


class RawClient:
    """An open WebSocket connection that does only what the test says."""

    def __init__(self, port: int, token: str) -> None:
        self.sock = request(port, [("Authorization", f"Bearer {token}")])
        status, head = answer_head(self.sock)
        assert status == 101, head
        self._buffer = head.split(b"\r\n\r\n", 1)[1]

    def send(self, message: dict[str, Any]) -> None:
        payload = json.dumps(message).encode()
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            length = bytes([0x80 | n])
        elif n < 65536:
            length = bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            length = bytes([0x80 | 127]) + struct.pack("!Q", n)
        header = bytes([0x81]) + length  # a final text frame, masked as a client's must be
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _take(self, n: int, deadline: float) -> bytes:
        while len(self._buffer) < n:
            self.sock.settimeout(max(0.1, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def recv(self, timeout: float = 30) -> dict[str, Any]:
        """The next text frame's message (the server's frames are not masked, nor fragmented)."""
        deadline = time.monotonic() + timeout
        while True:
            first, second = self._take(2, deadline)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._take(2, deadline))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._take(8, deadline))[0]
            payload = self._take(n, deadline)
            if first & 0x0F == 0x1:
                return dict(json.loads(payload))
            if first & 0x0F == 0x8:
                raise ConnectionError("the server sent a close frame")

    def rpc(self, rpc_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
        while True:
            message = self.recv()
            if message.get("id") == rpc_id and "method" not in message:
                return message

    def close(self) -> None:
        self.sock.close()
