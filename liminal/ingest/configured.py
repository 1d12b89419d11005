"""The configured indexer for a proxy: in a worker process of its own (``SpoolWriter``), or inline.

Here, not in ``indexer.py``: the worker process runs an ``Indexer``, so the indexer's file
choosing the worker's ``SpoolWriter`` made a circle of the two.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from liminal import log
from liminal.config import Settings
from liminal.ingest.indexer import Indexer, Tuning
from liminal.ingest.sessions import SessionFiles
from liminal.ingest.worker import SpoolWriter
from liminal.store.base import Store, StoreError, UnavailableStore, describe
from liminal.store.configured import open_store

if TYPE_CHECKING:
    from liminal.ingest.shared import SharedWorker

logger = log.get("liminal.ingest.indexer")


@asynccontextmanager
async def open_indexer(settings: Settings, connection_id: str | None = None, *,
                       run: bool = True, store: Store | None = None,
                       watch_sessions: bool = True,
                       shared: SharedWorker | None = None) -> AsyncIterator[Indexer | SpoolWriter]:
    """The configured indexer, running for the block's duration: a tap subscriber to give the
    proxy as a component (a proxy that also calls ``run`` is harmless).

    ``store.indexer = "worker"`` (default): a ``SpoolWriter``, indexing in a process of its own.
    ``"inline"`` (or a ``store`` given): an ``Indexer`` on the configured store, in this process.
    ``shared``: the worker process this spool is given to (``liminal serve``'s one, for all its
    connections), instead of one of its own.
    """
    spool_root = settings.home / "spool"
    async with contextlib.AsyncExitStack() as stack:
        indexer: Indexer | SpoolWriter
        if settings.store.indexer == "worker" and store is None:
            indexer = SpoolWriter(settings, spool_name=connection_id, shared=shared)
        else:
            if store is None:
                try:
                    store = await stack.enter_async_context(open_store(settings))
                except StoreError as exc:
                    # Never in the way: proxy anyway, spool everything for the next start.
                    logger.error("store unavailable; frames are spooled until the next start",
                                 store=describe(settings), error=str(exc))
                    store = UnavailableStore(str(exc))
            from liminal.harness.known import find_session_file
            from liminal.ingest import quarantine
            from liminal.ingest.rewrites import own_bytes

            rewrites_path = settings.home / "rewrites.jsonl"

            files = SessionFiles(find_session_file, lambda backing: own_bytes(rewrites_path, backing))
            indexer = Indexer(store, spool_root, spool_name=connection_id,
                              quarantine=quarantine.folder(settings.home),
                              tuning=Tuning(queue_frames=settings.store.queue_frames),
                              session_files=files if watch_sessions else None)
        async with anyio.create_task_group() as tg:
            if run:
                tg.start_soon(indexer.run)
            try:
                yield indexer
            finally:
                with anyio.CancelScope(shield=True):
                    await indexer.aclose()
                tg.cancel_scope.cancel()
