"""The store, the recall cache and the recaller the commands read, each opened at its first use
and closed once when liminal stops (``CommandCenter.aclose``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from liminal.harness.base import SessionHarness
    from liminal.lookup.recaller import Recaller
    from liminal.store.base import Store
    from liminal.store.cache import Cache

StoreOpener = Callable[[], AbstractAsyncContextManager["Store"]]
CacheOpener = Callable[[], AbstractAsyncContextManager["Cache"]]


class StoreOff(Exception):
    """``store.index = false``: there is no store to read or write."""


class Stores:
    def __init__(self, open_store: StoreOpener | None, open_cache: CacheOpener | None) -> None:
        self.open_store = open_store  # None: no store is configured
        self._open_cache = open_cache
        self._store: Store | None = None
        self._store_cm: AbstractAsyncContextManager[Store] | None = None
        # One open at a time: a load's question to the store runs on in the background past
        # its wait (``whereabouts.ask_store``) while the next command asks for the store too.
        self._store_lock = anyio.Lock()
        self._cache: Cache | None = None
        self._cache_cm: AbstractAsyncContextManager[Cache] | None = None
        self._recaller: Recaller | None = None

    @property
    def configured(self) -> bool:
        return self.open_store is not None

    async def store(self) -> Store:
        if self.open_store is None:
            raise StoreOff("the store is off (store.index = false)")
        async with self._store_lock:
            if self._store is None:
                self._store_cm = self.open_store()
                self._store = await self._store_cm.__aenter__()
            return self._store

    async def cache(self) -> Cache | None:
        """The recall cache (None: none configured here)."""
        if self._cache is None and self._open_cache is not None:
            self._cache_cm = self._open_cache()
            self._cache = await self._cache_cm.__aenter__()
        return self._cache

    async def recaller(self, harness: SessionHarness) -> Recaller:
        """Recall keys resolved through the cache, then the store, then the CLI's file."""
        if self._recaller is None:
            from liminal.lookup.recaller import Recaller
            from liminal.store.base import StoreError

            try:
                store: Store | None = await self.store()
            except (StoreOff, StoreError):  # no history kept: the CLI's files answer
                store = None
            self._recaller = Recaller(store, await self.cache(), harness=harness)
        return self._recaller

    async def aclose(self) -> None:
        for cm in (self._cache_cm, self._store_cm):
            if cm is not None:
                await cm.__aexit__(None, None, None)
