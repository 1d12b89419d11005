"""Benchmark: ``liminal serve`` under 50 concurrent WebSocket clients, against stdio.

    .venv/bin/python bench/ws_load.py [--clients 50] [--prompts 5] [--chunks 2000] [--pings 300] [--smoke]

1. Starts ``liminal serve -- python bench/support/fast_agent.py`` in a fresh ``LIMINAL_HOME`` (default
   settings: the index worker records everything, the swap manager watches), on loopback.
2. ``--clients`` clients connect at once (``websockets.asyncio.client``), each initializes, opens a
   session and sends ``--prompts`` prompts of ``chunks:N``: the agent streams N
   ``agent_message_chunk`` notifications (~200 bytes) per prompt. Frames lost = expected chunks -
   received chunks, over all clients. Throughput = chunks received / wall time.
3. Latency: one client, ``--pings`` prompts of ``chunks:0`` one after another (a request and its
   answer through the whole stack), through ``serve`` and through ``liminal acp`` on stdio, and
   straight to the agent; added latency = each minus the agent's own, at the same percentile.
Prints a Markdown table for ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parent.parent
AGENT = [sys.executable, str(ROOT / "bench" / "support" / "fast_agent.py")]


def env_for(home: Path) -> dict[str, str]:
    return {**os.environ, "LIMINAL_HOME": str(home), "PYTHONPATH": str(ROOT)}


async def rpc(ws: ClientConnection, rpc_id: int, method: str, params: dict[str, object]) -> tuple[dict[str, object], int]:
    """Send a request; the answer and how many chunk notifications came before it."""
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}))
    chunks = 0
    while True:
        raw = await ws.recv()
        if '"agent_message_chunk"' in raw:
            chunks += 1
            continue
        message = json.loads(raw)
        if message.get("id") == rpc_id and "method" not in message:
            return message, chunks


async def one_client(url: str, token: str, prompts: int, chunks: int) -> int:
    async with connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                       max_size=None, open_timeout=60) as ws:
        await rpc(ws, 1, "initialize", {"protocolVersion": 1})
        new, _ = await rpc(ws, 2, "session/new", {"cwd": "/tmp", "mcpServers": []})
        session = new["result"]["sessionId"]  # type: ignore[index]
        received = 0
        for n in range(prompts):
            _, got = await rpc(ws, 10 + n, "session/prompt", {
                "sessionId": session, "prompt": [{"type": "text", "text": f"chunks:{chunks}"}]})
            received += got
        return received


async def pings_ws(url: str, token: str, pings: int) -> list[float]:
    async with connect(url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None) as ws:
        await rpc(ws, 1, "initialize", {"protocolVersion": 1})
        new, _ = await rpc(ws, 2, "session/new", {"cwd": "/tmp", "mcpServers": []})
        session = new["result"]["sessionId"]  # type: ignore[index]
        times = []
        for n in range(pings):
            t = time.perf_counter()
            await rpc(ws, 10 + n, "session/prompt", {"sessionId": session, "prompt": [
                {"type": "text", "text": "chunks:0"}]})
            times.append(time.perf_counter() - t)
        return times


def pings_stdio(argv: list[str], env: dict[str, str], pings: int) -> list[float]:
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None

    def call(rpc_id: int, method: str, params: dict[str, object]) -> dict[str, object]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method,
                                     "params": params}).encode() + b"\n")
        proc.stdin.flush()
        while True:
            message = json.loads(proc.stdout.readline())
            if message.get("id") == rpc_id and "method" not in message:
                return dict(message)

    call(1, "initialize", {"protocolVersion": 1})
    session = call(2, "session/new", {"cwd": "/tmp", "mcpServers": []})["result"]["sessionId"]  # type: ignore[index]
    times = []
    for n in range(pings):
        t = time.perf_counter()
        call(10 + n, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "chunks:0"}]})
        times.append(time.perf_counter() - t)
    proc.stdin.close()
    proc.wait(30)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--prompts", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--pings", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="a small, quick run: does the script still work (its figures mean nothing)")
    args = parser.parse_args()
    if args.smoke:
        args.clients, args.prompts, args.chunks, args.pings = 3, 1, 100, 10
    with tempfile.TemporaryDirectory(prefix="liminal-ws-bench-") as tmp:
        home = Path(tmp) / "home"
        (home).mkdir(mode=0o700)
        (home / "config.toml").write_text(f"[serve]\nmax_connections = {args.clients + 5}\n")
        serve = subprocess.Popen([sys.executable, "-m", "liminal", "serve", "--listen", "127.0.0.1:0",
                                  "--print-port", "--", *AGENT], env=env_for(home),
                                 stdout=subprocess.PIPE, stderr=open(Path(tmp) / "serve.log", "wb"))  # noqa: SIM115
        assert serve.stdout is not None
        port = int(serve.stdout.readline())
        url = f"ws://127.0.0.1:{port}/acp"
        token = (home / "serve-token").read_text().strip()

        async def load() -> tuple[list[int], float]:
            t = time.perf_counter()
            got = await asyncio.gather(*(one_client(url, token, args.prompts, args.chunks)
                                         for _ in range(args.clients)))
            return list(got), time.perf_counter() - t

        received, wall = asyncio.run(load())
        ws_times = asyncio.run(pings_ws(url, token, args.pings))
        serve.terminate()
        serve.wait(60)
        stdio_home = Path(tmp) / "stdio"
        stdio_home.mkdir(mode=0o700)
        stdio_times = pings_stdio([sys.executable, "-m", "liminal", "acp", "--", *AGENT],
                                  env_for(stdio_home), args.pings)
        direct_times = pings_stdio(AGENT, env_for(stdio_home), args.pings)

    expected = args.clients * args.prompts * args.chunks
    total = sum(received)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}")
    print(f"{args.clients} clients x {args.prompts} prompts x {args.chunks} chunks: "
          f"expected {expected:,}, received {total:,}, lost {expected - total:,}; "
          f"{wall:.1f} s, {total / wall:,.0f} chunks/s through one sidecar")
    print()
    print("| path | request p50 | p99 | added p50 | added p99 |")
    print("|---|---|---|---|---|")
    base50, base99 = statistics.median(direct_times), pct(direct_times, 0.99)
    for name, times in (("agent, stdio (baseline)", direct_times), ("liminal acp, stdio", stdio_times),
                        ("liminal serve, WebSocket", ws_times)):
        p50, p99 = statistics.median(times), pct(times, 0.99)
        print(f"| {name} | {p50 * 1000:.2f} ms | {p99 * 1000:.2f} ms | "
              f"{(p50 - base50) * 1000:+.2f} ms | {(p99 - base99) * 1000:+.2f} ms |")
    return 0 if total == expected else 1  # a frame lost is a failure, not a figure


if __name__ == "__main__":
    sys.exit(main())
