"""Thread locks: one writer per thread across connections, processes and machines.

A connection of ``liminal serve`` that opens a thread (``session/new``'s answer, or the first
``session/load``, ``resume`` or ``prompt`` naming it) takes its lock; another connection waits
for it. Two layers, both taken:

- **The home**: ``$LIMINAL_HOME/locks/<thread>.lock`` with ``flock``, held by the open file, so a
  lock is freed when its holder closes it or dies (nothing goes stale after a crash), and two
  holders conflict even inside one process.
- **Redis**, when ``cache.url`` is a Redis URL (sidecars on several machines share it):
  ``liminal:lock:thread:<thread>`` set with ``NX`` to the holder's random token and a 30 s
  expiry that a task renews every 10 s while held; released by compare-and-delete. A holder that
  died stops renewing: its lock is seen as stale and free 30 s later at most. A Redis that does
  not answer does not block anyone (logged once): the home's lock still holds on one machine.

A thread is locked under one name however it is spelled (``lock_name``): an id that is a UUID
under its canonical form, since an agent that reads session ids as UUIDs (Codex's) opens the same
session for ``ABC...``, ``abc...`` and the 32 digits without hyphens.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import uuid
from pathlib import Path
from typing import Any

from liminal import log
from liminal.acp.port import Component
from liminal.mcp.link import safe

logger = log.get("liminal.serve")
REDIS_TTL_MS = 30_000
RENEW_SECONDS = 10.0
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0"""


def lock_name(thread_id: str) -> str | None:
    """The name the thread is locked under; None when it cannot be one (not a file name)."""
    if not safe(thread_id):
        return None
    try:
        return str(uuid.UUID(thread_id))
    except ValueError:
        return thread_id


class ThreadLocks:
    """The locks one holder (a connection's proxy, a command) has taken."""

    def __init__(self, home: Path, redis_url: str | None = None) -> None:
        self.folder = home / "locks"
        self.redis_url = redis_url
        self.token = uuid.uuid4().hex
        self._held: dict[str, int] = {}  # thread -> the lock file's descriptor
        self._remote: set[str] = set()  # threads also held in Redis
        self._client: Any = None
        self._renewer: asyncio.Task[None] | None = None
        self._warned = False
        # Released for good: a take that finishes later (a connection's reader still winding
        # down, a new session's lock still being taken) would hold a lock nobody frees.
        self._released = False

    def holds(self, thread_id: str) -> bool:
        return lock_name(thread_id) in self._held

    async def try_take(self, thread_id: str) -> bool:
        """Take the thread's lock if it is free (or already ours); False if another has it. An
        id that cannot be a file name is not locked (and counts as taken: ``liminal serve``
        refuses such an id before it asks)."""
        if self._released:
            return False
        name = lock_name(thread_id)
        if name is None or name in self._held:
            return True
        thread_id = name
        fd = self._take_file(thread_id)
        if fd is None:
            return False
        if self.redis_url is not None and not await self._take_remote(thread_id):
            os.close(fd)
            return False
        self._held[thread_id] = fd
        if self._released:  # released while Redis answered: let go of this one too
            await self.release_all()
            return False
        return True

    def _take_file(self, thread_id: str) -> int | None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.folder / f"{thread_id}.lock"
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            # The file may have been removed by its holder (``remove``) between our open and our
            # lock: a lock on that gone file guards nothing (the next taker makes a new one), so
            # only a lock on the file the path still names counts.
            try:
                same = os.path.samestat(os.fstat(fd), path.stat())
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd

    def remove(self, thread_id: str) -> None:
        """Remove a held thread's lock file (the thread is deleted), then let go of it: removed
        while held, so that no taker can hold the file it names meanwhile (``_take_file``)."""
        name = lock_name(thread_id)
        fd = self._held.pop(name, None) if name is not None else None
        if fd is None or name is None:
            return
        thread_id = name
        with contextlib.suppress(OSError):
            (self.folder / f"{thread_id}.lock").unlink()
        with contextlib.suppress(OSError):
            os.close(fd)

    def _redis(self) -> Any:
        if self._client is None:
            import redis.asyncio as redis

            assert self.redis_url is not None

            self._client = redis.Redis.from_url(self.redis_url, socket_timeout=5, socket_connect_timeout=5)
        return self._client

    @staticmethod
    def key(thread_id: str) -> str:
        return f"liminal:lock:thread:{thread_id}"

    async def _take_remote(self, thread_id: str) -> bool:
        try:
            taken = await self._redis().set(self.key(thread_id), self.token, nx=True, px=REDIS_TTL_MS)
        except Exception as exc:  # Redis down: the home's lock is what there is
            self._warn(exc)
            return True
        if not taken:
            return False
        self._remote.add(thread_id)
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew())
        return True

    async def _renew(self) -> None:
        while self._remote:
            await asyncio.sleep(RENEW_SECONDS)
            for thread_id in list(self._remote):
                try:
                    await self._redis().eval(_RENEW, 1, self.key(thread_id), self.token, REDIS_TTL_MS)
                except Exception as exc:
                    self._warn(exc)

    def _warn(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            logger.warning("Redis does not answer; thread locks hold on this machine only", error=str(exc))

    async def release_all(self) -> None:
        """Let go of every lock, for good: later takes are refused."""
        self._released = True
        for fd in self._held.values():
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the file releases its flock
        self._held.clear()
        if self._renewer is not None:
            self._renewer.cancel()
        for thread_id in list(self._remote):
            with contextlib.suppress(Exception):
                await self._redis().eval(_RELEASE, 1, self.key(thread_id), self.token)
        self._remote.clear()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None


class LockRelease(Component):
    """A connection's thread locks end with its agent (``aclose``, after the proxy has waited
    for the agent processes it was stopping, under the supervisor's bound), and not after its
    index worker has drained into the store, which took seconds under load while another
    connection's load of the thread waited (or gave up after ``serve.busy_wait_seconds``): it is
    put ahead of the index worker among the proxy's components (``wiring.Served``'s
    ``leading``)."""

    def __init__(self, locks: ThreadLocks) -> None:
        self.locks = locks

    async def aclose(self) -> None:
        await self.locks.release_all()
