"""The swap journal: every swap attempt, and which backing session each thread is on.

An append-only JSONL file (``$LIMINAL_HOME/swaps.jsonl``), fsynced per record. It is the
authority for "which backing id carries this thread" across restarts, so it is deliberately
independent of the document store: a thread must come back on its last committed backing
session even when the store is down or being replayed from the spool.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from liminal import log
from liminal.ingest import rewrites
from liminal.sessionfiles import is_session_id

logger = log.get("liminal.kernel.journal")
_TAIL = 64  # bytes of the last line read that ``current`` finds again (see ``_read_tail``)


def _damaged(path: Path, line: int, exc: Exception) -> None:
    logger.warning("damaged line skipped", file=str(path), line=line, error=str(exc)[:200])


@dataclass(frozen=True, slots=True)
class SwapRecord:
    thread_id: str
    old_backing_id: str
    new_backing_id: str | None  # None when the swap failed before a new session existed
    # "committed", "failed", "abandoned", "skipped" (not worth a swap); "begin" opens an attempt
    # (written before its file exists) and is followed by one of the others unless liminal died
    outcome: str
    reason: str  # committed: why it started ("context 131200 tokens >= 120000"); else why not
    started_at: float  # wall clock
    duration_s: float  # from the hold to the release
    tokens_before: int | None
    tokens_after: int | None
    harness: str = "claude"
    cwd: str | None = None
    new_path: str | None = None  # begin: where the rewrite goes, for the clean-up after a crash
    # The cost policy's terms (``liminal.kernel.policy.Decision``): context, target, trigger,
    # rebuild, saves_per_call, payback_calls, calls_to_next, idle, summary, why; and, committed,
    # calls_since_move (the model calls since the thread's move before, as counted). None: a
    # move the policy did not decide (a command's, a recycle's), or a record without the terms.
    cost: dict[str, Any] | None = None
    # "empty": the new session was opened empty (``session/new``, by /clear), and the CLI writes
    # its file only at its first turn (``liminal.kernel.reopen``); None: a session liminal wrote.
    opened: str | None = None
    # What moved the thread: liminal's own swap (``swap``), a command as it was given
    # (``/undo``, ``/clear A``, ``/clear``, ``/optimise``), or ``reopen`` (``reopen_empty``).
    # None in records written before it: a committed one's ``reason`` then names a command.
    move: str | None = None
    # What the rewrite placed in its dynamic zone (``liminal.gradient.zone.Placed.as_dict``:
    # key, kind, score, text); None: nothing, or a record from before the zone.
    zone: list[dict[str, Any]] | None = None
    # committed: the bytes liminal wrote as the new session's file (what a later ``/fork MARK``
    # leaves out of it on a machine whose ``rewrites.jsonl`` does not know the session); None
    # for an empty session, and in records from before it.
    size: int | None = None

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: Any) -> SwapRecord:
        """The record a journal line holds; ValueError for anything else (damage)."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        known = {f for f in cls.__dataclass_fields__}
        record = cls(**{k: v for k, v in data.items() if k in known})
        for name, kinds in _TYPES.items():
            if not isinstance(getattr(record, name), kinds) or isinstance(getattr(record, name), bool):
                raise ValueError(f"{name} is {getattr(record, name)!r}")
        # A time no clock gives (years 1 to 9999) is damage: shown, it crashes the listing.
        if not _EARLIEST <= record.started_at <= _LATEST:
            raise ValueError(f"started_at is {record.started_at!r}")
        return record


_EARLIEST, _LATEST = -62_135_596_800, 253_402_300_799


_TYPES: dict[str, tuple[type, ...]] = {
    "thread_id": (str,), "old_backing_id": (str,), "new_backing_id": (str, type(None)),
    "outcome": (str,), "reason": (str,), "started_at": (int, float), "duration_s": (int, float),
    "tokens_before": (int, type(None)), "tokens_after": (int, type(None)), "harness": (str,),
    "cwd": (str, type(None)), "new_path": (str, type(None)), "cost": (dict, type(None)),
    "opened": (str, type(None)), "move": (str, type(None)), "zone": (list, type(None)),
    "size": (int, type(None)),
}


class SwapJournal:
    """One proxy's view of the journal. Several share the file (two editor windows, every
    connection of ``liminal serve``), so an attempt under way is marked beyond the file: its
    ``begin`` is written holding an ``flock`` on ``swaps.moving/<new id>.lock`` until its end
    record is (``begin``, ``finish``). The lock dies with its process, which is what tells a
    crash's leftover from another liminal's swap still running (``abandon``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._moving: dict[str, int] = {}  # attempts of this journal under way -> lock descriptor
        # ``current``'s reading, carried on from where it stopped (the journal only grows):
        self._read_to = 0  # bytes read, up to the end of the last whole line
        self._read_id: tuple[int, int] | None = None  # (device, inode) of the file read
        # The last bytes read: still there in a file only appended to since. A file written anew
        # (``forget``) may get the inode of the one read before, freed by the rename.
        self._read_tail = b""
        self._commits: dict[str, list[str]] = {}  # thread -> backing ids committed, oldest first
        self._outcomes: dict[str, str] = {}  # new backing id -> the last outcome of its attempt
        self._empty: set[str] = set()  # backing ids committed as sessions opened empty

    def append(self, record: SwapRecord) -> None:
        self._append(self.path, record.to_json() + b"\n")

    def _append(self, path: Path, line: bytes, *, sync: bool = True) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            # Whole, after any record a crash or a full disk cut short (see ``append_line``).
            rewrites.append_line(path, line, sync=sync)

    @property
    def moving_folder(self) -> Path:
        return self.path.with_name("swaps.moving")

    def _attempt_lock(self, new_id: str) -> Path:
        if not is_session_id(new_id):  # an id becomes part of a path only in a session id's form
            raise ValueError(f"not a session id: {new_id!r}")
        return self.moving_folder / f"{new_id}.lock"

    def _open_attempt_lock(self, new_id: str) -> int:
        path = self._attempt_lock(new_id)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def begin(self, record: SwapRecord) -> None:
        """An attempt starts; the record names the file it will write (``unfinished``). Until
        ``finish``, no other liminal's start takes it for a crash's leftover."""
        new_id = record.new_backing_id or ""
        fd = self._open_attempt_lock(new_id)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a fresh id: nobody else holds it
            self._moving[new_id] = fd
            self.append(record)
        except BaseException:
            self.finish(new_id)
            raise

    def finish(self, new_id: str) -> None:
        """The attempt ``new_id`` has ended (its end record written, or it never will be: what it
        made is already removed)."""
        fd = self._moving.pop(new_id, None)
        if fd is None:
            return
        with contextlib.suppress(OSError):
            self._attempt_lock(new_id).unlink()
        os.close(fd)  # the flock goes with it

    @contextlib.contextmanager
    def abandon(self, new_id: str) -> Iterator[bool]:
        """Whether the attempt ``new_id`` is a crash's leftover: True when no live liminal runs
        it and it still has no end record; held so until the block ends."""
        path = self._attempt_lock(new_id)
        fd = self._open_attempt_lock(new_id)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False  # its liminal is alive and swapping
                return
            # Its liminal may have ended it between the reading and the lock: read again.
            yield any(r.new_backing_id == new_id for r in self.unfinished())
            with contextlib.suppress(OSError):
                path.unlink()
        finally:
            os.close(fd)

    def records(self, thread_id: str | None = None, *, begins: bool = False) -> list[SwapRecord]:
        """Every swap attempt's outcome, oldest first (with ``begins``, their opening records
        too)."""
        if not self.path.exists():
            return []
        found = []
        with self.path.open("rb") as f:
            for number, line in enumerate(f, 1):
                try:
                    record = SwapRecord.from_json(orjson.loads(line))
                except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
                    # A torn last line after a crash (the swap it described never committed),
                    # or damage: skipped, said once per reading, never a reason not to start.
                    _damaged(self.path, number, exc)
                    continue
                if record.outcome == "begin" and not begins:
                    continue
                if thread_id is None or record.thread_id == thread_id:
                    found.append(record)
        return found

    def opened_empty(self, thread_id: str, backing_id: str) -> bool:
        """A committed move put the thread on ``backing_id`` opened empty (``SwapRecord.opened``).
        Asked at every load of a moved thread: read on as ``current`` reads."""
        self.current(thread_id)
        return backing_id in self._empty and self._outcomes.get(backing_id) == "committed"

    def unfinished(self) -> list[SwapRecord]:
        """Attempts that began and never ended: liminal died during them."""
        open_attempts: dict[str | None, SwapRecord] = {}
        for record in self.records(begins=True):
            if record.outcome == "begin":
                open_attempts[record.new_backing_id] = record
            else:
                open_attempts.pop(record.new_backing_id, None)
        return list(open_attempts.values())

    def current(self, thread_id: str) -> tuple[str | None, list[str]]:
        """The backing id the journal says carries ``thread_id`` now (None: never moved), and
        every one it was on, as ``lineage`` would say; reads only what was appended since the
        last call (it is asked at every load, by a liminal that may run for days)."""
        try:
            with self.path.open("rb") as f:
                st = os.fstat(f.fileno())
                tail = self._read_tail
                if (st.st_dev, st.st_ino) != self._read_id or st.st_size < self._read_to \
                        or os.pread(f.fileno(), len(tail), self._read_to - len(tail)) != tail:
                    self._read_to, self._read_id, self._read_tail = 0, (st.st_dev, st.st_ino), b""
                    self._commits, self._outcomes, self._empty = {}, {}, set()
                f.seek(self._read_to)
                data = f.read()
        except FileNotFoundError:
            return None, []
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        for line in data[:end].splitlines():
            try:
                record = SwapRecord.from_json(orjson.loads(line))
            except (orjson.JSONDecodeError, TypeError, ValueError):
                continue  # said by ``records`` when it reads the file
            if record.outcome == "begin" or not record.new_backing_id:
                continue
            self._outcomes[record.new_backing_id] = record.outcome
            if record.outcome == "committed":
                self._commits.setdefault(record.thread_id, []).append(record.new_backing_id)
                if record.opened == "empty":
                    self._empty.add(record.new_backing_id)
        self._read_to += end
        if end:
            self._read_tail = data[max(0, end - _TAIL):end]
        carried = [b for b in self._commits.get(thread_id, ()) if self._outcomes.get(b) == "committed"]
        return (carried[-1] if carried else None), carried

    def forget(self, thread_id: str) -> int:
        """Every record of ``thread_id`` taken out of the journal (a deleted thread's: what its
        rewrites placed in their dynamic zone is its text, ``SwapRecord.zone``); how many. The
        file is written anew under the lock appends take (``rewrites.rewrite_lines``)."""
        def of_thread(line: bytes) -> bool:
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                return False  # damage: kept, as a reading skips it
            return isinstance(record, dict) and record.get("thread_id") == thread_id

        with self._lock:
            return rewrites.rewrite_lines(self.path, lambda line: not of_thread(line))

    @property
    def rewrites_path(self) -> Path:
        return self.path.with_name("rewrites.jsonl")

    def note_rewrite(self, backing_id: str, size: int) -> None:
        """liminal wrote ``size`` bytes as ``backing_id``'s file (``liminal.ingest.rewrites``)."""
        rewrites.note(self.rewrites_path, backing_id, size)

    def own_bytes(self, backing_id: str) -> int:
        return rewrites.own_bytes(self.rewrites_path, backing_id)

    def lineage(self) -> list[tuple[str, str]]:
        """(thread id, backing id) of every committed swap, oldest first. A commit that a later
        end record of the same attempt undoes (its write reported an error after the line was
        on disk: the swap was undone and its rewrite removed) binds nothing."""
        return [(r.thread_id, r.new_backing_id or "") for r in committed(self.records())]


def committed(records: list[SwapRecord]) -> list[SwapRecord]:
    """The committed records of ``records`` (a journal's, oldest first) whose attempt ended so:
    ``SwapJournal.lineage``, of this home's journal or the shared store's."""
    last: dict[str | None, str] = {r.new_backing_id: r.outcome for r in records}
    return [r for r in records
            if r.outcome == "committed" and r.new_backing_id and last[r.new_backing_id] == "committed"]
