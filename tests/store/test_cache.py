"""The blob cache: the local fallback always, Redis for real when LIMINAL_TEST_REDIS_URL is set."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from liminal.config import Settings
from liminal.store.cache import Cache, LocalCache, RedisCache, open_cache
from tests.store.conftest import REDIS_URL

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["local", pytest.param("redis", marks=pytest.mark.skipif(
    not REDIS_URL, reason="LIMINAL_TEST_REDIS_URL is not set"))])
async def cache(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cache]:
    if request.param == "local":
        yield LocalCache(tmp_path / "cache", ttl_seconds=60)
        return
    redis_cache = RedisCache.from_url(REDIS_URL, 60, prefix=f"liminal-test-{uuid.uuid4().hex}:")
    try:
        yield redis_cache
    finally:
        await redis_cache.aclose()


async def test_set_get_delete(cache: Cache) -> None:
    blob = bytes(range(256)) * 8192  # 2 MiB, every byte value
    assert await cache.get("recall:toolu_1") is None
    await cache.set("recall:toolu_1", blob)
    assert await cache.get("recall:toolu_1") == blob
    await cache.set("recall:toolu_1", b"replaced")
    assert await cache.get("recall:toolu_1") == b"replaced"
    await cache.delete("recall:toolu_1")
    assert await cache.get("recall:toolu_1") is None
    await cache.delete("never-set")


@pytest.mark.slow
async def test_entries_expire(cache: Cache) -> None:
    await cache.set("short", b"v", ttl_seconds=1)
    await cache.set("long", b"v", ttl_seconds=60)
    assert await cache.get("short") == b"v"
    await anyio.sleep(2.1)
    assert await cache.get("short") is None
    assert await cache.get("long") == b"v"


async def test_an_unreachable_redis_is_a_miss_not_a_failure() -> None:
    cache = RedisCache.from_url("redis://127.0.0.1:9/0", 60)  # nothing listens on port 9
    await cache.set("k", b"v")
    assert await cache.get("k") is None
    assert not await cache.ping()
    await cache.aclose()


async def test_open_cache_follows_the_settings(tmp_path: Path) -> None:
    async with open_cache(Settings(home=tmp_path)) as local:
        assert local.backend == "local"
        await local.set("k", b"v")
        assert (tmp_path / "cache").is_dir()
    if REDIS_URL:
        from liminal.config import CacheSettings

        async with open_cache(Settings(home=tmp_path, cache=CacheSettings(url=REDIS_URL))) as r:
            assert r.backend == "redis"
            assert isinstance(r, RedisCache) and await r.ping()


async def test_local_purge(tmp_path: Path) -> None:
    cache = LocalCache(tmp_path / "c", ttl_seconds=60)
    await cache.set("old", b"v", ttl_seconds=0)
    await cache.set("new", b"v")
    os.sync()
    assert await cache.purge() >= 1
    assert await cache.get("new") == b"v"


async def test_the_local_cache_is_bounded_and_private(tmp_path: Path) -> None:

    import stat

    cache = LocalCache(tmp_path / "cache", ttl_seconds=60, max_bytes=10_000)
    for n in range(10):
        await cache.set(f"k{n}", bytes(3000))
    sizes = [p.stat().st_size for p in (tmp_path / "cache").iterdir()]
    assert sum(sizes) <= 10_000
    assert await cache.get("k9") is not None  # the newest stay
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (tmp_path / "cache").iterdir())
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) & 0o077 == 0


async def test_a_failed_local_cache_write_is_a_log_line_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("a file where the folder should be")
    cache = LocalCache(tmp_path / "cache", ttl_seconds=60)
    await cache.set("k", b"v")  # does not raise
    assert await cache.get("k") is None
