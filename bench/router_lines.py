"""The router alone, line by line: CPU time per line the agent sends, no process, no pipe.

``bench/proxy_throughput.py`` measures the whole chain, and on a machine shared with other test
runs its figures move by a third from one run to the next. This one feeds ``Router`` directly
(64 lines per ``receive_from_agent``, ``take()`` after each, as the proxy's flush does) and
takes the process's CPU time, the fewest of ``--repeat`` runs, so that two trees can be
compared to a few percent on a busy machine: run it with each tree first on ``PYTHONPATH``.

Cases: a streamed ``agent_message_chunk`` of about 300 bytes in the canonical form the adapters
write (read from its bytes), for a thread that never moved ("same id") and for one that did
(its session id rewritten); with an update hook installed, as the command center has; without
taps; and the same update with its members in another order, which is parsed. 64 canonical
lines of one session and kind are one run (``liminal.acp.runs``: routed whole), so the canonical
cases measure the run path and the parsed ones the line path.

    .venv/bin/python bench/router_lines.py [--lines 19200] [--repeat 25] [--smoke]

Figures and their machine go to ``docs/benchmarks.md`` ("router, line by line").
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from liminal.acp.router import Router

THREAD = "11111111-1111-4111-8111-111111111111"
BACKING = "22222222-2222-4222-8222-222222222222"
BATCH = 64


def canonical(session: str, n: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": session, "update": {"sessionUpdate": "agent_message_chunk",
                                         "content": {"type": "text", "text": "x" * 220 + str(n)}}}})


def reordered(session: str, n: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x" * 220 + str(n)}},
        "sessionId": session}})


def per_line(make: Callable[[str, int], bytes], *, moved: bool, hooks: bool = False, tapping: bool = True,
             ids: bool = False, lines: int, repeat: int) -> float:
    """Nanoseconds of CPU per line, the fewest of ``repeat`` runs."""
    batch = b"".join(make(BACKING if moved else THREAD, n) + b"\n" for n in range(BATCH))
    best = float("inf")
    for _ in range(repeat):
        router = Router(max_frame_bytes=1 << 24, tapping=tapping, message_ids=ids, connection_id="c" * 32)
        if hooks:
            router.add_update_hook(("available_commands_update",), lambda thread, update: None)
        if moved:
            router.bind(THREAD, BACKING)
        start = time.process_time()
        for _ in range(lines // BATCH):
            router.receive_from_agent(batch, 0.0)
            router.take()
        best = min(best, time.process_time() - start)
    return best / (lines // BATCH * BATCH) * 1e9


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300 * BATCH, help="lines per run")
    parser.add_argument("--repeat", type=int, default=25, help="runs per case; the fewest CPU counts")
    parser.add_argument("--smoke", action="store_true", help="a small run that checks the script works")
    args = parser.parse_args(argv)
    lines, repeat = (BATCH * 4, 2) if args.smoke else (args.lines, args.repeat)
    cases = [
        ("canonical chunk, same id, taps on", canonical, {"moved": False}),
        ("canonical chunk, moved thread, taps on", canonical, {"moved": True}),
        ("canonical chunk, moved thread, an update hook", canonical, {"moved": True, "hooks": True}),
        ("canonical chunk, same id, taps off", canonical, {"moved": False, "tapping": False}),
        ("parsed chunk, moved thread, taps on", reordered, {"moved": True}),
        ("parsed chunk, moved thread, an update hook", reordered, {"moved": True, "hooks": True}),
        # Rule 10, as the proxy runs the router: every chunk gets its message's id.
        ("canonical chunk, same id, taps on, message ids", canonical, {"moved": False, "ids": True}),
        ("canonical chunk, moved thread, taps on, message ids", canonical, {"moved": True, "ids": True}),
        ("parsed chunk, moved thread, taps on, message ids", reordered, {"moved": True, "ids": True}),
    ]
    print(f"machine: {platform.machine()}, Python {platform.python_version()}, {platform.system()} "
          f"{platform.release()}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {lines} lines x {repeat} runs")
    print("| case | ns of CPU per line |\n|---|---:|")
    for name, make, options in cases:
        print(f"| {name} | {per_line(make, lines=lines, repeat=repeat, **options):,.0f} |")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
