"""Forwarding never waits for the store: an agent's stream through ``liminal acp``, its latency
with the store working and with the store stalled.

An agent (this script, ``agent`` mode) streams ``agent_message_chunk`` notifications at a steady
rate (1,000 a second, a fast model's pace and more), each carrying the ``time.monotonic_ns()`` of
its write (one clock for every process on Linux); the client (this script) takes the time of
the read that completed each frame. The same stream goes through ``python -m liminal acp`` as an
editor launches it (a fresh ``LIMINAL_HOME``, the SQLite store, the index worker), in four cases:

  ``no-store``      ``store.index = false``: no spool, no worker; the proxy alone;
  ``store``         the store working, as in use;
  ``worker-stopped``  the index worker stopped (SIGSTOP) for the whole stream: nothing is indexed,
                    the spool grows; continued after;
  ``store-locked``  another process holds the SQLite database's write lock for the whole stream
                    (``BEGIN IMMEDIATE``): the worker's writes wait and retry.

For each: the latency percentiles of the measured stream, how many frames the store took during
it, and how much the spool grew. If forwarding waited for the store, the stalled cases' latency
would grow with the stream (a frame a millisecond, queued behind writes that cannot happen);
it does not. The figures, with their machine and date, are in ``docs/benchmarks.md``. The
test that bounds it without timing: ``tests/integration/test_index_faults.py``
(``test_a_stopped_index_worker_does_not_stop_forwarding``).

    .venv/bin/python bench/forward_latency.py [--frames 20000] [--rate 1000] [--cases ...] [--smoke]

``--smoke`` is a small run (a few hundred frames a case) that checks the benchmark works; its
figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from bench.proxy_throughput import percentile  # noqa: E402
from tests.support.processes import descendants  # noqa: E402

SESSION = "5b3f7c2e-1d4a-4e8b-9c6f-0a2b4c6d8e10"
STAMP = re.compile(rb" at (\d{19}) ")
CASES = ("no-store", "store", "worker-stopped", "store-locked")
SKIPPED = 77  # what a smoke run exits with when it cannot run here


# ------------------------------------------------------------------------------------ the agent


def agent() -> None:
    """A minimal ACP agent: ``session/prompt`` with ``frames:N rate:R`` streams N chunks at R a
    second, each stamped with the monotonic clock at its write, then ends the turn."""
    out = sys.stdout.buffer

    def send(message: dict[str, object]) -> None:
        out.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        out.flush()

    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, rpc_id = message.get("method"), message.get("id")
        if rpc_id is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rpc_id, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": rpc_id, "result": {"sessionId": SESSION}})
        elif method == "session/prompt":
            text = " ".join(b.get("text", "") for b in message["params"]["prompt"])
            words = dict(w.split(":", 1) for w in text.split() if ":" in w)
            n, interval = int(words.get("frames", "0")), 1.0 / float(words.get("rate", "1000"))
            due = time.monotonic()
            for i in range(n):
                pause = due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                due += interval
                stamp = f"{time.monotonic_ns():019d}"
                out.write(b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + SESSION.encode()
                          + b'","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk '
                          + str(i).encode() + b" at " + stamp.encode()
                          + b' of an answer streamed at a steady pace"}}}}\n')
                out.flush()
            send({"jsonrpc": "2.0", "id": rpc_id, "result": {"stopReason": "end_turn"}})
        else:
            send({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32601, "message": f"no {method}"}})


# ----------------------------------------------------------------------------------- the client


@dataclass
class Client:
    """``liminal acp`` in front of the agent above; the frames it forwards, timed as read."""

    proc: subprocess.Popen[bytes]
    latencies: list[int] = field(default_factory=list)  # ns, of stamped frames since ``measure``
    answered: dict[int, threading.Event] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    measuring: bool = False

    def start(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buffer = b""
        while chunk := os.read(fd, 1 << 16):
            now = time.monotonic_ns()
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                found = STAMP.search(line)
                if found is not None:
                    if self.measuring:
                        self.latencies.append(now - int(found.group(1)))
                elif line.startswith(b'{"jsonrpc":"2.0","id":'):
                    rpc_id = json.loads(line).get("id")
                    with self.lock:
                        event = self.answered.setdefault(rpc_id, threading.Event())
                    event.set()

    def request(self, rpc_id: int, method: str, params: dict[str, object], timeout: float = 120) -> None:
        with self.lock:
            event = self.answered.setdefault(rpc_id, threading.Event())
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method,
                                          "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        if not event.wait(timeout):
            raise SystemExit(f"no answer to {method} in {timeout:.0f} s")

    def stream(self, rpc_id: int, frames: int, rate: int) -> None:
        self.request(rpc_id, "session/prompt", {"sessionId": SESSION, "prompt": [
            {"type": "text", "text": f"frames:{frames} rate:{rate}"}]}, timeout=60 + 4 * frames / rate)


def worker_of(pid: int, timeout: float = 30) -> int:
    """The index worker liminal started (``python -m liminal.ingest.worker``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in descendants(pid):
            if "liminal.ingest.worker" in process.cmdline:
                return process.pid
        time.sleep(0.05)
    raise SystemExit("liminal started no index worker")


def spooled(home: Path) -> int:
    total = 0
    for path in home.glob("spool/*/*.spool"):
        try:
            total += path.stat().st_size
        except FileNotFoundError:  # the worker removed a segment it had stored
            continue
    return total


def stored(home: Path) -> int:
    """Frames in the store (0 before the worker has made it)."""
    try:
        db = sqlite3.connect(f"file:{home / 'liminal.db'}?mode=ro", uri=True, timeout=30)
    except sqlite3.OperationalError:
        return 0
    try:
        return int(db.execute("SELECT count(*) FROM frames").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


@contextmanager
def stall(case: str, home: Path, liminal_pid: int) -> Iterator[None]:
    """The store stalled for the block, as the case says."""
    if case == "worker-stopped":
        worker = worker_of(liminal_pid)
        os.kill(worker, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(worker, signal.SIGCONT)
    elif case == "store-locked":
        lock = sqlite3.connect(home / "liminal.db", isolation_level=None, timeout=30)
        lock.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            lock.execute("ROLLBACK")
            lock.close()
    else:
        yield


@dataclass
class Result:
    case: str
    frames: int
    p50: float
    p90: float
    p99: float
    worst: float
    stored_during: int
    spool_growth: int
    seconds: float


def pct(values: list[int], q: float) -> float:
    """The ``q`` quantile (0 to 1) of nanosecond latencies, in milliseconds."""
    return percentile(sorted(values), q * 100) / 1e6


def run_case(case: str, frames: int, rate: int, workdir: Path) -> Result:
    home = workdir / f"home-{case}"
    env = dict(os.environ, LIMINAL_HOME=str(home), LIMINAL_LOG_LEVEL="warning",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name in ("LIMINAL_STORE_URL", "LIMINAL_CACHE_URL", "LIMINAL_CONFIG"):
        env.pop(name, None)
    env["LIMINAL_STORE_INDEX"] = "false" if case == "no-store" else "true"
    env["LIMINAL_SWAP_ENABLED"] = "false"  # the stream, not the swap manager's reading of it
    log = (workdir / f"stderr-{case}.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "liminal", "acp", "--", sys.executable, str(HERE), "agent"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, cwd=workdir)
    client = Client(proc)
    client.start()
    try:
        client.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        client.request(2, "session/new", {"cwd": str(workdir), "mcpServers": []})
        client.stream(3, min(frames, 500), rate)  # warm up; the store made and the worker running
        if case != "no-store":
            deadline = time.monotonic() + 60
            while stored(home) < min(frames, 500) and time.monotonic() < deadline:
                time.sleep(0.05)
        with stall(case, home, proc.pid):
            before, spool_before = stored(home), spooled(home)
            client.measuring = True
            started = time.monotonic()
            client.stream(4, frames, rate)
            took = time.monotonic() - started
            client.measuring = False
            during, spool_after = stored(home) - before, spooled(home)
        assert proc.stdin is not None
        proc.stdin.close()
        code = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    if code != 0:
        raise SystemExit(f"{case}: liminal exited with {code}: {(workdir / f'stderr-{case}.log').read_text()[-2000:]}")
    if len(client.latencies) != frames:
        raise SystemExit(f"{case}: {len(client.latencies)} of {frames} frames arrived")
    lat = client.latencies
    return Result(case, frames, pct(lat, 0.50), pct(lat, 0.90), pct(lat, 0.99), max(lat) / 1e6,
                  during, spool_after - spool_before, took)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=["agent"], help=argparse.SUPPRESS)
    parser.add_argument("--frames", type=int, default=20_000, help="frames in each measured stream")
    parser.add_argument("--rate", type=int, default=1000, help="frames a second")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, of: " + ", ".join(CASES))
    parser.add_argument("--repeat", type=int, default=1, help="rounds, the cases interleaved in each")
    parser.add_argument("--smoke", action="store_true", help="a small run that checks the benchmark works")
    args = parser.parse_args()
    if args.mode == "agent":
        agent()
        return 0
    if not sys.platform.startswith("linux"):
        print("forward_latency: needs Linux (/proc, SIGSTOP of the worker)", file=sys.stderr)
        return SKIPPED if args.smoke else 1
    frames = 300 if args.smoke else args.frames
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: {', '.join(CASES)}")
    print(f"# {platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}; {frames} frames at {args.rate}/s a case")
    print(f"{'case':<15} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8} "
          f"{'stored during':>14} {'spool growth':>13} {'stream s':>9}")
    results: dict[str, list[Result]] = {case: [] for case in cases}
    for _round in range(1 if args.smoke else args.repeat):
        with tempfile.TemporaryDirectory(prefix="liminal-forward-") as tmp:
            for case in cases:
                r = run_case(case, frames, args.rate, Path(tmp))
                results[case].append(r)
                print(f"{r.case:<15} {r.p50:8.3f} {r.p90:8.3f} {r.p99:8.3f} {r.worst:8.2f} "
                      f"{r.stored_during:14,} {r.spool_growth:13,} {r.seconds:9.2f}", flush=True)
                if r.case in ("worker-stopped", "store-locked") and r.stored_during:
                    # Whatever the timing: the store took nothing while stalled, and the stream went on.
                    raise SystemExit(f"{r.case}: the store took {r.stored_during} frames while stalled")
    if len(next(iter(results.values()))) > 1:
        print("# medians of the rounds")
        for case, rounds in results.items():
            def median(values: list[float]) -> float:
                return sorted(values)[len(values) // 2]
            print(f"{case:<15} {median([r.p50 for r in rounds]):8.3f} {median([r.p90 for r in rounds]):8.3f} "
                  f"{median([r.p99 for r in rounds]):8.3f} {median([r.worst for r in rounds]):8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
