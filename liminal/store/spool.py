"""The indexer's local, append-only spool: where frames wait while the store cannot take them.

Layout: ``$LIMINAL_HOME/spool/<connection id>/`` holds a ``.lock`` (``flock``ed by the live
process, so a restarted liminal can tell an orphan from a neighbour's spool) and segment files
``<first seq>.spool``. A segment holds a contiguous, ascending run of one connection's frames;
segments sorted by name give the frames in order. Spilling normally appends to one tail segment;
when frames already taken out of memory must go back (a failed or stalled write), they are
written as a new segment whose name sorts before the tail.

A record is a JSON header line (the frame's metadata, ``n`` = raw length) followed by the raw
bytes and a newline, written with a single ``writev``: a process killed mid-write (SIGKILL)
leaves whole records behind, because the kernel finishes a write it has started. A torn record
(disk full, power loss) ends the segment and is ignored on replay.

Everything here is synchronous and short: ``append`` runs on the forwarding path and costs one
system call; reads run in the indexer's consumer.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from liminal.store.records import FrameRecord

MAX_HEADER = 64 * 1024
_SUFFIX = ".spool"


def encode(frame: FrameRecord) -> list[bytes]:
    header = orjson.dumps({
        "id": frame.id, "c": frame.connection_id, "s": frame.seq, "t": frame.time,
        "d": frame.direction, "k": frame.kind, "th": frame.thread_id, "b": frame.backing_id,
        "m": frame.method, "i": frame.rpc_id, "z": frame.size, "n": len(frame.raw),
    })
    return [header, b"\n", frame.raw, b"\n"]


@dataclass(slots=True)
class Segment:
    path: Path
    first_seq: int
    written: int  # bytes known complete (for the live tail: what this process wrote)
    read: int = 0  # bytes already replayed into the store


class SpoolDir:
    """One connection's spool, owned (locked) by the process that writes or replays it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_fd: int | None = None
        self.segments: list[Segment] = []
        self._tail_fd: int | None = None

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
        self.segments = []
        for seg in sorted(self.path.glob(f"*{_SUFFIX}"), key=_first_seq):
            self.segments.append(Segment(seg, _first_seq(seg), seg.stat().st_size))
        return True

    @property
    def owned(self) -> bool:
        return self._lock_fd is not None

    def release(self, *, remove_if_empty: bool = True) -> None:
        self._close_tail()
        if self._lock_fd is None:
            return
        if remove_if_empty and not self.segments:
            with contextlib.suppress(OSError):
                (self.path / ".lock").unlink()
                self.path.rmdir()
        os.close(self._lock_fd)
        self._lock_fd = None

    # -- writing ------------------------------------------------------------------------------

    @property
    def empty(self) -> bool:
        return not self.segments

    def append(self, frame: FrameRecord) -> None:
        """Append to the tail segment (started at this frame if there is none)."""
        if self._tail_fd is None:
            seg = Segment(self.path / f"{frame.seq:012d}{_SUFFIX}", frame.seq, 0)
            self._tail_fd = os.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self.segments.append(seg)
        seg = self.segments[-1]
        seg.written += _write_all(self._tail_fd, encode(frame))

    def prepend(self, frames: list[FrameRecord]) -> None:
        """Write frames that precede everything spooled so far as their own segment."""
        if not frames:
            return
        path = self.path / f"{frames[0].seq:012d}{_SUFFIX}"
        if any(s.path == path for s in self.segments):
            return  # already spooled (a stalled write spilled these before)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            written = sum(_write_all(fd, encode(f)) for f in frames)
        finally:
            os.close(fd)
        self.segments.append(Segment(path, frames[0].seq, written))
        self.segments.sort(key=lambda s: s.first_seq)

    def dup_tail(self) -> int | None:
        """A duplicate of the tail's descriptor, to ``fdatasync`` from another thread."""
        return os.dup(self._tail_fd) if self._tail_fd is not None else None

    # -- replaying ----------------------------------------------------------------------------

    def read(self, max_frames: int) -> tuple[list[FrameRecord], int]:
        """Up to ``max_frames`` frames from the head segment and the offset after them."""
        if not self.segments:
            return [], 0
        seg = self.segments[0]
        frames, pos = read_segment(seg.path, seg.read, seg.written, max_frames)
        if not frames and pos < seg.written:
            seg.written = pos  # a torn tail: nothing more can be read from this segment
        return frames, pos

    def discard(self) -> None:
        """Remove every segment (an orphan spool, once all of it is in the store)."""
        for seg in self.segments:
            with contextlib.suppress(FileNotFoundError):
                seg.path.unlink()
        self.segments = []

    def consumed(self, pos: int) -> None:
        """The head segment's frames up to ``pos`` are in the store; drop finished segments."""
        seg = self.segments[0]
        seg.read = pos
        is_tail = self._tail_fd is not None and seg is self.segments[-1]
        if seg.read >= seg.written:
            if is_tail:
                self._close_tail()
            with contextlib.suppress(FileNotFoundError):
                seg.path.unlink()
            self.segments.pop(0)

    def _close_tail(self) -> None:
        if self._tail_fd is not None:
            os.close(self._tail_fd)
            self._tail_fd = None


def read_segment(path: Path, start: int, end: int,
                 max_frames: int) -> tuple[list[FrameRecord], int]:
    """Whole records from ``start`` (not past ``end``): the frames and the offset after them."""
    frames: list[FrameRecord] = []
    pos = start
    with open(path, "rb") as f:
        f.seek(pos)
        while len(frames) < max_frames and pos < end:
            header = f.readline(MAX_HEADER)
            if not header.endswith(b"\n"):
                break
            try:
                h = orjson.loads(header)
                n = int(h["n"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                break
            raw = f.read(n)
            if len(raw) != n or f.read(1) != b"\n":
                break  # torn record: the end of what was written whole
            frames.append(FrameRecord(
                h["id"], h["c"], h["s"], h["t"], h["d"], h["k"], h["th"], h["b"], h["m"],
                h["i"], h["z"], raw))
            pos += len(header) + n + 1
    return frames, pos


def _write_all(fd: int, parts: list[bytes]) -> int:
    total = sum(len(p) for p in parts)
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
