"""Records set aside: what the store refuses even cut, kept whole in a file of its own.

``$LIMINAL_HOME/quarantine/<kind>-<id>.rec`` (0600, in a 0700 folder; a name too long or with
characters a file name should not have is cut and given a digest of the id): one JSON line, the
record's fields and why it was set aside, then the record's raw bytes if it has any (a frame, a
session line), byte for byte. The JSON is ASCII, so a lone surrogate or a NUL the store could not
take is written as its escape. The file is complete (written, synced, then renamed into place)
before the spool that held the record is released: nothing reaches the quarantine half written.
A record set aside again (the write around it failed and was tried later) replaces its file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Collection
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from liminal.ingest.salvage import clean_json

_UNSAFE = re.compile(r"[^A-Za-z0-9._@-]")
_NAME_CHARS = 100


def file_name(kind: str, record_id: str) -> str:
    safe = _UNSAFE.sub("_", record_id)[:_NAME_CHARS]
    if safe != record_id:
        safe += "-" + hashlib.blake2b(record_id.encode("utf-8", "surrogatepass"),
                                      digest_size=6).hexdigest()
    return f"{kind}-{safe}.rec"


def set_aside(into: Path, kind: str, record: Any, reason: str) -> Path:
    """Write ``record`` (a store record) whole into the folder ``into``; returns the file's
    path."""
    assert is_dataclass(record) and not isinstance(record, type)
    into.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        into.chmod(0o700)
    raw = b""
    values: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if isinstance(value, bytes):
            raw = value
            values[f.name] = {"bytes": len(value), "after": "this line"}
        else:
            values[f.name] = list(value) if isinstance(value, tuple) else value
    header = {"kind": kind, "reason": reason, "set_aside": time.time(), "record": values}
    try:
        line = json.dumps(header, ensure_ascii=True)
    except (ValueError, TypeError, RecursionError):  # nested past what json writes, NaN ...
        line = json.dumps(clean_json(header), ensure_ascii=True)
    path = into / file_name(kind, str(getattr(record, "id", "")))
    part = path.with_name(path.name + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb", closefd=False) as out:
            out.write(line.encode("ascii") + b"\n")
            out.write(raw)
            out.flush()
        os.fsync(fd)
    finally:
        os.close(fd)
    part.replace(path)
    dir_fd = os.open(into, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def read_aside(path: Path) -> tuple[dict[str, Any], bytes]:
    """A quarantined record's header and raw bytes (for a person, or a test)."""
    data = path.read_bytes()
    head, _, raw = data.partition(b"\n")
    return json.loads(head), raw


def folder(home: Path) -> Path:
    """Where records are set aside under the liminal home ``home``."""
    return home / "quarantine"


def listing(home: Path) -> list[Path]:
    """The records set aside under ``home``, oldest first."""
    where = folder(home)
    if not where.is_dir():
        return []
    return sorted(where.glob("*.rec"), key=lambda p: (p.stat().st_mtime, p.name))


def of_thread(home: Path, thread: str, sessions: Collection[str]) -> list[Path]:
    """The records set aside under ``home`` that are ``thread``'s: recorded under it (a message,
    the model's summary of it, a frame, a line) or of one of its ``sessions`` (a line, a file
    kept beside one). A file whose first line cannot be read is no one's: left for a person."""
    found = []
    for path in listing(home):
        try:
            with path.open("rb") as f:
                head = json.loads(f.readline())
        except (OSError, ValueError):
            continue
        record = head.get("record") if isinstance(head, dict) else None
        if not isinstance(record, dict):
            continue
        data = record.get("data")
        backing = record.get("backing_id")
        if thread in (record.get("thread_id"), data.get("thread") if isinstance(data, dict) else None) \
                or (isinstance(backing, str) and backing.split("/", 1)[0] in sessions):
            found.append(path)
    return found
