"""What a thread owns, wherever liminal or its CLI keeps it: the one list a deletion empties.

A thread is deleted by both doors (``session/delete``: ``liminal.kernel.delete``; ``liminal
threads delete``) by emptying every part of ``Holdings.parts`` of it, in this order:

- ``records``: the store's record of it (messages, frames, its sessions' lines and the files
  kept beside them, the model's summaries of it, its parts of lessons), and its tombstone (``DELETED``), which keeps
  the ids of the sessions that were its alone, so that what is left of them can be found later.
  First: from then on nothing answers for the thread (a recall, a search, a listing), so
  nothing puts it back in the cache;
- ``files``: every file the CLI keeps of those sessions, through the harness (``Removal
  .files``, ``remove``): the original, each swap's rewrite, the cuts of ``/clear`` and
  ``/undo``, and what the CLI keeps of a session beside it (Claude Code's ``<id>/``,
  ``session-env/<id>/`` ...; the rows Codex's databases keep of the thread);
- ``lines in the CLI's logs``: the lines the CLI's logs of every session keep of those sessions,
  through the harness (``Removal.lines``, ``remove_lines``: the prompts a person typed in
  the CLI's own interface, the names the thread was given), rewritten under the CLI's own lock;
- ``cache entries``: the recall cache's blobs of those sessions (``Cache.forget``: Redis, or
  the files under ``$LIMINAL_HOME/cache``);
- ``records set aside``: what the store refused of it (``liminal.ingest.quarantine``);
- ``queued commands``: the slash commands its model left for its turn's end, and the files
  binding an MCP server to it (``liminal.mcp.link``);
- ``journal lines``: its lines in the swap journal (``swaps.jsonl``: what its rewrites placed
  in their dynamic zone is its text). A shared store's journal goes with ``records``.

Its sessions are its lineage (``whose``) less every session another thread has in its own: a
fork (``/fork``) is a thread with a session of its own, which stays with all it holds, and so
does a session two threads share (one an older liminal recorded under another).

``liminal doctor`` counts what the deleted threads (their tombstones) still have in any part
(``leftovers``), and ``liminal threads purge`` removes it (``purge``): a CLI that wrote a
session's file again, a part that could not be reached at the delete, a thread deleted by an
older liminal that left its cache and files.

liminal's memory of a thread needs no part of its own where it is kept as the thread's: its
scratchpad and its search dumps' queries are messages of the thread (``Records``), and a dump's
text is a cache entry under the thread's id (``Cached``). A lesson several threads share is one
message per thread in the ``liminal-lessons`` pseudo-thread, each naming its thread as a summary
does (``records.of_thread``): the thread's part is its record, which ``Store.delete_thread``
takes, leaving the other threads' parts (``liminal.lookup.lessons``). What memory keeps
elsewhere is one more part in ``Holdings.parts``: deleted, counted and purged with the rest, by
both doors. Not parts: the spool (frames wait there only until the store takes them, and a deleted
thread's are dropped then: ``Batch.without``); ``rewrites.jsonl`` (ids and sizes); the side
sessions of the model's summaries (each removed as it ends); memos (``/memo``: a person's notes,
kept for every thread).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio.to_thread

from liminal import log
from liminal.config import Settings
from liminal.errors import in_words
from liminal.harness.base import Removal
from liminal.kernel.journal import SwapJournal
from liminal.mcp.link import safe
from liminal.store.records import DELETED, OWNED_ELSEWHERE, Batch, ThreadUpdate, summarised
from liminal.units import plural

if TYPE_CHECKING:
    from liminal.store.base import Store
    from liminal.store.cache import Cache

logger = log.get("liminal.owned")


@dataclass(frozen=True, slots=True)
class Whose:
    """A thread, and the sessions that are its alone (its own id first)."""

    thread: str
    sessions: tuple[str, ...]
    cwd: str | None = None
    harness: str = ""


class Part(Protocol):
    """One place a thread's text is kept."""

    name: str  # as a person reads one of it: "file", "cache entry"
    names: str  # and more: "files", "cache entries"
    # What may fill again once emptied: the CLI writes a session's file again as its process
    # ends (Claude Code's exit records), a recall under way caches what it read before.
    refills: bool

    async def count(self, whose: Whose) -> int: ...

    async def remove(self, whose: Whose) -> int: ...


class Records:
    name, names = "record", "records"
    refills = False

    def __init__(self, store: Store) -> None:
        self.store = store

    async def count(self, whose: Whose) -> int:
        store = self.store
        found = len(await store.messages(whose.thread)) + len(await store.frames(thread_id=whose.thread, limit=1000))
        for session in whose.sessions:
            found += len(await store.session_records(session, limit=1000))
        for pseudo in OWNED_ELSEWHERE:  # its summaries, its parts of lessons
            found += sum(1 for m in await store.messages(pseudo) if summarised(m.data) == whose.thread)
        return found

    async def remove(self, whose: Whose) -> int:
        # The tombstone first: from then on no batch brings back a record of the thread (the
        # index worker's frames and lines still on their way: ``Batch.without``), so what the
        # delete takes stays gone. Written after, a batch stored between the two would be kept.
        await self.store.write(Batch(threads=[ThreadUpdate(
            whose.thread, time.time(), cwd=whose.cwd or "", harness=whose.harness, state=DELETED,
            backing_ids=whose.sessions, by_user=True)]))
        return await self.store.delete_thread(whose.thread, whose.sessions)


class Files:
    name, names = "file", "files"
    refills = True

    def __init__(self, harnesses: Sequence[Removal]) -> None:
        self.harnesses = harnesses

    async def count(self, whose: Whose) -> int:
        return await anyio.to_thread.run_sync(self._each, whose, False)

    async def remove(self, whose: Whose) -> int:
        return await anyio.to_thread.run_sync(self._each, whose, True)

    def _each(self, whose: Whose, remove: bool) -> int:
        return sum(len(h.remove(s, whose.cwd) if remove else h.files(s, whose.cwd))
                   for h in self.harnesses for s in whose.sessions)


class Lines:
    name, names = "line in the CLI's logs", "lines in the CLI's logs"
    refills = True  # (Codex names a session after its first turn, maybe after the delete)

    def __init__(self, harnesses: Sequence[Removal]) -> None:
        self.harnesses = harnesses
        self._held: list[dict[str, int]] | None = None  # read once for the counts of one look

    async def count(self, whose: Whose) -> int:
        if self._held is None:
            self._held = await anyio.to_thread.run_sync(lambda: [h.lines() for h in self.harnesses])
        return sum(held.get(s, 0) for held in self._held for s in whose.sessions)

    async def remove(self, whose: Whose) -> int:
        self._held = None
        return await anyio.to_thread.run_sync(
            lambda: sum(h.remove_lines(whose.sessions) for h in self.harnesses))


class Cached:
    name, names = "cache entry", "cache entries"
    refills = True

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self._held: dict[str, int] | None = None  # read once for the counts of one look

    async def count(self, whose: Whose) -> int:
        if self._held is None:
            self._held = await self.cache.held()
        return sum(self._held.get(s, 0) for s in whose.sessions)

    async def remove(self, whose: Whose) -> int:
        self._held = None
        return sum([await self.cache.forget(s) for s in whose.sessions])


class InHome:
    """Files of liminal's own under ``$LIMINAL_HOME`` that are a thread's, as ``found`` finds
    them."""

    refills = False

    def __init__(self, name: str, names: str, home: Path,
                 found: Callable[[Path, Whose], list[Path]]) -> None:
        self.name, self.names, self.home, self._found = name, names, home, found

    async def count(self, whose: Whose) -> int:
        return len(await anyio.to_thread.run_sync(self._found, self.home, whose))

    async def remove(self, whose: Whose) -> int:
        return await anyio.to_thread.run_sync(_unlink, self._found(self.home, whose))


def _set_aside(home: Path, whose: Whose) -> list[Path]:
    """What the store refused of the thread (``liminal.ingest.quarantine``)."""
    from liminal.ingest import quarantine

    return quarantine.of_thread(home, whose.thread, whose.sessions)


def _queued(home: Path, whose: Whose) -> list[Path]:
    """Its model's slash commands waiting, the bind files naming it (``liminal.mcp.link``)."""
    from liminal.mcp import link

    return link.of_thread(home, whose.thread)


def _lock_files(root: Path, whose: Whose) -> list[Path]:
    """The lock file named for the thread (``liminal.serve.locks``: ``locks/<id>.lock``, a UUID
    in its canonical spelling), which ``liminal acp`` and ``liminal serve`` leave under the
    store's lock root (``liminal.store.base.lock_root``: the home, or beside a shared SQLite
    file): it holds only a pid, but its name is the deleted thread's id. Removing one a live
    liminal holds is safe: a taker only counts a lock on the file the path still names."""
    import uuid

    names = {whose.thread}
    with contextlib.suppress(ValueError):
        names.add(str(uuid.UUID(whose.thread)))
    return [path for name in names if safe(name) and (path := root / "locks" / f"{name}.lock").is_file()]


class JournalLines:
    name, names = "journal line", "journal lines"
    refills = False

    def __init__(self, journal: SwapJournal) -> None:
        self.journal = journal

    async def count(self, whose: Whose) -> int:
        return len(await anyio.to_thread.run_sync(lambda: self.journal.records(whose.thread, begins=True)))

    async def remove(self, whose: Whose) -> int:
        return await anyio.to_thread.run_sync(self.journal.forget, whose.thread)


def _unlink(paths: list[Path]) -> int:
    for path in paths:
        path.unlink(missing_ok=True)
    return len(paths)


@dataclass
class Removed:
    """What a removal took from each part (or a look found there), and the parts it could not
    reach (why), each part by its ``names``."""

    counts: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    _name: dict[str, str] = field(default_factory=dict)  # a part's one, by its names

    def add(self, part: Part, count: int) -> None:
        self.counts[part.names] = self.counts.get(part.names, 0) + count
        self._name[part.names] = part.name

    def fail(self, part: Part, exc: Exception) -> None:
        self.failed[part.names] = in_words(exc)
        self._name[part.names] = part.name

    def merge(self, other: Removed) -> None:
        for names, n in other.counts.items():
            self.counts[names] = self.counts.get(names, 0) + n
        self.failed |= other.failed
        self._name |= other._name

    def said(self) -> str:
        """``12 records, 1 file, 4 cache entries`` (the parts that held something)."""
        return ", ".join(plural(n, self._name[names], names)
                         for names, n in self.counts.items() if n) or "nothing"


@dataclass
class Holdings:
    """Every part a thread's text is kept in, as far as this process can reach: the store
    (None: ``store.index = false``), the recall cache, the CLIs' harnesses, the home."""

    store: Store | None
    cache: Cache | None
    harnesses: Sequence[Removal]
    home: Path | None
    journal: SwapJournal | None
    # Where the thread locks are (``liminal.store.base.lock_root``); None: the home.
    lock_root: Path | None = None
    _parts: list[Part] | None = None

    def parts(self) -> list[Part]:
        """In the order a deletion empties them (see the module's text). A new kind of thing a
        thread owns is one more part here."""
        if self._parts is None:
            parts: list[Part] = []
            if self.store is not None:
                parts.append(Records(self.store))
            if self.harnesses:
                parts += [Files(self.harnesses), Lines(self.harnesses)]
            if self.cache is not None:
                parts.append(Cached(self.cache))
            if self.home is not None:
                parts += [InHome("record set aside", "records set aside", self.home, _set_aside),
                          InHome("queued command", "queued commands", self.home, _queued),
                          InHome("thread lock", "thread locks", self.lock_root or self.home, _lock_files)]
            if self.journal is not None:
                parts.append(JournalLines(self.journal))
            self._parts = parts
        return self._parts

    async def remove(self, whose: Whose, *, refilling: bool = False) -> Removed:
        """Empty every part of ``whose`` (``refilling``: only those that may fill again). A part
        that fails is said in ``failed``; the others are emptied all the same."""
        removed = Removed()
        for part in self.parts():
            if refilling and not part.refills:
                continue
            try:
                removed.add(part, await part.remove(whose))
            except Exception as exc:  # a store or cache down: said; the rest goes all the same
                logger.warning("a deleted thread's part not removed", thread=whose.thread, part=part.names,
                               error=str(exc)[:300])
                removed.fail(part, exc)
        return removed

    async def count(self, whose: Whose) -> Removed:
        """What every part holds of ``whose`` (nothing removed)."""
        found = Removed()
        for part in self.parts():
            try:
                found.add(part, await part.count(whose))
            except Exception as exc:
                found.fail(part, exc)
        return found


async def claimed(store: Store | None, journal: SwapJournal | None) -> dict[str, set[str]]:
    """Every session a thread not deleted has in its lineage (its own id among them), and those
    threads: what a deletion of another thread leaves."""
    found: dict[str, set[str]] = {}
    if store is not None:
        for summary in await store.threads(limit=1_000_000, empty=True):
            for session in (summary.thread.id, *summary.thread.backing_ids):
                found.setdefault(session, set()).add(summary.thread.id)
    if journal is not None:
        for thread, session in await anyio.to_thread.run_sync(journal.lineage):
            for one in (thread, session):  # a thread's own id is its first session
                found.setdefault(one, set()).add(thread)
    return found


async def whose(thread: str, store: Store | None, journal: SwapJournal | None,
                claims: dict[str, set[str]], *, now: str | None = None, cwd: str | None = None,
                harness: str = "") -> Whose:
    """The thread and the sessions that are its alone: its own id, the one it is on ``now``,
    the store's lineage (a tombstone's too, and a shared store's place), and every session the
    journal moved it to or began to (an abandoned move's rewrite may be left), less what
    ``claims`` gives another thread."""
    lineage = [thread, *([now] if now else [])]
    record = await store.thread(thread) if store is not None else None
    if record is not None:
        lineage += record.backing_ids
        cwd = cwd or record.cwd or None
        harness = harness or record.harness
    if store is not None and store.moves is not None:
        place = await store.moves.place(thread)
        if place is not None:
            lineage += [*place.lineage, place.backing_id, *([place.moving] if place.moving else [])]
    if journal is not None:
        for r in await anyio.to_thread.run_sync(lambda: journal.records(thread, begins=True)):
            lineage += [r.old_backing_id, *([r.new_backing_id] if r.new_backing_id else [])]
    mine = tuple(s for s in dict.fromkeys(lineage) if s and not (claims.get(s, set()) - {thread}))
    return Whose(thread, mine, cwd, harness)


async def deleted(holdings: Holdings) -> list[Whose]:
    """Every thread deleted (its tombstone in the store), with the sessions that were its."""
    if holdings.store is None:
        return []
    claims = await claimed(holdings.store, holdings.journal)
    return [await whose(t.id, holdings.store, holdings.journal, claims)
            for t in await holdings.store.deleted_threads()]


async def leftovers(holdings: Holdings) -> list[tuple[Whose, Removed]]:
    """What each deleted thread still has in any part (only those that have something)."""
    found = []
    for one in await deleted(holdings):
        counts = await holdings.count(one)
        if any(counts.counts.values()) or counts.failed:
            found.append((one, counts))
    return found


async def purge(holdings: Holdings) -> list[tuple[Whose, Removed]]:
    """Remove what the deleted threads left (``leftovers``); what went, for each."""
    return [(one, await holdings.remove(one)) for one, _ in await leftovers(holdings)]


@asynccontextmanager
async def reached(settings: Settings, store: Store | None) -> AsyncIterator[Holdings]:
    """The parts a command reaches with no proxy and no agent (``liminal threads delete`` and
    ``purge``, ``liminal doctor``): the store given, the configured cache, every CLI's harness
    (a session id names one CLI's session), the home and its swap journal."""
    from liminal.harness.base import HarnessChoice
    from liminal.harness.known import known_harnesses
    from liminal.store.base import lock_root
    from liminal.store.cache import open_cache

    async with open_cache(settings) as cache:
        yield Holdings(store, cache, HarnessChoice(known_harnesses(settings.gradient)).all(),
                       settings.home, SwapJournal(settings.journal_path), lock_root(settings))
