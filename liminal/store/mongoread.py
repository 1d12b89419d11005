"""Reading the MongoDB store in replies of bounded size (``read_all``), and its search
(``MongoSearch``): with the server's text index, or where the server has none (FerretDB 1.x,
some managed Mongo-compatible services) with case-insensitive regular expressions over the same
text, as the SQLite backend falls back from FTS5 to ``LIKE``. ``liminal.store.mongo`` has the
rest of the store.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Collection
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.cursor import AsyncCursor
from pymongo.errors import ProtocolError, PyMongoError

from liminal.store.base import (
    StoreError,
    ToolCallPlace,
    digest,
    fts_terms,
    head,
    place_tool_records,
    ranked,
    seconds,
    snippet,
)
from liminal.store.records import SearchHit

# Documents in one reply of a read, so that a reply stays under the 48 MB a message may hold:
# MongoDB cuts a reply at 16 MB itself, FerretDB 1.x does not (60 frames of 1 MiB came back as
# one reply of 63 MB, which the driver refused, and a replay deriving a connection again failed
# at every retry). A frame or a session line keeps at most 1 MiB inline (1.1 MiB with its
# fields), a message 1 Mi characters (up to 4 MiB as UTF-8), a piece of a blob 4 MiB.
BATCH_FRAMES, BATCH_LINES, BATCH_MESSAGES, BATCH_PIECES = 32, 16, 8, 8


async def read_all(cursor: Callable[[int], AsyncCursor[dict[str, Any]]],
               batch: int) -> list[dict[str, Any]]:
    """Every document ``cursor(batch)`` finds, ``batch`` to a reply; a reply past the message
    size all the same (documents near 16 MB, on a server that does not cut its replies) is read
    again a document to a reply."""
    try:
        return await cursor(batch).to_list(None)
    except ProtocolError as exc:
        if "max message size" not in str(exc):
            raise
        return await cursor(1).to_list(None)


class MongoSearch:
    """Search over the store's messages and session lines, placed in their threads and turns."""

    def __init__(self, frames: AsyncCollection[dict[str, Any]], messages: AsyncCollection[dict[str, Any]],
                 sessions: AsyncCollection[dict[str, Any]]) -> None:
        self._frames = frames
        self._messages = messages
        self._sessions = sessions

    async def search(self, query: str, *, text_index: bool, thread_id: str | None, limit: int,
                     kinds: Collection[str] | None,
                     record_types: Collection[str] | None) -> list[SearchHit]:
        """``MongoStore.search``: with the server's text index, or (``text_index=False``) with
        regular expressions over the same text."""
        terms = fts_terms(query)
        if not terms:
            return []
        fields = {"text": 1, "thread_id": 1, "kind": 1, "time": 1, "type": 1, "turn_id": 1,
                  "tool_call_id": 1, "tool_ids": 1}
        match: dict[str, Any]
        if text_index:
            # Each term quoted: every one must appear, as with the SQLite backend.
            match = {"$text": {"$search": " ".join('"' + t.replace('"', "") + '"' for t in terms)}}
            projection: dict[str, Any] = {"score": {"$meta": "textScore"}, **fields}
            order: list[tuple[str, Any]] | None = [("score", {"$meta": "textScore"})]
            take = limit * 3  # more than asked from each source: ``ranked`` merges duplicates
            shown = terms

            def score(d: dict[str, Any]) -> float:
                return float(d["score"])
        else:
            # Without text indexes: every term must appear (case-insensitive), scored by
            # occurrences. Escaped, a term is the user's word, never a pattern; in either Unicode
            # form, as the SQLite backend's ``LIKE``.
            match = {"$and": [{"text": {"$regex": "|".join(re.escape(f) for f in _forms(t)),
                                        "$options": "i"}} for t in terms]}
            projection, order, take = fields, None, limit * 5
            shown = [f for t in terms for f in _forms(t)]  # for the score and the snippet

            def score(d: dict[str, Any]) -> float:
                lower = d["text"].lower()
                return float(sum(lower.count(t.lower()) for t in shown))
        if thread_id:
            match["thread_id"] = thread_id
        hits: list[SearchHit] = []
        try:
            query_messages = {**match, "replayed": False}
            if kinds is not None:
                query_messages["kind"] = {"$in": sorted(kinds)}
            found = self._messages.find(query_messages, projection)
            found = found.sort(order) if order else found
            docs = await read_all(lambda batch: found.clone().limit(take).batch_size(batch),
                              BATCH_MESSAGES)
            directions = await self.directions([d["_id"] for d in docs])
            for d in docs:
                hits.append(SearchHit(
                    "message", d["_id"], d["thread_id"], d["kind"], d["time"],
                    snippet(d["text"], shown), score(d), message_id=d["_id"],
                    turn_id=d.get("turn_id"), head=head(d["text"]), direction=directions.get(d["_id"]),
                    tool_ids=(d["tool_call_id"],) if d.get("tool_call_id") else (),
                    digest=digest(d["text"])))
            # liminal's own lines copy lines found already (under the session they came from).
            query_records = {**match, "own": {"$ne": True}}
            if record_types is not None:
                query_records["type"] = {"$in": sorted(record_types)}
            found = self._sessions.find(query_records, projection)
            found = found.sort(order) if order else found
            for d in await read_all(lambda batch: found.clone().limit(take).batch_size(batch),
                                BATCH_LINES):
                hits.append(SearchHit(
                    "session", d["_id"], d["thread_id"], d.get("type") or "", seconds(d.get("time")),
                    snippet(d["text"], shown), score(d),
                    tool_ids=tuple(d.get("tool_ids") or ()), digest=digest(d["text"])))
            hits = await self.place_tools(hits)
        except PyMongoError as exc:
            raise StoreError(str(exc)) from exc
        return ranked(hits, limit)

    async def directions(self, frame_ids: list[str]) -> dict[str, str]:
        """The direction of each frame (a message's id is the id of the frame that started it)."""
        if not frame_ids:
            return {}
        return {d["_id"]: d["direction"] async for d in self._frames.find(
            {"_id": {"$in": frame_ids}}, {"direction": 1})}

    async def place_tools(self, hits: list[SearchHit]) -> list[SearchHit]:
        wanted = sorted({t for h in hits if h.source == "session" for t in h.tool_ids})
        if not wanted:
            return hits
        docs = await read_all(lambda batch: self._messages.find(
            {"tool_call_id": {"$in": wanted}, "kind": "tool_call"},
            {"tool_call_id": 1, "thread_id": 1, "turn_id": 1, "time": 1, "text": 1,
             "replayed": 1}).batch_size(batch), BATCH_MESSAGES)
        directions = await self.directions([d["_id"] for d in docs])
        return place_tool_records(hits, [ToolCallPlace(
            d["tool_call_id"], d["thread_id"], d["_id"], d.get("turn_id"), d["time"],
            d["text"][:400], directions.get(d["_id"]), bool(d.get("replayed"))) for d in docs])


def _forms(term: str) -> list[str]:
    """The term composed (NFC) and taken apart (NFD), when they differ: a word a tool printed
    decomposed (macOS file names) is found by the same word typed."""
    return sorted({unicodedata.normalize("NFC", term), unicodedata.normalize("NFD", term)})
