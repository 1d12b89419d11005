"""Lessons on every store (docs/memory.md): one message per lesson and thread it came from in the
``liminal-lessons`` pseudo-thread, consolidated across threads, confirmed and forgotten by the
person; a deleted thread takes its parts and leaves the other threads' (a consolidated lesson
loses only that thread's part); recall of a lesson's, a summary's and a conversation's key; what
the dynamic zone is offered of other conversations (``kernel.zone.ZoneSource``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from liminal.config import MemorySettings
from liminal.kernel.owned import Holdings, Records, Whose
from liminal.kernel.zone import CONFIRMED, ELSEWHERE, SHORT_LESSON, ZoneSource, recency
from liminal.lookup import lessons
from liminal.lookup.lessons import Learned
from liminal.lookup.recaller import Recaller
from liminal.store.base import Store
from liminal.store.records import LESSON_THREAD, SUMMARY_THREAD, Batch, ThreadUpdate
from tests.store.test_store_contract import message

pytestmark = pytest.mark.anyio
A = "aaaaaaaa-0000-4000-8000-00000000000a"
B = "bbbbbbbb-0000-4000-8000-00000000000b"
C = "cccccccc-0000-4000-8000-00000000000c"
SAID = "remember: the release codename is PLOVER-8812, because the staging port moved to 6543"
LESSON = "The release codename is PLOVER-8812, because the staging port moved to 6543."
AGAIN = "Release codename PLOVER-8812 (the staging port moved to 6543)."
DAY = 86_400.0
NOW = 1_800_000_000.0


async def conversations(store: Store) -> None:
    """A and B in one project folder, C in another; A said the codename."""
    await store.write(Batch(
        messages=[message("a:0000000001", SAID, thread=A, kind="user", turn="a:1", time=NOW - 2 * DAY),
                  message("b:0000000001", "what was the codename again", thread=B, kind="user", turn="b:1"),
                  message("c:0000000001", "lunch plans", thread=C, kind="user", turn="c:1")],
        threads=[ThreadUpdate(A, NOW - 2 * DAY, title="Release prep", cwd="/work/app", backing_ids=(A,)),
                 ThreadUpdate(B, NOW - DAY, title="Deploy checks", cwd="/work/app", backing_ids=(B,)),
                 ThreadUpdate(C, NOW - DAY, title="Lunch codename plover", cwd="/elsewhere", backing_ids=(C,))]))


async def test_a_repeated_lesson_is_one_lesson_with_a_part_from_each_thread(store: Store) -> None:
    await conversations(store)
    [key] = await lessons.keep(store, A, [Learned(LESSON, "fact", "turnkey-a", "a:0000000001", SAID)], now=NOW - 2 * DAY)
    assert lessons.is_key(key)
    # The same thread saying it again updates its part: no copy, the turns and words added to.
    assert await lessons.keep(store, A, [Learned(LESSON + " Still.", "fact", "turnkey-a2")], now=NOW - DAY) == [key]
    # Another thread repeating it joins it, in its own words.
    assert await lessons.keep(store, B, [Learned(AGAIN, "decision", "turnkey-b", "b:0000000001", "the codename?")],
                              now=NOW) == [key]
    # Something else is a lesson of its own.
    [other] = await lessons.keep(store, B, [Learned("Deploys go through the blue pool first.", "convention")], now=NOW)
    assert other != key
    found = await lessons.find(store, key)
    assert found is not None and found.threads == (A, B)
    assert found.text == AGAIN and found.sort == "decision"  # the newest part's words
    part_a = next(p for p in found.parts if p.thread == A)
    assert part_a.turns == ("turnkey-a", "turnkey-a2") and part_a.messages == ("a:0000000001",)
    assert part_a.said == (SAID,)
    assert len(await store.messages(LESSON_THREAD, lessons.KIND)) == 3  # A's part, B's two
    assert [lesson.key for lesson in await lessons.every(store)] == [key, other]


async def test_deleting_a_thread_takes_its_part_and_leaves_the_others(store: Store) -> None:
    await conversations(store)
    [shared] = await lessons.keep(store, A, [Learned(LESSON, turn="t", said=SAID)], now=NOW - DAY)
    [alone] = await lessons.keep(store, A, [Learned("Only A knows the vault combination 31-4-15.")], now=NOW - DAY)
    await lessons.keep(store, B, [Learned(AGAIN, said="the codename?")], now=NOW)
    assert await Records(store).count(Whose(A, (A,))) == 1 + 2  # its message, its two parts
    removed = await Holdings(store, None, (), None, None).remove(Whose(A, (A,), "/work/app"))
    assert removed.counts["records"] >= 3 and not removed.failed
    left = await lessons.find(store, shared)
    assert left is not None and left.threads == (B,) and left.text == AGAIN
    assert await lessons.find(store, alone) is None
    texts = [m.text for m in await store.messages(LESSON_THREAD)]
    assert not any("PLOVER-8812, because" in t or "vault" in t for t in texts), texts  # A's words gone
    described = await lessons.resolve(store, shared)
    assert SAID not in described and "the codename?" in described
    with pytest.raises(LookupError, match="no such lesson"):
        await lessons.resolve(store, alone)
    # A deleted thread writes no more parts (its tombstone: ``Batch.without``).
    late = Batch(messages=[message(f"{shared}@{A}", LESSON, thread=LESSON_THREAD, kind="lesson",
                                   data={"thread": A, "key": shared})])
    assert not late.without({A}).messages


async def test_a_person_confirms_and_forgets_a_lesson(store: Store) -> None:
    await conversations(store)
    [key] = await lessons.keep(store, A, [Learned(LESSON)], now=NOW - DAY)
    confirmed = await lessons.confirm(store, key)
    assert confirmed is not None and confirmed.confirmed
    # A part that joins a confirmed lesson is confirmed too.
    await lessons.keep(store, B, [Learned(AGAIN)], now=NOW)
    found = await lessons.find(store, key)
    assert found is not None and all(p.confirmed for p in found.parts)
    assert await lessons.forget(store, key) is not None
    assert await lessons.find(store, key) is None
    assert not any(m.text for m in await store.messages(LESSON_THREAD))  # every part's words gone
    assert await lessons.confirm(store, key) is None and await lessons.forget(store, "lesson:0000000000") is None
    # Said again later, it is a lesson anew (the forgotten one's words are not there to match).
    [again] = await lessons.keep(store, B, [Learned(LESSON)], now=NOW)
    assert again != key


async def test_recall_gives_a_lessons_a_summarys_and_a_conversations_words(store: Store) -> None:
    await conversations(store)
    [key] = await lessons.keep(store, A, [Learned(LESSON, said=SAID)], now=NOW)
    summary = "summary-7a1b2c3d-0000-4000-8000-000000000001"
    await store.write(Batch(messages=[message(summary, "SUMMARY OF A: the codename and the port", thread=SUMMARY_THREAD,
                                              kind="summary", turn=None, data={"thread": A})]))
    recaller = Recaller(store, None)
    text = (await recaller.recall(key)).decode()
    assert text.startswith(f"[liminal memory] {key} (fact): {LESSON}") and '"Release prep"' in text and SAID in text
    assert "SUMMARY OF A" in (await recaller.recall(summary)).decode()
    began = (await recaller.recall(f"thread:{A}")).decode()
    assert '"Release prep"' in began and SAID in began and key in began and summary in began
    await store.delete_thread(A)
    from liminal.gradient.recall import RecallError

    for gone in (key, summary, f"thread:{A}"):
        with pytest.raises(RecallError):
            await recaller.recall(gone)
    with pytest.raises(RecallError, match="store"):
        await Recaller(None, None).recall(key)


def source(store: Store, reach: str = "folder") -> ZoneSource:
    @asynccontextmanager
    async def opened() -> AsyncIterator[Store]:
        yield store

    return ZoneSource(opened, MemorySettings(reach=reach), clock=lambda: NOW)


async def test_the_zone_is_offered_other_conversations_lessons_summaries_and_titles(store: Store) -> None:
    await conversations(store)
    [key] = await lessons.keep(store, A, [Learned(LESSON, said=SAID)], now=NOW - 2 * DAY)
    [mine] = await lessons.keep(store, B, [Learned("B's own lesson about the deploy checks list.")], now=NOW)
    long = "The codename rules: " + "x" * SHORT_LESSON
    [tickled] = await lessons.keep(store, A, [Learned(long)], now=NOW - 30 * DAY)
    summary = "summary-7a1b2c3d-0000-4000-8000-000000000002"
    await store.write(Batch(messages=[message(summary, "A's summary: codename and port", thread=SUMMARY_THREAD,
                                              kind="summary", turn=None, time=NOW - DAY, data={"thread": A})]))
    pool = {c.key: c for c in await source(store).pool(B, "/work/app")}
    assert mine not in pool  # B's own lessons are in its preamble's summaries, not its zone
    lesson = pool[key]
    assert lesson.kind == "lesson" and lesson.origin == (A,)
    assert lesson.shown.startswith(LESSON) and '"Release prep"' in lesson.shown  # short: whole
    assert lesson.weight == pytest.approx(recency(2 * DAY))
    tickle = pool[tickled]
    assert tickle.kind == "tickle" and tickle.shown.startswith('reminds of the conversation "Release prep" (')
    assert f"recall {tickled}" in tickle.shown and len(tickle.shown) < 300
    assert tickle.weight < lesson.weight  # older
    assert pool[summary].kind == "tickle" and pool[summary].origin == (A,)
    # C is in another folder: out of reach but with "all", where it weighs less; a conversation
    # with no lesson or summary is offered by its title.
    assert not any(C in c.origin for c in pool.values())
    everywhere = {c.key: c for c in await source(store, "all").pool(B, "/work/app")}
    title = everywhere[f"thread:{C}"]
    assert title.kind == "tickle" and title.weight == pytest.approx(recency(DAY) * ELSEWHERE)
    assert await source(store, "off").pool(B, "/work/app") == []
    # A lesson the person confirmed weighs more.
    await lessons.confirm(store, key)
    confirmed = {c.key: c for c in await source(store).pool(B, "/work/app")}[key]
    assert confirmed.weight == pytest.approx(recency(2 * DAY) * CONFIRMED) and "confirmed" in confirmed.shown


async def test_memos_come_first_and_the_review_drops_and_keeps(store: Store, tmp_path: Path) -> None:
    from liminal.kernel.zone import Verdict
    from liminal.lookup.memos import save_memo

    await conversations(store)
    memo = await save_memo(store, "the codename list lives in the wiki", ["ops"], A)
    [key] = await lessons.keep(store, A, [Learned(LESSON)], now=NOW)
    zone = source(store)
    offer = await zone.offer(B, "/work/app", "session-1")
    assert [c.key for c in offer.candidates][:2] == [memo.id, key] and offer.dropped == ()
    zone.reviewed(B, "session-1", [Verdict(memo.id, "memo", "wiki", False, "not about the release"),
                                   Verdict(key, "lesson", LESSON, True, "the codename")])
    offer = await zone.offer(B, "/work/app", "session-1")
    assert [c.key for c in offer.candidates] == [key] and offer.candidates[0].why.endswith("the codename")
    assert [v.key for v in offer.dropped] == [memo.id]
    assert offer.dropped[0].as_dict()["placed"] is False
    # Another cycle (the thread swapped since): the review no longer applies.
    assert len((await zone.offer(B, "/work/app", "session-2")).candidates) == 2


async def test_lessons_lists_this_folders_and_every_folders_and_refuses_what_it_does_not_take(store: Store) -> None:
    from liminal.kernel.commands import CommandError
    from liminal.kernel.commands import lessons as lessonlist

    await conversations(store)
    assert (await lessonlist.answer(store, "", "/work/app")).startswith("No lessons in this project's conversations yet")
    [key] = await lessons.keep(store, A, [Learned(LESSON)], now=NOW - DAY)
    [lunch] = await lessons.keep(store, C, [Learned("Lunch orders go to the desk on Fridays.", "convention")], now=NOW)
    here = await lessonlist.answer(store, "", "/work/app")
    assert here.splitlines() == [
        "1 lesson of this project's conversations, newest first (/lessons confirm KEY, /lessons forget KEY):",
        f"- {key} fact: {LESSON}", f'    from "Release prep", {lessons.when(NOW - DAY)}']
    everywhere = await lessonlist.answer(store, "--all", "/work/app")
    assert everywhere.startswith("2 lessons of every conversation") and everywhere.index(lunch) < everywhere.index(key)
    assert (await lessonlist.answer(store, f"confirm {key}", None)).startswith(f"Lesson {key} confirmed")
    assert f"- {key} (confirmed) fact:" in await lessonlist.answer(store, "", "/work/app")
    assert "forgotten: its words are gone from 1 conversation" in await lessonlist.answer(store, f"forget {key}", None)
    for wrong in ("confirm", "forget lesson:0000000000", "confirm nokey", "now"):
        with pytest.raises(CommandError):
            await lessonlist.answer(store, wrong, "/work/app")
