"""The local, append-only spool: where frames wait on disk until the store has them.

Layout: ``$LIMINAL_HOME/spool/<name>/`` holds a ``.lock`` (``flock``ed by the live writer, and
by its index worker, which inherits the lock and drains after the writer dies, so a restarted
liminal can tell an orphan from a neighbour's spool), a ``.writer`` (the writing process's pid,
in decimal: a spool with segments whose writer is gone holds frames a store may still lack,
``behind``) and segment files
``<n>.spool``, where ``n`` is the writer's running count of frames at the segment's first frame:
segments sorted by ``n`` give the frames in the order they were offered. A writer appends to one
tail segment; frames that must go back in front of it (the inline indexer's failed or stalled
write) are written as a new segment whose ``n`` sorts before the tail.

A segment is a run of blocks. A block is one JSON header line (``{"s": {connection: seq of its
first frame in the block}, "f": [[connection, time, direction, kind, thread, backing, method, rpc
id (the JSON value), size], ...], "n": [raw length, ...]}``), then the frames' raw bytes back to
back, then a newline, written with a single ``writev``: a process killed
mid-write (SIGKILL) leaves whole blocks behind, because the kernel finishes a write it has
started. A torn block (disk full, power loss) ends the segment and is ignored on replay.

Encoding many frames per block is what keeps the cost per frame on the forwarding path near a
microsecond (docs/benchmarks.md, "index"): the rows are tuples taken by ``attrgetter`` (C), one
``orjson.dumps`` and one system call per block; sequence numbers and the rpc id's JSON text are worked out by the reader.

``liminal acp``'s spool writer, whose frames all belong to one connection, writes the same
fields as columns (``encode_columns``: ``{"v": 2, "c": connection, "s": seq of the first frame,
"t": [time...], "d": [direction...], "k": [kind...], "h": [thread...], "b": [backing...],
"m": [method...], "i": [rpc id...], "z": [size...], "n": [raw length...]}``), where a column
whose values are all the same holds just one: a stream of chunks repeats everything but the
time and the size, so the header is about a third smaller and a third cheaper to encode. The
reader takes both forms.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from liminal import log
from liminal.store.records import FrameRecord, frame_id

SEGMENT_BYTES = 64 * 1024 * 1024  # a new tail segment after this much
# A reader takes whole blocks until it holds this many bytes of frames (at least one block):
# unbounded, 2,000 frames of a megabyte each would be read, and stored, as one batch.
READ_BYTES = 64 * 1024 * 1024
# A block larger than this is read a frame at a time, into the frame's own bytes: read whole
# and sliced, a 1.5 GB frame would be held twice.
WHOLE_BLOCK_BYTES = 8 * 1024 * 1024
IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024  # writev's limit
_SUFFIX = ".spool"
_WRITER = ".writer"
logger = log.get("liminal.ingest.spool")


def encode_block(starts: dict[str, int], rows: Sequence[Sequence[Any]], raws: list[bytes], *,
                 rpc_text: bool = False) -> list[bytes]:
    """A block for ``writev``. ``starts``: each connection's seq at its first frame here.
    ``rpc_text``: the rows' rpc ids are already JSON text (``"t": 1`` tells the reader)."""
    lengths = list(map(len, raws))
    block: dict[str, Any] = {"s": starts, "f": rows, "n": lengths}
    if rpc_text:
        block["t"] = 1
    try:
        header = orjson.dumps(block)
    except TypeError:  # an rpc id orjson cannot write (an integer past 64 bits): as JSON text
        import json

        block["f"] = [(*row[:7], None if row[7] is None else json.dumps(row[7]), row[8])
                      for row in rows]
        block["t"] = 1
        header = orjson.dumps(block)
    return [header, b"\n", *raws, b"\n"]


_COLUMNS = ("t", "d", "k", "h", "b", "m", "i", "z")


def encode_columns(connection: str, seq: int, columns: Sequence[list[Any]],
                   raws: list[bytes]) -> list[bytes] | None:
    """A block in the column form for ``writev``, or None when it cannot be (an rpc id orjson
    cannot write: use ``encode_block``). ``columns``: time, direction, kind, thread, backing,
    method, rpc id (the JSON value), size, one value per frame, in ``_COLUMNS`` order."""
    n = len(raws)
    block: dict[str, Any] = {"v": 2, "c": connection, "s": seq, "n": list(map(len, raws))}
    for key, column in zip(_COLUMNS, columns, strict=True):
        first = column[0]
        # A column all of one value keeps one. ``count`` compares with ==, so rpc ids (where
        # 1 == 1.0 == True) are folded only when all None; the others hold one type each.
        if n > 1 and (first is None or key != "i") and column.count(first) == n:
            column = column[:1]
        block[key] = column
    try:
        header = orjson.dumps(block)
    except TypeError:
        return None
    return [header, b"\n", *raws, b"\n"]


def frame_rows(frames: Sequence[FrameRecord]) -> tuple[dict[str, int], list[tuple[Any, ...]]]:
    """``encode_block``'s first two arguments for records, whose rpc ids are JSON text (so
    ``rpc_text=True``; each connection's frames must be consecutive, as they are in a spill)."""
    starts: dict[str, int] = {}
    rows = []
    for f in frames:
        starts.setdefault(f.connection_id, f.seq)
        rows.append((f.connection_id, f.time, f.direction, f.kind, f.thread_id, f.backing_id,
                     f.method, f.rpc_id, f.size))
    return starts, rows


@dataclass(slots=True)
class Segment:
    path: Path
    first_seq: int  # the writer's frame count at the segment's first frame
    written: int  # bytes known complete (for the live tail: what this process wrote)
    read: int = 0  # bytes already replayed into the store


class SpoolDir:
    """One connection's spool, owned (locked) by the process that writes or replays it;
    ``writer``: this process writes it (its pid is recorded when it takes the lock)."""

    def __init__(self, path: Path, *, writer: bool = False) -> None:
        self.path = path
        self._writer = writer
        self._lock_fd: int | None = None
        self.segments: list[Segment] = []
        self._tail_fd: int | None = None
        self.appended = 0  # bytes seen appended by another process (``refresh``), ever

    # -- ownership ----------------------------------------------------------------------------

    def acquire(self) -> bool:
        """Create (if needed) and lock the folder; False if another live process holds it."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        if self._writer:
            try:
                _record_writer(self.path)
            except OSError as exc:  # a neighbour's rewind then waits on this spool, bounded
                logger.warning("cannot record the spool's writer", spool=str(self.path), error=str(exc))
        self.segments = []
        for seg in sorted(self.path.glob(f"*{_SUFFIX}"), key=_first_seq):
            self.segments.append(Segment(seg, _first_seq(seg), seg.stat().st_size))
        return True

    @property
    def owned(self) -> bool:
        return self._lock_fd is not None

    @property
    def lock_fd(self) -> int | None:
        """The descriptor the lock is held by (a process that inherits it holds the lock too)."""
        return self._lock_fd

    def release(self, *, remove_if_empty: bool = True) -> None:
        self._close_tail()
        if self._lock_fd is None:
            return
        if remove_if_empty and not self.segments:
            with contextlib.suppress(OSError):
                (self.path / _WRITER).unlink()
            with contextlib.suppress(OSError):
                (self.path / ".lock").unlink()
                self.path.rmdir()
        os.close(self._lock_fd)
        self._lock_fd = None

    # -- writing ------------------------------------------------------------------------------

    @property
    def empty(self) -> bool:
        return not self.segments

    def append(self, n: int, frame: FrameRecord) -> None:
        """Append one frame (the ``n``-th the writer took) to the tail segment."""
        self.append_block(n, *frame_rows([frame]), [frame.raw], rpc_text=True)

    def append_block(self, n: int, starts: dict[str, int], rows: Sequence[Sequence[Any]],
                     raws: list[bytes], *, rpc_text: bool = False) -> int:
        """Append a block whose first frame is the writer's ``n``-th; returns its size."""
        return self.append_encoded(n, encode_block(starts, rows, raws, rpc_text=rpc_text))

    def append_encoded(self, n: int, parts: list[bytes]) -> int:
        """Append an encoded block (``encode_block``, ``encode_columns``) whose first frame is
        the writer's ``n``-th; returns its size."""
        if self._tail_fd is None or self.segments[-1].written >= SEGMENT_BYTES:
            self._close_tail()
            seg = Segment(self.path / f"{n:012d}{_SUFFIX}", n, 0)
            self._tail_fd = os.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self.segments.append(seg)
        seg = self.segments[-1]
        try:
            size = _write_all(self._tail_fd, parts)
        except OSError:
            # Part of the block may be on disk (the disk filled during the write). Left there,
            # it would end the segment for every reader: the blocks appended after it, once space
            # came back, would never be indexed and would be skipped as damage at the next start. So
            # the segment is cut back to its last whole block; if even that fails, the next
            # block starts a segment of its own and readers skip this one's torn rest.
            try:
                os.ftruncate(self._tail_fd, seg.written)
            except OSError:
                self._close_tail()
            raise
        seg.written += size
        return size

    def prepend(self, n: int, frames: list[FrameRecord]) -> None:
        """Write frames that precede everything spooled so far as their own segment."""
        if not frames:
            return
        path = self.path / f"{n:012d}{_SUFFIX}"
        if any(s.path == path for s in self.segments):
            return  # already spooled (a stalled write spilled these before)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            written = 0
            for start in range(0, len(frames), 1000):
                part = frames[start:start + 1000]
                written += _write_all(fd, encode_block(*frame_rows(part),
                                                       [f.raw for f in part], rpc_text=True))
        finally:
            os.close(fd)
        self.segments.append(Segment(path, n, written))
        self.segments.sort(key=lambda s: s.first_seq)

    def seal(self) -> None:
        """No more appends to the current tail (a reader may then remove it once read)."""
        self._close_tail()

    # -- tailing another process's spool ------------------------------------------------------

    def refresh(self) -> None:
        """For a reader that does not own the folder: pick up new segments and what was
        appended to the known ones since the last look."""
        known = {seg.path: seg for seg in self.segments}
        found = []
        for path in self.path.glob(f"*{_SUFFIX}"):
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            seg = known.get(path)
            if seg is None:
                seg = Segment(path, _first_seq(path), size)
                self.appended += size
            elif seg.written != size and seg.read <= size:
                self.appended += max(0, size - seg.written)
                seg.written = size
            found.append(seg)
        found.sort(key=lambda s: s.first_seq)
        self.segments = found

    def dup_tail(self) -> int | None:
        """A duplicate of the tail's descriptor, to ``fdatasync`` from another thread."""
        return os.dup(self._tail_fd) if self._tail_fd is not None else None

    # -- replaying ----------------------------------------------------------------------------

    def read(self, max_frames: int, max_bytes: int = READ_BYTES) -> tuple[list[FrameRecord], int]:
        """Up to ``max_frames`` frames (and about ``max_bytes`` of them) from the head segment
        and the offset after them."""
        if not self.segments:
            return [], 0
        seg = self.segments[0]
        frames, pos = read_segment(seg.path, seg.read, seg.written, max_frames, max_bytes)
        if not frames and pos < seg.written:
            if len(self.segments) > 1:
                # The writer has moved on to a later segment, so this rest (a block torn by a
                # failed write) never completes: said, and skipped, as a replay does. Waiting
                # for it held every later frame back, and the worker's exit with them.
                logger.warning("damaged spool segment; the rest of it is skipped",
                               file=str(seg.path), offset=pos, skipped=seg.written - pos)
                return [], seg.written
            seg.written = pos  # a torn tail: nothing more can be read from this segment
        return frames, pos

    def discard(self) -> None:
        """Remove the segments whose every byte on disk was read into the store (an orphan
        spool, once replayed); a segment with more on disk than was read stays."""
        kept = []
        for seg in self.segments:
            on_disk = _size(seg.path)
            if on_disk is not None and on_disk > seg.read:
                kept.append(seg)
                continue
            with contextlib.suppress(FileNotFoundError):
                seg.path.unlink()
        self.segments = kept

    def consumed(self, pos: int, *, writer_done: bool = True) -> None:
        """The head segment's frames up to ``pos`` are in the store; drop finished segments.

        A reader tailing another process's spool passes ``writer_done=False`` while that
        process may still append: the last segment is then kept even when read to its end."""
        seg = self.segments[0]
        seg.read = pos
        is_tail = seg is self.segments[-1]
        if seg.read >= seg.written and (writer_done or not is_tail or self._tail_fd is not None):
            # What this reader knows of the segment is all read; the file itself may have grown
            # since its last look (the writer's last flush, after a slow write). Removed only
            # when every byte on disk is committed: anything else is read next time round.
            on_disk = _size(seg.path)
            if on_disk is not None and on_disk > seg.read:
                self.appended += on_disk - seg.written
                seg.written = on_disk
                return
            if is_tail:
                self._close_tail()
            with contextlib.suppress(FileNotFoundError):
                seg.path.unlink()
            self.segments.pop(0)

    def _close_tail(self) -> None:
        if self._tail_fd is not None:
            os.close(self._tail_fd)
            self._tail_fd = None


def read_segment(path: Path, start: int, end: int, max_frames: int,
                 max_bytes: int | None = None) -> tuple[list[FrameRecord], int]:
    """Whole blocks from ``start`` (not past ``end``) until at least ``max_frames`` frames, or
    ``max_bytes`` of them: the frames and the offset after them."""
    frames: list[FrameRecord] = []
    pos = start
    held = 0
    with open(path, "rb") as f:
        f.seek(pos)
        while len(frames) < max_frames and pos < end and (max_bytes is None or held < max_bytes):
            # No fixed cap: a header holds each frame's rpc id, which the client chooses (up to
            # a frame's 64 MiB), so a cap would fail a block the writer wrote whole, and with it
            # the rest of the segment. What the segment still holds bounds it.
            header = f.readline(end - pos)
            if not header.endswith(b"\n"):
                break
            try:
                block = orjson.loads(header)
                lengths = block["n"]
                total = sum(lengths)
                rows = _rows(block, len(lengths))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError):
                break
            # A header is trusted with no allocation larger than what the file still holds (a
            # damaged one may claim a terabyte).
            if not all(isinstance(n, int) and n >= 0 for n in lengths) \
                    or total + 1 > end - pos - len(header):
                break
            raws = _read_raws(f, lengths, total)
            if raws is None:
                break  # torn block: the end of what was written whole
            for (c, seq, t, d, k, th, b, m, rpc, z), raw in zip(rows, raws, strict=True):
                frames.append(FrameRecord(frame_id(c, seq), c, seq, t, d, k, th, b, m, rpc, z, raw))
            pos += len(header) + total + 1
            held += total
    return frames, pos


def _read_raws(f: Any, lengths: list[int], total: int) -> list[bytes] | None:
    """A block's frames' raw bytes and its closing newline; None if the block is torn."""
    if total <= WHOLE_BLOCK_BYTES:
        body = f.read(total + 1)
        if len(body) != total + 1 or body[-1:] != b"\n":
            return None
        raws, at = [], 0
        for n in lengths:
            raws.append(body[at:at + n])
            at += n
        return raws
    raws = []
    for n in lengths:
        raw = f.read(n)
        if len(raw) != n:
            return None
        raws.append(raw)
    return raws if f.read(1) == b"\n" else None


def _rows(block: dict[str, Any], count: int) -> list[tuple[Any, ...]]:
    """A block header's frames as (connection, seq, time, direction, kind, thread, backing,
    method, rpc id as JSON text, size), from either form."""
    out: list[tuple[Any, ...]] = []
    if block.get("v") == 2:
        connection, seq = block["c"], block["s"]
        columns = [block[key] if len(block[key]) == count else block[key] * count
                   for key in _COLUMNS]
        for j, (t, d, k, th, b, m, i, z) in enumerate(zip(*columns, strict=True)):
            rpc = None if i is None else orjson.dumps(i).decode()
            out.append((connection, seq + j, t, d, k, th, b, m, rpc, z))
        return out
    seqs, as_text = dict(block["s"]), bool(block.get("t"))
    for c, t, d, k, th, b, m, i, z in block["f"]:
        seq = seqs[c]
        seqs[c] = seq + 1
        rpc = i if i is None or as_text else orjson.dumps(i).decode()
        out.append((c, seq, t, d, k, th, b, m, rpc, z))
    return out


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _write_all(fd: int, parts: list[bytes]) -> int:
    """One system call for the whole block (so SIGKILL cannot cut it), finishing a short one."""
    total = sum(map(len, parts))
    if len(parts) > IOV_MAX:
        parts = [b"".join(parts)]
    done = os.writev(fd, parts)
    while done < total:  # a short write (rare: signals, quotas); finish it
        flat = b"".join(parts)[done:]
        done += os.write(fd, flat)
    return total


def _first_seq(path: Path) -> int:
    try:
        return int(path.name.removesuffix(_SUFFIX))
    except ValueError:
        return -1


def orphans(root: Path, own: Path | None) -> list[SpoolDir]:
    """Spool folders of processes that are gone (their lock is free), locked for replay."""
    found: list[SpoolDir] = []
    if not root.is_dir():
        return found
    for path in sorted(root.iterdir()):
        if not path.is_dir() or path == own or not any(path.glob(f"*{_SUFFIX}")):
            continue
        spool = SpoolDir(path)
        try:
            if spool.acquire():
                found.append(spool)
        except OSError:
            continue
    return found


def _record_writer(path: Path) -> None:
    """This process's pid as the folder's writer, replaced whole (a reader never sees half)."""
    temporary = path / f"{_WRITER}.new"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, str(os.getpid()).encode())
    finally:
        os.close(fd)
    temporary.replace(path / _WRITER)


def writer_alive(path: Path) -> bool:
    """The process recorded as the spool's writer is running (a folder without one: gone)."""
    try:
        pid = int((path / _WRITER).read_text())
    except (OSError, ValueError):
        return False
    if pid <= 0:  # 0 and below name process groups, not a writer
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's process: alive
        return True
    except OSError:
        return False
    return True


def behind(root: Path) -> bool:
    """Some spool under ``root`` holds segments of a writer that is gone, and someone is storing
    them: its worker draining them (it holds the lock after its writer dies), or a replay that
    took them (``orphans``). A live writer's spool (this process's own, a neighbour's) always has
    segments, and a folder with no writer recorded is an older liminal's, alive or not: neither
    is waited on. Nor is an orphan no one has taken (a neighbour and its worker killed after
    this liminal's worker started): no replay here would ever store it."""
    try:
        folders = [path for path in root.iterdir() if path.is_dir()]
    except OSError:
        return False
    return any(any(path.glob(f"*{_SUFFIX}")) and (path / _WRITER).exists() and not writer_alive(path)
               and _locked(path) for path in folders)


def _locked(path: Path) -> bool:
    """Someone holds the folder's lock. Asked by a shared lock taken and given back at once: a
    replay's scan (``orphans``) that came at that instant would pass the folder by until the
    next start, nothing lost."""
    try:
        fd = os.open(path / ".lock", os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # (a lock taken is let go with the descriptor)
    return False
