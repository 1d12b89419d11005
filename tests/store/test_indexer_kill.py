"""SIGKILL mid-stream: whatever reached the spool is in the store after the next start."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import orjson
import pytest

from liminal.ingest.indexer import Indexer
from liminal.store.sqlite import SqliteStore
from tests.store.streams import expected_text

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


def run_child_and_kill(home: Path, n: int, spooled: int) -> dict[str, int]:
    """Start the child, stall its store, SIGKILL it once ``spooled`` frames reached the spool;
    returns its last progress report."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.store.indexer_child", str(home), str(n)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdin is not None and child.stdout is not None
    lock = None
    last: dict[str, int] = {}
    deadline = time.monotonic() + 60
    try:
        assert child.stdout.readline().strip() == "ready"
        # The store stalls: another writer holds the database for as long as the test likes.
        lock = sqlite3.connect(home / "liminal.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        child.stdin.write("go\n")
        child.stdin.flush()
        while last.get("spooled", 0) < spooled:
            line = child.stdout.readline()
            assert line, "the child stopped early"
            assert time.monotonic() < deadline
            last = orjson.loads(line)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if lock is not None:
            lock.execute("ROLLBACK")
            lock.close()
    return last


@pytest.mark.slow
async def test_sigkill_loses_nothing_that_reached_the_spool(tmp_path: Path) -> None:
    n = 200_000
    last = await anyio.to_thread.run_sync(run_child_and_kill, tmp_path, n, 3000)
    assert last["spooled"] >= 3000
    store = await SqliteStore.open(tmp_path / "liminal.db")
    restarted = Indexer(store, tmp_path / "spool")
    async with anyio.create_task_group() as tg:
        tg.start_soon(restarted.run)
        with anyio.fail_after(30):
            await restarted.recovered_all.wait()
        await restarted.aclose()
    frames = await store.frames(connection_id="conn-long", limit=n)
    seqs = [f.seq for f in frames]
    # Everything reported spooled or written before the kill is there, with no hole and no
    # duplicate (frames offered after the last report may be there too).
    assert len(seqs) >= last["spooled"]
    assert seqs == list(range(len(seqs)))
    # Messages were derived again from the recovered frames: the agent text is exactly the
    # chunks that reached the store, joined once.
    [text] = [m.text for m in await store.messages("sess-long") if m.kind == "agent"]
    assert text == expected_text(len(seqs) + 1)
    await store.aclose()
