"""The cache for large blobs (big tool outputs, search dumps): Redis when configured, else files.

A cache, not a store: every entry has a TTL and may vanish earlier; whoever reads it must be able
to rebuild it from the store (the system of record). That is why a Redis outage only makes
``get`` miss and ``set`` a no-op, with one warning, instead of failing the caller.

Keys are short strings (``recall:<tool call id>``); values are bytes.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio

from liminal import log
from liminal.config import Settings

logger = log.get("liminal.store.cache")


class Cache(Protocol):
    backend: str

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, ttl_seconds: int | None = None) -> None: ...

    async def delete(self, key: str) -> None: ...

    async def aclose(self) -> None: ...


class LocalCache:
    """Files under ``$LIMINAL_HOME/cache``; the expiry time is the file's mtime."""

    backend = "local"

    def __init__(self, root: Path, ttl_seconds: int, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.root = root
        self.ttl = ttl_seconds
        self.max_bytes = max_bytes  # past this, expired then oldest entries go first

    def _path(self, key: str) -> Path:
        return self.root / hashlib.sha256(key.encode()).hexdigest()

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
                Path(tmp).replace(path)  # atomic: a reader sees the old value or the new one
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

    def _bound(self) -> None:
        """Keep the folder under ``max_bytes``: expired entries go first, then the oldest."""
        entries = []
        for entry in os.scandir(self.root):
            if entry.name.startswith(".tmp-"):
                continue
            try:
                info = entry.stat()
            except FileNotFoundError:
                continue
            entries.append((info.st_mtime, info.st_size, entry.path))
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
        """Remove expired entries; returns how many."""

        def sweep() -> int:
            now, removed = time.time(), 0
            for path in self.root.glob("*"):
                try:
                    if path.stat().st_mtime < now:
                        path.unlink()
                        removed += 1
                except FileNotFoundError:
                    continue
            return removed

        return await anyio.to_thread.run_sync(sweep) if self.root.is_dir() else 0

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

    async def ping(self) -> bool:
        from redis.exceptions import RedisError

        try:
            return bool(await self._client.ping())
        except (RedisError, OSError):
            return False

    async def aclose(self) -> None:
        await self._client.aclose()


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
