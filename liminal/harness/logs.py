"""A CLI's own logs of every session (JSONL files it appends one line to at a time: the prompts a
person typed in its own interface, the names given to threads), without the lines of some
sessions: what a deleted thread leaves in them. No CLI's format here: each harness says which
file, which lines, and how its CLI locks the file while it appends.

The CLI may append at the very moment liminal rewrites, so the rewrite takes the lock the CLI
takes itself (``Lock``) and writes in the way that loses no line the CLI appends:

- ``Flock``: an exclusive ``flock(2)`` on a file, the way Rust's ``File::lock`` takes it (Codex);
- ``LockDir``: a lock folder made with ``mkdir``, taken over when older than its staleness (the
  ``proper-lockfile`` package Claude Code uses, ``<file>.lock``).

A CLI that opens the log by its name once it holds the lock gets a rewrite into a temp file and
a rename over the log (``in_place=False``): atomic, a crash leaves the log whole. One that opens
the log first and then waits for the lock on the open file (Codex's ``history.jsonl``) would
append to the file the rename replaced, so its log is rewritten in place (``in_place=True``):
the lines kept from the start, then the file cut to their length; a crash halfway leaves the
lines kept and a tail of the old ones (some of the deleted thread's among them, which the next
``liminal threads purge`` takes). Either way the log's size is looked at again just before the
write: a writer that takes no lock (an older CLI) and appended meanwhile makes the rewrite start
over. The lock is waited for ``WAIT_SECONDS`` at most, then ``LogBusy``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

WAIT_SECONDS = 5.0
_POLL = 0.02
_ATTEMPTS = 5  # rewrites started again because the log grew under them


class LogBusy(RuntimeError):
    """The CLI held its log's lock past ``WAIT_SECONDS``, or kept appending: left as it is."""


@contextlib.contextmanager
def flock(lock_file: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``lock_file`` (made, 0600, if absent)."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)

    def taken() -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    try:
        _wait(taken, lock_file)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def lock_dir(folder: Path, stale: float) -> Iterator[None]:
    """The lock folder ``folder`` (``proper-lockfile``'s): made with ``mkdir``; one older than
    ``stale`` seconds is a holder that died, removed and taken."""
    def taken() -> bool:
        try:
            folder.mkdir(mode=0o700)
            return True
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):
                if time.time() - folder.lstat().st_mtime > stale:
                    folder.rmdir()
                    return taken()
            return False

    _wait(taken, folder)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            folder.rmdir()


def _wait(taken: Callable[[], bool], lock: Path) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not taken():
        if time.monotonic() > deadline:
            raise LogBusy(f"{lock.name} stayed locked {WAIT_SECONDS:.0f} s")
        time.sleep(_POLL)


@dataclass(frozen=True, slots=True)
class Dropped:
    """What a rewrite took out, and the lines it kept (parsed: those that parse as objects)."""

    dropped: list[dict[str, Any]]
    kept: list[dict[str, Any]]


def count(log: Path, drop: Callable[[dict[str, Any]], bool]) -> int:
    """How many lines of ``log`` ``drop`` picks (no lock: a look)."""
    try:
        data = _read(log)
    except FileNotFoundError:
        return 0
    return sum(1 for _, value in _lines(data) if value is not None and drop(value))


def count_by(log: Path, key: str) -> Counter[str]:
    """How many lines of ``log`` name each value of their field ``key`` (a string)."""
    try:
        data = _read(log)
    except FileNotFoundError:
        return Counter()
    return Counter(v for _, value in _lines(data) if value is not None and isinstance(v := value.get(key), str))


def remove(log: Path, drop: Callable[[dict[str, Any]], bool], lock: AbstractContextManager[None], *,
           in_place: bool) -> Dropped:
    """``log`` without the lines ``drop`` picks, under ``lock``; every other line kept byte for
    byte (one that does not parse, a last one without its newline). A log that is not there, or
    has none of them, is left untouched."""
    if not log.is_file() or log.is_symlink() or count(log, drop) == 0:
        return Dropped([], [])
    with lock:
        for _ in range(_ATTEMPTS):
            data = _read(log)
            dropped: list[dict[str, Any]] = []
            kept: list[dict[str, Any]] = []
            out: list[bytes] = []
            for raw, value in _lines(data):
                if value is not None and drop(value):
                    dropped.append(value)
                    continue
                out.append(raw)
                if value is not None:
                    kept.append(value)
            if not dropped:
                return Dropped([], kept)
            if _write(log, b"".join(out), len(data), in_place=in_place):
                return Dropped(dropped, kept)
    raise LogBusy(f"{log.name} kept growing while it was rewritten")


def _read(log: Path) -> bytes:
    fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _lines(data: bytes) -> Iterator[tuple[bytes, dict[str, Any] | None]]:
    for raw in data.splitlines(keepends=True):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            value = None
        yield raw, value if isinstance(value, dict) else None


def _write(log: Path, data: bytes, was: int, *, in_place: bool) -> bool:
    """``data`` as the log's whole content, unless the log is no longer ``was`` bytes long (a
    writer appended meanwhile: False, nothing written)."""
    if in_place:
        fd = os.open(log, os.O_RDWR | os.O_NOFOLLOW)
        try:
            if os.fstat(fd).st_size != was:
                return False
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        finally:
            os.close(fd)
        return True
    temp = log.with_name(f".{log.name}.{os.getpid()}.tmp")
    try:
        with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
            os.fchmod(handle.fileno(), log.stat().st_mode & 0o777)  # the CLI's own choice
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if log.stat().st_size != was:
            return False
        temp.replace(log)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    folder = os.open(log.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return True
