"""Lessons: what the model drew from a thread's turns for later conversations (decisions, facts
the person asked to keep, conventions, open threads of work), each with the turns and messages
it came from, consolidated across threads (docs/memory.md).

The side session that summarises a range asks for them in the same request
(``liminal.gradient.summarize``, ``## LESSONS``); ``keep`` stores them. A lesson is named by its
key, ``lesson:<10 hex digits>``, and kept as one message per thread it came from (its **part**)
in the ``liminal-lessons`` pseudo-thread: id ``<key>@<thread>``, the text as that thread's
summary put it, ``data`` naming the thread (``records.of_thread``), its turns, its messages and
the person's words there. So each part is that thread's record: ``Store.delete_thread`` takes a
deleted thread's parts and leaves the other threads' (a lesson consolidated from several loses
only that thread's part), and ``Batch.without`` keeps a deleted thread from writing more. A
pseudo-thread rather than a table of its own: every backend holds messages, every sidecar on a
shared store reads them, and deletion needs no new door.

**Consolidated**: a lesson that repeats an earlier one (its words mostly the same: ``same``),
from this thread or another, updates it instead of adding a copy: the thread's part is written
again with the newer words, its turns and messages added to. A lesson's text is its newest
part's. **Confirmed** and **forgotten** by the person (``/lessons``): confirming marks every
part (a part added later takes the mark); forgetting writes every part again empty, its words
gone (the store has no delete of one message; the empty parts are no lesson any more, and go
with their threads).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from liminal.gradient.zone import RECOLLECTION, STOPWORDS
from liminal.store.records import LESSON_THREAD, SUMMARY_THREAD, Batch, MessageRecord, summarised

if TYPE_CHECKING:
    from liminal.store.base import Store

KIND = "lesson"
SORTS = ("decision", "fact", "convention", "open")  # what a lesson is (``## LESSONS`` asks)
KEY = re.compile(r"lesson:[0-9a-f]{10}")
SAME = 0.6  # two lessons whose words overlap this much (Jaccard) are one
SAID_CHARS = 1_000  # of the person's words a part keeps
_WORD = re.compile(r"[a-z0-9_]+(?:-[a-z0-9_]+)*")


def is_key(text: str) -> bool:
    return KEY.fullmatch(text.strip()) is not None


def new_key() -> str:
    return f"lesson:{uuid.uuid4().hex[:10]}"


def words(text: str) -> frozenset[str]:
    """What two lessons are compared by: lower case words of three characters or more, numbers
    (a port, a version) and hyphenated names (``plover-8812``) whole, no stopword."""
    found = set()
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS:
            continue
        if len(word) >= 3 or any(c.isdigit() for c in word):
            found.add(word)
    return frozenset(found)


def likeness(a: str, b: str) -> float:
    one, two = words(a), words(b)
    if not one or not two:
        return 0.0
    return len(one & two) / len(one | two)


@dataclass(frozen=True, slots=True)
class Learned:
    """A lesson as the side session gave it, with where it came from in the range."""

    text: str
    sort: str = "fact"
    turn: str | None = None  # the turn's key (``summarize.turn_key``)
    message: str | None = None  # the store's id of the person's message of that turn
    said: str = ""  # the person's words in that turn


@dataclass(frozen=True, slots=True)
class Part:
    """One thread's part of a lesson."""

    thread: str
    text: str
    sort: str
    time: float
    turns: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()
    said: tuple[str, ...] = ()
    confirmed: bool = False

    @staticmethod
    def of(message: MessageRecord) -> Part | None:
        data = message.data if isinstance(message.data, dict) else {}
        thread = summarised(data)
        if thread is None or not message.text.strip() or data.get("forgotten"):
            return None

        def strings(name: str) -> tuple[str, ...]:
            found = data.get(name)
            return tuple(str(v) for v in found) if isinstance(found, list) else ()

        sort = data.get("sort")
        return Part(thread, message.text, sort if sort in SORTS else "fact", message.time,
                    strings("turns"), strings("messages"), strings("said"), bool(data.get("confirmed")))


@dataclass(frozen=True, slots=True)
class Lesson:
    key: str
    parts: tuple[Part, ...] = field(default=())  # oldest first

    @property
    def newest(self) -> Part:
        return max(self.parts, key=lambda p: (p.time, p.thread))

    @property
    def text(self) -> str:
        return self.newest.text

    @property
    def sort(self) -> str:
        return self.newest.sort

    @property
    def time(self) -> float:
        return self.newest.time

    @property
    def confirmed(self) -> bool:
        return any(p.confirmed for p in self.parts)

    @property
    def threads(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.thread for p in self.parts))


def _key_of(message: MessageRecord) -> str | None:
    key = message.data.get("key") if isinstance(message.data, dict) else None
    return key if isinstance(key, str) and is_key(key) else None


async def every(store: Store) -> list[Lesson]:
    """Every lesson with a part left, oldest first (by its first part)."""
    parts: dict[str, list[Part]] = {}
    for message in await store.messages(LESSON_THREAD, KIND):
        key, part = _key_of(message), Part.of(message)
        if key is not None and part is not None:
            parts.setdefault(key, []).append(part)
    found = [Lesson(key, tuple(sorted(p, key=lambda x: (x.time, x.thread)))) for key, p in parts.items()]
    return sorted(found, key=lambda lesson: (lesson.parts[0].time, lesson.key))


async def find(store: Store, key: str) -> Lesson | None:
    key = key.strip()
    return next((lesson for lesson in await every(store) if lesson.key == key), None)


def matching(text: str, lessons: Iterable[Lesson]) -> Lesson | None:
    """The lesson ``text`` repeats (the likest, at least ``SAME``; on a tie the older), or None."""
    best: tuple[float, float, str] | None = None
    chosen = None
    for lesson in lessons:
        alike = likeness(text, lesson.text)
        if alike < SAME:
            continue
        rank = (-alike, lesson.parts[0].time, lesson.key)
        if best is None or rank < best:
            best, chosen = rank, lesson
    return chosen


def _record(key: str, part: Part) -> MessageRecord:
    return MessageRecord(
        id=f"{key}@{part.thread}", thread_id=LESSON_THREAD, turn_id=None, time=part.time,
        order=f"{key}@{part.thread}", kind=KIND, text=part.text,
        data={"thread": part.thread, "key": key, "sort": part.sort, "turns": list(part.turns),
              "messages": list(part.messages), "said": list(part.said), "confirmed": part.confirmed})


def _joined(old: tuple[str, ...], new: str | None, limit: int = 20) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*old, *([new] if new else [])]))[-limit:]


async def keep(store: Store, thread: str, learned: Sequence[Learned], *,
               now: float | None = None) -> list[str]:
    """``learned`` (from ``thread``'s range) stored, each consolidated with the lesson it
    repeats, of any thread; the key of each, in order."""
    now = time.time() if now is None else now
    known = {lesson.key: lesson for lesson in await every(store)}
    keys: list[str] = []
    written: dict[str, Part] = {}
    for item in learned:
        text = " ".join(item.text.split())
        if not text:
            continue
        same = matching(text, known.values())
        key = same.key if same is not None else new_key()
        before = next((p for p in (same.parts if same is not None else ()) if p.thread == thread), None)
        said = " ".join(item.said.split())[:SAID_CHARS]
        part = Part(
            thread, text, item.sort if item.sort in SORTS else "fact", now,
            _joined(before.turns if before else (), item.turn),
            _joined(before.messages if before else (), item.message),
            _joined(before.said if before else (), said, limit=5),
            same.confirmed if same is not None else False)
        written[key] = part
        others = tuple(p for p in (same.parts if same is not None else ()) if p.thread != thread)
        known[key] = Lesson(key, (*others, part))
        keys.append(key)
    if written:
        await store.write(Batch(messages=[_record(key, part) for key, part in written.items()]))
    return keys


async def confirm(store: Store, key: str) -> Lesson | None:
    """Every part of the lesson marked confirmed by the person; None: no such lesson."""
    lesson = await find(store, key)
    if lesson is None:
        return None
    parts = tuple(Part(p.thread, p.text, p.sort, p.time, p.turns, p.messages, p.said, True)
                  for p in lesson.parts)
    await store.write(Batch(messages=[_record(lesson.key, p) for p in parts]))
    return Lesson(lesson.key, parts)


async def forget(store: Store, key: str) -> Lesson | None:
    """The lesson's words gone from every part (each written again empty); None: no such lesson."""
    lesson = await find(store, key)
    if lesson is None:
        return None
    await store.write(Batch(messages=[MessageRecord(
        id=f"{lesson.key}@{p.thread}", thread_id=LESSON_THREAD, turn_id=None, time=time.time(),
        order=f"{lesson.key}@{p.thread}", kind=KIND, text="",
        data={"thread": p.thread, "key": lesson.key, "forgotten": True}) for p in lesson.parts]))
    return lesson


async def of_thread(store: Store, thread: str) -> list[MessageRecord]:
    """The thread's parts of lessons (forgotten ones too): its record under the pseudo-thread."""
    return [m for m in await store.messages(LESSON_THREAD, KIND) if summarised(m.data) == thread]


# ------------------------------------------------------------------ recall
#
# What a key from the dynamic zone gives back through ``recall`` (and ``/recall``): a lesson
# (``lesson:<hex>``), another thread's summary by the model (``summary-<uuid>``, its message
# id), or a conversation (``thread:<id>``, a title alone). Read from the store every time (no
# cache): a lesson changes, and a deleted thread's part, summary or title must be gone at once.

SUMMARY_KEY = re.compile(r"summary-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
THREAD_KEY = re.compile(r"thread:([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})")


def is_memory_key(text: str) -> bool:
    text = text.strip()
    return bool(KEY.fullmatch(text) or SUMMARY_KEY.fullmatch(text) or THREAD_KEY.fullmatch(text))


def when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(stamp))


async def _named(store: Store, thread: str) -> str:
    """``"Release prep" (2026-12-07)``: a conversation as a person knows it."""
    found = await store.thread(thread)
    if found is None:
        return f"a conversation {thread[:8]}"
    title = " ".join(found.title.split())[:80] or thread[:8]
    return f'"{title}" ({when(found.updated)})'


async def resolve(store: Store, key: str) -> str:
    """The text behind a lesson's, a summary's or a conversation's key, headed by
    ``RECOLLECTION`` (the dynamic zone does not place it again as this thread's own passage);
    raises ``LookupError`` when the store has none (forgotten, its thread deleted, never was)."""
    return f"{RECOLLECTION} {await _resolve(store, key.strip())}"


async def _resolve(store: Store, key: str) -> str:
    if KEY.fullmatch(key):
        lesson = await find(store, key)
        if lesson is None:
            raise LookupError(f"{key}: no such lesson (forgotten, or every conversation it came from was deleted)")
        return await describe(store, lesson)
    if SUMMARY_KEY.fullmatch(key):
        found = [m for m in await store.messages(SUMMARY_THREAD, "summary") if m.id == key and m.text]
        of = summarised(found[0].data) if found else None
        if not found or of is None:
            raise LookupError(f"{key}: no such summary (its conversation was deleted, or it never was)")
        return f"The model's summary of earlier turns of {await _named(store, of)}:\n{found[0].text}"
    matched = THREAD_KEY.fullmatch(key)
    if matched is None:
        raise LookupError(f"{key}: not a key of liminal's memory")
    return await _conversation(store, matched.group(1))


async def describe(store: Store, lesson: Lesson) -> str:
    """A lesson with every conversation it came from, and the person's words there."""
    mark = "; confirmed by the user" if lesson.confirmed else ""
    out = [f"{lesson.key} ({lesson.sort}{mark}): {lesson.text}"]
    for part in lesson.parts:
        out.append(f"From {await _named(store, part.thread)}"
                   + (f", where it was put as: {part.text}" if part.text != lesson.text else ""))
        out.extend(f"  the user said there: {said}" for said in part.said if said)
    return "\n".join(out)


async def _conversation(store: Store, thread: str) -> str:
    from liminal.store.records import DELETED

    found = await store.thread(thread)
    if found is None or found.state == DELETED:
        raise LookupError(f"thread:{thread}: no such conversation (deleted, or never was)")
    out = [f"The conversation {await _named(store, thread)}, in {found.cwd or 'an unknown folder'}."]
    mine = [lesson for lesson in await every(store) if thread in lesson.threads]
    if mine:
        out.append("Its lessons:")
        out.extend(f"- {lesson.key}: {lesson.text}" for lesson in mine)
    summaries = [m for m in await store.messages(SUMMARY_THREAD, "summary")
                 if summarised(m.data) == thread and m.text]
    if summaries:
        out.append(f"The model's latest summary of it ({summaries[-1].id}):\n{summaries[-1].text}")
    prompts = [m.text for m in await store.messages(thread, kind="user") if m.text.strip()][:3]
    if prompts:
        out.append("How it began, the user's first words:")
        out.extend(f"- {' '.join(p.split())[:400]}" for p in prompts)
    return "\n".join(out)


def as_data(lesson: Lesson) -> dict[str, Any]:
    """A lesson for ``/lessons`` and the dashboard."""
    return {"key": lesson.key, "text": lesson.text, "sort": lesson.sort, "confirmed": lesson.confirmed,
            "threads": list(lesson.threads), "time": lesson.time}
