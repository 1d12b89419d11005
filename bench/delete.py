"""What deleting a thread costs in the SQLite store, with and without what makes it whole.

A delete removes the thread's rows in one transaction; then it takes its words out of the file
too (``liminal.store.sqlite._scrub``): it merges the full-text indexes (which keep a deleted
row's terms in their segments until merged) and checkpoints the WAL (which keeps pages as they
were). Both read and write the whole index, so their cost grows with the store, not with the
thread. This builds a store of ``--threads`` threads of ``--messages`` messages of 200 words
(random words of a 20,000-word vocabulary), deletes two threads with the scrub and two with it
switched off, and prints each delete's time.

    .venv/bin/python bench/delete.py [--threads 40] [--messages 1000] [--smoke]

Figures and their machine go to ``docs/operations.md`` ("Deleting a thread").
"""

from __future__ import annotations

import argparse
import platform
import random
import string
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import liminal.store.sqlite as sqlite_store
from liminal.store.records import Batch, MessageRecord, ThreadUpdate


def messages(thread: str, count: int, vocabulary: list[str], rnd: random.Random) -> list[MessageRecord]:
    return [MessageRecord(id=f"{thread}-{n}", thread_id=thread, turn_id="p1", time=100.0 + n,
                          order=f"{100.0 + n:017.6f}|{n}", kind="agent",
                          text=" ".join(rnd.choices(vocabulary, k=200)))
            for n in range(count)]


async def run(folder: Path, threads: int, count: int) -> None:
    rnd = random.Random(1)
    vocabulary = ["".join(rnd.choices(string.ascii_lowercase, k=rnd.randint(3, 9))) for _ in range(20_000)]
    store = await sqlite_store.SqliteStore.open(folder / "liminal.db")
    try:
        for t in range(threads):
            await store.write(Batch(messages=messages(f"t{t}", count, vocabulary, rnd),
                                    threads=[ThreadUpdate(f"t{t}", 100.0, title=f"thread {t}")]))
        size = (folder / "liminal.db").stat().st_size
        print(f"store: {threads} threads of {count} messages, {size / 1e6:,.1f} MB, "
              f"search {store.search_mode}")
        scrub = sqlite_store._scrub
        for n, (label, on) in enumerate([("with the scrub", True), ("with the scrub", True),
                                         ("rows only", False), ("rows only", False)]):
            sqlite_store._scrub = scrub if on else (lambda c, fts: None)
            started = time.perf_counter()
            await store.delete_thread(f"t{n}")
            print(f"  delete {label:<15} {time.perf_counter() - started:7.3f} s")
        sqlite_store._scrub = scrub
    finally:
        await store.aclose()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=40)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true", help="a store of 5 threads of 20 messages")
    args = parser.parse_args()
    threads, count = (5, 20) if args.smoke else (max(4, args.threads), args.messages)
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    with tempfile.TemporaryDirectory() as folder:
        anyio.run(run, Path(folder), threads, count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
