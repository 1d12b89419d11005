"""What liminal keeps for the model beyond its context, on every store (docs/memory.md): a
thread's scratchpad (one record of the thread, bounded, no part of its conversation) and its
search dumps (kept in the cache, resolved only while the store holds their record, made again
from the store when the cache lost them). Deleting a thread takes both."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from liminal.gradient.recall import RecallError
from liminal.lookup import dumps, scratchpad
from liminal.lookup.recaller import Recaller
from liminal.store.base import Store
from liminal.store.cache import Cache, LocalCache, RedisCache
from liminal.store.records import DELETED, MEMORY_KINDS, Batch, ThreadUpdate, conversation
from tests.store.conftest import REDIS_URL
from tests.store.test_store_contract import message

pytestmark = pytest.mark.anyio
ONE = "7a1b2c3d-0000-4000-8000-000000000001"
TWO = "7a1b2c3d-0000-4000-8000-000000000002"


@pytest.fixture(params=["local", pytest.param("redis", marks=pytest.mark.skipif(
    not REDIS_URL, reason="LIMINAL_TEST_REDIS_URL is not set"))])
async def cache(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cache]:
    """Where dumps are kept: files in the home, or Redis (a prefix of the test's own)."""
    if request.param == "local":
        yield LocalCache(tmp_path / "cache", 3600)
        return
    redis_cache = RedisCache.from_url(REDIS_URL, 3600, prefix=f"liminal-test-{uuid.uuid4().hex}:")
    try:
        yield redis_cache
    finally:
        await redis_cache.aclose()


def test_the_memory_records_are_no_part_of_a_conversation() -> None:
    assert {scratchpad.KIND, dumps.KIND} == MEMORY_KINDS


async def threads(store: Store) -> None:
    await store.write(Batch(
        messages=[message(f"c1:{n:010d}", f"turn {n}: the staging port needle {n}", thread=ONE,
                          kind="user" if n % 2 == 0 else "agent", turn=f"c1:{n - n % 2:010d}",
                          order=f"c1:{n:010d}", time=100.0 + n) for n in range(40)]
        + [message("c2:0000000001", "the other thread's needle", thread=TWO, kind="user", turn="c2:1",
                   order="c2:0000000001")],
        threads=[ThreadUpdate(ONE, 100.0, title="one", backing_ids=(ONE,)),
                 ThreadUpdate(TWO, 100.0, title="two", backing_ids=(TWO,))]))


async def test_a_scratchpad_is_one_bounded_record_of_its_thread(store: Store) -> None:
    await threads(store)
    assert await scratchpad.read(store, ONE) is None
    await scratchpad.replace(store, ONE, "  the codename is PLOVER-8812  ", limit=100, by="person")
    await scratchpad.append(store, ONE, "staging port 6543", limit=100, by="model")
    found = await scratchpad.read(store, ONE)
    assert found is not None and (found.text, found.by) == ("the codename is PLOVER-8812\nstaging port 6543", "model")
    with pytest.raises(scratchpad.TooLong, match=r"47 characters, over its limit of 40 \(memory.scratchpad_chars\)"):
        await scratchpad.append(store, ONE, "x", limit=40, by="person")
    with pytest.raises(scratchpad.TooLong):
        await scratchpad.replace(store, ONE, "y" * 51, limit=50, by="person")
    assert (await scratchpad.read(store, ONE)) == found  # nothing changed
    assert [m.kind for m in await store.messages(ONE, scratchpad.KIND)] == ["scratchpad"]
    assert await scratchpad.read(store, TWO) is None
    # No part of the conversation: it ends where it did, and begins where it did.
    shown = conversation(await store.messages(ONE))
    assert len(shown) == 40 and shown[0].id == "c1:0000000000" and shown[-1].id == "c1:0000000039"
    [one] = [s for s in await store.threads() if s.thread.id == ONE]
    assert one.turns == 20
    await scratchpad.replace(store, ONE, "", limit=100, by="person")
    assert await scratchpad.read(store, ONE) is None


async def test_a_deleted_threads_scratchpad_and_dumps_go_with_it(store: Store, cache: Cache) -> None:
    await threads(store)
    await scratchpad.replace(store, ONE, "the codename is PLOVER-8812", limit=100, by="person")
    query = dumps.Query("needle", limit=50)
    found = await dumps.search(store, ONE, query)
    text = dumps.answer(found, all_threads=False)
    dump_id = await dumps.keep(store, cache, ONE, query, found, text)
    assert await dumps.resolve(store, cache, dump_id) == text
    assert await cache.get(dump_id) is not None
    await store.delete_thread(ONE)
    await store.write(Batch(threads=[ThreadUpdate(ONE, 200.0, state=DELETED, by_user=True)]))
    assert await scratchpad.read(store, ONE) is None
    with pytest.raises(RecallError, match="no such dump"):
        await dumps.resolve(store, cache, dump_id)  # the cache still has it: the store says no
    # A tombstone takes no more of it (a model's append still on its way).
    await scratchpad.replace(store, ONE, "late", limit=100, by="model")
    assert await scratchpad.read(store, ONE) is None


async def test_a_dump_the_cache_lost_is_searched_again_from_the_store(store: Store, cache: Cache) -> None:
    await threads(store)
    query = dumps.Query("needle", all_threads=True, limit=50)
    found = await dumps.search(store, ONE, query)
    text = dumps.answer(found, all_threads=True)
    assert "the other thread's needle" in text
    dump_id = await dumps.keep(store, cache, ONE, query, found, text)
    await cache.delete(dump_id)
    assert await Recaller(store, cache).recall(dump_id) == text.encode()  # made again, the same
    assert await cache.get(dump_id) == text.encode()
    # Another thread it holds finds of deleted since: searched again, without them.
    await store.delete_thread(TWO)
    again = await dumps.resolve(store, cache, dump_id)
    assert "the other thread's needle" not in again and "staging port needle 39" in again
    # Never a search hit itself (it holds no text), and an id checked before it is used.
    assert all(h.kind != dumps.KIND for h in await store.search("needle", limit=100))
    for bad in (f"dump:{ONE}:zz", "dump:../../x:0123456789ab", f"dump:{ONE}:0123456789ab"):
        with pytest.raises(RecallError):
            await dumps.resolve(store, cache, bad)


def test_a_dumps_paragraph_says_what_it_holds_and_how_to_read_it() -> None:
    from liminal.lookup.search import Found
    from liminal.store.records import SearchHit

    hits = [Found(SearchHit("message", f"m{n}", ONE, "user", 1_790_000_000.0 + n * 60, f"needle {n}", 1.0),
                  "one", n + 1, "you") for n in range(30)]
    query = dumps.Query("needle", limit=30)
    text = dumps.answer(hits, all_threads=False)
    said = dumps.summary(f"dump:{ONE}:0123456789ab", query, hits, text, 300)
    assert said.startswith("30 finds for 'needle'") and "this thread (turns 1-30)" in said
    assert f"recall tool with key dump:{ONE}:0123456789ab" in said and "pass start" in said
    assert "[you, " in said and "needle 0" in said and "\n" not in said
    pages, start = [], 0
    while True:
        part = dumps.paged(text, start, 300, lines=True)
        pages.append(part[0])
        if len(part) == 1:
            break
        start = int(part[1].rsplit("start=", 1)[1].rstrip("]"))
    assert "".join(pages) == text and all(p.endswith("\n") for p in pages[:-1])


async def test_the_dashboards_thread_page_shows_the_scratchpad(store: Store) -> None:
    from liminal.dashboard.views import scratchpad_view

    await threads(store)
    assert scratchpad_view(await store.messages(ONE)) is None
    await scratchpad.replace(store, ONE, "the codename is PLOVER-8812", limit=100, by="model")
    shown = scratchpad_view(await store.messages(ONE))
    assert shown is not None and (shown["text"], shown["chars"], shown["by"]) == (
        "the codename is PLOVER-8812", 27, "model")


async def test_a_move_reads_the_scratchpad_within_a_bound_and_a_store_down_keeps_the_earlier(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """What every move reads (``liminal.kernel.memory``): the text, "" for none, and None (the
    earlier preamble's stays) when the store cannot be opened or does not answer in time; a
    store still opening past the wait is left to finish, never cancelled."""
    import anyio

    from liminal.config import MemorySettings
    from liminal.kernel import memory

    await threads(store)
    await scratchpad.replace(store, ONE, "the codename is PLOVER-8812", limit=100, by="person")

    async def opened() -> Store:
        return store

    async def down() -> Store:
        raise OSError("connection refused")

    slow = anyio.Event()

    async def stuck() -> Store:
        await slow.wait()
        return store

    assert await memory.Memory(MemorySettings(), opened).scratchpad(ONE) == "the codename is PLOVER-8812"
    assert await memory.Memory(MemorySettings(), opened).scratchpad(TWO) == ""
    assert await memory.Memory(MemorySettings(), down).scratchpad(ONE) is None
    assert await memory.unknown().scratchpad(ONE) is None
    monkeypatch.setattr(memory, "READ_SECONDS", 0.05)
    async with anyio.create_task_group() as tasks:
        assert await memory.Memory(MemorySettings(), stuck, lambda: tasks).scratchpad(ONE) is None
        slow.set()  # the open goes on and ends in the task group
