"""What ``liminal mcp`` and the proxy share, as small private files under ``$LIMINAL_HOME/mcp``.

Which thread a server serves: a server added to a ``session/resume`` or ``session/load`` is told
(``--thread``); one added to a ``session/new`` cannot be, since the agent chooses the session id
in its answer. It gets a fresh nonce (``--bind``) instead, and the proxy writes
``bind-<nonce>`` holding the thread id once the answer names it. The server reads that file when
a tool first needs its thread (the model cannot call a tool before the session exists).

The slash commands the model asks for (``slash``) cannot run while the model's own turn is
running: the server leaves each as ``slash/<thread>--<time>-<rand>.json``; the proxy runs and
removes them, oldest first, when the thread's turn ends.

Every name that becomes part of a path is checked first (``safe``); files are written 0600 and
atomically, so a reader sees all of one or none.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SEPARATOR = "--"


def safe(name: str) -> bool:
    """Whether ``name`` may become (part of) a file name: no separators, no dot-files, no '--'."""
    return isinstance(name, str) and SAFE.fullmatch(name) is not None and SEPARATOR not in name


def folder(home: Path) -> Path:
    return home / "mcp"


def new_nonce() -> str:
    return secrets.token_hex(16)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")  # 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def bind(home: Path, nonce: str, thread: str) -> None:
    if not (safe(nonce) and safe(thread)):
        raise ValueError(f"not a nonce and thread id: {nonce!r}, {thread!r}")
    _write(folder(home) / f"bind-{nonce}", thread.encode())


BIND_LIFE_SECONDS = 30 * 24 * 3600  # a bind file serves the process that wrote it, as long as it lives


TEMP_LIFE_SECONDS = 3600  # a half-written file's writer is long gone by then


def sweep(home: Path, older_than: float = BIND_LIFE_SECONDS) -> int:
    """Remove bind files and queued slash commands not touched for ``older_than`` seconds, and
    half-written files (``.tmp-*``, left by a server killed mid-write) after an hour; returns
    how many. A server reads its bind file when a tool is first called, and a swap's resume
    starts a new server with the same nonce: the file must outlive the session's first turns,
    not the liminal that wrote it. A slash command waits for its thread's next turn end, which
    may never come (the thread was left)."""
    removed = 0
    now = time.time()
    base = folder(home)
    for where, prefix in ((base, "bind-"), (base / "slash", "")):  # slash/: every command
        try:
            entries = list(where.iterdir())
        except OSError:
            continue
        for path in entries:
            if path.name.startswith(".tmp-"):
                life: float = TEMP_LIFE_SECONDS
            elif path.name.startswith(prefix):
                life = older_than
            else:
                continue
            try:
                if path.is_file() and path.lstat().st_mtime < now - life:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
    return removed


def bound_thread(home: Path, nonce: str) -> str | None:
    if not safe(nonce):
        return None
    try:
        thread = (folder(home) / f"bind-{nonce}").read_text().strip()
    except OSError:
        return None
    return thread if safe(thread) else None


@dataclass(frozen=True, slots=True)
class SlashRequest:
    thread: str
    command: str
    args: str
    path: Path


def leave_slash(home: Path, thread: str, command: str, args: str) -> Path:
    """Queue a slash command for the thread's turn end; returns the file written."""
    if not safe(thread):
        raise ValueError(f"not a thread id: {thread!r}")
    name = f"{thread}{SEPARATOR}{time.time_ns():020d}-{secrets.token_hex(4)}.json"
    path = folder(home) / "slash" / name
    _write(path, orjson.dumps({"thread": thread, "command": command, "args": args}))
    return path


# A queued command's file name, as ``leave_slash`` writes it; anything else in the folder is
# not a command (nor another thread's: the thread is the whole part before the separator).
_SLASH_FILE = re.compile(r"(?P<thread>[A-Za-z0-9][A-Za-z0-9._-]{0,127})--[0-9]{20}-[0-9a-f]{8}\.json")
_SLASH_BYTES = 64 * 1024  # a command is a few dozen bytes


def take_slash(home: Path, thread: str) -> list[SlashRequest]:
    """The thread's queued slash commands, oldest first, each removed from the queue as read (a
    command runs at most once, even if the proxy dies while running it). Only regular files are
    read (this runs in the proxy: a FIFO or a link to a device there must not block or flood it)."""
    if not safe(thread):
        return []
    queue = folder(home) / "slash"
    try:
        names = sorted(p.name for p in queue.iterdir()
                       if (m := _SLASH_FILE.fullmatch(p.name)) is not None and m["thread"] == thread)
    except OSError:
        return []
    taken = []
    for name in names:
        path = queue / name
        data = _read_small(path)
        with contextlib.suppress(OSError):  # a folder by that name: left, never read
            path.unlink()
        if isinstance(data, dict) and data.get("thread") == thread and isinstance(data.get("command"), str) \
                and isinstance(data.get("args"), str):
            taken.append(SlashRequest(thread, data["command"], data["args"], path))
    return taken


def _read_small(path: Path, *, raw: bool = False) -> object:
    """A regular file's JSON (``raw``: its bytes), read without following a link or waiting on a
    FIFO; None else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _SLASH_BYTES + 1)
        if len(data) > _SLASH_BYTES:
            return None
        return data if raw else orjson.loads(data)
    except (OSError, orjson.JSONDecodeError):
        return None
    finally:
        os.close(fd)


def of_thread(home: Path, thread: str) -> list[Path]:
    """The files here that are ``thread``'s: the slash commands it has queued (their words are
    the model's) and the bind files naming it."""
    if not safe(thread):
        return []
    base = folder(home)
    found = []
    try:
        found += [p for p in (base / "slash").iterdir()
                  if (m := _SLASH_FILE.fullmatch(p.name)) is not None and m["thread"] == thread]
    except OSError:
        pass
    try:
        binds = [p for p in base.iterdir() if p.name.startswith("bind-")]
    except OSError:
        binds = []
    for path in binds:
        data = _read_small(path, raw=True)
        if isinstance(data, bytes) and data.strip() == thread.encode():
            found.append(path)
    return found
