"""The configured store: MongoDB for ``mongodb://`` URLs, else SQLite.

Here, not in ``base.py``: both backends implement the protocol in ``base.py``, so the protocol's
file choosing between them made a circle of the three.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from liminal.config import Settings
from liminal.store.base import Store, StoreError, sqlite_path


@asynccontextmanager
async def open_store(settings: Settings, *, create: bool = True,
                     readonly: bool = False) -> AsyncIterator[Store]:
    """Open the configured store: MongoDB for ``mongodb://`` URLs, else SQLite.

    ``readonly`` (the dashboard): SQLite's connections cannot write (``SqliteStore.open``);
    MongoDB's are the same as ever, and the reader simply never writes.

    ``store.url`` may be empty (SQLite at ``$LIMINAL_HOME/liminal.db``), ``sqlite:///PATH`` or a
    MongoDB URL (``mongodb://`` or ``mongodb+srv://``; the database is the URL's path, default
    ``liminal``).
    """
    url = settings.store.url
    store: Store
    if url.startswith(("mongodb://", "mongodb+srv://")):
        from liminal.store.mongo import MongoStore

        store = await MongoStore.open(url)
    elif not url or url.startswith("sqlite:"):
        from liminal.store.sqlite import SqliteStore

        store = await SqliteStore.open(sqlite_path(settings), create=create, readonly=readonly)
    else:
        raise StoreError(f"store.url: unsupported scheme in {url!r} (sqlite:// or mongodb://)")
    try:
        yield store
    finally:
        await store.aclose()
