"""What liminal's own components cost the forwarding path, in CPU time, without processes.

``bench/proxy_throughput.py`` measures the whole chain (processes, pipes, the event loop) by
the clock, which a machine shared with other work makes noisy: on two cores at a load average of
10 its figures moved by half from one run to the next. This one feeds the router streamed
chunks (a tool call and a usage update among each hundred, as an agent at work sends them)
and offers the events to the components ``liminal acp`` runs by default
(``liminal.wiring.components``: the thread model, the swap manager, the command center,
the model tools, the replay manager, the recycle), as the proxy does in each flush, and takes
the process's CPU time, best of ``--rounds``. No bytes are written anywhere.

    .venv/bin/python bench/forward_cpu.py [--frames 200000] [--rounds 5] [--smoke]

Figures and their machine go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from liminal import config  # noqa: E402
from liminal.proxy import Proxy  # noqa: E402
from liminal.wiring import components  # noqa: E402

THREAD = "9b1f3a55-2c41-4c6e-9a57-0d6f2f4f0e11"


def update(body: dict[str, object]) -> bytes:
    return (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + THREAD.encode()
            + b'","update":' + json.dumps(body, separators=(",", ":")).encode() + b"}}\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--frames", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="a small run, to check the script runs")
    args = ap.parse_args()
    frames, rounds = (20_000, 1) if args.smoke else (args.frames, args.rounds)
    home = tempfile.mkdtemp(prefix="liminal-forward-cpu-")
    settings = config.load({}, env={"LIMINAL_HOME": home})
    proxy = Proxy(["true"], settings.proxy, components=components(settings))
    router, supervisor = proxy.router, proxy.supervisor

    def client(line: bytes) -> None:
        router.receive_from_client(line + b"\n", 1.0)
        supervisor.offer(router.take().taps)

    def agent(data: bytes) -> None:
        router.receive_from_agent(data, 1.0)
        supervisor.offer(router.take().taps)

    client(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}')
    agent(b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}\n')
    client(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}')
    agent(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"' + THREAD.encode() + b'"}}\n')
    client(b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"' + THREAD.encode()
           + b'","prompt":[{"type":"text","text":"hi"}]}}')
    chunk = update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x" * 200}})
    lines = [update({"sessionUpdate": "tool_call", "toolCallId": str(i), "title": "ls"}) if i % 100 == 0
             else update({"sessionUpdate": "usage_update", "used": 1000 + i, "size": 200_000}) if i % 100 == 1
             else chunk for i in range(frames)]
    batches = [b"".join(lines[i:i + 64]) for i in range(0, len(lines), 64)]  # 64 frames a read
    gc.collect()
    gc.freeze()
    best = float("inf")
    for _ in range(rounds):
        t = time.process_time()
        for batch in batches:
            agent(batch)
        best = min(best, time.process_time() - t)
    offered = ", ".join(member.name for member in supervisor.members if member.offer is not None)
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{frames} frames, best of {rounds}: {best:.3f} s of CPU, {best / frames * 1e6:.3f} us a frame "
          f"(components offered frames: {offered})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
