"""The blob cache: the local fallback always, Redis for real when LIMINAL_TEST_REDIS_URL is set."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from liminal.config import Settings
from liminal.store.cache import Cache, CacheUnavailable, LocalCache, RedisCache, open_cache
from tests.store.conftest import REDIS_URL

pytestmark = pytest.mark.anyio
ONE = "11111111-1111-4111-8111-111111111111"
TWO = "22222222-2222-4222-8222-222222222222"


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
    # A deletion must know what it could not remove: said, never a silent nothing.
    with pytest.raises(CacheUnavailable):
        await cache.forget(ONE)
    with pytest.raises(CacheUnavailable):
        await cache.held()
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
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= 10_000
    assert await cache.get("k9") is not None  # the newest stay
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in (tmp_path / "cache").rglob("*") if p.is_dir())
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) & 0o077 == 0


async def test_a_failed_local_cache_write_is_a_log_line_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("a file where the folder should be")
    cache = LocalCache(tmp_path / "cache", ttl_seconds=60)
    await cache.set("k", b"v")  # does not raise
    assert await cache.get("k") is None


async def test_a_sessions_entries_are_found_and_forgotten_and_no_other(cache: Cache) -> None:
    """A deleted thread's recalled blobs go with it: every entry whose key names one of its
    sessions (``recall:<session>:...``), and nothing else (issue 33: nothing purged them)."""
    for key in (f"recall:{ONE}:u1:0", f"recall:{ONE}:u2:1:input.command", f"recall:{TWO}:u1:0",
                "recall:toolu_1", f"lock:thread:{ONE}", f"other:{ONE}"):
        await cache.set(key, key.encode())
    assert await cache.held() == {ONE: 2, TWO: 1}
    assert await cache.forget(ONE) == 2
    assert await cache.get(f"recall:{ONE}:u1:0") is None
    assert await cache.get(f"recall:{ONE}:u2:1:input.command") is None
    for kept in (f"recall:{TWO}:u1:0", "recall:toolu_1", f"lock:thread:{ONE}", f"other:{ONE}"):
        assert await cache.get(kept) == kept.encode()
    assert await cache.held() == {TWO: 1}
    assert await cache.forget(ONE) == 0
    assert await cache.forget("../..") == 0  # not a session id: never a path or a pattern
    await cache.set(f"recall:{ONE}:u3:0", b"again")  # after a forget, kept as before
    assert await cache.get(f"recall:{ONE}:u3:0") == b"again"


async def test_an_entry_of_the_older_flat_layout_is_removed(tmp_path: Path) -> None:
    """Entries an older liminal kept directly in the folder say no session, so a deleted
    thread's could not be found among them: they go at the next write."""
    root = tmp_path / "cache"
    root.mkdir()
    (root / ("ab" * 32)).write_bytes(b"a deleted thread's output")
    cache = LocalCache(root, ttl_seconds=60)
    assert await cache.held() == {}  # counting changes nothing
    assert (root / ("ab" * 32)).exists()
    await cache.set(f"recall:{ONE}:u1:0", b"v")
    assert not (root / ("ab" * 32)).exists()
    assert await cache.get(f"recall:{ONE}:u1:0") == b"v"
