"""One writer at a time on a thread's document, for a MongoDB server that applies no update
atomically.

A thread's merge is read, merge in Python, replace only over the ``rev`` it read
(``liminal.store.mongo``). On MongoDB the replace's filter and write are one atomic step, so a
second writer in between is seen and merges again. FerretDB 1.x reads the documents an update
matches and writes them afterwards, with nothing between to stop another writer: two merges of
one thread both passed the check, and the second wrote over the first (backing ids of the
lineage lost). What it does apply atomically is an insert of one ``_id`` (its unique key): the
latch is a document inserted before the merge and deleted after, so merges of one thread take
turns there.

A writer that dies holding the latch leaves its document; one older than ``STALE_SECONDS``
(the merge takes milliseconds, a call at most the socket bound) is taken over.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from liminal.store.base import StoreError

STALE_SECONDS = 60.0
WAIT_SECONDS = 120.0  # waiting longer than this for a latch is a StoreError, not a hang
_FIRST_PAUSE, _MOST_PAUSE = 0.002, 0.05


@contextlib.asynccontextmanager
async def latched(latches: AsyncCollection[dict[str, Any]], key: str) -> AsyncIterator[None]:
    """Hold the latch named ``key`` for the block."""
    token = uuid.uuid4().hex
    pause = _FIRST_PAUSE
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            # Shielded: a cancellation between the server's insert and its answer would leave
            # the latch held, unknown to the ``finally`` below, until it goes stale. The call
            # is bounded by the client's socket timeout.
            with anyio.CancelScope(shield=True):
                await latches.insert_one({"_id": key, "token": token, "at": time.time()})
            break
        except DuplicateKeyError:
            held = await latches.find_one({"_id": key})
            if held is not None and time.time() - float(held.get("at") or 0) > STALE_SECONDS:
                await latches.delete_one({"_id": key, "token": held.get("token")})
                continue
            if time.monotonic() > deadline:
                raise StoreError(f"{key}: another writer held it for {WAIT_SECONDS:.0f} s") from None
            await anyio.sleep(pause)
            pause = min(pause * 2, _MOST_PAUSE)
    try:
        yield
    finally:
        # Released even when the block was cancelled; a release that fails leaves a latch that
        # goes stale and is taken over.
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await latches.delete_one({"_id": key, "token": token})
