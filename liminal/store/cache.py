"""The cache for large blobs (big tool outputs, search dumps): Redis when configured, else files.

A cache, not a store: every entry has a TTL and may vanish earlier; whoever reads it must be able
to rebuild it from the store (the system of record). That is why a Redis outage only makes
``get`` miss and ``set`` a no-op, with one warning, instead of failing the caller.

Keys are short strings; values are bytes. A key of the form ``<kind>:<session id>:<rest>``
(``recall:<session>:<record>:<block>``, ``liminal.gradient.recall``) holds something of that
session of a CLI, and so of the thread whose lineage has it: the cache keeps such entries by
session, so that every one of a deleted thread's can be found and removed (``forget``) and those
left behind counted (``held``: ``liminal doctor``). Locally each session's entries are a folder of
their own; in Redis the key says the session, and a ``SCAN`` finds them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio

from liminal import log
from liminal.config import Settings
from liminal.sessionfiles import is_session_id

logger = log.get("liminal.store.cache")


class Cache(Protocol):
    backend: str

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, ttl_seconds: int | None = None) -> None: ...

    async def delete(self, key: str) -> None: ...

    async def forget(self, session: str) -> int:
        """Remove every entry whose key names ``session`` (``session_of``); how many. Raises
        ``CacheUnavailable`` when the cache cannot be reached: what it holds may be there still."""

    async def held(self) -> dict[str, int]:
        """How many entries each session has (``session_of``), expired ones left out. Raises
        ``CacheUnavailable``."""

    async def aclose(self) -> None: ...


class CacheUnavailable(Exception):
    """The cache could not be reached to remove or count entries (a read or write that fails is
    a miss instead: the store has what the cache holds, but a deletion must know)."""


def session_of(key: str) -> str | None:
    """The session a key names, ``<kind>:<session id>:<rest>``; None for any other key."""
    parts = key.split(":", 2)
    return parts[1] if len(parts) == 3 and is_session_id(parts[1]) else None


OTHERS = "_"  # the local folder of entries whose key names no session (a session id never is one)


class LocalCache:
    """Files under ``$LIMINAL_HOME/cache``, in a folder per session (``<session id>/``, and
    ``_/`` for keys naming none), each named by its key's digest; the expiry time is the file's
    mtime. A file directly in the folder is an entry of the flat layout of older liminals, whose
    session nothing tells: removed when found (``_bound``, ``purge``)."""

    backend = "local"

    def __init__(self, root: Path, ttl_seconds: int, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.root = root
        self.ttl = ttl_seconds
        self.max_bytes = max_bytes  # past this, expired then oldest entries go first

    def _path(self, key: str) -> Path:
        return self.root / (session_of(key) or OTHERS) / hashlib.sha256(key.encode()).hexdigest()

    async def get(self, key: str) -> bytes | None:
        path = self._path(key)

        def read() -> bytes | None:
            try:
                if path.stat().st_mtime < time.time():
                    path.unlink(missing_ok=True)
                    return None
                return path.read_bytes()
            except OSError:  # gone, or a folder that is not one: a miss
                return None

        return await anyio.to_thread.run_sync(read)

    async def set(self, key: str, value: bytes, ttl_seconds: int | None = None) -> None:
        path = self._path(key)
        expires = time.time() + (self.ttl if ttl_seconds is None else ttl_seconds)

        def write() -> None:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")  # 0600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(value)
                os.utime(tmp, (expires, expires))
                for last in (False, True):  # its folder emptied and removed meanwhile: made again
                    path.parent.mkdir(mode=0o700, exist_ok=True)
                    try:
                        Path(tmp).replace(path)  # atomic: a reader sees the old value or the new one
                        break
                    except FileNotFoundError:
                        if last:
                            raise
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            self._bound()

        # A cache is never the record: a write that fails (disk full, a folder gone) is a miss
        # later, said here, and never an error for the caller.
        try:
            await anyio.to_thread.run_sync(write)
        except OSError as exc:
            logger.warning("cache write failed", key=key[:80], error=str(exc))

    def _entries(self, *, flat: bool = True) -> list[tuple[float, int, str]]:
        """Every entry (expiry, size, path); an entry of the flat layout is removed instead
        (with ``flat``; else left out)."""
        entries = []
        for folder in os.scandir(self.root):
            if folder.name.startswith(".tmp-"):
                continue
            if not folder.is_dir(follow_symlinks=False):
                if flat:
                    Path(folder.path).unlink(missing_ok=True)
                continue
            try:
                inside = list(os.scandir(folder.path))
            except OSError:  # removed meanwhile (``forget``)
                continue
            for entry in inside:
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                entries.append((info.st_mtime, info.st_size, entry.path))
        return entries

    def _bound(self) -> None:
        """Keep the folder under ``max_bytes``: expired entries go first, then the oldest."""
        entries = self._entries()
        total = sum(size for _, size, _ in entries)
        entries.sort()  # expiry order: expired ones, then those written longest ago (one TTL)
        for _, size, entry_path in entries:
            if total <= self.max_bytes:
                break
            Path(entry_path).unlink(missing_ok=True)
            total -= size

    async def delete(self, key: str) -> None:
        path = self._path(key)
        await anyio.to_thread.run_sync(lambda: path.unlink(missing_ok=True))

    async def purge(self) -> int:
        """Remove expired entries (and those of the flat layout), and the folders left empty;
        returns how many entries."""

        def sweep() -> int:
            now, removed = time.time(), 0
            for expires, _, path in self._entries():
                if expires < now:
                    Path(path).unlink(missing_ok=True)
                    removed += 1
            for folder in self.root.iterdir():
                if folder.is_dir() and not folder.is_symlink():
                    try:
                        folder.rmdir()  # only when empty
                    except OSError:
                        continue
            return removed

        return await anyio.to_thread.run_sync(sweep) if self.root.is_dir() else 0

    async def forget(self, session: str) -> int:
        if not is_session_id(session):
            return 0
        folder = self.root / session

        def remove() -> int:
            try:
                found = sum(1 for entry in os.scandir(folder) if not entry.name.startswith("."))
            except FileNotFoundError:
                return 0
            except OSError as exc:
                raise CacheUnavailable(f"{folder}: {exc}") from exc
            if folder.is_symlink():
                folder.unlink()
                return 0
            shutil.rmtree(folder, ignore_errors=True)
            if folder.exists():
                raise CacheUnavailable(f"{folder} could not be removed")
            return found

        return await anyio.to_thread.run_sync(remove)

    async def held(self) -> dict[str, int]:
        def count() -> dict[str, int]:
            now, found = time.time(), dict[str, int]()
            for expires, _, path in self._entries(flat=False) if self.root.is_dir() else []:
                session = Path(path).parent.name
                if expires >= now and is_session_id(session):
                    found[session] = found.get(session, 0) + 1
            return found

        try:
            return await anyio.to_thread.run_sync(count)
        except OSError as exc:
            raise CacheUnavailable(f"{self.root}: {exc}") from exc

    async def aclose(self) -> None:
        return None


class RedisCache:
    """``redis.asyncio`` with ``SET key value EX ttl``; errors become misses, logged once."""

    backend = "redis"

    def __init__(self, client: Any, ttl_seconds: int, prefix: str = "liminal:") -> None:
        self._client = client
        self.ttl = ttl_seconds
        self.prefix = prefix
        self._warned = False

    @classmethod
    def from_url(cls, url: str, ttl_seconds: int, prefix: str = "liminal:") -> RedisCache:
        import redis.asyncio as redis

        client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        return cls(client, ttl_seconds, prefix)

    def _failed(self, exc: Exception) -> None:
        if not self._warned:
            logger.warning("cache unavailable; continuing without it", error=str(exc))
            self._warned = True

    async def get(self, key: str) -> bytes | None:
        from redis.exceptions import RedisError

        try:
            value = await self._client.get(self.prefix + key)
        except (RedisError, OSError) as exc:
            self._failed(exc)
            return None
        self._warned = False
        return bytes(value) if value is not None else None

    async def set(self, key: str, value: bytes, ttl_seconds: int | None = None) -> None:
        from redis.exceptions import RedisError

        ttl = self.ttl if ttl_seconds is None else ttl_seconds
        try:
            await self._client.set(self.prefix + key, value, ex=max(1, ttl))
        except (RedisError, OSError) as exc:
            self._failed(exc)

    async def delete(self, key: str) -> None:
        from redis.exceptions import RedisError

        try:
            await self._client.delete(self.prefix + key)
        except (RedisError, OSError) as exc:
            self._failed(exc)

    def _matching(self, pattern: str) -> AsyncIterator[bytes]:
        result: AsyncIterator[bytes] = self._client.scan_iter(match=pattern, count=1000)
        return result

    async def forget(self, session: str) -> int:
        from redis.exceptions import RedisError

        if not is_session_id(session):
            return 0
        pattern = f"{_glob(self.prefix)}*:{session}:*"
        try:
            keys = [k async for k in self._matching(pattern)
                    if session_of(k.decode("utf-8", "replace")[len(self.prefix):]) == session]
            for start in range(0, len(keys), 500):
                await self._client.unlink(*keys[start:start + 500])
        except (RedisError, OSError) as exc:
            raise CacheUnavailable(str(exc)) from exc
        return len(keys)

    async def held(self) -> dict[str, int]:
        from redis.exceptions import RedisError

        found: dict[str, int] = {}
        try:
            async for k in self._matching(f"{_glob(self.prefix)}*"):
                session = session_of(k.decode("utf-8", "replace")[len(self.prefix):])
                if session is not None:
                    found[session] = found.get(session, 0) + 1
        except (RedisError, OSError) as exc:
            raise CacheUnavailable(str(exc)) from exc
        return found

    async def ping(self) -> bool:
        from redis.exceptions import RedisError

        try:
            return bool(await self._client.ping())
        except (RedisError, OSError):
            return False

    async def aclose(self) -> None:
        await self._client.aclose()


def _glob(text: str) -> str:
    """``text`` as itself in a Redis ``MATCH`` pattern."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def redis_url_of(cache_url: str) -> str | None:
    """The Redis ``cache.url`` names, if it names one (a ``redis://``, ``rediss://`` or
    ``unix://`` URL); else the cache is files in the home. The cache, serve's thread locks and
    the move leases all ask here."""
    return cache_url if cache_url.startswith(("redis://", "rediss://", "unix://")) else None


@asynccontextmanager
async def open_cache(settings: Settings) -> AsyncIterator[Cache]:
    """Redis when ``cache.url`` names one (``redis_url_of``), else local files."""
    url = settings.cache.url
    cache: Cache
    if redis_url_of(url) is not None:
        cache = RedisCache.from_url(url, settings.cache.ttl_seconds)
    else:
        cache = LocalCache(settings.home / "cache", settings.cache.ttl_seconds)
    try:
        yield cache
    finally:
        await cache.aclose()
