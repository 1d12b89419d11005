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
