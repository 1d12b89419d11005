"""MongoDB backend, through pymongo's native asyncio client (``pymongo.AsyncMongoClient``).

Written for MongoDB server 6.0-8.0 and pymongo 4.10+ (AsyncMongoClient became GA in 4.13; it
exists since 4.10). A standalone server is enough: no transactions are used. Instead every write
is idempotent (deterministic ``_id``s; frames inserted only if absent, messages and session
records replaced, thread updates merged), so a batch that failed half way is simply written
again by the indexer.

Documents stay far below the 16 MB limit: a frame's raw bytes, a session line, or a message whose
text and data together pass ``INLINE_BYTES`` are stored in the ``blobs`` collection in chunks of
``CHUNK_BYTES`` (ids ``<owner>#<n>``), and the owner keeps a reference. A message moved out keeps
the first ``SEARCH_CHARS`` of its text inline so the text index still finds it.

Message ``data`` is kept as JSON text (``data_json``): ACP payloads may hold integers BSON cannot
represent, and the store must never refuse a frame for that. A large record's pieces are written
a few at a time (``BLOB_WRITE_BYTES``), so a 1.5 GB frame is not copied whole into BSON. A record
the server or the driver refuses as such (a document past 16 MB: a thread whose cwd is that
long; a value BSON cannot encode) is ``StoreRefused``; the writer cuts it or sets it aside
(``liminal.ingest.poison``). Any other error is the server failing, and is tried again.

Search uses a text index where the server has one. Servers that speak MongoDB's protocol without
text indexes (FerretDB 1.x, which CI runs; some managed Mongo-compatible services) refuse to
create it: the store says so once and searches with case-insensitive regular expressions over
the same text instead, as the SQLite backend falls back from FTS5 to ``LIKE``: every term must
appear (inside a word too: "flux" finds "fluxes"), hits scored by occurrences. Every search then
reads each message and session line, so it is slower on a large store.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Collection, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar

import bson
import orjson
from bson.binary import Binary
from bson.errors import BSONError
from pymongo import ASCENDING, DESCENDING, TEXT, AsyncMongoClient, ReplaceOne, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import (
    BulkWriteError,
    DuplicateKeyError,
    OperationFailure,
    PyMongoError,
)

from liminal import log
from liminal.errors import in_words
from liminal.store import compaction
from liminal.store.base import (
    Census,
    MoveLog,
    StoreError,
    StoreRefused,
    within,
)
from liminal.store.mongoblobs import Blobs
from liminal.store.mongolatch import latched
from liminal.store.mongomoves import MongoMoves
from liminal.store.mongoread import BATCH_FRAMES, BATCH_LINES, BATCH_MESSAGES, MongoSearch, read_all
from liminal.store.records import (
    DELETED,
    HISTORY_KINDS,
    LOAD,
    OWNED_ELSEWHERE,
    TO_LIMINAL,
    Batch,
    FrameRecord,
    MessageRecord,
    SearchHit,
    SessionRecord,
    Thread,
    ThreadSummary,
    ThreadUpdate,
    context_now,
    merge_thread,
    one_row_per_thread,
    summarised,
)

INLINE_BYTES = 1024 * 1024
# The largest document MongoDB takes (its maxBsonObjectSize). Every document liminal builds is
# checked against it before anything of the batch is sent, and one past it is ``StoreRefused``:
# FerretDB 1.x took an update's document past it (and one such write crashed it, SIGBUS in its
# embedded SQLite), MongoDB refuses it, the driver checks only an insert's; so every server
# refuses alike, and none is sent what it should not hold. Tests lower it (a piece of a blob,
# ``CHUNK_BYTES``, must still fit).
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
SEARCH_CHARS = 256 * 1024
# Merges of one thread that lose to another writer before one is written: with a handful of
# writers per thread this is never reached; it bounds a loop, nothing more.
_MERGE_ATTEMPTS = 100
_DELETE_CHUNK = 1000  # owners in one delete, far below the 16 MB a command may hold
# Server error codes of a write that failed rather than was refused: the driver's retryable
# ones (a primary stepping down, shutdown, network), a duplicate key from two writers racing on
# an upsert, write conflicts and lock timeouts, time limits, authentication, a full disk. Any
# other code refuses the documents (BSONObjectTooLarge 10334, a bad value, a bad field name).
_FAILING_CODES = frozenset({6, 7, 89, 91, 134, 189, 262, 9001, 10058, 10107, 11600, 11602,
                            13435, 13436, 11000, 112, 24, 50, 13, 18, 14031})
_T = TypeVar("_T")
_P = ParamSpec("_P")


def refused(exc: BaseException) -> bool:
    """Whether the driver or the server refused what was written (see ``_FAILING_CODES``)."""
    if isinstance(exc, (BSONError, UnicodeError, OverflowError, ValueError, TypeError)):
        return True  # the driver could not encode it, or it is past the server's size
    if isinstance(exc, BulkWriteError):
        details = exc.details or {}
        errors = details.get("writeErrors") or []
        return bool(errors) and not details.get("writeConcernErrors") and all(
            e.get("code") not in _FAILING_CODES for e in errors)
    if isinstance(exc, OperationFailure):
        return exc.code is not None and exc.code not in _FAILING_CODES
    return False


def _bound(value: Any) -> int:
    """At least the BSON size of ``value``, cheaply (a character is at most 4 bytes of UTF-8)."""
    if isinstance(value, str):
        return 4 * len(value) + 8
    if isinstance(value, (bytes, Binary)):
        return len(value) + 8
    if isinstance(value, dict):
        return sum(4 * len(k) + 8 + _bound(v) for k, v in value.items()) + 8
    if isinstance(value, (list, tuple)):
        return sum(_bound(v) + 16 for v in value) + 8
    return 16


def check_size(doc: dict[str, Any]) -> None:
    """``StoreRefused`` if ``doc`` is past ``MAX_DOCUMENT_BYTES`` (encoded only when its cheap
    bound is past it)."""
    if _bound(doc) <= MAX_DOCUMENT_BYTES:
        return
    size = len(bson.encode(doc))
    if size > MAX_DOCUMENT_BYTES:
        raise StoreRefused(f"a document of {size:,} bytes ({str(doc.get('_id'))[:80]!r}), past "
                           f"the {MAX_DOCUMENT_BYTES:,} a MongoDB document may hold")


def _store_errors(method: Callable[_P, Coroutine[Any, Any, _T]]) -> Callable[_P, Coroutine[Any, Any, _T]]:
    """A driver error is a ``StoreError``, as every caller expects of any store (the recaller,
    the replay, the commands catch that): a MongoDB that went away fails the call, not its caller."""
    @functools.wraps(method)
    async def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await method(*args, **kwargs)
        except PyMongoError as exc:
            raise StoreError(str(exc)) from exc
    return wrapped


# The longest one call on an open connection may take: a 16 MiB record's write on a slow link
# fits well within it, and a server that went quiet fails the call (retried by the worker) where
# pymongo's default, none, would wait for good.
SOCKET_TIMEOUT_MS = 120_000


# FerretDB 1.x (its ``buildInfo`` has ``ferretdbVersion``): statements per write command. Its
# SQLite backend holds one pooled connection per existing document an update touches until the
# command ends; past its pool (about 100) the command waits for itself. A few at a time leaves
# room for several writers at once.
FERRETDB_OPS_PER_COMMAND = 16


async def _create_indexes(client: AsyncMongoClient[dict[str, Any]], name: str,
                          text_index: bool) -> str | None:
    """Every index the store reads by; what the server said if it refused the text indexes
    (None: created, or not asked for)."""
    db = client[name]
    await db["frames"].create_index([("connection_id", ASCENDING), ("seq", ASCENDING)])
    await db["frames"].create_index([("thread_id", ASCENDING), ("time", ASCENDING)])
    await db["messages"].create_index([("thread_id", ASCENDING), ("ord", ASCENDING)])
    await db["messages"].create_index([("thread_id", ASCENDING), ("kind", ASCENDING)])
    await db["messages"].create_index([("tool_call_id", ASCENDING)])
    await db["session_records"].create_index([("backing_id", ASCENDING), ("offset", ASCENDING)])
    # A large record's pieces are found by their owner: without it every read of one
    # scanned the whole collection of pieces, the store's largest by far.
    await db["blobs"].create_index([("owner", ASCENDING), ("n", ASCENDING)])
    await MongoMoves(client, name).create_indexes()
    return await _create_text_indexes(db) if text_index else None


async def _create_text_indexes(db: AsyncDatabase[dict[str, Any]]) -> str | None:
    """Create the text indexes; what the server said if it refused them (None: created).

    A refusal is a command the server answered with an error (``OperationFailure``) after
    it accepted every ordinary index: the server lacks the feature. FerretDB 1.x answers
    ``IndexNotFound``, other servers ``CommandNotSupported`` or ``NotImplemented``; which
    code does not matter, the fallback is the same. A connection failure is not a refusal:
    it fails the open like any other."""
    try:
        await db["messages"].create_index([("text", TEXT)], default_language="none")
        await db["session_records"].create_index([("text", TEXT)], default_language="none")
    except OperationFailure as exc:
        return str(exc.details.get("errmsg") if exc.details else exc) or repr(exc)
    return None


async def _merge_thread(threads: AsyncCollection[dict[str, Any]], update: ThreadUpdate) -> None:
    """Merge in Python, written only if nobody wrote the thread since it was read.

    Without transactions a plain read-merge-replace lost updates: two writers (an index
    worker and ``liminal threads rename``, two sidecars on one store) read the same thread
    and the second replace dropped what the first had added (a backing id, the user's
    title). Each write bumps ``rev``; a replace that finds another ``rev`` merges again."""
    for _ in range(_MERGE_ATTEMPTS):
        d = await threads.find_one({"_id": update.id})
        t = merge_thread(_thread(d) if d else None, update)
        doc = {"_id": t.id, "title": t.title, "cwd": t.cwd, "harness": t.harness,
               "state": t.state, "backing_ids": list(t.backing_ids), "created": t.created,
               "updated": t.updated, "named": t.named, "titled": t.titled,
               "rev": (d.get("rev") or 0) + 1 if d else 1}
        check_size(doc)
        if d is None:
            try:
                await threads.insert_one(doc)
                return
            except DuplicateKeyError:
                continue  # created meanwhile: merge into that one
        # A thread written before ``rev`` existed has none; null matches a missing field.
        if (await threads.replace_one({"_id": t.id, "rev": d.get("rev")}, doc)).matched_count:
            return
    raise StoreError(f"thread {update.id}: changed by others at every attempt to merge")


class MongoStore:
    backend = "mongodb"
    search_mode = "text-index"

    def __init__(self, client: AsyncMongoClient[dict[str, Any]], database: str) -> None:
        self._client = client
        self.text_index = True
        # Statements per write command (None: as many as the driver sends in one): FerretDB 1.x
        # takes a connection of its own pool for each update whose document exists and keeps it
        # to the command's end, so a command of more than about 100 of them would wait for
        # good, and every client of the server behind it (``FERRETDB_OPS_PER_COMMAND``).
        self.ops_per_command: int | None = None
        # Whether the server applies a conditional update atomically (MongoDB does, FerretDB 1.x
        # does not): without, a thread's merges take turns by a latch (``liminal.store.mongolatch``).
        self.atomic_updates = True
        db = client[database]
        self._frames = db["frames"]
        self._messages = db["messages"]
        self._threads = db["threads"]
        self._latches = db["thread_latches"]
        self._sessions = db["session_records"]
        self._blobs = db["blobs"]
        self._meta = db["meta"]  # what was done to the store once (its compaction)
        self._pieces = Blobs(self._blobs, self._bulk)
        self._search = MongoSearch(self._frames, self._messages, self._sessions)
        # Where threads are: the store is shared (``liminal.store.mongomoves``).
        self.moves: MoveLog | None = MongoMoves(client, database, atomic=lambda: self.atomic_updates)

    @classmethod
    async def open(cls, url: str, *, timeout_ms: int = 5000, socket_timeout_ms: int = SOCKET_TIMEOUT_MS,
                   text_index: bool = True) -> MongoStore:
        """Open the store, creating its indexes; ``text_index=False`` forces the regex search.
        ``socket_timeout_ms`` bounds every call on an open connection, unless the URL sets its
        own ``socketTimeoutMS``: pymongo's default waits for good on a server that went quiet
        (a partition, a host gone without a reset), and so did the index worker and every
        command reading the store."""
        bound: dict[str, Any] = ({} if "sockettimeoutms" in url.lower()
                                 else {"socketTimeoutMS": socket_timeout_ms})
        try:  # the URL is parsed here, before any connection: refused, it is a StoreError too
            client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
                url, serverSelectionTimeoutMS=timeout_ms, connectTimeoutMS=timeout_ms, **bound)
        except (PyMongoError, ValueError, TypeError) as exc:
            raise StoreError(f"cannot open MongoDB store: {exc}") from exc
        try:
            name = client.get_default_database(default="liminal").name
        except (PyMongoError, ValueError, TypeError) as exc:
            await client.close()
            raise StoreError(f"cannot open MongoDB store: {exc}") from exc
        store = cls(client, name)
        try:
            await client[name].command("ping")
            if "ferretdbVersion" in await client.admin.command("buildInfo"):
                store.ops_per_command = FERRETDB_OPS_PER_COMMAND
                store.atomic_updates = False
                log.get("liminal.store").info(
                    "this MongoDB server is FerretDB: writes go a few statements per command",
                    database=name, statements=FERRETDB_OPS_PER_COMMAND)
            refused = await _create_indexes(client, name, text_index)
        except PyMongoError as exc:
            await client.close()
            raise StoreError(f"cannot open MongoDB store: {exc}") from exc
        if not text_index or refused:
            store.text_index, store.search_mode = False, "regex"
        if refused:
            log.get("liminal.store").warning(
                "search degraded: this MongoDB server has no text indexes; using regular "
                "expressions", database=name, server_said=refused)
        return store

    async def _bulk(self, collection: AsyncCollection[dict[str, Any]], ops: Sequence[Any]) -> None:
        """``ops`` in one write command, or ``ops_per_command`` at a time where the server needs
        it (every statement is idempotent: a command that fails is written again whole)."""
        step = self.ops_per_command or len(ops)
        for start in range(0, len(ops), step):
            await collection.bulk_write(list(ops[start:start + step]), ordered=False)

    # -- writing ------------------------------------------------------------------------------

    async def write(self, batch: Batch) -> None:
        if not batch:
            return
        try:
            await self._write(batch)
        except StoreError:
            raise
        except Exception as exc:
            if refused(exc):
                raise StoreRefused(in_words(exc)) from exc
            if isinstance(exc, PyMongoError):
                raise StoreError(str(exc)) from exc
            raise

    async def _write(self, batch: Batch) -> None:
        ids = batch.thread_ids()
        sessions = batch.unowned_sessions()
        if ids or sessions:  # nothing more of a thread the client deleted (its tombstone, ``DELETED``)
            deleted = {d["_id"] async for d in self._threads.find(
                {"_id": {"$in": sorted(ids)}, "state": DELETED}, {"_id": 1})} if ids else set()
            named: set[str] = set()
            if sessions:  # nor a line of one of its sessions that names no thread
                async for d in self._threads.find({"state": DELETED, "backing_ids": {"$in": sorted(sessions)}},
                                                  {"backing_ids": 1}):
                    named |= sessions.intersection(d["backing_ids"])
            batch = batch.without(deleted, named)
        blobs: list[tuple[str, bytes]] = []
        frame_ops = []
        for f in batch.frames:
            doc: dict[str, Any] = {
                "_id": f.id, "connection_id": f.connection_id, "seq": f.seq, "time": f.time,
                "direction": f.direction, "kind": f.kind, "thread_id": f.thread_id,
                "backing_id": f.backing_id, "method": f.method, "rpc_id": f.rpc_id,
                "size": f.size}
            if len(f.raw) > INLINE_BYTES:
                doc["raw_blob"] = Blobs.ref(f.id, f.raw)
                blobs.append((f.id, f.raw))
            else:
                doc["raw"] = Binary(f.raw)
            check_size(doc)
            frame_ops.append(UpdateOne({"_id": f.id}, {"$setOnInsert": doc}, upsert=True))
        message_ops = []
        for m in batch.messages:
            data_json = orjson.dumps(m.data).decode()
            doc = {"_id": m.id, "thread_id": m.thread_id, "turn_id": m.turn_id, "time": m.time,
                   "ord": m.order, "kind": m.kind, "text": m.text, "tool_call_id": m.tool_call_id,
                   "status": m.status, "data_json": data_json, "replayed": m.replayed,
                   "backing_id": m.backing_id}
            if len(m.text) + len(data_json) > INLINE_BYTES:
                body = orjson.dumps({"text": m.text, "data_json": data_json})
                doc["body_blob"] = Blobs.ref(f"message:{m.id}", body)
                blobs.append((f"message:{m.id}", body))
                doc["text"], doc["data_json"] = m.text[:SEARCH_CHARS], "{}"
            check_size(doc)
            message_ops.append(ReplaceOne({"_id": m.id}, doc, upsert=True))
        session_ops = []
        for r in batch.session_records:
            doc = {"_id": r.id, "backing_id": r.backing_id, "thread_id": r.thread_id,
                   "offset": r.offset, "end": r.offset + len(r.raw) + 1, "uuid": r.uuid,
                   "type": r.type, "time": r.time,
                   "usage_json": orjson.dumps(r.usage).decode() if r.usage is not None else None,
                   "tool_ids": list(r.tool_ids), "text": r.text[:SEARCH_CHARS], "own": r.own}
            if len(r.raw) > INLINE_BYTES:
                doc["raw_blob"] = Blobs.ref(f"session:{r.id}", r.raw)
                blobs.append((f"session:{r.id}", r.raw))
            else:
                doc["raw"] = Binary(r.raw)
            check_size(doc)
            session_ops.append(ReplaceOne({"_id": r.id}, doc, upsert=True))
        # Blobs first: a reference is never written before what it points to.
        if blobs:
            await self._pieces.write(blobs)
        if frame_ops:
            await self._bulk(self._frames, frame_ops)
        if message_ops:
            await self._bulk(self._messages, message_ops)
        if session_ops:
            await self._bulk(self._sessions, session_ops)
        by_thread: dict[str, list[ThreadUpdate]] = {}  # each thread's in order: one latch for them
        for update in batch.threads:
            by_thread.setdefault(update.id, []).append(update)
        for thread_id, updates in by_thread.items():
            async with contextlib.nullcontext() if self.atomic_updates else latched(self._latches, thread_id):
                for update in updates:
                    await _merge_thread(self._threads, update)

    # -- reading ------------------------------------------------------------------------------

    async def frames(self, *, connection_id: str | None = None, thread_id: str | None = None,
                     after_seq: int = -1, limit: int = 10_000,
                     max_bytes: int | None = None) -> list[FrameRecord]:
        query: dict[str, Any] = {"seq": {"$gt": after_seq}}
        if connection_id is not None:
            query["connection_id"] = connection_id
        if thread_id is not None:
            query["thread_id"] = thread_id
        order = ([("seq", ASCENDING)] if connection_id is not None else
                 [("time", ASCENDING), ("connection_id", ASCENDING), ("seq", ASCENDING)])
        try:
            if max_bytes is not None:  # their sizes first
                sizes = await self._frames.find(query, {"size": 1}).sort(order).limit(limit) \
                    .to_list(None)
                limit = within(max_bytes, [d.get("size") or 0 for d in sizes])
                if not limit:  # (a limit of 0 is none to MongoDB)
                    return []
            docs = await read_all(lambda batch: self._frames.find(query).sort(order).limit(limit)
                                  .batch_size(batch), BATCH_FRAMES)
            # A null field may be absent: in MongoDB's model the two are the same (a query for
            # null finds both), and FerretDB's $setOnInsert drops null fields from the document.
            return [FrameRecord(
                d["_id"], d["connection_id"], d["seq"], d["time"], d["direction"], d["kind"],
                d.get("thread_id"), d.get("backing_id"), d.get("method"), d.get("rpc_id"),
                d["size"], await self._pieces.raw(d)) for d in docs]
        except PyMongoError as exc:
            raise StoreError(str(exc)) from exc

    @_store_errors
    async def frame_count(self) -> int:
        return int(await self._frames.count_documents({}))

    async def _message(self, d: dict[str, Any]) -> MessageRecord:
        text, data_json = d["text"], d["data_json"]
        if d.get("body_blob"):
            body = orjson.loads(await self._pieces.read(d["body_blob"]))
            text, data_json = body["text"], body["data_json"]
        return MessageRecord(
            id=d["_id"], thread_id=d["thread_id"], turn_id=d["turn_id"], time=d["time"],
            order=d["ord"], kind=d["kind"], text=text, tool_call_id=d["tool_call_id"],
            status=d["status"], data=orjson.loads(data_json), replayed=d["replayed"],
            backing_id=d["backing_id"])

    @_store_errors
    async def messages(self, thread_id: str, kind: str | None = None) -> list[MessageRecord]:
        query = {"thread_id": thread_id, **({"kind": kind} if kind else {})}
        docs = await read_all(lambda batch: self._messages.find(query).sort("ord", ASCENDING)
                              .batch_size(batch), BATCH_MESSAGES)
        return [await self._message(d) for d in docs]

    @_store_errors
    async def delete_thread(self, thread_id: str, sessions: Collection[str] = ()) -> int:
        found = await self._threads.find_one({"_id": thread_id})
        backings = list(dict.fromkeys([thread_id, *(found["backing_ids"] if found else []), *sessions]))
        # The model's summaries of it and its parts of lessons, kept under their own
        # pseudo-threads (their data is JSON text).
        summaries = [d["_id"] async for d in self._messages.find({"thread_id": {"$in": list(OWNED_ELSEWHERE)}})
                     if summarised((await self._message(d)).data) == thread_id]
        records = (
            (self._messages, {"thread_id": thread_id}, "message:"),
            (self._messages, {"_id": {"$in": summaries}}, "message:"),
            (self._frames, {"$or": [{"thread_id": thread_id}, {"backing_id": {"$in": backings}}]}, ""),
            (self._sessions, {"$or": [{"thread_id": thread_id}, {"backing_id": {"$in": backings}}]},
             "session:"),
        )
        # The pieces of large records first, found by the ids of every record of the thread
        # (also those that shrank since and no longer name theirs): deleted after the records,
        # a delete that failed between would leave them with nothing left to find them by. The
        # thread goes last, so a delete that failed part way is listed and can be run again.
        for collection, query, prefix in records:
            owners = [prefix + d["_id"] async for d in collection.find(query, {"_id": 1})]
            for start in range(0, len(owners), _DELETE_CHUNK):
                await self._blobs.delete_many({"owner": {"$in": owners[start:start + _DELETE_CHUNK]}})
        gone = 0
        for collection, query, _ in records:
            gone += (await collection.delete_many(query)).deleted_count
        # Where it was and its moves (a move's record holds what its dynamic zone placed).
        gone += await MongoMoves(self._client, self._threads.database.name).forget(thread_id)
        # A latch a dead writer left names the thread too (not a record of it: not counted).
        await self._latches.delete_many({"_id": {"$in": backings}})
        # The thread, and a record an older liminal kept under a session of its lineage.
        # Its tombstone stays: written first (``liminal.kernel.owned``), it keeps out every record
        # of the thread still on its way while the rest goes.
        gone += (await self._threads.delete_many({"_id": {"$in": backings},
                                                  "$nor": [{"_id": thread_id, "state": DELETED}]})).deleted_count
        return gone

    @_store_errors
    async def said_before(self, thread_id: str, frame_id: str) -> bool:
        # Message ids are frame ids (``<connection>:<seq, 10 digits>``): those of the frame's
        # connection sort from ``<connection>:`` to before ``<connection>;``.
        connection = frame_id.rpartition(":")[0]
        found = await self._messages.find_one(
            {"thread_id": thread_id, "kind": {"$in": list(HISTORY_KINDS)},
             "$or": [{"_id": {"$lt": frame_id}}, {"_id": {"$gte": connection + ";"}}]},
            projection={"_id": 1})
        return found is not None

    @_store_errors
    async def liminal_turns(self, thread_id: str) -> set[str]:
        started = [x for x in await self._messages.distinct(
            "turn_id", {"thread_id": thread_id, "kind": "user", "replayed": False}) if x is not None]
        by = await self._search.directions(started)  # a turn's id is its prompt frame's
        return {x for x in started if by.get(x) == TO_LIMINAL}

    @_store_errors
    async def census(self) -> Census:
        rows = [(d["_id"], d.get("state"), d.get("backing_ids") or [])
                async for d in self._threads.find({}, {"state": 1, "backing_ids": 1})]
        backing = {b for tid, _, ids in rows for b in ids if b != tid}
        listed = sum(1 for tid, state, _ in rows if tid not in backing and state != DELETED)
        messages = int(await self._messages.count_documents({}))
        repeated = sum(len(ids) for ids in (await self._plan()).repeated.values())
        size: int | None = None
        try:
            stats = await self._threads.database.command("dbStats")
            size = int(stats.get("storageSize", 0)) + int(stats.get("indexSize", 0)) or None
        except (OperationFailure, TypeError, ValueError):
            pass  # a server without dbStats: the size is not known
        return Census(size, listed, messages, repeated)

    async def _plan(self) -> compaction.Plan:
        rows = [compaction.Row(d["thread_id"], d["_id"], d["ord"], bool(d.get("replayed")),
                               d.get("kind") or "")
                async for d in self._messages.find(
                    {"$or": [{"replayed": True}, {"kind": {"$ne": LOAD}}]},
                    {"thread_id": 1, "ord": 1, "replayed": 1, "kind": 1})]
        return compaction.plan(rows)

    @_store_errors
    async def compact(self) -> int:
        if await self._meta.find_one({"_id": compaction.MARKER}) is not None:
            return 0
        found = await self._plan()
        loads = compaction.windows([compaction.LoadFrame(
            d["connection_id"], d["seq"], d["direction"], d.get("thread_id"), d.get("rpc_id"),
            d.get("method") or "") async for d in self._frames.find(
                {"method": {"$in": list(compaction.WINDOW_METHODS)}},
                {"connection_id": 1, "seq": 1, "direction": 1, "thread_id": 1, "rpc_id": 1,
                 "method": 1})])
        dropped = compaction.repeated_loads(loads, found.kept)
        gone = 0
        # No transactions here: every delete is by id, so one cut short is done again whole.
        for thread in sorted(set(found.repeated) | {w.thread for w in dropped}):
            ids = found.repeated.get(thread, [])
            frames: list[str] = []
            for window in (w for w in dropped if w.thread == thread):
                low, high = window.ids()
                async for d in self._frames.find({"_id": {"$gt": low, "$lt": high},
                                                  "thread_id": thread, "method": "session/update"}):
                    if compaction.history_update(await self._pieces.raw(d)):
                        frames.append(d["_id"])
            for start in range(0, max(len(ids), len(frames)), _DELETE_CHUNK):
                some_ids, some_frames = (ids[start:start + _DELETE_CHUNK],
                                         frames[start:start + _DELETE_CHUNK])
                await self._blobs.delete_many({"owner": {"$in": [
                    *(f"message:{i}" for i in some_ids), *some_frames]}})
                gone += (await self._messages.delete_many({"_id": {"$in": some_ids}})).deleted_count
                gone += (await self._frames.delete_many({"_id": {"$in": some_frames}})).deleted_count
        await self._meta.update_one({"_id": compaction.MARKER}, {"$set": {"value": "1"}},
                                    upsert=True)
        if gone:
            log.get("liminal.store").info(
                "store compacted: loads' copies of what it had removed", records=gone)
        return gone

    @_store_errors
    async def deleted_threads(self) -> list[Thread]:
        return [_thread(d) async for d in self._threads.find({"state": DELETED})]

    @_store_errors
    async def thread(self, thread_id: str) -> Thread | None:
        d = await self._threads.find_one({"_id": thread_id})
        return None if d is None else _thread(d)

    @_store_errors
    async def threads(self, limit: int = 1000, *, empty: bool = False) -> list[ThreadSummary]:
        out = []
        async for d in self._threads.find({}):
            t = _thread(d)
            started = [x for x in await self._messages.distinct(
                "turn_id", {"thread_id": t.id, "replayed": False}) if x is not None]
            by = await self._search.directions(started)  # a turn's id is its prompt frame's
            turns = [x for x in started if by.get(x) != TO_LIMINAL]
            usage_doc = await self._messages.find_one(
                {"thread_id": t.id, "kind": "usage"}, sort=[("ord", DESCENDING)])
            move_doc = await self._messages.find_one(
                {"thread_id": t.id, "kind": "swap", "status": "committed"}, sort=[("ord", DESCENDING)])
            latest = [None if d is None else (d["ord"], (await self._message(d)).data)
                      for d in (usage_doc, move_doc)]
            used, size = context_now(latest[0], latest[1])
            last_doc = await self._messages.find_one(
                {"thread_id": t.id}, sort=[("time", DESCENDING)])
            last = max(t.updated, last_doc["time"] if last_doc else 0.0)
            said = await self._messages.find_one(
                {"thread_id": t.id, "kind": {"$in": ["user", "agent"]}}, projection={"_id": 1})
            out.append(ThreadSummary(t, len(turns), used, size, last,
                                     empty=said is None and not t.title))
        return one_row_per_thread(out, empty=empty)[:limit]

    @_store_errors
    async def session_records(self, backing_id: str, *, uuid: str | None = None,
                              limit: int | None = None) -> list[SessionRecord]:
        if limit is not None and limit <= 0:
            return []  # (MongoDB reads a limit of 0 as none)
        query = {"backing_id": backing_id, **({"uuid": uuid} if uuid is not None else {})}
        docs = await read_all(lambda batch: self._sessions.find(query).sort("offset", ASCENDING)
                              .limit(limit or 0).batch_size(batch), BATCH_LINES)
        return [await self._session(d) for d in docs]

    async def _session(self, d: dict[str, Any]) -> SessionRecord:
        return SessionRecord(
            id=d["_id"], backing_id=d["backing_id"], thread_id=d["thread_id"],
            offset=d["offset"], uuid=d["uuid"], type=d["type"], time=d["time"],
            usage=orjson.loads(d["usage_json"]) if d["usage_json"] else None,
            tool_ids=tuple(d["tool_ids"]), text=d["text"], raw=await self._pieces.raw(d),
            own=bool(d.get("own")))

    @_store_errors
    async def session_file_end(self, backing_id: str) -> int:
        d = await self._sessions.find_one({"backing_id": backing_id},
                                          sort=[("offset", DESCENDING)])
        return int(d["end"]) if d else 0

    async def search(self, query: str, *, thread_id: str | None = None, limit: int = 20,
                     kinds: Collection[str] | None = None,
                     record_types: Collection[str] | None = None) -> list[SearchHit]:
        return await self._search.search(query, text_index=self.text_index, thread_id=thread_id,
                                         limit=limit, kinds=kinds, record_types=record_types)

    async def aclose(self) -> None:
        await self._client.close()


def _thread(d: dict[str, Any]) -> Thread:
    """A thread document as a ``Thread`` (``named``, ``titled``: absent from documents written
    before they existed, which read as false)."""
    return Thread(d["_id"], d["title"], d["cwd"], d["harness"], d["state"], tuple(d["backing_ids"]),
                  d["created"], d["updated"], bool(d.get("named")), bool(d.get("titled")))
