"""Where threads are, in a MongoDB several sidecars share (``liminal.store.base.MoveLog``).

Two collections. ``moves``: the swap journal's records, one document each (a ``SwapRecord`` as
its fields, plus ``at``, when it was written), read by ``liminal swaps`` and ``/fork MARK`` on
any sidecar. ``places``: one document per thread that moved through the store,
``{_id: thread, backing_id, lineage, moving, since, rev}``; every change to it is one
conditional update of that one document, which is what makes the store the authority:

- a move **claims** the thread (``moving`` set to its attempt) only while the thread is on the
  session the move leaves and nothing else is moving it, or what is has begun before the
  caller's ``stale_before`` (a sidecar that died mid-move: taken over);
- its **commit** is the update that puts the thread on the new session, made only while the
  claim is still the attempt's; a sidecar whose claim another took over is refused;
- any other end **releases** the claim.

MongoDB applies each conditional update atomically. FerretDB 1.x does not (it reads, then
writes): four claims at the same instant all passed. Where updates are not atomic (``atomic``
says so), a claim, a commit and a release each hold the thread's latch
(``liminal.store.mongolatch``, the one its merges take turns by) for their update.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from pymongo import ASCENDING, AsyncMongoClient, ReturnDocument
from pymongo.errors import DuplicateKeyError, PyMongoError

from liminal.store.base import Place, StoreError
from liminal.store.mongolatch import latched

_RECORD_FIELDS = ("thread_id", "old_backing_id", "new_backing_id", "outcome", "started_at")


class MongoMoves:
    def __init__(self, client: AsyncMongoClient[dict[str, Any]], database: str, *,
                 atomic: Callable[[], bool] = lambda: True) -> None:
        db = client[database]
        self._places = db["places"]
        self._moves = db["moves"]
        self._latches = db["thread_latches"]
        self._atomic = atomic

    def _alone(self, thread_id: str) -> AbstractAsyncContextManager[Any]:
        """The block as the thread's one writer of its place, where the server needs a latch."""
        return contextlib.nullcontext() if self._atomic() else latched(self._latches, thread_id)

    async def create_indexes(self) -> None:
        await self._moves.create_index([("thread_id", ASCENDING), ("started_at", ASCENDING)])

    async def claim(self, thread_id: str, old: str, attempt: str, *, now: float,
                    stale_before: float) -> tuple[bool, str | None]:
        try:
            async with self._alone(thread_id):
                return await self._claim(thread_id, old, attempt, now=now, stale_before=stale_before)
        except PyMongoError as exc:
            raise StoreError(str(exc)) from exc

    async def _claim(self, thread_id: str, old: str, attempt: str, *, now: float,
                     stale_before: float) -> tuple[bool, str | None]:
        for _ in range(3):  # created by another between the update and the insert: again
            before = await self._places.find_one_and_update(
                {"_id": thread_id, "backing_id": old,
                 "$or": [{"moving": None}, {"since": {"$lt": stale_before}}]},
                {"$set": {"moving": attempt, "since": now}, "$inc": {"rev": 1}},
                return_document=ReturnDocument.BEFORE)
            if before is not None:
                return True, before.get("moving") or None
            found = await self._places.find_one({"_id": thread_id})
            if found is not None:
                if found.get("backing_id") != old:
                    return False, (f"another liminal on the same store moved this thread: it "
                                   f"is on session {found.get('backing_id')}")
                return False, "another liminal on the same store is moving this thread"
            try:
                await self._places.insert_one({
                    "_id": thread_id, "backing_id": old, "lineage": [old] if old != thread_id else [],
                    "moving": attempt, "since": now, "rev": 1})
                return True, None
            except DuplicateKeyError:
                continue
        return False, "the thread's place in the store changed at every attempt to claim it"

    async def commit(self, thread_id: str, old: str, attempt: str) -> bool:
        try:
            async with self._alone(thread_id):
                done = await self._places.update_one(
                    {"_id": thread_id, "backing_id": old, "moving": attempt},
                    {"$set": {"backing_id": attempt, "moving": None, "since": None},
                     "$push": {"lineage": attempt}, "$inc": {"rev": 1}})
        except PyMongoError as exc:
            raise StoreError(str(exc)) from exc
        return bool(done.matched_count)

    async def release(self, thread_id: str, attempt: str) -> bool:
        try:
            async with self._alone(thread_id):
                done = await self._places.update_one(
                    {"_id": thread_id, "moving": attempt},
                    {"$set": {"moving": None, "since": None}, "$inc": {"rev": 1}})
        except PyMongoError as exc:
            raise StoreError(str(exc)) from exc
        return bool(done.matched_count)

    async def place(self, thread_id: str) -> Place | None:
        try:
            d = await self._places.find_one({"_id": thread_id})
        except PyMongoError as exc:
            raise StoreError(str(exc)) from exc
        if d is None or not isinstance(d.get("backing_id"), str):
            return None
        return Place(d["backing_id"], tuple(b for b in d.get("lineage") or () if isinstance(b, str)),
                     d.get("moving") or None, d.get("since"))

    async def append(self, record: dict[str, Any]) -> None:
        missing = [f for f in _RECORD_FIELDS if f not in record]
        if missing:
            raise ValueError(f"not a journal record: no {', '.join(missing)}")
        doc = {**record, "_id": uuid.uuid4().hex, "at": time.time()}
        try:
            await self._moves.insert_one(doc)
        except PyMongoError as exc:
            raise StoreError(str(exc)) from exc

    async def forget(self, thread_id: str) -> int:
        """The thread's place and records gone (``MongoStore.delete_thread``); how many."""
        gone = (await self._places.delete_many({"_id": thread_id})).deleted_count
        return int(gone + (await self._moves.delete_many({"thread_id": thread_id})).deleted_count)

    async def records(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        query = {} if thread_id is None else {"thread_id": thread_id}
        try:
            docs = await self._moves.find(query, {"_id": 0}).to_list(None)
        except PyMongoError as exc:
            raise StoreError(str(exc)) from exc
        docs.sort(key=lambda d: (d.get("started_at") or 0.0, d.get("at") or 0.0))
        for d in docs:
            d.pop("at", None)
        return docs
