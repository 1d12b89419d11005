"""How long a search takes (issue 20): ``liminal.lookup.search.find``, what ``liminal search``,
``/search`` and ``search_history`` run, against the store's raw ``search`` it is built on.

A SQLite store of THREADS threads of TURNS turns, each turn a prompt, an answer, a tool call
with a long output and a usage point, and the CLI's records of them (Claude Code's lines, an
``api-request-blob`` copy of the prompt among them). Words come from a small vocabulary, so a
query matches nearly every message: the worst case for ranking.

    .venv/bin/python bench/search.py [--threads 50] [--turns 100] [--repeat 5] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from liminal.lookup.search import find
from liminal.store.records import Batch, FrameRecord, MessageRecord, SessionRecord, ThreadUpdate
from liminal.store.sqlite import SqliteStore

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]
QUERIES = ("alpha bravo", "kilo", "november oscar papa", "golf hotel")


def words(r: random.Random, n: int) -> str:
    return " ".join(r.choice(WORDS) for _ in range(n))


async def build(db: Path, threads: int, turns: int) -> None:
    store = await SqliteStore.open(db)
    r = random.Random(1)
    for t in range(threads):
        thread, conn = f"thread-{t:04d}", f"c{t}"
        frames, messages, records = [], [], []
        seq = offset = 0
        for n in range(turns):
            start = 1_790_000_000 + t * 10_000 + n * 10
            turn = f"{conn}:{seq:010d}"
            tool = f"toolu_{t}_{n}"
            said = {"user": words(r, 20), "agent": words(r, 120), "tool_call": "Read x\n" + words(r, 600)}
            for kind in ("user", "agent", "tool_call", "usage"):
                fid = f"{conn}:{seq:010d}"
                at = start + seq * 0.01
                frames.append(FrameRecord(fid, conn, seq, at, "c2a" if kind == "user" else "a2c",
                                          "request" if kind == "user" else "notification",
                                          thread, thread, "session/prompt", None, 10, b"{}"))
                messages.append(MessageRecord(fid, thread, turn, at, f"{at:017.6f}|{fid}", kind,
                                              said.get(kind, ""), tool if kind == "tool_call" else None))
                seq += 1
            for kind, text, tools in (("user", said["user"], ()), ("assistant", said["agent"], ()),
                                      ("assistant", "Read {}", (tool,)), ("user", said["tool_call"], (tool,)),
                                      ("api-request-blob", said["user"], ())):
                stamp = None if kind == "api-request-blob" else "2026-09-21T10:00:00Z"
                records.append(SessionRecord(SessionRecord.make_id(thread, offset), thread, thread, offset,
                                             None, kind, stamp, None, tools, text, b"{}"))
                offset += 100
        await store.write(Batch(frames=frames, messages=messages, session_records=records,
                                threads=[ThreadUpdate(thread, 1_790_000_000.0, title=f"thread {t}")]))
    await store.aclose()


async def measure(db: Path, repeat: int) -> dict[str, list[float]]:
    store = await SqliteStore.open(db, create=False)
    times: dict[str, list[float]] = {"store.search": [], "find": []}
    try:
        for _ in range(repeat):
            for query in QUERIES:
                t0 = time.perf_counter()
                await store.search(query, limit=20)
                times["store.search"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await find(store, query, limit=20)
                times["find"].append(time.perf_counter() - t0)
    finally:
        await store.aclose()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true",
                        help="a small, quick run: does the script still work (its figures mean nothing)")
    args = parser.parse_args()
    if args.smoke:
        args.threads, args.turns, args.repeat = 3, 5, 1
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "liminal.db"
        asyncio.run(build(db, args.threads, args.turns))
        size = db.stat().st_size
        times = asyncio.run(measure(db, args.repeat))
    print(f"store: {args.threads} threads x {args.turns} turns, {size / 1e6:.0f} MB")
    for name, found in times.items():
        print(f"{name:13} median {statistics.median(found) * 1000:6.0f} ms   max {max(found) * 1000:6.0f} ms")
    if args.smoke and not all(times.values()):
        raise SystemExit("no search was timed")


if __name__ == "__main__":
    main()
