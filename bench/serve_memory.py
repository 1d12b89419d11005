"""Benchmark: the resident memory of ``liminal serve`` and its children with idle clients.

    .venv/bin/python bench/serve_memory.py [--clients 50] [--settle 5] [--smoke]

Starts ``liminal serve -- python tests/support/scripted_agent.py`` in a fresh ``LIMINAL_HOME``
(default settings: indexing on, in its worker process), connects ``--clients`` clients, each
initializes, opens a session and runs one short turn (``chunks:10``, so every part has worked
once), then leaves them idle for ``--settle`` seconds and reads VmRSS from ``/proc`` of the
server and every process under it, by kind: the server, the agents, the index workers, the rest
(the reaper). Prints a Markdown table for ``docs/benchmarks.md`` (issue 23: one index worker per
server instead of one per connection).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parent.parent
# The tests' scripted agent: a session id of its own for each connection (``fast_agent.py``
# gives every connection the same one, so the server's thread locks made the clients queue).
AGENT = [sys.executable, str(ROOT / "tests" / "support" / "scripted_agent.py")]


def proc_status(pid: int) -> dict[str, str]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def tree(root: int) -> list[int]:
    """``root`` and every process under it."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            status = proc_status(int(entry.name))
            if status.get("State", "Z").startswith("Z") or "PPid" not in status:
                continue
            parents.setdefault(int(status["PPid"].strip()), []).append(int(entry.name))
    found, todo = [root], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kind_of(pid: int, server: int) -> str:
    if pid == server:
        return "server"
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return "gone"
    if "liminal.ingest" in cmdline:
        return "index worker"
    if "scripted_agent" in cmdline:
        return "agent"
    return "other"


def rss_kib(pid: int) -> int:
    value = proc_status(pid).get("VmRSS", "0 kB").split()[0]
    return int(value)


async def rpc(ws: ClientConnection, rpc_id: int, method: str, params: dict[str, object]) -> dict[str, object]:
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}))
    while True:
        message = json.loads(await ws.recv())
        if message.get("id") == rpc_id and "method" not in message:
            return dict(message)


async def measure(url: str, token: str, clients: int, settle: float, server: int) -> dict[str, list[int]]:
    held: list[ClientConnection] = []
    try:
        for _ in range(clients):
            ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                               max_size=None, open_timeout=60)
            held.append(ws)
            await rpc(ws, 1, "initialize", {"protocolVersion": 1})
            new = await rpc(ws, 2, "session/new", {"cwd": "/tmp", "mcpServers": []})
            session = new["result"]["sessionId"]  # type: ignore[index]
            await rpc(ws, 3, "session/prompt", {"sessionId": session,
                                                "prompt": [{"type": "text", "text": "chunks:10"}]})
        await asyncio.sleep(settle)  # idle: the indexing of those turns is over
        by_kind: dict[str, list[int]] = {}
        for pid in tree(server):
            by_kind.setdefault(kind_of(pid, server), []).append(rss_kib(pid))
        return by_kind
    finally:
        for ws in held:
            await ws.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--smoke", action="store_true",
                        help="a small, quick run: does the script still work (its figures mean nothing)")
    args = parser.parse_args()
    if args.smoke:
        args.clients, args.settle = 3, 0.5
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "LIMINAL_HOME": str(home), "PYTHONPATH": str(ROOT)}
        home.mkdir()
        (home / "config.toml").write_text(f"[serve]\nmax_connections = {args.clients + 1}\n")
        proc = subprocess.Popen(
            [sys.executable, "-m", "liminal", "serve", "--listen", "127.0.0.1:0", "--print-port",
             "--", *AGENT], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            token = (home / "serve-token").read_text().strip()
            started = time.monotonic()
            by_kind = asyncio.run(measure(f"ws://127.0.0.1:{port}/acp", token, args.clients,
                                          args.settle, proc.pid))
            took = time.monotonic() - started
        finally:
            proc.terminate()
            proc.wait(60)
    print(f"{args.clients} idle clients, {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {took:.1f} s\n")
    print("| processes | count | RSS total | RSS each (median) |")
    print("|---|---|---|---|")
    total = 0
    for kind in ("server", "agent", "index worker", "other"):
        values = sorted(by_kind.get(kind, []))
        total += sum(values)
        each = values[len(values) // 2] if values else 0
        print(f"| {kind} | {len(values)} | {sum(values) / 1024:.1f} MiB | {each / 1024:.1f} MiB |")
    print(f"| **all** | {sum(len(v) for v in by_kind.values())} | **{total / 1024:.1f} MiB** | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
