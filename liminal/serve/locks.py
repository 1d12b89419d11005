"""Thread locks: one writer per thread across connections and processes.

A connection of ``liminal serve`` that opens a thread (``session/new``'s answer, or the first
``session/load``, ``resume`` or ``prompt`` naming it) takes ``$LIMINAL_HOME/locks/<thread>.lock``
with ``flock``: held by the open file, so a lock is freed when its holder closes it or dies (no
stale locks after a crash), and two holders conflict even inside one process. Another
connection, here or in another ``liminal serve`` on the same home, waits for it.

Sidecars on different machines share no home: their locks would live in Redis (``SET NX`` with a
renewed expiry); not built yet (docs/operations.md, "serve").
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from liminal.mcp.link import safe


class ThreadLocks:
    """The locks one holder (a connection's proxy) has taken."""

    def __init__(self, home: Path) -> None:
        self.folder = home / "locks"
        self._held: dict[str, int] = {}

    def holds(self, thread_id: str) -> bool:
        return thread_id in self._held

    def try_take(self, thread_id: str) -> bool:
        """Take the thread's lock if it is free (or already ours); False if another has it. An
        id that cannot be a file name is not locked (and counts as taken)."""
        if thread_id in self._held:
            return True
        if not safe(thread_id):
            return True
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.folder / f"{thread_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._held[thread_id] = fd
        return True

    def release_all(self) -> None:
        for fd in self._held.values():
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the file releases its flock
        self._held.clear()
