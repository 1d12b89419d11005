"""Rule 9 of the router (``liminal.acp.router``): a new client takes over from one that left.

``liminal serve`` lets a connection take over the proxy of one that dropped mid-turn. What the
old client is still owed (its *orphans*) must not reach the new one, which counts its request
ids from 1 too: an orphan's answer is dropped, and a request of the new client under an orphan's
id goes to the agent under one of ours, its answer back under the client's id. Ours is one of the
router's own ids (``liminal-<random per router>-N``, the namespace of liminal's own requests,
never reused: an open request may hold one), not a namespace of its own, which a client could
send itself. No I/O; the router calls ``incoming`` for each client request
and ``outgoing`` for each answer to one, while ``active``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from liminal.acp import jsonrpc


class TakeOver:
    def __init__(self, own_ids: Iterator[str]) -> None:
        self._own_ids = own_ids  # the router's ids of its own
        self._orphans: set[Any] = set()  # ``jsonrpc.id_key`` of what the old client is owed
        self._renames: dict[str, bytes] = {}  # our id -> the new client's id, as JSON

    @property
    def active(self) -> bool:
        return bool(self._orphans or self._renames)

    def begin(self, owed: set[Any]) -> None:
        """A new client goes on from here; ``owed``, the keys of what the old one is owed."""
        self._orphans = set(owed)

    def incoming(self, line: bytes, message: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
        """A new client's request: under one of our ids if an orphan has its id."""
        if jsonrpc.id_key(message["id"]) not in self._orphans:
            return line, message
        ours = next(self._own_ids)
        self._renames[ours] = jsonrpc.encode_id(message["id"], line)
        message = {**message, "id": ours}
        return orjson.dumps(message), message

    def outgoing(self, key: Any, line: bytes) -> bytes | None:
        """An answer for the client: under the client's id if we renamed it; None (dropped) if
        it answers an orphan."""
        original = self._renames.pop(key, None) if isinstance(key, str) else None
        if original is not None:
            message = jsonrpc.parse(line)
            return line if message is None else _with_id(message, original)
        if key in self._orphans:
            self._orphans.discard(key)
            return None
        return line


def _with_id(message: dict[str, Any], id_json: bytes) -> bytes:
    """``message`` encoded under the id ``id_json`` (its exact bytes: a big integer too)."""
    rest = orjson.dumps({k: v for k, v in message.items() if k != "id"})
    return b'{"id":' + id_json + (b"," + rest[1:] if len(rest) > 2 else b"}")
