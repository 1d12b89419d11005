"""The indexer: normal flow, a stalled store, a store that goes away and comes back."""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal.ingest.indexer import Indexer, Tuning, to_record
from liminal.store.base import StoreError
from liminal.store.records import Batch
from liminal.store.sqlite import SqliteStore
from tests.store.conftest import REPLAY, conversation, load_of
from tests.store.streams import expected_text, stream

pytestmark = pytest.mark.anyio


class FaultyStore:
    """Wraps a store; can be made to stall or to fail every write."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.down = False
        self.stall_until = 0.0
        self.writes = 0
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def write(self, batch: Batch) -> None:
        self.writes += 1
        if self.down:
            self.failed += 1
            raise StoreError("store is down (test)")
        delay = self.stall_until - time.monotonic()
        if delay > 0:
            await anyio.sleep(delay)
        await self.inner.write(batch)


async def agent_text(store: SqliteStore, thread: str) -> list[str]:
    return [m.text for m in await store.messages(thread) if m.kind == "agent"]


async def test_a_conversation_is_indexed(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "liminal.db")
    events = conversation()
    indexer = Indexer(store, tmp_path / "spool")
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        for e in events:
            indexer.offer(e)
        await indexer.aclose()
    frames = await store.frames(connection_id="conn1")
    assert [f.raw for f in frames] == [e.raw for e in events]
    assert [m.kind for m in await store.messages("sess-1")] == [
        "user", "thought", "agent", "tool_call", "plan", "agent", "usage", "turn_end"]
    [summary] = await store.threads()
    assert (summary.thread.cwd, summary.thread.harness, summary.turns, summary.context_used) == (
        "/work/demo", "claude-agent-acp", 1, 12345)
    assert not (tmp_path / "spool").exists() or not any((tmp_path / "spool").iterdir())
    await store.aclose()


@pytest.mark.slow
async def test_a_store_that_stalls_ten_seconds_costs_forwarding_nothing(tmp_path: Path) -> None:
    inner = await SqliteStore.open(tmp_path / "liminal.db")
    store = FaultyStore(inner)
    n = 40_000
    indexer = Indexer(store, tmp_path / "spool",  # type: ignore[arg-type]
                      tuning=Tuning(queue_frames=2000, stall_seconds=1.0, close_timeout=30))
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        events = list(stream(n))
        # The test's own 40,000 prepared events would make the collector pause the whole
        # process (router included) for tens of ms; that is not the indexer's cost.
        gc.freeze()
        start = time.monotonic()
        for i, e in enumerate(events):
            if i == 2000:
                store.stall_until = time.monotonic() + 10.0
            indexer.offer(e)
            if i % 200 == 0:
                await anyio.sleep(0.05)  # ~10 s of traffic at 4,000 frames/s
        assert time.monotonic() - start > 9.0
        assert indexer.stats.spooled > 0
        await indexer.aclose()
    gc.unfreeze()
    # Offers went on while the store stood still (they spilled to the spool), and nothing was
    # lost. What an offer costs in time is for a benchmark (bench/index_throughput.py measures
    # offers unstalled): a bound here (2 ms at the 99.9th percentile) failed on a loaded machine.
    assert await inner.frame_count() == n
    assert await agent_text(inner, "sess-long") == [expected_text(n)]
    await inner.aclose()


async def test_a_store_that_goes_away_and_comes_back(tmp_path: Path) -> None:
    inner = await SqliteStore.open(tmp_path / "liminal.db")
    store = FaultyStore(inner)
    n = 5000
    indexer = Indexer(store, tmp_path / "spool",  # type: ignore[arg-type]
                      tuning=Tuning(queue_frames=500, retry_seconds=0.05))
    events = list(stream(n))
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        for i, e in enumerate(events):
            if i == 1000:
                store.down = True
            if i == 4000:
                store.down = False
            indexer.offer(e)
            if i % 100 == 0:
                await anyio.sleep(0.01)
        await indexer.aclose()
    assert store.failed > 0 and indexer.stats.spooled > 0
    frames = await inner.frames(connection_id="conn-long", limit=n + 10)
    assert [f.seq for f in frames] == list(range(n))
    assert [f.raw for f in frames] == [e.raw for e in events]
    assert await agent_text(inner, "sess-long") == [expected_text(n)]
    assert not list((tmp_path / "spool").glob("*/*.spool"))
    await inner.aclose()


async def test_closing_while_down_leaves_the_spool_for_the_next_start(tmp_path: Path) -> None:
    inner = await SqliteStore.open(tmp_path / "liminal.db")
    store = FaultyStore(inner)
    store.down = True
    n = 300
    indexer = Indexer(store, tmp_path / "spool",  # type: ignore[arg-type]
                      tuning=Tuning(retry_seconds=0.05, close_timeout=0.5))
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        for e in stream(n):
            indexer.offer(e)
        with anyio.fail_after(10):  # it tried to store them, and the store was down
            while not store.failed:  # noqa: ASYNC110 - a stand-in's count
                await anyio.sleep(0.01)
        await indexer.aclose()
        tg.cancel_scope.cancel()
    assert await inner.frame_count() == 0
    assert list((tmp_path / "spool").glob("*/*.spool"))
    # The next liminal replays it, and derives the messages again from the frames.
    second = Indexer(inner, tmp_path / "spool")
    async with anyio.create_task_group() as tg:
        tg.start_soon(second.run)
        with anyio.fail_after(10):
            await second.recovered_all.wait()
        await second.aclose()
    assert await inner.frame_count() == n
    assert await agent_text(inner, "sess-long") == [expected_text(n)]
    assert not list((tmp_path / "spool").glob("*/*.spool"))
    await inner.aclose()


async def test_a_later_loads_replay_is_left_out_whichever_way_its_frames_come(tmp_path: Path) -> None:
    """A thread the store has, loaded again: offered in memory (a process of its own, whose
    indexer asks the store), and in the spool of a process that was killed (replayed at the
    next start, then derived again from the frames table): either way its frames less the
    replay's history, and no message but its note."""
    from liminal.ingest.spool import SpoolDir

    store = await SqliteStore.open(tmp_path / "liminal.db")

    async def indexed(*events: Any) -> None:
        indexer = Indexer(store, tmp_path / "spool")
        async with anyio.create_task_group() as tg:
            tg.start_soon(indexer.run)
            for e in events:
                indexer.offer(e)
            with anyio.fail_after(10):
                await indexer.recovered_all.wait()
            await indexer.aclose()

    await indexed(*conversation("s", connection="c0"))  # the thread's turn, live
    await indexed(*load_of("s", 7, REPLAY, connection="c1"))
    orphan = SpoolDir(tmp_path / "spool" / "killed")
    assert orphan.acquire()
    for n, e in enumerate(load_of("s", 7, REPLAY, connection="c2", t=3000.0)):
        orphan.append(n, to_record(n, e))
    orphan.release(remove_if_empty=False)  # its process is gone: the next start replays it
    await indexed()

    history = {"user_message_chunk", "agent_message_chunk", "tool_call"}
    for connection in ("c1", "c2"):
        frames = await store.frames(connection_id=connection)
        assert [f.seq for f in frames] == [0, len(REPLAY) + 1, len(REPLAY) + 2, len(REPLAY) + 3]
        assert not [f for f in frames if any(k.encode() in f.raw for k in history)]
    messages = await store.messages("s")
    assert not [m for m in messages if m.replayed]
    [note] = [m for m in messages if m.kind == "load"]
    assert note.data["said"][-1] == ["agent", "m9"]
    assert not list((tmp_path / "spool").glob("*/*.spool"))
    await store.aclose()


async def test_a_line_routed_by_its_first_bytes_that_is_not_json_is_stored_as_invalid(
        tmp_path: Path) -> None:
    from liminal.acp.events import Direction, Kind, make_lazy_event
    from liminal.ingest.spool import SpoolDir
    from liminal.ingest.worker import _FIELDS, _RAW

    raw = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{oops'
    event = make_lazy_event(Direction.AGENT_TO_CLIENT, Kind.NOTIFICATION, 1000.0, raw, "c9",
                            "s1", "s1", "session/update", len(raw))
    assert event.message is None
    store = await SqliteStore.open(tmp_path / "liminal.db")
    inline = Indexer(store, tmp_path / "spool")  # offered in memory
    async with anyio.create_task_group() as tg:
        tg.start_soon(inline.run)
        inline.offer(event)
        await inline.aclose()
    spool = SpoolDir(tmp_path / "spool" / "live")  # and through the spool, as the worker reads it
    assert spool.acquire()
    spool.append_block(0, {"c8": 0}, [("c8", *_FIELDS(event)[1:])],
                       [_RAW(event)])
    spool.seal()
    spool.release(remove_if_empty=False)
    worker = Indexer(store, tmp_path / "spool", tail=spool.path, recover=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await worker.aclose()
    frames = [*await store.frames(connection_id="c9"), *await store.frames(connection_id="c8")]
    assert [(f.kind, f.raw) for f in frames] == [("invalid", raw), ("invalid", raw)]
    assert inline.stats.invalid == worker.stats.invalid == 1
    await store.aclose()


@pytest.mark.parametrize("oddity", [b'"hi \\ud83d"', b'"hi", "n": NaN'])
async def test_a_frame_only_the_stdlib_reads_is_parsed_alike_everywhere_and_stored(
        tmp_path: Path, oddity: bytes) -> None:
    """orjson refuses lone surrogates and NaN; the router falls back to the stdlib. The lazy
    event, the index worker and the store must read such a line as the router did."""
    from liminal.acp import jsonrpc
    from liminal.acp.events import Direction, Kind, make_lazy_event

    raw = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
           b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":' + oddity + b'}}}}')
    lazy = make_lazy_event(Direction.AGENT_TO_CLIENT, Kind.NOTIFICATION, 1000.0, raw, "c7", "s1",
                           "s1", "session/update", len(raw))
    assert lazy.message == jsonrpc.parse(raw) is not None
    store = await SqliteStore.open(tmp_path / "liminal.db")
    indexer = Indexer(store, tmp_path / "spool")
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        indexer.offer(lazy)
        await indexer.aclose()
    [frame] = await store.frames(connection_id="c7")
    assert (frame.kind, frame.raw) == ("notification", raw)
    assert [m.text for m in await store.messages("s1")] == ["hi ?" if b"ud83d" in oddity else "hi"]
    await store.aclose()


async def test_a_growing_message_is_rewritten_in_all_a_few_times_its_length(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long answer is written while it streams, and each write replaces its whole text and
    the text's search index. Written whenever the pace allowed (once a second), what the worker
    wrote in all grew as the square of the answer: a 20 s answer at 1,000 chunks a second, 2.6
    MB, was written 27 MB over, the worker's largest cost in a paced stream. Now it is written
    again only once it has grown by half: in all about three times its length, here where the
    pace allows a write at every round (80 rounds: 40 times its length before)."""
    from liminal.ingest import indexer as indexer_module
    from tests.store.test_worker_yield import stored

    monkeypatch.setattr(indexer_module, "OPEN_MESSAGE_SECONDS", 0.0)
    written: list[int] = []

    class Counting(FaultyStore):
        async def write(self, batch: Batch) -> None:
            written.extend(len(m.text) for m in batch.messages if m.kind == "agent")
            await super().write(batch)

    store = await SqliteStore.open(tmp_path / "liminal.db")
    events = list(stream(4002))
    indexer = Indexer(Counting(store), tmp_path / "spool", recover=False)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        for start in range(0, len(events), 50):  # a round of the worker's every 50 chunks
            for event in events[start:start + 50]:
                indexer.offer(event)
            await stored(indexer, min(start + 50, len(events)))
        await indexer.aclose()
    final = len(expected_text(4002))
    assert await agent_text(store, "sess-long") == [expected_text(4002)]
    assert len(written) > 5  # written while it grew, not only at its end
    assert sum(written) <= 3.5 * final
    await store.aclose()


async def test_a_worker_caught_up_with_its_spool_waits_for_a_poke(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spool writer flushes every few milliseconds but pokes the worker for streamed
    updates only every ``STREAM_POKE_SECONDS``. A worker that looked at its spool again as soon
    as it had stored a round found the blocks flushed meanwhile: one round, one transaction,
    every few milliseconds of a stream, which was most of its CPU. Now a round that caught up
    waits for the next poke (or its own look, made rare here); and a poke that comes while it
    works is not lost: its next wait returns at once."""
    from liminal.ingest import indexer as indexer_module
    from liminal.ingest.spool import SpoolDir
    from liminal.ingest.worker import _FIELDS, _RAW

    monkeypatch.setattr(indexer_module, "TAIL_POLL_SECONDS", 3600.0)

    class Slow(FaultyStore):  # a round takes longer than the writer's flushes are apart
        async def write(self, batch: Batch) -> None:
            await anyio.sleep(0.005)
            await super().write(batch)

    store = await SqliteStore.open(tmp_path / "liminal.db")
    counting = Slow(store)
    events = list(stream(1000))
    spool = SpoolDir(tmp_path / "spool" / "live")
    assert spool.acquire()
    worker = Indexer(counting, tmp_path / "spool", tail=spool.path, recover=False)  # type: ignore[arg-type]
    pokes = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        for at in range(0, len(events), 5):  # a block every 2 ms, a poke every 20 blocks
            part = events[at:at + 5]
            spool.append_block(at, {part[0].connection_id: at}, list(map(_FIELDS, part)),
                               list(map(_RAW, part)))
            if at % 100 == 0:
                worker.wake()
                pokes += 1
            await anyio.sleep(0.002)
        spool.seal()
        await worker.aclose()
    assert await store.frame_count() == len(events)
    assert counting.writes <= pokes + 3  # a round a poke (and the last at the close): was one a block
    spool.release(remove_if_empty=False)
    await store.aclose()
