"""The index worker leaves the CPU to the proxy while the proxy streams a burst into the spool."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from liminal.acp.events import FrameEvent
from liminal.ingest.indexer import Indexer, Tuning
from liminal.ingest.spool import SpoolDir
from liminal.ingest.worker import _FIELDS, _RAW
from liminal.store.sqlite import SqliteStore
from tests.store.streams import stream

pytestmark = pytest.mark.anyio
BLOCK = 50  # frames a block, written every 10 ms: about 0.5 MB/s with this padding


async def write_burst(spool: SpoolDir, events: list[FrameEvent], start: int,
                      seconds: float, until: Callable[[], bool] = lambda: False) -> int:
    """Append ``events[start:]`` in blocks every 10 ms for ``seconds`` or ``until`` it holds;
    returns how many frames were written."""
    at = start
    with anyio.move_on_after(seconds):
        while at < len(events) and not until():
            part = events[at:at + BLOCK]
            spool.append_block(at, {part[0].connection_id: at}, list(map(_FIELDS, part)),
                               list(map(_RAW, part)))
            at += len(part)
            await anyio.sleep(0.01)
    return at - start


async def stored(worker: Indexer, count: int) -> None:
    with anyio.fail_after(30):
        while True:
            if worker.stats.written >= count:
                return
            await anyio.sleep(0.02)


@pytest.mark.parametrize("max_seconds", [60.0, 0.3])
async def test_the_worker_waits_out_a_burst_for_a_bounded_time(tmp_path: Path,
                                                                max_seconds: float) -> None:
    store = await SqliteStore.open(tmp_path / "liminal.db")
    events = list(stream(20_000, pad=100))
    spool = SpoolDir(tmp_path / "spool" / "live")
    assert spool.acquire()
    worker = Indexer(store, tmp_path / "spool", tail=spool.path, recover=False,
                     tuning=Tuning(yield_bytes_per_second=10_000, yield_max_seconds=max_seconds))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        first = await write_burst(spool, events, 0, 0.2)  # the first look sees a backlog
        await stored(worker, first)  # the backlog is in; the next look finds a quiet writer
        if max_seconds > 1.5:
            burst = await write_burst(spool, events, first, 1.5)
            during = await store.frame_count()
            # Before its rate window sees the burst (up to one window, 100 ms, or longer on a
            # loaded machine), the worker may take a few blocks of it, but not the burst.
            assert during <= first + 10 * BLOCK and during < first + burst // 2
            assert worker.yielded_seconds > 0
        else:  # it waits 0.3 s, then indexes while the burst goes on (written until it has)
            burst = await write_burst(spool, events, first, 60.0,
                                      until=lambda: worker.stats.written > first + 10 * BLOCK)
            assert first + burst < len(events), "the worker indexed nothing of a burst going on"
        spool.seal()
        await worker.aclose()  # the burst is over: everything goes in
    assert await store.frame_count() == first + burst
    spool.release(remove_if_empty=False)
    await store.aclose()
