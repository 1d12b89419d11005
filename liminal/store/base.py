"""The one interface every store backend implements, and how the configured one is opened.

Kept small on purpose: one write (a ``Batch``, committed as a unit) and a handful of reads. All
writes are idempotent (records carry deterministic ids), which is what makes the indexer's
replay-after-outage safe. The contract suite in ``tests/test_store_contract.py`` is the
specification; a backend is done when it passes it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import orjson

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


class StoreRefused(StoreError):
    """The store refused what a write held, not the write: a value it cannot encode (a lone
    surrogate, an integer past 64 bits), a record past its size limit. Writing the same again
    fails the same way, so the writer must change it or set it aside
    (``liminal.ingest.poison``); any other ``StoreError`` is the store failing (down, locked,
    full, slow), which a writer waits out and tries again."""


class Place(NamedTuple):
    """Where a store shared by several sidecars has a thread (``MoveLog.place``)."""

    backing_id: str  # the session the thread is on
    lineage: tuple[str, ...]  # every session a move put it on, oldest first (its own id left out)
    moving: str | None  # the attempt under way (the id of the session it would move to), if any
    since: float | None  # when that attempt began (wall clock)


class MoveLog(Protocol):
    """Where threads are, in a store several sidecars may share (MongoDB, ``mongomoves``; one
    SQLite file, ``sqlitemoves``): the swap journal's records and, per thread, its place. A move
    claims the thread (``claim``), and its commit is the store's write (``commit``): a
    conditional update of the thread's one place, made only while the store has the thread on
    the session the move leaves (a compare-and-set on the lineage's tip), so of two sidecars
    that moved one thread from one session, one commits and the other is refused."""

    async def claim(self, thread_id: str, old: str, attempt: str, *, now: float,
                    stale_before: float) -> tuple[bool, str | None]:
        """Mark ``thread_id`` as moving from ``old`` by ``attempt``: (True, the attempt it took
        over, if one under way had begun before ``stale_before``: its sidecar is gone), or
        (False, why not): it is on another session, or another attempt is under way."""

    async def commit(self, thread_id: str, old: str, attempt: str) -> bool:
        """The move ``attempt`` claimed is the thread's: on ``attempt``'s session from now on.
        False when the store has it elsewhere or another took the claim over."""

    async def release(self, thread_id: str, attempt: str) -> bool:
        """The attempt ended without a commit: the thread is no longer moving (a claim taken
        over since is left alone). Whether it still held it."""

    async def place(self, thread_id: str) -> Place | None: ...

    async def append(self, record: dict[str, Any]) -> None:
        """One journal record (``SwapRecord`` as a dict), kept with the others."""

    async def records(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        """The records, oldest first (by ``started_at``, then as written)."""


class Census(NamedTuple):
    """A store's size against its threads (``liminal doctor``)."""

    bytes: int | None  # on disk: SQLite's file and its -wal; MongoDB's data and indexes (None: unknown)
    threads: int  # threads listed, empty ones too (``Store.threads(empty=True)``)
    messages: int  # message rows, liminal's own (memos, summaries) among them
    # Message rows that repeat a thread's history: a later load's replay of what the store had,
    # which an older liminal stored at every load (``records.replays_kept``; ``Store.compact``).
    repeated: int
    free: int = 0  # bytes of the file that deleted rows left (SQLite), given back by VACUUM


class Store(Protocol):
    # "sqlite" or "mongodb"; and how search works here ("fts5", "like", "text-index").
    backend: str
    search_mode: str
    # Where threads are (``MoveLog``): every sidecar on the store moves a thread through it.
    moves: MoveLog | None

    async def write(self, batch: Batch) -> None:
        """Commit the batch as a unit. Idempotent: frames already stored are left untouched,
        messages and session records are replaced by id, thread updates merged. Raw bytes of
        any length are stored (in parts where one value could not hold them); a record the
        backend cannot hold otherwise raises ``StoreRefused``."""

    async def frames(
        self,
        *,
        connection_id: str | None = None,
        thread_id: str | None = None,
        after_seq: int = -1,
        limit: int = 10_000,
        max_bytes: int | None = None,
    ) -> list[FrameRecord]:
        """Frames in order (connection, seq); filtered by connection or thread; with
        ``max_bytes``, only as many of the first ``limit`` as fit in it (at least one): a reader
        paging through a connection's frames holds a bounded part of them."""

    async def frame_count(self) -> int: ...

    async def messages(self, thread_id: str, kind: str | None = None) -> list[MessageRecord]:
        """A thread's messages in conversation order (by ``order``); only those of ``kind`` if
        given (``/marks`` reads its marks without the whole conversation)."""

    async def thread(self, thread_id: str) -> Thread | None: ...

    async def threads(self, limit: int = 1000, *, empty: bool = False) -> list[ThreadSummary]:
        """Threads, most recently active first, each once (``records.one_row_per_thread``: no
        record kept under one of its backing sessions' ids); empty threads (no title, nothing
        said: a session a client opened and never prompted) only with ``empty``."""

    async def session_records(self, backing_id: str, *, uuid: str | None = None,
                              limit: int | None = None) -> list[SessionRecord]:
        """A session file's indexed lines, in file order, liminal's own among them; with
        ``uuid``, only the lines whose record has it (what a recall key names: a CLI may write a
        record twice, and Codex names a call and its output by one id); the first ``limit``."""

    async def session_file_end(self, backing_id: str) -> int:
        """Where indexing of this session file stopped: the byte after the last indexed line."""

    async def search(
        self, query: str, *, thread_id: str | None = None, limit: int = 20,
        kinds: Collection[str] | None = None, record_types: Collection[str] | None = None,
    ) -> list[SearchHit]:
        """Full-text search over messages and session records, best first (``ranked``); only
        messages of ``kinds`` and session records of ``record_types`` when given. Messages a
        load replayed are left out (the CLI's records hold that history), and so is every record
        liminal wrote itself (``SessionRecord.own``)."""

    async def delete_thread(self, thread_id: str, sessions: Collection[str] = ()) -> int:
        """Remove the thread and everything recorded of it (its messages, frames, and the lines
        of its sessions' files: those its record names, and ``sessions``, which a tombstone an
        older liminal wrote does not); how many records went. The CLIs' own files stay."""
        ...

    async def deleted_threads(self) -> list[Thread]:
        """The tombstones of the threads deleted (state ``DELETED``: ``records.DELETED``), each
        with the sessions that were its alone (``liminal.kernel.owned``)."""
        ...

    async def said_before(self, thread_id: str, frame_id: str) -> bool:
        """Whether the thread has a message of its history (``records.HISTORY_KINDS``) that a
        frame before ``frame_id`` started: one of another connection, or an earlier one of its
        own. A load asks it: the agent's replay of a conversation the store has already is not
        stored again (``liminal.ingest.recovery.ask_loads``)."""
        ...

    async def liminal_turns(self, thread_id: str) -> set[str]:
        """The thread's turns liminal answered itself, by id: those whose prompt went from the
        client to liminal (a command, ``/mark A``; a prompt refused while the agent was gone),
        which never reached the model. No turn of the conversation (``records.turn_numbers``;
        ``threads`` counts the others)."""
        ...

    async def census(self) -> Census:
        """How large the store is, and what it holds (``liminal doctor``)."""
        ...

    async def compact(self) -> int:
        """Remove what older liminals stored at every load of a thread the store had already
        (the agent's replay of its history, liminal's own replay of a moved thread): the
        message rows ``records.replays_kept`` leaves out, and the frames of those loads'
        history (``records.HISTORY_UPDATES``); the first load's replay and every live turn
        stay. Done once a store (a marker records it), each thread in a transaction of its own:
        safe to interrupt and run again. How many records went. A writer runs it (the index
        worker at its start: ``liminal.ingest.recovery``), never a reader."""
        ...

    async def aclose(self) -> None: ...


class UnavailableStore:
    """Stands in for a store that could not be opened, so the conversation goes on: every
    write fails, the indexer spools, and the next start replays the spool."""

    backend = "unavailable"
    search_mode = "none"
    moves: MoveLog | None = None

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def write(self, batch: Batch) -> None:
        raise StoreError(self.reason)

    async def frames(self, *, connection_id: str | None = None, thread_id: str | None = None,
                     after_seq: int = -1, limit: int = 10_000,
                     max_bytes: int | None = None) -> list[FrameRecord]:
        raise StoreError(self.reason)

    async def frame_count(self) -> int:
        raise StoreError(self.reason)

    async def messages(self, thread_id: str, kind: str | None = None) -> list[MessageRecord]:
        raise StoreError(self.reason)

    async def thread(self, thread_id: str) -> Thread | None:
        raise StoreError(self.reason)

    async def threads(self, limit: int = 1000, *, empty: bool = False) -> list[ThreadSummary]:
        raise StoreError(self.reason)

    async def session_records(self, backing_id: str, *, uuid: str | None = None,
                              limit: int | None = None) -> list[SessionRecord]:
        raise StoreError(self.reason)

    async def session_file_end(self, backing_id: str) -> int:
        raise StoreError(self.reason)

    async def search(self, query: str, *, thread_id: str | None = None, limit: int = 20,
                     kinds: Collection[str] | None = None,
                     record_types: Collection[str] | None = None) -> list[SearchHit]:
        raise StoreError(self.reason)

    async def delete_thread(self, thread_id: str, sessions: Collection[str] = ()) -> int:
        raise StoreError(self.reason)

    async def deleted_threads(self) -> list[Thread]:
        raise StoreError(self.reason)

    async def said_before(self, thread_id: str, frame_id: str) -> bool:
        raise StoreError(self.reason)

    async def liminal_turns(self, thread_id: str) -> set[str]:
        raise StoreError(self.reason)

    async def census(self) -> Census:
        raise StoreError(self.reason)

    async def compact(self) -> int:
        raise StoreError(self.reason)

    async def aclose(self) -> None:
        return None


def sqlite_path(settings: Settings) -> Path:
    """The SQLite file in use: ``store.url`` as ``sqlite:///PATH``, else ``$LIMINAL_HOME/liminal.db``."""
    url = settings.store.url
    if url.startswith("sqlite://"):
        return Path(url.removeprefix("sqlite://")).expanduser()
    return settings.sqlite_path


def lock_root(settings: Settings) -> Path:
    """The folder whose ``locks/`` holds the thread locks every sidecar on this store shares
    (``liminal.serve.locks``): the home, or, for a SQLite file the home does not hold (homes
    that share one file), ``<file>.threads`` beside it. One rule for whoever takes a lock
    (``liminal acp``, ``liminal threads delete``) and whatever removes a deleted thread's."""
    url = settings.store.url
    if url.startswith(("mongodb://", "mongodb+srv://")):
        return settings.home
    shared = sqlite_path(settings)
    if shared.parent != settings.home:
        return shared.with_name(shared.name + ".threads")
    return settings.home


def describe(settings: Settings) -> str:
    """Where the configured store lives, for logs and ``liminal doctor``."""
    url = settings.store.url
    if not url:
        return f"sqlite:{sqlite_path(settings)}"
    return url.split("@")[-1] if "@" in url else url


def within(max_bytes: int, sizes: Sequence[int]) -> int:
    """How many of the first ``sizes`` add up to at most ``max_bytes`` (at least one)."""
    total = 0
    for n, size in enumerate(sizes):
        total += size or 0
        if total > max_bytes:
            return max(1, n)
    return len(sizes)




def fts_terms(query: str) -> list[str]:
    """Split a user's query into plain terms (quotes and operators are not special)."""
    return [t for t in (w.strip("\"'") for w in query.split()) if t]


def snippet(text: str, terms: Sequence[str], width: int = 160) -> str:
    """What a person reads of a find: about ``width`` characters of ``text`` on one line,
    centred on the match (where most of the terms are found close together, the first such
    place), cut between words, an ellipsis where text is left out. A line of JSON in it (a tool
    call's input, ``Bash {"command": "seq 1 3"}``) reads as its fields (``Bash command: seq 1 3``)."""
    wanted = [t.lower() for t in terms if t]
    at, _ = _match_at(text.lower(), wanted, width)
    # The lines around the match, made readable; the window is taken from them.
    lo = max(text.rfind("\n", 0, max(0, at - width)) + 1, at - 4 * width, 0)
    hi = text.find("\n", at + width)
    hi = min(len(text) if hi < 0 else hi, at + 4 * width)
    region = " ".join(" ".join(readable(line).split()) for line in text[lo:hi].split("\n")).strip()
    at, end_of_match = _match_at(region.lower(), wanted, width)
    start = max(0, (at + end_of_match - width) // 2)
    end = min(len(region), start + width)
    start = max(0, end - width)
    if start > 0 and region[start - 1] != " ":  # mid-word: from the next word on, or the match's
        space = region.find(" ", start, at)
        start = space + 1 if space >= 0 else region.rfind(" ", 0, at) + 1
    if end < len(region) and region[end] != " ":  # the same at the end: the word that would be cut
        space = region.rfind(" ", end_of_match, end)
        end = space if space >= 0 else end
    before = start > 0 or bool(text[:lo].strip())
    after = end < len(region) or bool(text[hi:].strip())
    return ("…" if before else "") + region[start:end].strip() + ("…" if after else "")


def _match_at(lower: str, terms: Sequence[str], width: int) -> tuple[int, int]:
    """Where the match in ``lower`` starts and ends: the first place where the most of
    ``terms`` are found within half of ``width`` of one another (0, 0 where none is)."""
    spots: list[tuple[int, int, int]] = []  # start, end, term
    for n, term in enumerate(terms):
        at, found = lower.find(term), 0
        while at >= 0 and found < 64:
            spots.append((at, at + len(term), n))
            at, found = lower.find(term, at + len(term)), found + 1
    if not spots:
        return 0, 0
    spots.sort()
    best, best_end, best_count = spots[0][0], spots[0][1], 0
    for i, (start, _, _) in enumerate(spots):
        near = [s for s in spots[i:] if s[0] < start + width // 2]
        count = len({s[2] for s in near})
        if count > best_count:
            best, best_end, best_count = start, max(s[1] for s in near), count
    return best, best_end


def readable(line: str) -> str:
    """A line that holds a JSON object or array, maybe after a name (``Bash {...}``: a tool
    call as a CLI records it), as its fields: ``command: seq 1 3; description: Count``; any
    other line as it is."""
    found = _JSON_LINE.match(line) if "{" in line or "[" in line else None
    if found is None:
        return line
    try:
        value = orjson.loads(found.group(2))
    except orjson.JSONDecodeError:
        return line
    if not isinstance(value, (dict, list)):
        return line
    return (found.group(1) or "") + _fields(value)


# A JSON object or array, maybe after one word (a tool's name), and nothing else on the line.
_JSON_LINE = re.compile(r"^(\s*[\w.:/-]{1,64} )?\s*([\[{].*[\]}])\s*$")


def _fields(value: Any, nested: bool = False) -> str:
    if isinstance(value, dict):
        text = "; ".join(f"{k}: {_fields(v, True)}" for k, v in value.items())
        return f"({text})" if nested else text
    if isinstance(value, list):
        text = ", ".join(_fields(v, True) for v in value)
        return f"[{text}]" if nested else text
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def seconds(stamp: str | None) -> float | None:
    """A session record's ISO 8601 time as epoch seconds (None when absent or unreadable)."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def digest(text: str) -> str:
    """The words of ``text`` as a short key: whitespace and case folded, composed (NFC)."""
    words = unicodedata.normalize("NFC", " ".join(text.split())).casefold()
    return hashlib.blake2b(words.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def head(text: str, width: int = 200) -> str:
    """The first line of ``text`` (a tool call message's title), at most ``width`` characters."""
    return text.lstrip("\n").split("\n", 1)[0][:width]


class ToolCallPlace(NamedTuple):
    """A tool call message, as far as placing a session record of its call on it needs."""

    tool_call_id: str
    thread_id: str
    message_id: str
    turn_id: str | None
    time: float
    text_head: str
    direction: str | None
    replayed: bool | int


def place_tool_records(hits: list[SearchHit], calls: Iterable[ToolCallPlace]) -> list[SearchHit]:
    """Each session record hit that names a tool call (its ids) whose message is in ``calls``
    becomes a hit on that message: its id, turn, title and direction, so it is one find with
    the message, and liminal's own tool calls are known as such. A call the client was shown
    live wins over one a load replayed. The record's snippet and time are kept (the CLI's
    record holds the whole output; the message may hold less)."""
    found: dict[tuple[str | None, str], ToolCallPlace] = {}
    for one in sorted(calls, key=lambda c: bool(c.replayed)):
        found.setdefault((one.thread_id, one.tool_call_id), one)
        found.setdefault((None, one.tool_call_id), one)
    if not found:
        return hits
    placed = []
    for hit in hits:
        call: ToolCallPlace | None = None
        if hit.source == "session":
            call = next((found[k] for t in hit.tool_ids
                         for k in ((hit.thread_id, t), (None, t)) if k in found), None)
        if call is None:
            placed.append(hit)
            continue
        placed.append(replace(
            hit, message_id=call.message_id, head=head(call.text_head), direction=call.direction,
            turn_id=None if call.replayed else call.turn_id,
            time=hit.time if hit.time is not None else call.time))
    return placed


def ranked(hits: Iterable[SearchHit], limit: int) -> list[SearchHit]:
    """Best first, one hit per thing said. A session record of a tool call whose message the
    store has (``message_id``) is that message; a record holding the same words as a message of
    its thread is that message too, and records holding the same words as one another are one
    (Codex keeps a prompt as a message item and again as an event). Of each group the message
    stands for it, since it has a place in the conversation, with the snippet of the best match
    and a time from any member that has one."""
    ordered = sorted(hits, key=lambda h: h.score, reverse=True)

    def words(hit: SearchHit) -> str:
        return hit.digest or " ".join(hit.snippet.split())

    said: dict[tuple[str | None, str], tuple[str, ...]] = {}
    for hit in ordered:
        if hit.source == "message":
            said.setdefault((hit.thread_id, words(hit)), ("message", hit.id))
    groups: dict[tuple[str | None, ...], list[SearchHit]] = {}
    for hit in ordered:
        if hit.source == "message":
            key: tuple[str | None, ...] = ("message", hit.id)
        elif hit.message_id is not None:
            key = ("message", hit.message_id)
        else:
            key = said.get((hit.thread_id, words(hit)), ("words", hit.thread_id, words(hit)))
        groups.setdefault(key, []).append(hit)
    kept = []
    for members in groups.values():  # in the order of each group's best member
        lead = next((m for m in members if m.source == "message"), members[0])
        time = lead.time if lead.time is not None else next(
            (m.time for m in members if m.time is not None), None)
        # A tool call's message joins its title, input and outputs in one text; the CLI's
        # record is one of them, the better excerpt: the last written (the output, after the call).
        shown = members[0]
        records = [m for m in members if m.source == "session"]
        if records and (lead.kind == "tool_call" or lead.message_id != lead.id):
            shown = max(records, key=lambda m: (m.time or 0.0, m.id))
        kept.append(replace(lead, snippet=shown.snippet, score=members[0].score, time=time))
    return kept[:limit]
