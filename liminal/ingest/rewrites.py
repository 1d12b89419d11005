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

import os
from pathlib import Path

import orjson

from liminal import log

logger = log.get("liminal.ingest.rewrites")


def append_line(path: Path, line: bytes, *, sync: bool) -> None:
    """Append one JSONL record (``line`` ends with a newline) to a 0600 file, whole: a record
    cut short before it (a crash, a full disk) is ended first, so it cannot make this one
    unreadable too, and a write the system takes only in part is finished."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
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
