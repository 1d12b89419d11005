"""Nothing that reached the spool is ever lost: a segment goes only when every byte of it is in
the store, damaged local state is skipped with a warning, and a store that cannot be used at
close does not hold the exit."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from liminal.ingest.indexer import Indexer, Tuning
from liminal.ingest.spool import SpoolDir, orphans, read_segment
from liminal.store.records import Batch, FrameRecord
from liminal.store.sqlite import SqliteStore
from tests.store.test_spool import frames

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.anyio


class GatedStore:
    """A store whose first write waits until the test lets it go (a slow or locked store)."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.entered = anyio.Event()
        self.gate = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def write(self, batch: Batch) -> None:
        self.entered.set()
        await self.gate.wait()
        await self.inner.write(batch)


async def test_a_segment_is_removed_only_when_every_byte_in_it_is_committed(tmp_path: Path) -> None:
    # The proxy (the spool's owner) wrote some frames; the worker took them and is stuck on a
    # slow store; meanwhile the proxy flushes the rest and the client leaves (the worker is
    # told to close). The worker's commit then succeeds: the segment holds more than it read.
    writer = SpoolDir(tmp_path / "spool" / "conn")
    assert writer.acquire()
    first, rest = frames(10), frames(30, start=10)
    for f in first:
        writer.append(f.seq, f)
    inner = await SqliteStore.open(tmp_path / "liminal.db")
    store = GatedStore(inner)
    worker = Indexer(store, tmp_path / "spool", tail=writer.path, recover=False,  # type: ignore[arg-type]
                     tuning=Tuning(yield_bytes_per_second=None))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(10):
            await store.entered.wait()
        for f in rest:
            writer.append(f.seq, f)
        writer.seal()
        tg.start_soon(worker.aclose)
        store.gate.set()
        with anyio.fail_after(20):
            await worker.stopped()
    writer.release(remove_if_empty=False)
    assert await inner.frame_count() + _spooled(tmp_path / "spool") == 40
    assert await inner.frame_count() == 40  # a healthy store: all of it, at once
    await inner.aclose()


def _spooled(root: Path) -> int:
    count = 0
    for path in root.glob("*/*.spool"):
        got, _ = read_segment(path, 0, path.stat().st_size, 1 << 30)
        count += len(got)
    return count


async def test_closing_with_an_unusable_store_leaves_the_frames_in_the_spool_at_once(tmp_path: Path) -> None:
    writer = SpoolDir(tmp_path / "spool" / "conn")
    assert writer.acquire()
    for f in frames(25):
        writer.append(f.seq, f)
    writer.seal()

    class Refusing:
        async def write(self, batch: Batch) -> None:
            raise OSError("disk I/O error")

    worker = Indexer(Refusing(), tmp_path / "spool", tail=writer.path, recover=False,  # type: ignore[arg-type]
                     tuning=Tuning(yield_bytes_per_second=None, close_timeout=300))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await worker.aclose()  # would retry for close_timeout (300 s) before
        tg.cancel_scope.cancel()
    writer.release(remove_if_empty=False)
    assert _spooled(tmp_path / "spool") == 25


def _left(folder: Path, records: list[FrameRecord]) -> Path:
    """A spool of ``records`` its writer left (its lock free): its one segment."""
    spool = SpoolDir(folder)
    assert spool.acquire()
    for f in records:
        spool.append(f.seq, f)
    path = spool.segments[0].path
    spool.release(remove_if_empty=False)
    return path


def _orphan_with(tmp_path: Path, tail: bytes) -> Path:
    path = _left(tmp_path / "spool" / "dead", frames(5))
    with path.open("ab") as out:
        out.write(tail)
    return path


@pytest.mark.parametrize("damage", [
    b'{"s":{"c":5},"f":[["c",1.0,"a2c","notification",null,null,null,null,3]],"n":[10]}\nabc',
    b'{"s":{"c":5},"f":[["c",1.0,"a2c","notification",null,null,null,null,3]],"n":[1099511627776]}\n',
    b'{"s":{"c":5},"f":[["c",1.0,"a2c","notification",null,null,null,null,3]],"n":[-4]}\nabcd\n',
    b"not a header at all\n",
])
async def test_a_damaged_spool_is_replayed_up_to_the_damage_and_then_removed(
    tmp_path: Path, damage: bytes, caplog: pytest.LogCaptureFixture,
) -> None:
    path = _orphan_with(tmp_path, damage)
    got, _ = read_segment(path, 0, path.stat().st_size, 100)  # no terabyte allocation
    assert [f.seq for f in got] == [0, 1, 2, 3, 4]
    inner = await SqliteStore.open(tmp_path / "liminal.db")
    indexer = Indexer(inner, tmp_path / "spool")
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        with anyio.fail_after(10):
            await indexer.recovered_all.wait()
        await indexer.aclose()
    assert await inner.frame_count() == 5
    assert orphans(tmp_path / "spool", None) == []  # replayed once, not again at every start
    await inner.aclose()


async def test_a_spool_header_is_never_read_past_the_file(tmp_path: Path) -> None:
    path = _orphan_with(tmp_path, orjson.dumps({"s": {"c": 5}, "f": [], "n": [2**40]}) + b"\n")
    got, pos = read_segment(path, 0, path.stat().st_size, 100)
    assert len(got) == 5 and pos < path.stat().st_size


def test_damaged_journal_and_rewrite_lines_are_skipped_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from liminal import log
    from liminal.kernel.journal import SwapJournal, SwapRecord

    log.configure("info", json=True)
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    good = SwapRecord("t", "t", "n", "committed", "context", 1.0, 0.1, 150_000, 90_000)
    journal.append(good)
    with journal.path.open("ab") as f:
        f.write(b'["a list, not a record"]\n42\n{"thread_id": 7, "old_backing_id": "t", "new_backing_id": "x",'
                b' "outcome": "committed", "reason": "", "started_at": 1, "duration_s": 0,'
                b' "tokens_before": null, "tokens_after": null}\n{"torn": ')
    assert journal.records() == [good]
    assert journal.lineage() == [("t", "n")]
    rewrites = tmp_path / "rewrites.jsonl"
    rewrites.write_bytes(b'{"backing_id": "n", "bytes": "lots"}\n{"backing_id": "m", "bytes": [1]}\n'
                         b'{"backing_id": "k", "bytes": 123}\n')
    assert journal.own_bytes("n") == 0 and journal.own_bytes("m") == 0
    assert journal.own_bytes("k") == 123
    err = capsys.readouterr().err
    for line in (2, 3, 4, 5):
        assert f'"line": {line}' in err and "swaps.jsonl" in err
    assert '"line": 1' in err and "rewrites.jsonl" in err


@pytest.mark.parametrize("queue_frames", [1, 2])
async def test_the_smallest_frame_queue_still_stores_everything(tmp_path: Path, queue_frames: int) -> None:
    from tests.store.conftest import conversation

    inner = await SqliteStore.open(tmp_path / "liminal.db")
    indexer = Indexer(inner, tmp_path / "spool", tuning=Tuning(queue_frames=queue_frames))
    frames_in = conversation()
    async with anyio.create_task_group() as tg:
        tg.start_soon(indexer.run)
        for e in frames_in:
            indexer.offer(e)
        await indexer.aclose()
        tg.cancel_scope.cancel()
    stored = await inner.frames(connection_id="conn1", after_seq=-1, limit=1000)
    assert [f.raw for f in stored] == [e.raw for e in frames_in]
    assert stored[0].method == "initialize"
    await inner.aclose()


def test_a_journal_record_after_a_torn_line_is_read_and_a_short_write_is_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A record cut short (a crash, a full disk) must not take the next one with it: glued to
    # the torn line, a later "committed" record was unreadable and the thread came back on its
    # stale session. And a write the system takes only in part is finished, not left torn.
    import os

    from liminal.kernel import journal as journal_module
    from liminal.kernel.journal import SwapJournal, SwapRecord

    journal = SwapJournal(tmp_path / "swaps.jsonl")
    journal.path.write_bytes(b'{"thread_id": "t", "old_backing_id": "t", "new_')  # torn
    first = SwapRecord("t", "t", "n", "committed", "context", 1.0, 0.1, 150_000, 90_000)
    journal.append(first)
    real_write = os.write

    def short_write(fd: int, data: bytes) -> int:
        return real_write(fd, bytes(data)[: max(1, len(data) // 3)])

    monkeypatch.setattr(journal_module.os, "write", short_write)
    second = SwapRecord("t", "n", "m", "committed", "context", 2.0, 0.1, 150_000, 90_000)
    journal.append(second)
    monkeypatch.undo()
    assert journal.records() == [first, second]
    assert journal.lineage()[-1] == ("t", "m")
    journal.rewrites_path.write_bytes(b'{"backing_id": "n", "by')  # the same for rewrites.jsonl
    journal.note_rewrite("m", 4096)
    assert journal.own_bytes("m") == 4096


def test_the_journal_read_on_from_where_it_stopped_says_where_a_thread_is(tmp_path: Path) -> None:
    from liminal.kernel.journal import SwapJournal, SwapRecord

    journal = SwapJournal(tmp_path / "swaps.jsonl")
    assert journal.current("t") == (None, [])
    journal.append(SwapRecord("t", "t", "a", "committed", "context", 1.0, 0.1, 150_000, 90_000))
    assert journal.current("t") == ("a", ["a"])
    line = SwapRecord("t", "a", "b", "committed", "context", 2.0, 0.1, 150_000, 90_000).to_json() + b"\n"
    with journal.path.open("ab") as f:
        f.write(line[:40])  # another liminal's record, half written
    assert journal.current("t") == ("a", ["a"])
    with journal.path.open("ab") as f:
        f.write(line[40:])
    assert journal.current("t") == ("b", ["a", "b"])
    journal.append(SwapRecord("t", "a", "b", "abandoned", "undone", 2.0, 0.1, None, None))
    assert journal.current("t") == ("a", ["a"])
    assert journal.lineage() == [("t", "a")]

@pytest.mark.parametrize("truncate_fails", [False, True])
async def test_a_write_that_fails_half_way_loses_only_its_own_frames(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, truncate_fails: bool) -> None:
    """The disk fills during a block's ``writev`` (part of it on disk, then ENOSPC), then space
    comes back. That block's frames are lost (said in the log); the blocks written after it are
    not: the worker indexes them, drains the spool and stops when told, and so does a replay
    at the next start."""
    import errno
    import os

    from liminal.ingest import spool as spool_module

    writer = SpoolDir(tmp_path / "spool" / "conn")
    assert writer.acquire()
    batch = frames(30)
    for f in batch[:10]:
        writer.append(f.seq, f)
    real_writev, real_ftruncate = os.writev, os.ftruncate

    def half_then_full(fd: int, parts: list[bytes]) -> int:
        flat = b"".join(parts)
        return real_writev(fd, [flat[:len(flat) // 2]])

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def cannot_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(spool_module.os, "writev", half_then_full)
    monkeypatch.setattr(spool_module.os, "write", full)
    if truncate_fails:
        monkeypatch.setattr(spool_module.os, "ftruncate", cannot_truncate)
    with pytest.raises(OSError):
        writer.append(batch[10].seq, batch[10])  # as the spool writer does: logged, lost
    monkeypatch.setattr(spool_module.os, "writev", real_writev)
    monkeypatch.setattr(spool_module.os, "ftruncate", real_ftruncate)
    monkeypatch.undo()
    for f in batch[11:20]:
        writer.append(f.seq, f)

    # A restart's replay of this spool as it is now (a copy: the worker below takes the original).
    import shutil

    copy = tmp_path / "copy" / "conn"
    shutil.copytree(writer.path, copy)
    (copy / ".lock").unlink()
    copied = await SqliteStore.open(tmp_path / "copied.db")
    from liminal.ingest.recovery import replay_orphans

    with anyio.fail_after(10):
        await replay_orphans(copied, copy.parent, None, retry_seconds=0.01,
                             quarantine=tmp_path / "quarantine")
    assert await copied.frame_count() == 19
    await copied.aclose()

    store = await SqliteStore.open(tmp_path / "liminal.db")
    worker = Indexer(store, tmp_path / "spool", tail=writer.path, recover=False,
                     tuning=Tuning(yield_bytes_per_second=None))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(10):
            while await store.frame_count() < 19:  # noqa: ASYNC110 - the store has no event
                await anyio.sleep(0.02)
        for f in batch[20:]:
            writer.append(f.seq, f)
        writer.seal()
        with anyio.fail_after(10):
            await worker.aclose()
    writer.release(remove_if_empty=False)
    stored = await store.frames(connection_id="c")
    assert [f.seq for f in stored] == [*range(10), *range(11, 30)]
    assert not list(writer.path.glob("*.spool"))  # drained: nothing waits for a next start
    await store.aclose()


async def test_a_worker_that_replaces_a_dead_one_mid_turn_derives_the_turn_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index worker dies (SIGKILL) after committing part of a turn: an answer's first
    chunks, a tool call. The proxy starts another, which resumes from the spool; the turn in
    the store must read as if no worker had died: one answer, the tool call's title kept with
    its result, the turn's end recorded, every message in its turn."""
    from liminal.ingest.derive import Deriver
    from liminal.ingest.indexer import to_record
    from liminal.ingest.recovery import parse
    from tests.store.conftest import conversation

    records = [to_record(i, e) for i, e in enumerate(conversation())]
    expected = Deriver()
    for r in records:
        expected.feed(r, parse(r))
    want = sorted((m.id, m.kind, m.text, m.turn_id, m.status) for m in expected.take().messages)
    cut = 11  # after the tool call, the answer's first chunk before it
    partial = Deriver()  # what the first worker stores: every message of the frames, open ones too
    for r in records[:cut]:
        partial.feed(r, parse(r))
    opened = {(m.id, m.text) for m in partial.take(include_open=True).messages}

    from liminal.ingest import spool as spool_module

    # Segments as small as can be: the first worker has removed those it committed (as it
    # does with a 64 MiB segment once the writer has moved past it).
    monkeypatch.setattr(spool_module, "SEGMENT_BYTES", 1)
    writer = SpoolDir(tmp_path / "spool" / "conn1")
    assert writer.acquire()
    for r in records[:cut]:
        writer.append(r.seq, r)
    store = await SqliteStore.open(tmp_path / "liminal.db")
    first = Indexer(store, tmp_path / "spool", tail=writer.path, recover=False,
                    tuning=Tuning(yield_bytes_per_second=None))
    async with anyio.create_task_group() as tg:  # the first worker, killed once it committed
        tg.start_soon(first.run)
        with anyio.fail_after(30):  # every frame, and the text of the answer still open
            while await store.frame_count() < cut or \
                    not opened <= {(m.id, m.text) for m in await store.messages("sess-1")}:  # noqa: ASYNC110 - the store has no event
                await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    for r in records[cut:]:
        writer.append(r.seq, r)
    writer.seal()
    second = Indexer(store, tmp_path / "spool", tail=writer.path, recover=False,
                     tuning=Tuning(yield_bytes_per_second=None))
    async with anyio.create_task_group() as tg:
        tg.start_soon(second.run)
        with anyio.fail_after(10):
            await second.aclose()
    writer.release(remove_if_empty=False)
    got = sorted((m.id, m.kind, m.text, m.turn_id, m.status) for m in await store.messages("sess-1"))
    assert got == want
    await store.aclose()


@pytest.mark.parametrize("started_at", ["1e300", "-1e300", "1e20"])
def test_a_journal_record_from_no_possible_time_is_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], started_at: str,
) -> None:
    """A start time no clock gives (a damaged or hand-edited line) crashed `liminal swaps` with
    an OverflowError: every swap became unlistable for one bad line."""
    from liminal import cli
    from liminal.kernel.journal import SwapJournal, SwapRecord

    journal = SwapJournal(tmp_path / "swaps.jsonl")
    good = SwapRecord("t", "t", "n", "committed", "context", 1.0e9, 0.1, 150_000, 90_000)
    journal.append(good)
    with journal.path.open("ab") as f:
        f.write(b'{"thread_id": "u", "old_backing_id": "u", "new_backing_id": "x", "outcome": "committed",'
                b' "reason": "", "started_at": ' + started_at.encode() + b', "duration_s": 0,'
                b' "tokens_before": null, "tokens_after": null}\n')
    assert journal.records() == [good]
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    assert cli.main(["swaps"]) == 0
    out, err = capsys.readouterr()
    assert "150k -> 90k" in out and '"line": 2' in err


@pytest.mark.parametrize("module", ["liminal.ingest.worker", "liminal.ingest.shared"])
async def test_a_signalled_worker_leaves_the_tail_a_live_writer_still_appends_to(
        tmp_path: Path, module: str) -> None:
    """Ctrl-C in a terminal signals the whole process group: the index worker stops while the
    proxy (or ``liminal serve``) still forwards, and spools, its last frames. The worker took a
    signal for the writer's end and removed the tail it had read, which the writer still held
    open: every frame after went into a file no one could read (issue 23's review of the shared
    worker). Stopped by a signal, it stores what is there and leaves the tail to its writer;
    only the writer's own end (its input closed, a ``seal``) lets it remove the tail."""
    home = tmp_path / "home"
    writer = SpoolDir(home / "spool" / "live")
    assert writer.acquire()
    for f in frames(10):
        writer.append(f.seq, f)
    argv = [sys.executable, "-m", module]
    argv += [str(writer.path)] if module.endswith("worker") else []
    env = dict(os.environ, LIMINAL_HOME=str(home), PYTHONPATH=str(ROOT))
    worker = _start([*argv, "--home", str(home), "--log-level", "warning"], env)
    try:
        assert worker.stdin is not None
        if not module.endswith("worker"):  # the shared worker is told the spools to tail
            worker.stdin.write(orjson.dumps(["add", str(writer.path)]) + b"\n")
            worker.stdin.flush()
        with anyio.fail_after(60):
            while await _stored(home) < 10:
                assert worker.poll() is None
                await anyio.sleep(0.05)
        worker.send_signal(signal.SIGINT)
        with anyio.fail_after(60):
            while worker.poll() is None:  # noqa: ASYNC110 - a process, no event to wait on
                await anyio.sleep(0.05)
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait()
    for f in frames(5, start=10):  # the proxy's last frames, after the worker stopped
        writer.append(f.seq, f)
    writer.seal()
    writer.release(remove_if_empty=False)
    on_disk = {f.seq for path in (home / "spool").glob("*/*.spool")
               for f in read_segment(path, 0, path.stat().st_size, 1 << 30)[0]}
    assert set(range(10, 15)) <= on_disk, "frames spooled after the worker stopped were lost"


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL)


async def _stored(home: Path) -> int:
    path = home / "liminal.db"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return int(db.execute("select count(*) from frames").fetchone()[0])
    except sqlite3.Error:
        return 0


async def test_a_spool_its_old_worker_finishes_during_the_replay_is_no_failure(tmp_path: Path) -> None:
    """A liminal killed alone (a conductor's stop) leaves its index worker draining its spool,
    whose lock is then free: a new liminal's start replays it as an orphan at the same time.
    The old worker removes each segment once every frame in it is stored; the replay then finds
    the segment gone. That is no failure of the replay (its frames are in the store), and the
    spools after it are replayed too. Before, the replay raised FileNotFoundError, which ended
    the new liminal's indexer."""
    from dataclasses import replace

    from liminal.ingest.recovery import replay_orphans
    from liminal.store.records import frame_id

    segment = _left(tmp_path / "spool" / "a", frames(10))
    _left(tmp_path / "spool" / "b", [replace(f, id=frame_id("d", f.seq), connection_id="d") for f in frames(5)])
    inner = await SqliteStore.open(tmp_path / "liminal.db")

    class OldWorkerDrains(GatedStore):
        async def write(self, batch: Batch) -> None:
            await self.inner.write(batch)
            if segment.exists():  # the old worker stores the whole segment, then removes it
                await self.inner.write(Batch(frames(10), [], []))
                segment.unlink()

    with anyio.fail_after(10):
        await replay_orphans(OldWorkerDrains(inner), tmp_path / "spool", None, batch_frames=2,
                             retry_seconds=0.01, quarantine=tmp_path / "quarantine")
    assert [f.seq for f in await inner.frames(connection_id="c")] == list(range(10))
    assert [f.seq for f in await inner.frames(connection_id="d")] == list(range(5))
    assert orphans(tmp_path / "spool", None) == []
    await inner.aclose()


def test_the_workers_last_bound_holds_when_its_stderr_is_full(tmp_path: Path) -> None:
    """A worker's stderr is its proxy's (an editor's pipe, a terminal): one no one reads fills,
    and a log line blocks, holding the stream. The bound that ends a worker whatever it is doing
    (``_exit_after``) logged its warning on that stream first, so it blocked behind the line
    and the process never exited."""
    script = (
        "import sys\n"
        "from liminal import log\n"
        "from liminal.ingest.worker import _exit_after\n"
        "log.configure('info')\n"
        "_exit_after(0.5, 7)\n"
        "while True:\n"
        "    sys.stderr.write('x' * 65536)\n"
        "    sys.stderr.flush()\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.wait(timeout=30) == 7
    finally:
        proc.kill()
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
