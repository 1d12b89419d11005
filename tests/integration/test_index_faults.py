"""Faults with the real pieces: ``liminal acp`` (its spool writer and index worker process)
between a raw client and the scripted agent, the SQLite store on disk."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import orjson
import pytest

from liminal.ingest.spool import read_segment
from liminal.store.sqlite import SqliteStore
from tests.support.commands import without_liminal_ids
from tests.support.proxy_process import ProxyProcess, child_env, liminal_argv, scripted_agent_argv
from tests.support.spools import spool_files, spooled_bytes

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
SQLITE_LIMIT_SITE = Path(__file__).resolve().parents[1] / "support" / "sqlite_limit"


@asynccontextmanager
async def liminal(tmp_path: Path, *, sqlite_limit: int = 0) -> AsyncIterator[tuple[ProxyProcess, str]]:
    """``sqlite_limit``: SQLite's length limit in liminal's processes (0: SQLite's own)."""
    env = child_env(tmp_path, LIMINAL_LOG_LEVEL="warning")
    env.pop("LIMINAL_STORE_URL", None)
    if sqlite_limit:
        env["PYTHONPATH"] = str(SQLITE_LIMIT_SITE) + os.pathsep + env["PYTHONPATH"]
        env["LIMINAL_TEST_SQLITE_MAX_LENGTH"] = str(sqlite_limit)
    process = await anyio.open_process(
        liminal_argv(scripted_agent_argv()), env=env, start_new_session=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proxy = ProxyProcess(process)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(proxy.pump)
            tg.start_soon(proxy.pump_stderr)
            await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=0)
            new = await proxy.request("session/new", {"cwd": str(tmp_path), "mcpServers": []}, rpc_id=1)
            yield proxy, new["result"]["sessionId"]
            tg.cancel_scope.cancel()
    finally:
        await proxy.aclose()


async def prompt(proxy: ProxyProcess, rpc_id: int, session: str, text: str) -> None:
    await proxy.send(orjson.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "session/prompt",
                                   "params": {"sessionId": session,
                                              "prompt": [{"type": "text", "text": text}]}})
                     + b"\n")


async def answered(proxy: ProxyProcess, rpc_id: int, timeout: float = 60) -> None:
    """Until the response to ``rpc_id`` arrives, looking only at lines not seen before (the
    shared helper re-parses every line at each wake-up: quadratic over a long stream)."""
    seen = 0
    marker = f'"id":{rpc_id},"result"'.encode()
    with anyio.fail_after(timeout):
        while True:
            lines = proxy.lines
            for line in lines[seen:]:
                if marker in line:
                    return
            seen = len(lines)
            await anyio.sleep(0.01)


def children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True, check=False).stdout
    return [int(p) for p in out.split()]


def worker_of(pid: int) -> int | None:
    for child in children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"liminal.ingest.worker" in f.read():
                    return child
        except FileNotFoundError:
            continue
    return None


async def stored_seqs(db: Path) -> list[int]:
    store = await SqliteStore.open(db, create=False)
    try:
        frames = await store.frames(limit=1_000_000)
    finally:
        await store.aclose()
    return sorted(f.seq for f in frames)


async def until(predicate: Callable[[], bool], timeout: float = 60,
                interval: float = 0.01) -> None:
    with anyio.fail_after(timeout):
        while True:
            if predicate():
                return
            await anyio.sleep(interval)


async def frame_count(db: Path) -> int:
    from liminal.store.base import StoreError

    try:
        store = await SqliteStore.open(db, create=False)
    except StoreError:  # the worker has not created it yet
        return 0
    try:
        return await store.frame_count()
    finally:
        await store.aclose()


async def wait_stored(db: Path, n: int, timeout: float = 60) -> None:
    with anyio.fail_after(timeout):
        while True:
            if await frame_count(db) >= n:
                return
            await anyio.sleep(0.1)


def spooled_frames(home: Path) -> int:
    """How many frames the spool writer has written: the last seq in its segments, plus one
    (the tail segment stays while the writer lives, so the newest frames are always there)."""
    last = -1
    for path in spool_files(home):
        try:
            frames, _ = read_segment(path, 0, path.stat().st_size, 10_000_000)
        except FileNotFoundError:  # the worker removed a segment it had stored
            continue
        last = max([last, *(f.seq for f in frames)])
    return last + 1


async def wait_drained(home: Path, timeout: float = 60) -> None:
    await until(lambda: not spool_files(home), timeout, 0.1)


async def test_sigkill_of_liminal_mid_stream_keeps_what_the_client_had(tmp_path: Path) -> None:
    home = tmp_path / "liminal-home"
    async with liminal(tmp_path) as (proxy, session):
        await prompt(proxy, 2, session, "chunks:200000")
        await until(lambda: len(proxy.lines) >= 20_000)
        had = len(proxy.lines)
        # Kill once the spool holds at least as many frames as the client has lines (it holds
        # the client's own requests too): nothing the client saw may be missing afterwards.
        await until(lambda: spooled_frames(home) >= had, interval=0.005)
        worker = worker_of(proxy.process.pid)
        os.kill(proxy.process.pid, signal.SIGKILL)  # liminal only, not its process group
        await proxy.process.wait()
        # The orphaned worker drains the spool on its own (its stdin closed with its parent).
        await wait_drained(home)
        if worker is not None:
            await exited(worker)
    seqs = await stored_seqs(home / "liminal.db")
    missing = sorted(set(range(seqs[-1] + 1)) - set(seqs))
    assert seqs == list(range(len(seqs))), (len(seqs), missing[:10], len(missing))  # no hole, no dup
    assert len(seqs) >= had


async def test_the_worker_outlives_a_stop_of_liminals_process_group(tmp_path: Path) -> None:
    """A conductor stops a component by its process group: SIGTERM a second after the editor
    left, SIGKILL two seconds later (docs/facts.md, "The conductor and proxy chains"); a
    terminal's Ctrl-C signals the group too. The index worker, in a session of its own, is not
    in that group: what liminal spooled is stored without another start (before, the worker died
    with the group and the frames waited in the spool)."""
    home = tmp_path / "liminal-home"
    async with liminal(tmp_path) as (proxy, session):
        await until(lambda: worker_of(proxy.process.pid) is not None, 10)
        worker = worker_of(proxy.process.pid)
        assert worker is not None and os.getpgid(worker) != os.getpgid(proxy.process.pid)
        await prompt(proxy, 2, session, "chunks:200000")
        await until(lambda: len(proxy.lines) >= 20_000)
        had = len(proxy.lines)
        await until(lambda: spooled_frames(home) >= had, interval=0.005)
        os.killpg(proxy.process.pid, signal.SIGTERM)
        await anyio.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proxy.process.pid, signal.SIGKILL)
        await proxy.process.wait()
        await wait_drained(home)
        await exited(worker)  # its stdin ended with liminal: it drained, and exits
    seqs = await stored_seqs(home / "liminal.db")
    assert seqs == list(range(len(seqs))) and len(seqs) >= had


async def test_a_spool_its_worker_still_drains_is_no_orphan(tmp_path: Path) -> None:
    """liminal killed alone leaves its worker draining the spool; the spool's lock, liminal's,
    is then free, and a new liminal's start replayed the same spool as an orphan while the old
    worker still stored it: two derivations of one connection, the old worker's later partial
    write of a message over the replay's whole one, the segment removed under either reader.
    The worker holds the lock too (it inherits it) until it exits."""
    from liminal.ingest.spool import orphans

    home = tmp_path / "liminal-home"
    async with liminal(tmp_path) as (proxy, session):
        await until(lambda: worker_of(proxy.process.pid) is not None, 10)
        worker = worker_of(proxy.process.pid)
        assert worker is not None
        await prompt(proxy, 2, session, "chunks:50000")
        await until(lambda: len(proxy.lines) >= 5_000)
        os.kill(worker, signal.SIGSTOP)  # draining, slowly
        try:
            os.kill(proxy.process.pid, signal.SIGKILL)
            await proxy.process.wait()
            assert spool_files(home)
            found = orphans(home / "spool", None)
            for spool in found:
                spool.release(remove_if_empty=False)
            assert [s.path for s in found] == []
        finally:
            os.kill(worker, signal.SIGCONT)
        await wait_drained(home)
        await exited(worker)
    seqs = await stored_seqs(home / "liminal.db")
    assert seqs == list(range(len(seqs)))


async def exited(pid: int, timeout: float = 30) -> None:
    """Until ``pid`` (no child of ours) has exited; then liminal's stderr, which it inherited,
    has ended too."""
    def state() -> str:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return "X"

    await until(lambda: state() in ("X", "Z"), timeout, 0.05)


async def test_a_killed_worker_is_replaced_and_nothing_is_lost(tmp_path: Path) -> None:
    stored = 2 + 2 + 30_002 + 103  # initialize, session/new, two prompts
    home = tmp_path / "liminal-home"
    async with liminal(tmp_path) as (proxy, session):
        await until(lambda: worker_of(proxy.process.pid) is not None, 10)
        worker = worker_of(proxy.process.pid)
        await prompt(proxy, 2, session, "chunks:30000")
        await until(lambda: len(proxy.lines) >= 5_000)
        os.kill(worker, signal.SIGKILL)
        await answered(proxy, 2)
        await prompt(proxy, 3, session, "chunks:100 used:777")
        await answered(proxy, 3)
        await until(lambda: worker_of(proxy.process.pid) not in (None, worker), 10, 0.1)
        # Stored by the new worker before liminal is closed: closing bounds the drain (20 s), and
        # what it leaves in the spool is stored at the next start, so a loaded machine would
        # fail the test without anything lost.
        await wait_stored(home / "liminal.db", stored, 120)
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 0
    seqs = await stored_seqs(home / "liminal.db")
    assert seqs == list(range(len(seqs)))
    assert len(seqs) == stored
    assert not spool_files(home)


async def test_a_turn_is_forwarded_whole_while_another_writer_holds_the_store(tmp_path: Path) -> None:
    """Another process holds the database (``BEGIN IMMEDIATE``) for a whole turn of 20,000
    frames: the turn is forwarded and answered all the same, it waits in the spool (on disk, not
    in the store), and once the lock goes every frame is stored, in order. Forwarding never
    waited for the store; how fast it forwards meanwhile is ``bench/forward_latency.py``'s to
    measure, not this test's."""
    home = tmp_path / "liminal-home"
    stored = 2 + 2 + 3 * 2 + 2000 + 20_000 * 2  # three prompts
    async with liminal(tmp_path) as (proxy, session):
        await prompt(proxy, 2, session, "chunks:2000")
        await answered(proxy, 2)
        await wait_stored(home / "liminal.db", 2 + 2 + 2002)
        await prompt(proxy, 3, session, "chunks:20000")
        await answered(proxy, 3)
        lock = sqlite3.connect(home / "liminal.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        try:
            await prompt(proxy, 4, session, "chunks:20000")
            await answered(proxy, 4)
            # The turn waits on disk, not in memory, and not in the store.
            assert spooled_bytes(home) > 20_000 * 100
            assert await frame_count(home / "liminal.db") < 2 + 2 + 2002 + 20_002 * 2
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        await wait_stored(home / "liminal.db", stored, 120)
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 0
    seqs = await stored_seqs(home / "liminal.db")
    assert seqs == list(range(stored))


async def test_a_stopped_index_worker_does_not_stop_forwarding(tmp_path: Path) -> None:
    """Forwarding never waits for the store (issue 21: nothing bounded it). The index worker is
    stopped (SIGSTOP) for a whole turn of 20,000 frames: the turn is forwarded whole and
    answered, every frame of it reaches the spool, and the store takes none of it, so nothing
    on the way waited for the store. Continued, the worker stores it all. No timing is asserted:
    ``bench/forward_latency.py`` measures the latency of the same, stalled and not."""
    home = tmp_path / "liminal-home"
    async with liminal(tmp_path) as (proxy, session):
        await prompt(proxy, 2, session, "chunks:100")
        await answered(proxy, 2)
        await wait_stored(home / "liminal.db", 2 + 2 + 102)
        await until(lambda: worker_of(proxy.process.pid) is not None, 10)
        worker = worker_of(proxy.process.pid)
        assert worker is not None
        os.kill(worker, signal.SIGSTOP)
        try:
            before = await frame_count(home / "liminal.db")
            spooled_before = spooled_frames(home)
            lines_before = len(proxy.lines)
            await prompt(proxy, 3, session, "chunks:20000")
            await answered(proxy, 3)
            assert len(proxy.lines) - lines_before == 20_001  # every update and the answer
            # Every frame of the turn is in the spool (its request, updates, answer) ...
            await until(lambda: spooled_frames(home) >= spooled_before + 20_002, 30)
            # ... and none in the store: the worker could not run.
            assert await frame_count(home / "liminal.db") == before
            assert worker_of(proxy.process.pid) == worker  # still there, stopped, not replaced
        finally:
            os.kill(worker, signal.SIGCONT)
        await wait_stored(home / "liminal.db", 2 + 2 + 102 + 20_002)
        await proxy.close_stdin()
        assert await proxy.wait_exit() == 0
    seqs = await stored_seqs(home / "liminal.db")
    assert seqs == list(range(2 + 2 + 102 + 20_002))


async def test_an_answer_past_the_stores_limit_is_forwarded_whole_and_the_turns_after_it_are_indexed(
        tmp_path: Path) -> None:
    """A frame the store cannot take (issue 21) through the real ``liminal acp`` and its worker,
    with SQLite's length limit lowered to 1 MiB in both (``tests/support/sqlite_limit``): a
    3 MB answer in one chunk reaches the client byte for byte and the turn after it is answered
    (forwarding never waits for the store); the store keeps the frame whole (in parts), the
    answer's message cut with a ``problem`` message saying so, and the turn after it; nothing is
    left in the spool or set aside, and liminal exits 0. On main the worker wrote the refused
    batch again and again: the turn after it never reached the store."""
    home = tmp_path / "liminal-home"
    size = 3_000_000
    async with liminal(tmp_path, sqlite_limit=1024 * 1024) as (proxy, session):
        await prompt(proxy, 2, session, f"chunks:1 size:{size}")
        await answered(proxy, 2)
        await prompt(proxy, 3, session, "chunks:2")
        await answered(proxy, 3)
        big = [without_liminal_ids(line) for line in proxy.lines if len(line) > size]
        sent = [line for line in (tmp_path / "agent_out.bin").read_bytes().split(b"\n")
                if len(line) > size]
        assert len(big) == 1 and big == sent  # forwarded unchanged
        await proxy.close_stdin()  # liminal waits for its worker to store the spool
        assert await proxy.wait_exit(60) == 0
    assert not spool_files(home)
    store = await SqliteStore.open(home / "liminal.db", create=False)
    try:
        frames = await store.frames(limit=1_000)
        assert big[0] in [f.raw for f in frames]  # whole, read back from its parts
        messages = await store.messages(session)
    finally:
        await store.aclose()
    agent = [m.text for m in messages if m.kind == "agent"]
    assert agent[0].startswith("chunk 0 é中xxx") and len(agent[0]) < 100_000
    assert "cut here to fit the store" in agent[0]
    assert agent[1:] == ["chunk 0 é中chunk 1 é中"]  # the turn after it
    assert any("stored cut to fit the store" in m.text for m in messages if m.kind == "problem")
    assert [m.kind for m in messages].count("turn_end") == 2
    assert not (home / "quarantine").exists()
