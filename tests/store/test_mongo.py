"""What only the MongoDB backend has to get right, on a real server (``LIMINAL_TEST_MONGO_URL``):
where its large records' pieces go, a thread's merge that another writer comes into, and search
on servers without text indexes."""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterator
from typing import Any

import pytest
import structlog
from pymongo import TEXT
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import OperationFailure

from liminal.store.mongo import INLINE_BYTES, MongoStore
from liminal.store.records import Batch, SessionRecord, ThreadUpdate, frame_id
from tests.store.test_store_contract import frame, message
from tests.support.mongo import fresh_database, needs_mongo

pytestmark = [pytest.mark.anyio, needs_mongo]


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


async def blob_owners(store: MongoStore) -> set[str]:
    return {d["owner"] for d in await store._blobs.find({}, {"owner": 1}).to_list(None)}


async def test_a_deleted_thread_leaves_none_of_its_large_records_behind(url: str) -> None:
    """The pieces of a large frame, message or session line are kept apart from their record;
    deleting the thread removed the records and left the pieces, the whole text of every
    large tool output the user had asked to delete. Pieces a message left behind when it
    shrank go too."""
    store = await MongoStore.open(url)
    try:
        big = "secret " * (INLINE_BYTES // 7 + 1)
        record = SessionRecord(SessionRecord.make_id("b1", 0), "b1", "t1", 0, "u1", "user", None,
                               None, (), big, big.encode())
        await store.write(Batch(
            [frame(0, big.encode()), frame(1, big.encode(), thread="t2")],
            [message("m1", big), message("m2", big), message("k1", big, thread="t2")],
            [ThreadUpdate("t1", 1.0, backing_ids=("t1", "b1")), ThreadUpdate("t2", 1.0)],
            [record]))
        await store.write(Batch(messages=[message("m2", "shrank")]))  # its pieces stay behind
        assert len(await blob_owners(store)) == 6
        assert await store.delete_thread("t1") >= 5
        assert await blob_owners(store) == {frame_id("c1", 1), "message:k1"}
        [kept] = await store.messages("t2")
        assert kept.text == big  # the other thread's large message is whole
    finally:
        await store.aclose()


async def test_a_large_record_is_read_by_its_own_pieces_through_an_index(url: str) -> None:
    store = await MongoStore.open(url)
    try:
        keys = [list(info["key"]) for info in (await store._blobs.index_information()).values()]
        assert [("owner", 1), ("n", 1)] in keys
    finally:
        await store.aclose()


@pytest.mark.parametrize("exists", [True, False], ids=["updated", "created"])
async def test_a_thread_written_by_another_between_read_and_write_keeps_both_updates(
        url: str, exists: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge reads the thread, then writes it: a plain replace wrote over whatever another
    writer (``liminal threads rename``, another sidecar) had written in between. Here the other
    writer comes in exactly there, every time (the test of the same at random, on servers that
    update atomically, is in the contract suite)."""
    store, other = await MongoStore.open(url), await MongoStore.open(url)
    # The revision check itself: on FerretDB the latch would keep the other writer out of the
    # merge, waiting for this one, which here waits for it.
    store.atomic_updates = other.atomic_updates = True
    try:
        if exists:
            await store.write(Batch(threads=[ThreadUpdate("t1", 10.0, backing_ids=("b0",))]))
        find_one = store._threads.find_one
        interleaved: list[bool] = []

        async def read_then_let_the_other_write(*args: Any, **kwargs: Any) -> Any:
            found = await find_one(*args, **kwargs)
            if not interleaved:
                interleaved.append(True)
                await other.write(Batch(threads=[ThreadUpdate("t1", 30.0, title="Mine", named=True)]))
            return found

        monkeypatch.setattr(store._threads, "find_one", read_then_let_the_other_write)
        await store.write(Batch(threads=[ThreadUpdate("t1", 20.0, backing_ids=("b1",),
                                                      fallback_title="first prompt")]))
        monkeypatch.undo()
        t = await store.thread("t1")
        assert t is not None and interleaved
        assert (t.title, t.named, t.updated) == ("Mine", True, 30.0)
        assert t.backing_ids == (("b0", "b1") if exists else ("b1",))
    finally:
        await store.aclose()
        await other.aclose()


async def test_a_thread_written_before_revisions_merges(url: str) -> None:
    """Threads an earlier liminal wrote carry no revision: they still take updates."""
    store = await MongoStore.open(url)
    try:
        await store._threads.insert_one({
            "_id": "t1", "title": "old", "cwd": "/w", "harness": "claude", "state": "active",
            "backing_ids": ["t1"], "created": 1.0, "updated": 1.0, "named": False})
        await store.write(Batch(threads=[ThreadUpdate("t1", 2.0, backing_ids=("b1",))]))
        t = await store.thread("t1")
        assert t is not None and (t.title, t.backing_ids, t.updated) == ("old", ("t1", "b1"), 2.0)
    finally:
        await store.aclose()


async def test_a_server_that_refuses_text_indexes_is_searched_by_regex_and_says_so(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """FerretDB 1.x (and managed Mongo-compatible services) refuse a text index: the store
    opened nowhere (every liminal command failed, the index worker spooled for good). It
    opens, says once why search is degraded, and search finds the same things."""
    create_index = AsyncCollection.create_index

    async def refuse_text(self: AsyncCollection[Any], keys: Any, **kwargs: Any) -> str:
        if any(kind == TEXT for _, kind in keys):
            raise OperationFailure("text indexes are not supported here", code=115)
        return await create_index(self, keys, **kwargs)

    monkeypatch.setattr(AsyncCollection, "create_index", refuse_text)
    with structlog.testing.capture_logs() as logs:
        store = await MongoStore.open(url)
    try:
        assert store.search_mode == "regex"
        [said] = [e for e in logs if e["event"].startswith("search degraded")]
        assert said["log_level"] == "warning" and "not supported" in said["server_said"]
        await store.write(Batch(messages=[message("m1", "the Flux capacitor"),
                                          message("m2", "flux flux")]))
        assert [h.id for h in await store.search("flux CAPACITOR")] == ["m1"]
    finally:
        await store.aclose()


@pytest.mark.parametrize("word", ["が", "한국어", "café", "ǅ"])
@pytest.mark.parametrize(("stored", "typed"), [("NFC", "NFD"), ("NFD", "NFC"), ("NFD", "NFD")])
async def test_regex_search_finds_a_word_whichever_unicode_form_it_was_stored_or_typed_in(
        url: str, word: str, stored: str, typed: str) -> None:
    """As the SQLite backend's fallback: macOS file names (and the tools that print them) are
    decomposed, what a person types is composed; neither form finds the other by bytes."""
    store = await MongoStore.open(url, text_index=False)
    try:
        text = f"the word {unicodedata.normalize(stored, word)} was here"
        await store.write(Batch(messages=[message("m1", text)]))
        assert [h.id for h in await store.search(unicodedata.normalize(typed, word))] == ["m1"]
    finally:
        await store.aclose()


class FreezingRelay:
    """A TCP relay to the test server that can stop passing requests while keeping every
    connection open: a request whose answer never comes (a lost segment through a relay, a
    server stuck on one connection), what two hosts on one MongoDB can meet. The monitor's
    ``hello`` still passes, so the driver sees a healthy server: with the monitor's connection
    frozen too, pymongo clears its pool and fails the call itself."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._listener: Any = None

    async def __aenter__(self) -> FreezingRelay:
        import anyio

        self.flowing = anyio.Event()
        self.flowing.set()
        self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = self._listener.extra(anyio.abc.SocketAttribute.local_port)
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._listener.serve, self._relay)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        await self._listener.aclose()

    async def _relay(self, client: Any) -> None:
        import anyio

        async with await anyio.connect_tcp(*self.target) as server, anyio.create_task_group() as tg:
            async def pump(source: Any, sink: Any, requests: bool) -> None:
                async for data in source:
                    if requests and b"hello" not in data.lower() and b"ismaster" not in data.lower():
                        await self.flowing.wait()  # held, never dropped: no answer comes
                    await sink.send(data)
            tg.start_soon(pump, client, server, True)
            tg.start_soon(pump, server, client, False)


async def test_a_server_gone_quiet_fails_a_call_within_the_socket_bound(url: str) -> None:
    """A call to a server that stops answering on an open connection fails after the socket
    bound (``socket_timeout_ms``) rather than waiting for good: without one, the index worker
    and every command that reads the store waited forever (the two-hosts test hung so, 15 min)."""
    import anyio
    from pymongo.uri_parser import parse_uri

    parsed = parse_uri(url)
    host, port = parsed["nodelist"][0]
    async with FreezingRelay((host, port)) as relay:
        relayed = url.replace(f"{host}:{port}", f"127.0.0.1:{relay.port}", 1)
        store = await MongoStore.open(relayed, socket_timeout_ms=1500)
        try:
            assert await store.thread("t-none") is None  # the line works
            relay.flowing = anyio.Event()  # frozen
            # The read, and the one retry pymongo makes of a read that met a network error,
            # each wait the bound (3.0 s in all, measured); the allowance is for choosing the
            # server again between them (its monitor's hello passes the relay) on a loaded
            # machine. A call that waits for good, or past a third bound, fails here.
            with anyio.fail_after(2 * 1.5 + 2.0):
                with pytest.raises(Exception) as raised:
                    await store.thread("t-none")
            assert not isinstance(raised.value, TimeoutError), "no failure within the bound"
            assert "timed out" in str(raised.value), raised.value
        finally:
            relay.flowing.set()
            await store.aclose()


async def test_a_write_of_records_the_server_already_has_ends_on_every_server(url: str) -> None:
    """A spool replayed after a crash writes frames the store has again (their ids are fixed,
    so nothing is doubled). FerretDB 1.x held one pooled connection per existing document of an
    update command until its end: past about 100 the command waited for itself, and every other
    client of the server behind it (CI hung 17 min on a test's clean-up). liminal writes a few
    statements per command there (``MongoStore.ops_per_command``); on MongoDB, as one."""
    import anyio

    store = await MongoStore.open(url)
    try:
        frames = [frame(n, b"x" * 40) for n in range(300)]
        with anyio.fail_after(60):
            await store.write(Batch(frames=frames))
            await store.write(Batch(frames=frames))  # again, every frame already there
        assert await store.frame_count() == 300
    finally:
        await store.aclose()


async def test_merges_of_one_thread_take_turns_on_a_server_without_atomic_updates(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where updates are not atomic (FerretDB 1.x), a merge waits while another writer holds the
    thread's latch, and goes on once it is released; a latch left by a writer that died (older
    than ``STALE_SECONDS``) is taken over rather than waited on for good."""
    import time

    import anyio

    from liminal.store import mongolatch

    store = await MongoStore.open(url)
    store.atomic_updates = False
    try:
        await store._latches.insert_one({"_id": "t1", "token": "another writer", "at": time.time()})
        written = anyio.Event()
        find_one = store._latches.find_one
        looked: list[str] = []  # each time the merge found the latch held

        async def look(*args: Any, **kwargs: Any) -> Any:
            looked.append("held")
            return await find_one(*args, **kwargs)

        monkeypatch.setattr(store._latches, "find_one", look)

        async def write() -> None:
            await store.write(Batch(threads=[ThreadUpdate("t1", 1.0, backing_ids=("b1",))]))
            written.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            with anyio.fail_after(30):  # it found the latch held, and again after a pause
                while len(looked) < 2:  # noqa: ASYNC110 - a stand-in's calls
                    await anyio.sleep(0.01)
            assert not written.is_set() and await store.thread("t1") is None
            await store._latches.delete_one({"_id": "t1"})  # the other writer is done
            with anyio.fail_after(30):
                await written.wait()
        assert await store._latches.count_documents({}) == 0  # released after the merge
        stale = time.time() - mongolatch.STALE_SECONDS - 1
        await store._latches.insert_one({"_id": "t1", "token": "a dead writer", "at": stale})
        with anyio.fail_after(30):
            await store.write(Batch(threads=[ThreadUpdate("t1", 2.0, backing_ids=("b2",))]))
        t = await store.thread("t1")
        assert t is not None and t.backing_ids == ("b1", "b2")
        assert await store._latches.count_documents({}) == 0
        # A latch a writer died holding names the thread: a deletion leaves none behind.
        await store._latches.insert_one({"_id": "t1", "token": "a dead writer", "at": time.time()})
        await store.delete_thread("t1")
        assert await store._latches.count_documents({}) == 0
    finally:
        await store.aclose()
