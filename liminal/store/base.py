"""The one interface every store backend implements, and how the configured one is opened.

Kept small on purpose: one write (a ``Batch``, committed as a unit) and a handful of reads. All
writes are idempotent (records carry deterministic ids), which is what makes the indexer's
replay-after-outage safe. The contract suite in ``tests/test_store_contract.py`` is the
specification; a backend is done when it passes it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Protocol

from liminal.config import Settings
from liminal.store.records import (
    Batch,
    FrameRecord,
    MessageRecord,
    SearchHit,
    SessionRecord,
    Thread,
    ThreadSummary,
)


class StoreError(Exception):
    """The store could not do what was asked (down, misconfigured, corrupt)."""


class Store(Protocol):
    # "sqlite" or "mongodb"; and how search works here ("fts5", "like", "text-index").
    backend: str
    search_mode: str

    async def write(self, batch: Batch) -> None:
        """Commit the batch as a unit. Idempotent: frames already stored are left untouched,
        messages and session records are replaced by id, thread updates merged."""

    async def frames(
        self,
        *,
        connection_id: str | None = None,
        thread_id: str | None = None,
        after_seq: int = -1,
        limit: int = 10_000,
    ) -> list[FrameRecord]:
        """Frames in order (connection, seq); filtered by connection or thread."""

    async def frame_count(self) -> int: ...

    async def messages(self, thread_id: str, kind: str | None = None) -> list[MessageRecord]:
        """A thread's messages in conversation order (by ``order``); only those of ``kind`` if
        given (``/marks`` reads its marks without the whole conversation)."""

    async def thread(self, thread_id: str) -> Thread | None: ...

    async def threads(self, limit: int = 1000, *, empty: bool = False) -> list[ThreadSummary]:
        """Threads, most recently active first, each once (``records.one_row_per_thread``: no
        record kept under one of its backing sessions' ids); empty threads (no title, nothing
        said: a session a client opened and never prompted) only with ``empty``."""

    async def session_records(self, backing_id: str) -> list[SessionRecord]:
        """A session file's indexed lines, in file order."""

    async def session_record(self, backing_id: str, uuid: str) -> SessionRecord | None:
        """The session file's line whose record has this uuid (what a recall key names)."""

    async def session_file_end(self, backing_id: str) -> int:
        """Where indexing of this session file stopped: the byte after the last indexed line."""

    async def search(
        self, query: str, *, thread_id: str | None = None, limit: int = 20
    ) -> list[SearchHit]:
        """Full-text search over messages and session records, best first."""

    async def delete_thread(self, thread_id: str) -> int:
        """Remove the thread and everything recorded of it (its messages, frames, and the lines
        of its sessions' files); how many records went. The CLIs' own files stay."""
        ...

    async def aclose(self) -> None: ...


class UnavailableStore:
    """Stands in for a store that could not be opened, so the conversation goes on: every
    write fails, the indexer spools, and the next start replays the spool."""

    backend = "unavailable"
    search_mode = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def write(self, batch: Batch) -> None:
        raise StoreError(self.reason)

    async def frames(self, *, connection_id: str | None = None, thread_id: str | None = None,
                     after_seq: int = -1, limit: int = 10_000) -> list[FrameRecord]:
        raise StoreError(self.reason)

    async def frame_count(self) -> int:
        raise StoreError(self.reason)

    async def messages(self, thread_id: str, kind: str | None = None) -> list[MessageRecord]:
        raise StoreError(self.reason)

    async def thread(self, thread_id: str) -> Thread | None:
        raise StoreError(self.reason)

    async def threads(self, limit: int = 1000, *, empty: bool = False) -> list[ThreadSummary]:
        raise StoreError(self.reason)

    async def session_records(self, backing_id: str) -> list[SessionRecord]:
        raise StoreError(self.reason)

    async def session_record(self, backing_id: str, uuid: str) -> SessionRecord | None:
        raise StoreError(self.reason)

    async def session_file_end(self, backing_id: str) -> int:
        raise StoreError(self.reason)

    async def search(self, query: str, *, thread_id: str | None = None,
                     limit: int = 20) -> list[SearchHit]:
        raise StoreError(self.reason)

    async def delete_thread(self, thread_id: str) -> int:
        raise StoreError(self.reason)

    async def aclose(self) -> None:
        return None


def sqlite_path(settings: Settings) -> Path:
    """The SQLite file in use: ``store.url`` as ``sqlite:///PATH``, else ``$LIMINAL_HOME/liminal.db``."""
    url = settings.store.url
    if url.startswith("sqlite://"):
        return Path(url.removeprefix("sqlite://")).expanduser()
    return settings.sqlite_path


def describe(settings: Settings) -> str:
    """Where the configured store lives, for logs and ``liminal doctor``."""
    url = settings.store.url
    if not url:
        return f"sqlite:{sqlite_path(settings)}"
    return url.split("@")[-1] if "@" in url else url


@asynccontextmanager
async def open_store(settings: Settings, *, create: bool = True) -> AsyncIterator[Store]:
    """Open the configured store: MongoDB for ``mongodb://`` URLs, else SQLite.

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

        store = await SqliteStore.open(sqlite_path(settings), create=create)
    else:
        raise StoreError(f"store.url: unsupported scheme in {url!r} (sqlite:// or mongodb://)")
    try:
        yield store
    finally:
        await store.aclose()


def fts_terms(query: str) -> list[str]:
    """Split a user's query into plain terms (quotes and operators are not special)."""
    return [t for t in (w.strip("\"'") for w in query.split()) if t]


def snippet(text: str, terms: Sequence[str], width: int = 160) -> str:
    """A window of ``text`` around the first term found, on one line."""
    lower = text.lower()
    at = min((i for i in (lower.find(t.lower()) for t in terms) if i >= 0), default=0)
    start = max(0, at - width // 3)
    piece = text[start : start + width].replace("\n", " ")
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


def seconds(stamp: str | None) -> float | None:
    """A session record's ISO 8601 time as epoch seconds (None when absent or unreadable)."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def ranked(hits: Iterable[SearchHit], limit: int) -> list[SearchHit]:
    """Best first, one hit per text: what the client was shown and the CLI's record of the same
    words (Codex records a prompt twice more in its rollout) are one find, not three. The kept
    hit takes a time from a duplicate that has one."""
    kept: dict[tuple[str | None, str], SearchHit] = {}
    for hit in sorted(hits, key=lambda h: h.score, reverse=True):
        key = (hit.thread_id, " ".join(hit.snippet.split()))
        first = kept.get(key)
        if first is None:
            kept[key] = hit
        elif first.time is None and hit.time is not None:
            kept[key] = replace(first, time=hit.time)
    return list(kept.values())[:limit]
