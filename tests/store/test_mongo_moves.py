"""Where threads are, in a store several sidecars share (``liminal.store.mongomoves`` against a
real server, ``liminal.store.sqlitemoves``): a move claims the thread, its commit is the store's
write, only from the session the store has the thread on (a compare-and-set on its tip), a claim
of a sidecar that died is taken over; two sidecars claiming at once from one session, one wins."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from liminal.store.base import MoveLog, Place
from liminal.store.mongo import MongoStore
from liminal.store.sqlite import SqliteStore
from tests.support.mongo import fresh_database, needs_mongo

pytestmark = pytest.mark.anyio
T = "11111111-1111-4111-8111-111111111111"
A, B, C = ("aaaaaaaa-0000-4000-8000-00000000000a", "bbbbbbbb-0000-4000-8000-00000000000b",
           "cccccccc-0000-4000-8000-00000000000c")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", pytest.param("mongodb", marks=needs_mongo)])
async def moves(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MoveLog]:
    if request.param == "sqlite":
        store = await SqliteStore.open(tmp_path / "liminal.db")
        try:
            assert store.moves is not None
            yield store.moves
        finally:
            await store.aclose()
        return
    async with fresh_database() as url:
        mongo = await MongoStore.open(url)
        try:
            assert mongo.moves is not None
            yield mongo.moves
        finally:
            await mongo.aclose()


async def test_two_sidecars_claiming_one_sqlite_thread_at_once_one_wins(tmp_path: Path) -> None:
    """Two sidecars' own connections to one file, each claiming the thread from its session at
    the same moment: one claim is taken, the other refused, and only the winner commits."""
    import anyio

    stores = [await SqliteStore.open(tmp_path / "liminal.db") for _ in range(2)]
    try:
        logs = [s.moves for s in stores]
        assert logs[0] is not None and logs[1] is not None
        results: dict[str, tuple[bool, str | None]] = {}

        async def claim(log: MoveLog, attempt: str) -> None:
            results[attempt] = await log.claim(T, T, attempt, now=100.0, stale_before=0.0)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(claim, logs[0], A)
            tasks.start_soon(claim, logs[1], B)
        won = [attempt for attempt, (taken, _) in results.items() if taken]
        assert len(won) == 1, results
        lost = B if won == [A] else A
        assert not await (logs[1] if lost == B else logs[0]).commit(T, T, lost)
        assert await (logs[0] if won == [A] else logs[1]).commit(T, T, won[0])
        assert await logs[1].place(T) == Place(won[0], (won[0],), None, None)
    finally:
        for store in stores:
            await store.aclose()


async def test_a_commit_is_the_stores_write_and_a_second_move_from_the_same_session_is_refused(
        moves: MoveLog) -> None:
    assert await moves.place(T) is None
    assert await moves.claim(T, T, A, now=100.0, stale_before=0.0) == (True, None)
    # Another sidecar, which has the thread where it was, cannot claim it meanwhile ...
    taken, why = await moves.claim(T, T, B, now=101.0, stale_before=0.0)
    assert not taken and why is not None and "is moving this thread" in why
    assert await moves.commit(T, T, A)
    assert await moves.place(T) == Place(A, (A,), None, None)
    # ... nor afterwards: its view is stale, it is told where the thread is.
    taken, why = await moves.claim(T, T, B, now=102.0, stale_before=0.0)
    assert not taken and why is not None and A in why
    assert not await moves.commit(T, T, B)  # a commit without the claim is refused
    assert await moves.claim(T, A, C, now=103.0, stale_before=0.0) == (True, None)
    assert await moves.commit(T, A, C)
    assert await moves.place(T) == Place(C, (A, C), None, None)


async def test_a_released_claim_leaves_the_thread_where_it_was(moves: MoveLog) -> None:
    assert (await moves.claim(T, T, A, now=100.0, stale_before=0.0))[0]
    assert await moves.release(T, A)
    assert not await moves.commit(T, T, A)  # released: nothing left to commit
    assert await moves.place(T) == Place(T, (), None, None)
    assert not await moves.release(T, A)


async def test_the_claim_of_a_sidecar_that_died_is_taken_over_and_its_commit_refused(
        moves: MoveLog) -> None:
    assert (await moves.claim(T, T, A, now=100.0, stale_before=0.0))[0]
    # Begun before ``stale_before``: its lease is gone, its sidecar with it.
    assert await moves.claim(T, T, B, now=500.0, stale_before=400.0) == (True, A)
    assert not await moves.commit(T, T, A)  # it was not dead after all: refused, it undoes
    assert not await moves.release(T, A)  # and its release leaves the new claim alone
    assert await moves.commit(T, T, B)
    assert await moves.place(T) == Place(B, (B,), None, None)


async def test_the_journal_records_are_kept_in_order_per_thread(moves: MoveLog) -> None:
    begin = {"thread_id": T, "old_backing_id": T, "new_backing_id": A, "outcome": "begin",
             "started_at": 100.0, "reason": "r"}
    await moves.append(begin)
    await moves.append({**begin, "outcome": "committed"})
    await moves.append({**begin, "thread_id": "other", "started_at": 50.0})
    assert [r["outcome"] for r in await moves.records(T)] == ["begin", "committed"]
    assert [r["thread_id"] for r in await moves.records()] == ["other", T, T]
    with pytest.raises(ValueError, match="not a journal record"):
        await moves.append({"thread_id": T})


@needs_mongo
async def test_a_deleted_thread_leaves_neither_its_place_nor_its_moves() -> None:
    async with fresh_database() as url:
        store = await MongoStore.open(url)
        try:
            assert store.moves is not None
            assert (await store.moves.claim(T, T, A, now=100.0, stale_before=0.0))[0]
            assert await store.moves.commit(T, T, A)
            record = {"thread_id": T, "old_backing_id": T, "new_backing_id": A, "outcome": "committed",
                      "started_at": 100.0, "zone": [{"key": "k", "text": "a memo's words"}]}
            await store.moves.append(record)
            await store.moves.append({**record, "thread_id": "other"})
            assert await store.delete_thread(T) >= 2
            assert await store.moves.place(T) is None
            assert [r["thread_id"] for r in await store.moves.records()] == ["other"]
        finally:
            await store.aclose()


@needs_mongo
async def test_sidecars_claiming_one_thread_at_once_on_the_server_one_wins_every_time() -> None:
    """Four sidecars, each with its own client, claim one thread from the session it is on at
    the same moment, twenty times over: each time one claim is taken. On FerretDB 1.x, which
    applies no update atomically, two claims read the free place and both wrote it."""
    import anyio

    async with fresh_database() as url:
        stores = [await MongoStore.open(url) for _ in range(4)]
        won: list[str] = []

        async def claim(store: MongoStore, thread: str, attempt: str) -> None:
            assert store.moves is not None
            if (await store.moves.claim(thread, A, attempt, now=100.0, stale_before=0.0))[0]:
                won.append(attempt)

        try:
            for round_ in range(20):
                thread = f"{round_:08d}-1111-4111-8111-111111111111"
                first = stores[0].moves
                assert first is not None
                # The place exists (a move before): every claim is the conditional update.
                assert (await first.claim(thread, thread, A, now=1.0, stale_before=0.0))[0]
                assert await first.commit(thread, thread, A)
                won.clear()
                async with anyio.create_task_group() as tasks:
                    for n, store in enumerate(stores):
                        tasks.start_soon(claim, store, thread, f"attempt-{n}")
                assert len(won) == 1, (round_, won)
        finally:
            for store in stores:
                await store.aclose()
