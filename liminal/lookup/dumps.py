"""Large search answers as dumps: kept in the cache under a retrieval id, read in pages.

A ``search_history`` answer longer than ``memory.dump_chars`` is not put in the model's context
whole: it is kept in the cache (Redis when ``cache.url`` names one, else files under
``$LIMINAL_HOME/cache``) under its id, ``dump:<thread>:<12 hex digits>``, and the model is given
one paragraph about it (how many finds, where and when, the best one), the id, and how to read
it: ``recall`` with the id, and ``start`` for the next page (``paged``). ``recall`` rather than
a ``dump`` argument of ``search_history``: it is already how the model reads the rest of
something liminal left out, by a key and in pages, and an id names its dump whole, so the model
need not repeat the query.

The store can always make the dump again: its query is kept as a message of the thread (kind
``dump``, no text, so never a search hit), and a dump the cache no longer has (expired,
evicted, Redis down) is searched again. That record is also what makes an id resolve at all:
``delete_thread`` takes it with the thread's other messages, so a deleted thread's dumps resolve
no more, whatever the cache still holds. A dump of every thread's finds (``all_threads``) is
searched again when a thread it holds finds of was deleted since. The cache key is the id, of
the form ``<kind>:<thread>:<rest>``, so a purge of a thread's cache entries finds it.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from liminal.gradient.recall import RecallError
from liminal.sessionfiles import is_session_id
from liminal.store.records import DELETED, Batch, MessageRecord

if TYPE_CHECKING:
    from liminal.lookup.search import Found
    from liminal.store.base import Store
    from liminal.store.cache import Cache

KIND = "dump"
DUMP_ID = re.compile(r"dump:([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}):([0-9a-f]{12})")


def is_dump_id(text: str) -> bool:
    return DUMP_ID.fullmatch(text.strip()) is not None


def thread_of(dump_id: str) -> str:
    """The thread a dump id names (checked: ``is_dump_id``)."""
    found = DUMP_ID.fullmatch(dump_id.strip())
    if found is None or not is_session_id(found.group(1)):
        raise RecallError(f"not a dump id: {dump_id!r}")
    return found.group(1)


@dataclass(frozen=True, slots=True)
class Query:
    """What a dump holds the answer to: ``search_history``'s arguments."""

    text: str
    all_threads: bool = False
    everything: bool = False
    limit: int = 8


def answer(found: list[Found], *, all_threads: bool) -> str:
    """A search's finds as ``search_history`` answers them, one line each."""
    return "\n".join(f"- [{f.speaker}, {f.when}, {f.where(title=all_threads)}] {f.hit.snippet}" for f in found)


async def search(store: Store, thread: str, query: Query) -> list[Found]:
    from liminal.lookup.search import find

    return await find(store, query.text, thread_id=None if query.all_threads else thread,
                      limit=query.limit, everything=query.everything)


async def keep(store: Store, cache: Cache | None, thread: str, query: Query, found: list[Found],
               text: str) -> str:
    """The dump of ``text`` (the answer of ``found``) kept, its record in the store first; its id."""
    dump_id = f"{KIND}:{thread}:{uuid.uuid4().hex[:12]}"
    threads = sorted({f.hit.thread_id for f in found if f.hit.thread_id and is_session_id(f.hit.thread_id)})
    now = time.time()
    await store.write(Batch(messages=[MessageRecord(
        id=dump_id, thread_id=thread, turn_id=None, time=now, order=f"~{dump_id}", kind=KIND,
        data={"query": query.text, "all_threads": query.all_threads, "everything": query.everything,
              "limit": query.limit, "threads": threads, "chars": len(text), "finds": len(found)})]))
    if cache is not None:
        await cache.set(dump_id, text.encode())
    return dump_id


def summary(dump_id: str, query: Query, found: list[Found], text: str, page_chars: int) -> str:
    """The one paragraph the model is given in place of the dump."""
    where: dict[str, list[int]] = {}
    for f in found:
        place = (f.title or (f.hit.thread_id or "?")[:8]) if query.all_threads else "this thread"
        where.setdefault(f.aside or place, []).extend([f.turn] if f.turn is not None else [])
    places = "; ".join(f"{place}" + (f" (turns {min(turns)}-{max(turns)})" if len(set(turns)) > 1
                                     else f" (turn {turns[0]})" if turns else "")
                       for place, turns in where.items())
    times = sorted(f.hit.time for f in found if f.hit.time is not None)
    span = ""
    if times:
        first, last = (time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) for t in (times[0], times[-1]))
        span = f", said {first}" + (f" to {last}" if last != first else "")
    best = found[0]
    pages = -(-len(text) // page_chars)
    return (f"{len(found)} finds for {query.text!r}, {len(text)} characters: too long to give whole, "
            f"so liminal keeps them as dump {dump_id}. They are in {places}{span}. The best: "
            f"[{best.speaker}, {best.when}, {best.where(title=query.all_threads)}] {best.hit.snippet} "
            f"To read the finds, call liminal's recall tool with key {dump_id} ({pages} parts of at most "
            f"{page_chars} characters: pass start to get the next).")


async def resolve(store: Store | None, cache: Cache | None, dump_id: str) -> str:
    """The dump's text: the cache's, else searched again from the store. Raises ``RecallError``
    when the id is malformed or names no dump the store holds (its thread deleted)."""
    from liminal.store.base import StoreError

    thread = thread_of(dump_id)
    dump_id = dump_id.strip()
    if store is None:
        raise RecallError(f"{dump_id}: dumps need liminal's store, which is off or down")
    try:
        return await _resolve(store, cache, thread, dump_id)
    except StoreError as exc:
        raise RecallError(f"{dump_id}: liminal's store could not be read ({exc})") from exc


async def _resolve(store: Store, cache: Cache | None, thread: str, dump_id: str) -> str:
    kept = [m for m in await store.messages(thread, kind=KIND) if m.id == dump_id]
    if not kept:
        raise RecallError(f"{dump_id}: no such dump (its thread was deleted, or it never was)")
    data = kept[-1].data
    query = Query(str(data.get("query") or ""), bool(data.get("all_threads")),
                  bool(data.get("everything")), int(data.get("limit") or 8))
    held = await cache.get(dump_id) if cache is not None else None
    if held is not None and not await _holds_deleted(store, thread, data.get("threads")):
        return held.decode("utf-8", "replace")
    found = await search(store, thread, query)
    text = answer(found, all_threads=query.all_threads) or f"Nothing found for {query.text!r} any more."
    if cache is not None:
        await cache.set(dump_id, text.encode())
    return text


async def _holds_deleted(store: Store, thread: str, threads: object) -> bool:
    """Whether a dump of every thread's finds holds finds of a thread deleted since."""
    for other in threads if isinstance(threads, list) else []:
        if isinstance(other, str) and other != thread:
            found = await store.thread(other)
            if found is None or found.state == DELETED:
                return True
    return False


def paged(text: str, start: int, page_chars: int, *, lines: bool = False) -> list[str]:
    """The part of ``text`` from ``start``, at most ``page_chars`` characters (with ``lines``,
    ended at a line's end where one is in its second half), and how to get the next."""
    start = max(0, start)
    part = text[start:start + page_chars]
    if lines and start + len(part) < len(text):
        cut = part.rfind("\n")
        if cut > page_chars // 2:
            part = part[:cut + 1]
    rest = len(text) - start - len(part)
    if rest > 0:
        return [part, f"[liminal: {rest} more characters; call recall with start={start + len(part)}]"]
    return [part]
