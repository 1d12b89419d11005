"""A WebSocket client made of a socket and RFC 6455 by hand, for what a well-behaved library will
not do: frames of any opcode and payload (a binary frame with invalid UTF-8, a batch, a message
larger than anything sensible), a client that never reads, one that vanishes with a reset.

Only the client's half of the protocol a test needs: the opening handshake, masked frames out,
unmasked frames in (pings answered unless told not to), the close code the server sent.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
from typing import Any

TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


class Closed(Exception):
    """The server closed the connection: ``code`` and ``reason`` from its close frame (None
    when the socket ended without one)."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        super().__init__(f"closed: {code} {reason}")
        self.code = code
        self.reason = reason


class RawWebSocket:
    def __init__(self, port: int, token: str, *, rcvbuf: int | None = None, path: str = "/acp",
                 timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # set before connecting, so the window is small from the start
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self._buffer = b""
        self._deadline: float | None = None
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                           f"Authorization: Bearer {token}\r\n\r\n").encode())
        while b"\r\n\r\n" not in self._buffer:
            self._fill()
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise ConnectionError(status.decode(errors="replace"))
        self.answer_pings = True

    # -- out -----------------------------------------------------------------------------------

    def send_frame(self, opcode: int, payload: bytes, *, fin: bool = True) -> None:
        length = len(payload)
        head = bytes([(0x80 if fin else 0) | opcode])
        if length < 126:
            head += bytes([0x80 | length])
        elif length < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", length)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", length)
        mask = os.urandom(4)
        # XOR through an integer: fast enough for messages of many megabytes.
        repeated = (mask * (length // 4 + 1))[:length]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(length, "big")
        self.sock.sendall(head + mask + masked)

    def send_header(self, opcode: int, length: int) -> None:
        """Only the head of a frame that says ``length`` bytes follow (none do): what a server
        that holds messages whole must refuse before it reads them."""
        self.sock.sendall(bytes([0x80 | opcode, 0x80 | 127]) + struct.pack("!Q", length) + os.urandom(4))

    def send_text(self, data: str | bytes) -> None:
        self.send_frame(TEXT, data.encode() if isinstance(data, str) else data)

    def send_binary(self, data: bytes) -> None:
        self.send_frame(BINARY, data)

    def send_json(self, message: Any) -> None:
        self.send_text(json.dumps(message))

    # -- in ------------------------------------------------------------------------------------

    def _fill(self) -> None:
        if self._deadline is not None:  # one deadline for a whole recv, pings or not
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("nothing came in time")
            self.sock.settimeout(left)
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise Closed(None, "the socket ended")
        self._buffer += chunk

    def _take(self, n: int) -> bytes:
        while len(self._buffer) < n:
            self._fill()
        taken, self._buffer = self._buffer[:n], self._buffer[n:]
        return taken

    def recv(self, timeout: float = 30.0) -> tuple[int, bytes]:
        """The next data frame (opcode, payload); ``Closed`` at the server's close frame."""
        self._deadline = time.monotonic() + timeout
        try:
            return self._recv()
        finally:
            self._deadline = None

    def _recv(self) -> tuple[int, bytes]:
        while True:
            first, second = self._take(2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", self._take(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", self._take(8))
            payload = self._take(length)
            if opcode == CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise Closed(code, payload[2:].decode(errors="replace"))
            if opcode == PING:
                if self.answer_pings:
                    self.send_frame(PONG, payload)
                continue
            if opcode == PONG:
                continue
            return opcode, payload

    def recv_json(self, timeout: float = 30.0) -> Any:
        return json.loads(self.recv(timeout)[1])

    def answer_to(self, rpc_id: Any, timeout: float = 30.0) -> dict[str, Any]:
        """The response with this id (what comes before it is skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.recv_json(max(0.1, deadline - time.monotonic()))
            if isinstance(message, dict) and message.get("id") == rpc_id and "method" not in message:
                return message

    def rpc(self, rpc_id: Any, method: str, params: Any, timeout: float = 30.0) -> dict[str, Any]:
        self.send_json({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
        return self.answer_to(rpc_id, timeout)

    # -- the end -------------------------------------------------------------------------------

    def reset(self) -> None:
        """Vanish: a TCP reset, no close frame (a client whose machine went away)."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawWebSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
