"""``rewrites.jsonl``: how much of a session file liminal wrote itself, so indexing marks it.

A swap (or the cut of ``/undo``, ``/clear MARK``) writes a thread's next session under a new id;
its records copy ones already in the store (indexed from the older file), so the session-file
indexer stores them marked as liminal's (``SessionRecord.own``: kept for the recall keys that
will name this session, never a search hit). The move notes the size here before it
(``note``); the index worker, which learns of the new session from the move's own frames, reads
it (``own_bytes``). It lives with ingest because ingest is its reader, and the worker process
must read it without the kernel.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import orjson

from liminal import log

logger = log.get("liminal.ingest.rewrites")


def append_line(path: Path, line: bytes, *, sync: bool) -> None:
    """Append one JSONL record (``line`` ends with a newline) to a 0600 file, whole: a record
    cut short before it (a crash, a full disk) is ended first, so it cannot make this one
    unreadable too, and a write the system takes only in part is finished. Written holding the
    file's ``flock``, to the file the path names once it is held: a rewrite of the file
    (``rewrite_lines``) replaces it holding the lock, and an append waiting for it goes to the
    new file, never to the one replaced."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _replaced(path, fd):
                continue
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            view = memoryview(line)
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(f"no bytes taken by {path}")
                view = view[written:]
            if sync:
                os.fsync(fd)
            return
        finally:
            os.close(fd)


def _replaced(path: Path, fd: int) -> bool:
    """The path names another file than ``fd`` now (or none)."""
    try:
        now = path.stat()
    except FileNotFoundError:
        return True
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino)


def rewrite_lines(path: Path, keep: Callable[[bytes], bool]) -> int:
    """The file (written by ``append_line``) less the lines ``keep`` refuses, written anew and
    renamed into place holding its ``flock``; how many lines went (none: the file untouched).
    Another process's append waits, then goes to the new file; a reader that follows the file by
    its offset sees another inode and reads it again."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _replaced(path, fd):
                continue
            with os.fdopen(os.dup(fd), "rb") as f:
                lines = f.read().splitlines(keepends=True)
            kept = [line for line in lines if keep(line)]
            if len(kept) == len(lines):
                return 0
            temp = path.with_name(f".{path.name}.rewrite")
            with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
                out.writelines(kept)
                out.flush()
                os.fsync(out.fileno())
            temp.replace(path)
            folder = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
            return len(lines) - len(kept)
        finally:
            os.close(fd)


def note(path: Path, backing_id: str, size: int) -> None:
    """liminal wrote ``size`` bytes as the session file of ``backing_id``."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Not fsynced (it is inside the swap's hold): a note lost to a power cut only means the
    # rewrite's records are indexed as the CLI's (recall still finds them; search twice).
    append_line(path, orjson.dumps({"backing_id": backing_id, "bytes": size}) + b"\n", sync=False)


def own_bytes(path: Path, backing_id: str) -> int:
    """How much of ``backing_id``'s session file liminal wrote; 0 for one the CLI wrote from the
    start. A damaged line is skipped with a warning naming the file and line."""
    try:
        with path.open("rb") as f:
            for number, line in enumerate(f, 1):
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    logger.warning("damaged line skipped", file=str(path), line=number, error=str(exc))
                    continue
                if not isinstance(record, dict) or record.get("backing_id") != backing_id:
                    continue
                size = record.get("bytes")
                if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
                    return size
                logger.warning("damaged line skipped", file=str(path), line=number,
                               error=f"bytes is {size!r}")
    except FileNotFoundError:
        pass
    return 0
