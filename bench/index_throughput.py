"""How fast the indexer takes frames into SQLite, and what indexing costs the proxy.

    python bench/index_throughput.py [--frames N] [--proxy-frames N] [--runs R] [--smoke]

1. ``indexer``: N frames (a long streamed answer: a prompt, chunk notifications, the response)
   offered to an ``Indexer`` on a fresh SQLite store as fast as the loop allows; frames/s from
   the first offer until the last frame is committed (messages derived and written too).
2. ``proxy``: ``liminal acp -- bench/support/fast_agent.py`` streams N chunk notifications through the
   proxy to a client reading as fast as it can, with indexing on (``LIMINAL_STORE_INDEX=1``) and
   off; frames/s as the client sees them, best of R runs each, from the prompt (sent a second
   after ``session/new``, once the index worker is up) to its answer. With indexing on, also the rate
   the store took the frames at while proxying: frames in the store over the time from the prompt
   until liminal has exited (it waits for its worker to drain the spool).

Targets (docs/benchmarks.md, "index"): >= 20,000 frames/s indexed; proxy with indexing >= 90% of
the proxy without.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import anyio.lowlevel
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from liminal.acp.port import Component, Frames  # noqa: E402
from liminal.ingest.indexer import Indexer, Tuning  # noqa: E402
from liminal.store.sqlite import SqliteStore  # noqa: E402
from tests.store.streams import stream  # noqa: E402


async def indexer_rate(n: int, home: Path) -> tuple[float, float]:
    store = await SqliteStore.open(home / "liminal.db")
    events = list(stream(n, pad=100))
    size = sum(len(e.raw) for e in events)
    indexer = Indexer(store, home / "spool", tuning=Tuning(queue_frames=n + 1))
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        start = time.perf_counter()
        for i, event in enumerate(events):
            indexer.offer(event)
            if i % 1000 == 999:
                await anyio.lowlevel.checkpoint()  # the router yields between reads, too
        await indexer.aclose()
        elapsed = time.perf_counter() - start
    assert await store.frame_count() == n, "frames missing"
    await store.aclose()
    return n / elapsed, size / elapsed / 1e6


async def worker_rate(n: int, home: Path) -> tuple[float, float]:
    """What the index worker sustains: a spool of n frames (as ``liminal acp`` writes it, in
    blocks of 500) consumed into a fresh SQLite store, messages derived and written."""
    from liminal import config
    from liminal.ingest.worker import SpoolWriter

    events = list(stream(n, pad=100))
    size = sum(len(e.raw) for e in events)
    writer = SpoolWriter(config.load({"home": home}), spool_name="bench")
    spool = writer.spool
    spool.acquire()
    for start in range(0, n, 500):
        for event in events[start:start + 500]:
            writer.offer(event)
        writer.flush()
    spool.seal()
    spool.release(remove_if_empty=False)
    store = await SqliteStore.open(home / "liminal.db")
    worker = Indexer(store, home / "spool", tail=spool.path, recover=False)
    async with anyio.create_task_group() as tg:
        start_time = time.perf_counter()
        tg.start_soon(worker.run)
        await worker.aclose()
        elapsed = time.perf_counter() - start_time
    assert await store.frame_count() == n, "frames missing"
    await store.aclose()
    return n / elapsed, size / elapsed / 1e6


async def stored_rate(home: Path, seconds: float, expected: int) -> float:
    """Frames/s into the store during a proxy run; checks that every frame got there."""
    store = await SqliteStore.open(home / "liminal.db")
    count = await store.frame_count()
    await store.aclose()
    assert count >= expected, f"{expected - count} frames missing from the store"
    return count / seconds


class NoOpTap(Component):
    """A subscriber that takes nothing: what the router's tapping costs by itself."""

    frames = Frames.ALL

    def offer(self, event: object) -> None:
        return None


def serve_noop(agent: list[str]) -> int:
    """``liminal acp`` with one no-op component (the public ``Proxy`` API, as acp.py builds it)."""
    from liminal import config, log
    from liminal.proxy import Proxy, tune_gc

    settings = config.load()
    log.configure(settings.log_level)
    tune_gc()
    proxy = Proxy(agent, settings.proxy, components=[NoOpTap()])
    return anyio.run(proxy.run, backend="asyncio")


def proxy_rate(n: int, home: Path, index: bool | None) -> tuple[float, float]:
    """Frames/s through ``liminal acp``: index True (the worker), False (the swap manager only),
    None (taps on, one no-op subscriber); and the seconds from the prompt until liminal has
    exited (with indexing on: until every frame is in the store)."""
    env = dict(os.environ, LIMINAL_HOME=str(home), LIMINAL_STORE_INDEX="1" if index else "0",
               LIMINAL_LOG_LEVEL="warning", PYTHONPATH=str(ROOT))
    env.pop("LIMINAL_STORE_URL", None)
    agent = [sys.executable, str(ROOT / "bench" / "support" / "fast_agent.py")]
    argv = ([sys.executable, "-m", "liminal", "acp", "--", *agent] if index is not None else
            [sys.executable, str(Path(__file__).resolve()), "--serve-noop", "--", *agent])
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    fd = proc.stdout.fileno()

    def send(message: dict[str, object]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(orjson.dumps(message) + b"\n")
        proc.stdin.flush()

    def read_until(marker: bytes) -> int:
        lines, tail = 0, b""
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise RuntimeError("liminal exited")
            lines += chunk.count(b"\n")
            tail = (tail + chunk)[-256:]
            if marker in tail:
                return lines

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    read_until(b'"id":0')
    send({"jsonrpc": "2.0", "id": 1, "method": "session/new",
          "params": {"cwd": str(home), "mcpServers": []}})
    read_until(b'"id":1')
    # A conversation in progress, not a cold start: the index worker (started with the proxy)
    # has finished importing and opening the store, which is not a cost per frame.
    time.sleep(1.0)
    start = time.perf_counter()
    send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
        "sessionId": "bench-session", "prompt": [{"type": "text", "text": f"chunks:{n}"}]}})
    lines = read_until(b'"stopReason":"end_turn"')
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    proc.wait(120)  # with indexing on, liminal exits once its worker has drained the spool
    return lines / elapsed, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--proxy-frames", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--serve-noop", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("agent", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="a small, quick run: does the script still work (its figures mean nothing)")
    args = parser.parse_args()
    if args.smoke:
        args.frames, args.proxy_frames, args.runs = 2_000, 2_000, 1
    if args.serve_noop:
        sys.exit(serve_noop(args.agent))
    load = os.getloadavg()[0]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} · {platform.node()} · {os.cpu_count()} CPUs · "
          f"load {load:.2f} · Python {platform.python_version()} · {platform.platform()}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in (("worker", worker_rate), ("inline", indexer_rate)):
            rates = [anyio.run(fn, args.frames, Path(tmp) / f"{name}-{run}")
                     for run in range(args.runs)]
            best = max(rates)
            median = sorted(r[0] for r in rates)[len(rates) // 2]
            print(f"{name} indexer: {best[0]:,.0f} frames/s best ({best[1]:.1f} MB/s), "
                  f"{median:,.0f} median, into SQLite, {args.frames:,} frames, {args.runs} runs")
        results: dict[bool | None, list[float]] = {False: [], None: [], True: []}
        indexed: list[float] = []
        for run in range(args.runs):  # interleaved, so load changes hit all alike
            for index in results:
                home = Path(tmp) / f"proxy-{index}-{run}"
                rate, until_exit = proxy_rate(args.proxy_frames, home, index)
                results[index].append(rate)
                if index:
                    indexed.append(anyio.run(stored_rate, home, until_exit, args.proxy_frames))
        best = {k: max(v) for k, v in results.items()}
        median = {k: sorted(v)[len(v) // 2] for k, v in results.items()}
        print(f"proxy ({args.proxy_frames:,} chunk frames, {args.runs} runs each), frames/s "
              "best / median:")
        for key, name in ((False, "indexing off (the swap manager only)"),
                          (None, "taps on, one no-op subscriber"),
                          (True, "indexing on (spool writer + worker)")):
            print(f"  {name}: {best[key]:,.0f} / {median[key]:,.0f}"
                  f"  = {best[key] / best[False]:.0%} / {median[key] / median[False]:.0%} of off")
        print(f"  indexing on vs the no-op subscriber: {best[True] / best[None]:.0%} best, "
              f"{median[True] / median[None]:.0%} median")
        print(f"indexed while proxying (frames in the store / seconds from the prompt until the "
              f"worker drained the spool): {max(indexed):,.0f} best, "
              f"{sorted(indexed)[len(indexed) // 2]:,.0f} median")


if __name__ == "__main__":
    main()
