"""The spool's on-disk format: whole blocks only, in order, torn tails ignored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liminal.ingest.spool import SpoolDir, behind, encode_columns, frame_rows, orphans, read_segment
from liminal.store.records import FrameRecord, frame_id


def frames(n: int, start: int = 0) -> list[FrameRecord]:
    return [FrameRecord(frame_id("c", i), "c", i, 1.0 + i, "a2c", "notification", "t", "t",
                        "session/update", None, 3, b"f" + str(i).encode() + b"\x00\n")
            for i in range(start, start + n)]


def test_blocks_larger_than_iov_max_round_trip(tmp_path: Path) -> None:
    spool = SpoolDir(tmp_path / "s")
    assert spool.acquire()
    batch = frames(5000)
    spool.append_block(0, *frame_rows(batch), [f.raw for f in batch], rpc_text=True)
    got, pos = spool.read(10_000)
    assert got == batch and pos == spool.segments[0].written


def test_a_torn_block_ends_the_segment(tmp_path: Path) -> None:
    spool = SpoolDir(tmp_path / "s")
    assert spool.acquire()
    for f in frames(3):
        spool.append(f.seq, f)
    seg = spool.segments[0]
    with open(seg.path, "ab") as out:
        out.write(b'{"s":{"c":3},"f":[["c",1.0,"a2c","notification",null,null,null,null,3]],'
                  b'"n":[10]}\nabc')
    got, pos = read_segment(seg.path, 0, seg.path.stat().st_size, 100)
    assert [f.seq for f in got] == [0, 1, 2] and pos == seg.written


def test_prepended_segments_sort_first_and_orphans_are_found(tmp_path: Path) -> None:
    spool = SpoolDir(tmp_path / "spool" / "a")
    assert spool.acquire()
    for f in frames(2, start=10):
        spool.append(f.seq, f)
    spool.prepend(0, frames(10))
    assert [s.first_seq for s in spool.segments] == [0, 10]
    assert orphans(tmp_path / "spool", None) == []  # locked by its live owner
    spool.release(remove_if_empty=False)
    [orphan] = orphans(tmp_path / "spool", None)
    seqs = []
    while orphan.segments:
        got, pos = orphan.read(100)
        seqs += [f.seq for f in got]
        orphan.consumed(pos)
    assert seqs == list(range(12))
    orphan.release()
    assert not (tmp_path / "spool" / "a").exists()


def test_a_reader_tails_a_live_writer(tmp_path: Path) -> None:
    writer = SpoolDir(tmp_path / "s")
    assert writer.acquire()
    reader = SpoolDir(tmp_path / "s")
    reader.refresh()
    assert reader.segments == []
    batch = frames(4)
    writer.append_block(0, *frame_rows(batch[:2]), [f.raw for f in batch[:2]])
    reader.refresh()
    got, pos = reader.read(100)
    reader.consumed(pos, writer_done=False)
    assert len(got) == 2 and len(reader.segments) == 1  # kept: the writer may append
    writer.append_block(2, *frame_rows(batch[2:]), [f.raw for f in batch[2:]])
    reader.refresh()
    got, pos = reader.read(100)
    assert [f.seq for f in got] == [2, 3]
    reader.consumed(pos, writer_done=True)
    assert reader.segments == []


def test_rpc_ids_round_trip_as_json_text(tmp_path: Path) -> None:
    spool = SpoolDir(tmp_path / "s")
    assert spool.acquire()
    ids = ['7', '"abc"', "null", str(2**70), '{"x":1}']
    batch = [FrameRecord(frame_id("c", i), "c", i, 1.0, "a2c", "response", None, None, "m",
                         None if rpc == "null" else rpc, 2, b"{}") for i, rpc in enumerate(ids)]
    for f in batch:
        spool.append(f.seq, f)
    got, _ = spool.read(100)
    assert [f.rpc_id for f in got] == [None if r == "null" else r for r in ids]


def test_a_writer_block_with_an_rpc_id_orjson_cannot_write(tmp_path: Path) -> None:
    spool = SpoolDir(tmp_path / "s")
    assert spool.acquire()
    rows = [("c", 1.0, "a2c", "response", None, None, "m", 2**70, 2),
            ("c", 1.0, "a2c", "response", None, None, "m", "x", 2)]
    spool.append_block(0, {"c": 0}, rows, [b"{}", b"{}"])
    got, _ = spool.read(10)
    assert [f.rpc_id for f in got] == [str(2**70), '"x"']


raw_lines = st.binary(max_size=64).map(lambda b: b.replace(b"\n", b"\\n"))  # as framed: no "\n"


@settings(max_examples=150)
@given(st.lists(st.lists(raw_lines, min_size=1, max_size=5), min_size=1, max_size=6),
       st.floats(min_value=0, max_value=1), st.booleans())
def test_a_spool_cut_anywhere_gives_back_exactly_its_whole_blocks(
        tmp_path_factory: pytest.TempPathFactory, blocks: list[list[bytes]], cut: float,
        columns: bool) -> None:
    """Whatever the frames' bytes, and wherever a crash or a full disk cut the file, reading gives
    every frame of every block written whole, in order, byte for byte, and nothing else."""
    spool = SpoolDir(tmp_path_factory.mktemp("spool") / "s")
    assert spool.acquire()
    written: list[list[FrameRecord]] = []
    seq = 0
    for raws in blocks:
        batch = [FrameRecord(frame_id("c", seq + i), "c", seq + i, 1.5, "a2c", "notification", "t",
                             "b", "session/update", None, len(raw), raw) for i, raw in enumerate(raws)]
        if columns:  # the form liminal acp writes
            fields = [[f.time, f.direction, f.kind, f.thread_id, f.backing_id, f.method, None,
                       f.size] for f in batch]
            parts = encode_columns("c", seq, [list(col) for col in zip(*fields, strict=True)], raws)
            assert parts is not None
            spool.append_encoded(seq, parts)
        else:
            spool.append_block(seq, *frame_rows(batch), raws, rpc_text=True)
        written.append(batch)
        seq += len(raws)
    seg = spool.segments[0]
    data = seg.path.read_bytes()
    at = int(len(data) * cut)
    seg.path.write_bytes(data[:at])
    got, pos = read_segment(seg.path, 0, at, 10_000)
    ends, total = [], 0
    for batch in written:  # where each block ends in the file
        total = data.index(b"\n", total) + 1 + sum(f.size for f in batch) + 1
        ends.append(total)
    whole = [f for batch, end in zip(written, ends, strict=True) if end <= at for f in batch]
    assert got == whole
    assert pos == max([e for e in ends if e <= at], default=0)


def test_the_column_form_round_trips_and_folds_repeated_values(tmp_path: Path) -> None:
    spool = SpoolDir(tmp_path / "s")
    assert spool.acquire()
    columns: list[list[object]] = [
        [1.5, 1.5, 2.5],  # time
        ["a2c"] * 3, ["notification", "notification", "response"],
        ["t"] * 3, ["b"] * 3, ["session/update"] * 3,
        [1, True, None],  # rpc ids: 1 == True, so never folded unless all None
        [3, 3, 3]]
    raws = [b"one", b"two", b"{3}"]
    parts = encode_columns("c", 7, columns, raws)
    assert parts is not None
    header = orjson.loads(parts[0])
    assert header["d"] == ["a2c"] and header["z"] == [3] and header["t"] == [1.5, 1.5, 2.5]
    assert header["i"] == [1, True, None]
    spool.append_encoded(0, parts)
    assert encode_columns("c", 10, [[0.0], ["a2c"], ["response"], [None], [None], [None],
                                    [2**70], [2]], [b"{}"]) is None  # rows will hold it as text
    got, _ = spool.read(10)
    assert [(f.id, f.seq, f.time, f.kind, f.rpc_id, f.raw) for f in got] == [
        ("c:0000000007", 7, 1.5, "notification", "1", b"one"),
        ("c:0000000008", 8, 1.5, "notification", "true", b"two"),
        ("c:0000000009", 9, 2.5, "response", None, b"{3}")]


def test_the_spool_writer_stores_what_it_was_offered(tmp_path: Path) -> None:
    from liminal import config
    from liminal.ingest.indexer import to_record
    from liminal.ingest.worker import SpoolWriter
    from tests.store.streams import stream

    events = list(stream(1200, pad=10))
    writer = SpoolWriter(config.load({"home": tmp_path}))
    assert writer.spool.acquire()
    for event in events[:700]:
        writer.offer(event)
    writer.flush()
    for event in events[700:]:
        writer.offer(event)
    writer.flush()
    got, _ = writer.spool.read(10_000)
    assert got == [to_record(seq, e) for seq, e in enumerate(events)]


def test_a_block_whose_header_is_larger_than_the_old_fixed_cap_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer puts every frame's rpc id (the client's to choose, up to a frame's 64 MiB) in
    the header, so no fixed cap on a header's length holds: the reader used to stop at 64 MiB,
    take the block as torn, and never read it or any block after it in the segment. Two frames
    with ids of 33 MiB each make a header past that old cap. (This test used to lower a
    ``MAX_HEADER`` that no longer exists, with ``raising=False``: it set nothing, and a header
    of 10 kB passed under any cap.)"""
    from liminal.ingest import spool as spool_module

    # The blocks after it stay in its segment (a new one starts past 64 MiB written).
    monkeypatch.setattr(spool_module, "SEGMENT_BYTES", 1 << 30)
    long_id = orjson.dumps("x" * (33 << 20)).decode()
    odd = [FrameRecord(frame_id("c", i), "c", i, 1.0 + i, "c2a", "request", "t", "t",
                       "session/prompt", long_id, 3, b"req") for i in range(2)]
    spool = SpoolDir(tmp_path / "s")
    assert spool.acquire()
    spool.append_block(0, *frame_rows(odd), [f.raw for f in odd], rpc_text=True)
    after = frames(3, start=2)
    for f in after:
        spool.append(f.seq, f)
    seg = spool.segments[0]
    assert len(spool.segments) == 1
    with open(seg.path, "rb") as f:
        assert len(f.readline()) > 64 << 20  # the header alone
    got, pos = read_segment(seg.path, 0, seg.written, 100)
    assert got == [*odd, *after] and pos == seg.written


def test_the_spool_writer_stores_a_routers_runs_as_their_events(tmp_path: Path) -> None:
    """A run of streamed lines (``FrameRun``) is spooled as its lines' events would be, in
    order with the events around it."""
    from liminal import config
    from liminal.acp.events import FrameEvent, FrameRun
    from liminal.acp.router import Router
    from liminal.ingest.indexer import to_record
    from liminal.ingest.worker import SpoolWriter

    router = Router(max_frame_bytes=1 << 20, connection_id="conn", message_ids=True)
    router.bind("thread", "backing")
    chunk = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"backing","update":'
             b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}\n')
    router.receive_from_client(b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":'
                               b'{"sessionId":"thread","prompt":[]}}\n', 1.0)
    router.receive_from_agent(b"".join(chunk % n for n in range(40)), 2.0)
    router.receive_from_agent(b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}\n'
                              + b"".join(chunk % n for n in range(3)), 3.0)
    out = router.take()
    writer = SpoolWriter(config.load({"home": tmp_path}))
    assert writer.spool.acquire()
    assert [type(tap) for tap in out.taps] == [FrameEvent, FrameRun, FrameEvent, FrameRun]
    for flushed in (out.taps[:2], out.taps[2:]):
        for tap in flushed:
            if isinstance(tap, FrameRun):
                writer.offer_run(tap)
            else:
                writer.offer(tap)
        writer.flush()
    got, _ = writer.spool.read(10_000)
    assert len(got) == 1 + 40 + 1 + 3
    assert got == [to_record(seq, e) for seq, e in enumerate(out.events)]


def test_a_steady_stream_is_flushed_by_its_offers_and_a_lone_frame_by_a_timer(tmp_path: Path) -> None:
    """Every frame is on disk within ``flush_seconds`` of its offer (the crash guarantee). A
    flush of its own (a task woken, then asleep for ``flush_seconds``) cost the proxy two
    more turns of its event loop every few frames of a paced stream, more than the frames it
    wrote. Now the offer that finds the oldest queued frame near its deadline flushes in the
    callback that forwarded it; a timer set for the first frame after a flush does it only when
    no such offer comes, and is cancelled when one does."""
    from liminal import config
    from liminal.ingest.worker import INLINE_FLUSH_SHARE, SpoolWriter
    from tests.store.streams import stream

    assert INLINE_FLUSH_SHARE == 0.7  # the offers that flush below

    class Timer:
        def __init__(self, when: float, callback: Any) -> None:
            self.when, self.callback, self.cancelled = when, callback, False

        def cancel(self) -> None:
            self.cancelled = True

    class Clock:  # the parts of an event loop the writer uses
        now = 0.0
        timers: list[Timer] = []

        def time(self) -> float:
            return self.now

        def call_at(self, when: float, callback: Any) -> Timer:
            self.timers.append(Timer(when, callback))
            return self.timers[-1]

        def call_later(self, delay: float, callback: Any) -> Timer:
            return self.call_at(self.now + delay, callback)

    events = list(stream(40))
    clock = Clock()
    writer = SpoolWriter(config.load({"home": tmp_path}), flush_seconds=0.005)
    assert writer.spool.acquire()
    writer._loop = clock  # type: ignore[assignment]
    on_disk = []
    for n, event in enumerate(events[:30]):  # a frame a millisecond
        clock.now = n * 0.001
        writer.offer(event)
        on_disk.append(writer.spooled)
    # The first offer finds nothing flushed before: at once. Then every offer that finds the
    # oldest frame INLINE_FLUSH_SHARE of flush_seconds old flushes, before its deadline.
    assert on_disk[0] == 1
    flushed_at = [n for n in range(1, 30) if on_disk[n] > on_disk[n - 1]]
    assert flushed_at == list(range(4, 30, 4))  # the first 1 ms step at or past 0.0035 s
    *steady, last = clock.timers  # one for the first frame after each flush
    assert all(t.cancelled for t in steady) and not last.cancelled
    assert last.when == pytest.approx(0.029 + 0.005) and writer.spooled == 29
    # A frame after a pause goes at once (with what waited); one with none after it soon
    # enough, by the timer set for it, at its deadline.
    clock.now = 1.0
    writer.offer(events[30])
    assert last.cancelled and writer.spooled == 31
    clock.now = 1.001
    writer.offer(events[31])
    [timer] = [t for t in clock.timers if not t.cancelled]
    assert timer.when == pytest.approx(1.006) and writer.spooled == 31
    clock.now = timer.when
    timer.callback()
    assert writer.spooled == 32
    got, _ = writer.spool.read(10_000)
    assert [f.raw for f in got] == [e.raw for e in events[:32]]


def test_streamed_updates_alone_poke_the_worker_at_most_every_stream_poke_seconds(tmp_path: Path) -> None:
    """Every block is written at once (the crash guarantee), but a block of streamed updates
    alone wakes the worker only past ``stream_poke_seconds`` since the last poke; a block with
    any other frame (the prompt, its answer: the turn's end) wakes it at once."""
    from liminal import config
    from liminal.acp.events import FrameRun
    from liminal.acp.router import Router
    from liminal.ingest.worker import SpoolWriter

    class Shared:
        pokes = 0

        def attach(self, spool: Path) -> None:
            pass

        def poke(self) -> None:
            self.pokes += 1

        async def drained(self, spool: Path, timeout: float) -> bool:
            return True

    router = Router(max_frame_bytes=1 << 20, connection_id="conn")
    chunk = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
             b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}\n')
    router.receive_from_client(b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":'
                               b'{"sessionId":"s","prompt":[]}}\n', 1.0)
    prompt = router.take().taps
    reads = []
    for n in range(3):
        router.receive_from_agent(b"".join(chunk % i for i in range(n * 10, n * 10 + 10)), 2.0 + n)
        reads.append(router.take().taps)
    router.receive_from_agent(b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}\n', 9.0)
    answer = router.take().taps
    assert all(isinstance(tap, FrameRun) for taps in reads for tap in taps)

    def spooled(stream_poke_seconds: float) -> list[int]:
        shared = Shared()
        writer = SpoolWriter(config.load({"home": tmp_path}), spool_name=f"p{stream_poke_seconds}",
                             stream_poke_seconds=stream_poke_seconds, shared=shared)
        pokes = []
        for taps in (prompt, *reads, answer):
            for tap in taps:
                writer.offer_run(tap) if isinstance(tap, FrameRun) else writer.offer(tap)
            writer.flush()
            pokes.append(shared.pokes)
        assert writer.spooled == 1 + 30 + 1
        return pokes

    assert spooled(3600.0) == [1, 1, 1, 1, 2]  # the prompt, then only the turn's end
    assert spooled(0.0) == [1, 2, 3, 4, 5]


def _left(root: Path, name: str, pid: int | None) -> Path:
    """A spool folder with one segment, its writer recorded as ``pid`` (None: no record)."""
    spool = SpoolDir(root / name, writer=pid == os.getpid())
    assert spool.acquire()
    spool.append(0, frames(1)[0])
    spool.release(remove_if_empty=False)
    if pid is not None and pid != os.getpid():
        (root / name / ".writer").write_text(str(pid))
    return root / name


def test_a_spool_of_a_gone_writer_is_behind_and_a_live_ones_is_not(tmp_path: Path) -> None:
    """A rewind waits on a stopped liminal's spool while someone stores it (its worker draining
    it, a replay that took it), never on a running one's, which always has segments, nor on an
    older liminal's, which records no writer."""
    root = tmp_path / "spool"
    root.mkdir()
    assert not behind(root) and not behind(tmp_path / "none")
    _left(root, "own", os.getpid())
    assert (root / "own" / ".writer").read_text() == str(os.getpid())
    (root / "empty").mkdir()  # a gone writer's folder with no segment left: nothing to wait for
    _left(root, "neighbour", os.getppid())
    assert not behind(root)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          check=True, capture_output=True, text=True)
    left = _left(root, "gone", int(gone.stdout))
    assert not behind(root)  # an orphan no one has taken: no replay here would store it
    draining = SpoolDir(left)  # its worker (or a replay) holds the lock as it stores it
    assert draining.acquire()
    assert behind(root)
    for segment in left.glob("*.spool"):  # drained
        segment.unlink()
    assert not behind(root)
    draining.release(remove_if_empty=False)
    older = SpoolDir(_left(root, "unrecorded", None))  # an older liminal's, which records no pid
    assert older.acquire()
    assert not behind(root)
    older.release(remove_if_empty=False)


def test_a_released_writer_spool_leaves_no_folder(tmp_path: Path) -> None:
    spool = SpoolDir(tmp_path / "s", writer=True)
    assert spool.acquire()
    spool.release()
    assert not (tmp_path / "s").exists()
