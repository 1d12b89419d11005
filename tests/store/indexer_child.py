"""A process that runs an indexer on a long stream and reports its progress, to be SIGKILLed.

    python -m tests.store.indexer_child HOME N

It opens the store, prints ``ready``, waits for a line on stdin (the parent locks the database
meanwhile, so writes stall), then offers N frames at a steady pace, printing the indexer's
stats as JSON after every 100.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import orjson

from liminal import log
from liminal.ingest.indexer import Indexer, Tuning
from liminal.store.sqlite import SqliteStore
from tests.store.streams import stream


async def main(home: Path, n: int) -> None:
    log.configure("warning", json=True)  # stderr: stdout carries the progress lines
    store = await SqliteStore.open(home / "liminal.db")
    indexer = Indexer(store, home / "spool", tuning=Tuning(queue_frames=1000, stall_seconds=0.2))
    print("ready", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        for i, event in enumerate(stream(n)):
            indexer.offer(event)
            if i % 100 == 99:
                s = indexer.stats
                print(orjson.dumps({"offered": s.offered, "spooled": s.spooled,
                                    "written": s.written}).decode(), flush=True)
                await anyio.sleep(0.01)
        await anyio.sleep(3600)


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), int(sys.argv[2]))
