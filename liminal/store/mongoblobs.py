"""A large record's bytes in the MongoDB store: a frame's raw bytes, a session line, or a
message whose text and data together pass ``liminal.store.mongo.INLINE_BYTES`` are kept in the
``blobs`` collection in pieces of ``CHUNK_BYTES`` (ids ``<owner>#<n>``), and the owner keeps a
reference (``Blobs.ref``). Pieces are written a few at a time (``BLOB_WRITE_BYTES``), so a
1.5 GB frame is never copied whole into BSON.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bson.binary import Binary
from pymongo import ASCENDING, ReplaceOne
from pymongo.asynchronous.collection import AsyncCollection

from liminal.store.base import StoreError
from liminal.store.mongoread import BATCH_PIECES

CHUNK_BYTES = 4 * 1024 * 1024
BLOB_WRITE_BYTES = 32 * 1024 * 1024  # pieces written (and held as BSON) at a time

# Write statements to a collection, as the store sends them (``MongoStore._bulk``).
Bulk = Callable[[AsyncCollection[dict[str, Any]], Sequence[Any]], Awaitable[None]]


class Blobs:
    def __init__(self, collection: AsyncCollection[dict[str, Any]], bulk: Bulk) -> None:
        self._collection = collection
        self._bulk = bulk

    @staticmethod
    def ref(owner: str, data: bytes) -> dict[str, Any]:
        """What the owner keeps of its bytes, once ``write`` has stored them."""
        return {"owner": owner, "chunks": (len(data) + CHUNK_BYTES - 1) // CHUNK_BYTES,
                "size": len(data)}

    async def write(self, blobs: list[tuple[str, bytes]]) -> None:
        """Every piece of every large record, ``BLOB_WRITE_BYTES`` at a time: each piece is
        copied once (from a view of the record's bytes) just before it is sent."""
        ops: list[ReplaceOne[dict[str, Any]]] = []
        held = 0
        for owner, data in blobs:
            view = memoryview(data)
            for n, start in enumerate(range(0, len(data), CHUNK_BYTES)):
                key = f"{owner}#{n}"
                piece = Binary(view[start:start + CHUNK_BYTES])
                ops.append(ReplaceOne({"_id": key}, {"_id": key, "owner": owner, "n": n,
                                                     "data": piece}, upsert=True))
                held += len(piece)
                if held >= BLOB_WRITE_BYTES:
                    await self._bulk(self._collection, ops)
                    ops, held = [], 0
        if ops:
            await self._bulk(self._collection, ops)

    async def read(self, ref: dict[str, Any]) -> bytes:
        """The bytes a reference names (``ref``); raises if a piece is missing."""
        # Only the pieces this version has: a record rewritten smaller (a message replaced by
        # id) leaves its earlier version's later pieces behind until the thread is deleted.
        # Joined as they arrive, into one buffer that becomes the result: a large frame is held
        # once, not in pieces and again whole.
        whole = io.BytesIO()
        async for d in self._collection.find({"owner": ref["owner"], "n": {"$lt": ref["chunks"]}}) \
                .sort("n", ASCENDING).batch_size(BATCH_PIECES):
            whole.write(d["data"])
        data = whole.getvalue()
        if len(data) != ref["size"]:
            raise StoreError(f"blob {ref['owner']} is incomplete")
        return data

    async def raw(self, doc: dict[str, Any]) -> bytes:
        """A frame's or a session line's raw bytes, inline or in pieces."""
        if doc.get("raw_blob"):
            return await self.read(doc["raw_blob"])
        return bytes(doc["raw"])
