"""A frame (or a streamed answer) past what the store takes, through the real index worker.

    python bench/poison_frame.py --mb 1536 [--chunks 1] [--limit-mb 0] [--seconds 300] [--live]
    python bench/poison_frame.py --smoke

Writes a spool as ``liminal acp`` would (a session, a prompt, an answer of ``--mb`` MiB of text
in ``--chunks`` frames, then a second turn): one a dead process left (replayed at the worker's
start, then the conversation derived again from the store), or with ``--live`` the one the worker
tails for its proxy. Starts ``python -m liminal.ingest.worker`` on it
(with SQLite's length limit lowered to ``--limit-mb`` when given: ``tests/support/sqlite_limit``
first on its ``PYTHONPATH``),
and samples the worker's resident memory and CPU time every 0.1 s until the second turn is in
the store and the spool is drained, or ``--seconds`` pass. Then it sends SIGTERM and times the
exit. Prints one JSON line: whether it got through, how long, peak RSS, CPU seconds, how long
SIGTERM took. docs/benchmarks.md, "a frame past the store's limit".

``--smoke`` (tests/integration/test_bench_smoke.py): a 24 MiB answer against SQLite's limit
lowered to 8 MiB, a dead spool then a live one; it fails (exit 1) unless each gets through and
the worker exits on SIGTERM. Its figures mean nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
# Put first on the worker's PYTHONPATH, it lowers SQLite's length limit there to
# $LIMINAL_TEST_SQLITE_MAX_LENGTH (nothing when 0).
SQLITE_LIMIT_SITE = ROOT / "tests" / "support" / "sqlite_limit"
sys.path.insert(0, str(ROOT))

from liminal.ingest.spool import SpoolDir, encode_block  # noqa: E402

CONN = "conn-bench"
THREAD = "sess-bench"


def frames(mb: int, chunks: int) -> list[tuple[str, str, str | None, str | None, bytes]]:
    """(direction, kind, thread, method, raw) of the conversation."""
    def req(rpc: int, method: str, params: dict[str, object]) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", "id": rpc, "method": method, "params": params})

    def chunk(text: str) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": THREAD, "update": {"sessionUpdate": "agent_message_chunk",
                                            "content": {"type": "text", "text": text}}}})

    def prompt(rpc: int, text: str) -> bytes:
        return req(rpc, "session/prompt", {"sessionId": THREAD,
                                           "prompt": [{"type": "text", "text": text}]})

    end = [orjson.dumps({"jsonrpc": "2.0", "id": n, "result": {"stopReason": "end_turn"}})
           for n in (2, 3)]
    out = [("c2a", "request", None, "session/new", req(1, "session/new", {"cwd": "/w", "mcpServers": []})),
           ("a2c", "response", THREAD, "session/new",
            orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": THREAD}})),
           ("c2a", "request", THREAD, "session/prompt", prompt(2, "the long one"))]
    per = mb * 1024 * 1024 // chunks
    piece = ("0123456789abcdef" * (per // 16 + 1))[:per]
    out += [("a2c", "notification", THREAD, "session/update", chunk(piece))] * chunks
    out += [("a2c", "response", THREAD, "session/prompt", end[0]),
            ("c2a", "request", THREAD, "session/prompt", prompt(3, "after it")),
            ("a2c", "notification", THREAD, "session/update", chunk("still indexed")),
            ("a2c", "response", THREAD, "session/prompt", end[1])]
    return out


def write_spool(spool: SpoolDir, mb: int, chunks: int) -> None:
    """The conversation into ``spool`` (acquired)."""
    conversation = frames(mb, chunks)
    at = 0
    while at < len(conversation):
        # Blocks as the proxy's writer makes them: what accumulated in 5 ms, a few frames of a
        # fast stream, one when frames are large.
        size = 1
        while (at + size < len(conversation) and size < 64
               and len(conversation[at + size][4]) <= 1 << 20 and len(conversation[at][4]) <= 1 << 20):
            size += 1
        part = conversation[at:at + size]
        rows = [(CONN, 1000.0 + at + i, direction, kind, thread, thread, method, None, len(raw))
                for i, (direction, kind, thread, method, raw) in enumerate(part)]
        spool.append_encoded(at, encode_block({CONN: at}, rows, [p[4] for p in part]))
        at += len(part)


def sample(pid: int) -> tuple[int, float]:
    """Resident kB and CPU seconds of ``pid``."""
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return rss, (int(fields[11]) + int(fields[12])) / tick


def said(db: Path) -> bool:
    if not db.exists():
        return False
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("SELECT 1 FROM messages WHERE text = 'still indexed'").fetchone() \
                is not None
    except sqlite3.Error:
        return False


def run(mb: int, chunks: int, limit_mb: int, seconds: float, live_spool: bool) -> dict[str, object]:
    """One run (see the module); its figures."""
    home = Path(tempfile.mkdtemp(prefix="poison-bench-"))
    home.chmod(0o700)
    live = SpoolDir(home / "spool" / "live")
    assert live.acquire()
    if live_spool:
        write_spool(live, mb, chunks)
        live.seal()
    else:
        dead = SpoolDir(home / "spool" / "dead")
        assert dead.acquire()
        write_spool(dead, mb, chunks)
        dead.release(remove_if_empty=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIMINAL_")}
    env.update(PYTHONPATH=os.pathsep.join([str(SQLITE_LIMIT_SITE), str(ROOT)]),
               LIMINAL_HOME=str(home), LIMINAL_TEST_SQLITE_MAX_LENGTH=str(limit_mb * 1024 * 1024))
    start = time.monotonic()
    log = (home / "worker.log").open("wb")
    worker = subprocess.Popen([sys.executable, "-m", "liminal.ingest.worker", str(live.path),
                               "--home", str(home), "--log-level", "warning"], cwd=ROOT, env=env,
                              stdin=subprocess.PIPE, stderr=log)
    peak, cpu, through = 0, 0.0, False
    while time.monotonic() - start < seconds and worker.poll() is None:
        rss, cpu = sample(worker.pid)
        peak = max(peak, rss)
        if said(home / "liminal.db") and not (home / "spool" / "dead").exists():
            through = True
            break
        time.sleep(0.1)
    took = time.monotonic() - start
    worker.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    try:
        worker.wait(120)
        stopped = round(time.monotonic() - sent, 2)
    except subprocess.TimeoutExpired:
        stopped = None
        worker.kill()
        worker.wait()
    log.close()
    err = (home / "worker.log").read_text(errors="replace")
    live.release(remove_if_empty=False)
    quarantined = sorted(p.name for p in (home / "quarantine").glob("*")) \
        if (home / "quarantine").exists() else []
    shutil.rmtree(home, ignore_errors=True)  # gigabytes of spool and database, for a full run
    return {
        "mb": mb, "chunks": chunks, "spool": "live" if live_spool else "dead",
        "sqlite_limit_mb": limit_mb or "1e9 default",
        "through": through, "seconds": round(took, 1), "peak_rss_mb": round(peak / 1024),
        "cpu_seconds": round(cpu, 1), "sigterm_exit_seconds": stopped,
        "quarantined": quarantined, "warnings": err.count('"warning"')}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=1536)
    parser.add_argument("--chunks", type=int, default=1)
    parser.add_argument("--limit-mb", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--live", action="store_true")
    parser.add_argument("--smoke", action="store_true",
                        help="a small run that checks the benchmark works (its figures mean nothing)")
    args = parser.parse_args()
    if not args.smoke:
        print(orjson.dumps(run(args.mb, args.chunks, args.limit_mb, args.seconds, args.live)).decode())
        return 0
    ok = True
    for live_spool in (False, True):
        found = run(24, 1, 8, 120, live_spool)
        print(orjson.dumps(found).decode())
        ok = ok and found["through"] is True and found["sigterm_exit_seconds"] is not None
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
