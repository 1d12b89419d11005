"""The thread latch on a MongoDB server without atomic updates (``liminal.store.mongolatch``),
against a stand-in collection: what a cancellation leaves behind."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pymongo.errors import DuplicateKeyError

from liminal.store.mongolatch import latched

pytestmark = pytest.mark.anyio


class SlowAnswers:
    """A collection whose server applies an insert at once and answers it a while later."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.applied = anyio.Event()

    async def insert_one(self, doc: dict[str, Any]) -> None:
        if doc["_id"] in self.docs:
            raise DuplicateKeyError("duplicate key")
        self.docs[doc["_id"]] = doc
        self.applied.set()
        await anyio.sleep(0.2)  # the answer on its way back

    async def find_one(self, query: dict[str, Any]) -> dict[str, Any] | None:
        return self.docs.get(query["_id"])

    async def delete_one(self, query: dict[str, Any]) -> None:
        held = self.docs.get(query["_id"])
        if held is not None and held.get("token") == query.get("token"):
            del self.docs[query["_id"]]


async def test_a_latch_taken_as_its_holder_is_cancelled_is_let_go() -> None:
    """A claim cancelled while its latch's insert was on its way back (the mover stopped, the
    proxy closing) left the latch held for ``STALE_SECONDS``: every merge and claim of the
    thread waited a minute, the index's batches with them."""
    latches = SlowAnswers()

    async def claim() -> None:
        async with latched(latches, "thread"):  # type: ignore[arg-type]
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(claim)
        await latches.applied.wait()
        tg.cancel_scope.cancel()
    assert latches.docs == {}
