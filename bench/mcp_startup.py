#!/usr/bin/env python3
"""How soon ``liminal mcp`` answers after it is started, and its first tool call.

    python bench/mcp_startup.py [--runs 30] [--smoke]

Every resume of a session restarts its MCP servers, and the CLI's next prompt waits for the
slowest to be ready (issue 13 asks for 0.2 s). Measured as the CLI sees it: from spawning the
process (``python -m liminal.mcp``, the command liminal puts in ``mcpServers``) to the answer of
``initialize``, then ``tools/list``; then the first ``tools/call`` (``memo_find``), which opens
the store: a cost paid once per server, when the model first uses a tool.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memo_find", "arguments": {}}}


def once(home: Path) -> tuple[float, float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "liminal.mcp", "--home", str(home), "--thread", "bench"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "LIMINAL_HOME": str(home)})
    assert proc.stdin and proc.stdout

    def ask(message: dict[str, object]) -> float:
        assert proc.stdin and proc.stdout
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert "result" in answer, answer
        return time.perf_counter()

    ready = ask(INIT) - start
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    listed = ask(LIST) - start
    before = time.perf_counter()
    called = ask(CALL) - before
    proc.stdin.close()
    proc.wait(10)
    return ready, listed, called


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--smoke", action="store_true", help="a small, quick run: does the script still work (its figures mean nothing)")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 2
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder) / "home"
        # A store to open, as on any machine that has run liminal.
        subprocess.run([sys.executable, "-m", "liminal", "--home", str(home), "threads"],
                       check=False, capture_output=True)
        import anyio

        from liminal.config import load
        from liminal.store.configured import open_store  # noqa: F401  (warm the file cache alike)
        from liminal.store.configured import open_store as opener

        async def create() -> None:
            async with opener(load({"home": home})):
                pass

        anyio.run(create)
        once(home)  # warm the OS's file cache: a CLI resuming has started python before
        runs = [once(home) for _ in range(args.runs)]
    for name, column in (("initialize answered", 0), ("tools/list answered", 1), ("first tools/call", 2)):
        values = sorted(r[column] * 1000 for r in runs)
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        print(f"{name:22s} median {statistics.median(values):6.1f} ms   p95 {p95:6.1f} ms   max {values[-1]:6.1f} ms")
    print(f"({args.runs} runs; python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
