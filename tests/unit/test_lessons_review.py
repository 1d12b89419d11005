"""Lessons and the model's review riding the summary's request (docs/memory.md): what the
request asks, how the answer's ``## LESSONS`` and ``## REVIEW`` are read (hypothesis: any
answer), how the first stage weighs a candidate (hypothesis: the same pool in any order, a
heavier candidate never ranks lower), when two lessons are one; and through a fake port, one
side session per cycle that stores the lessons and hands the zone its verdicts, a review the
model did not write or a side session that failed leaving the first stage's choice."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liminal.acp.port import OwnRequestError
from liminal.config import GradientSettings, MemorySettings, Settings, SwapSettings
from liminal.gradient.summarize import (
    LESSON_CHARS,
    LESSONS_MAX,
    NOTE_CHARS,
    SUMMARY_REQUEST,
    TurnDigest,
    parse_answer,
    parse_lessons,
    parse_review,
    summary_request,
)
from liminal.gradient.zone import RECOLLECTION, Candidate, is_recollection, select
from liminal.kernel.policy import (
    BOUNDED_OUTPUT,
    LESSONS_REQUEST,
    PRICES,
    REVIEW_REQUEST,
    SUMMARY_OUTPUT,
    CostPolicy,
    Pace,
)
from liminal.kernel.summaries import SideSummaries
from liminal.kernel.threads import ThreadModel, ThreadState
from liminal.kernel.zone import ZoneSource
from liminal.lookup import lessons
from liminal.store.base import Store
from liminal.store.configured import open_store
from liminal.store.records import Batch, ThreadUpdate
from tests.support.fakeport import FakePort
from tests.unit.test_side_summaries import Harness as SummaryHarness
from tests.unit.test_side_summaries import one_summary

pytestmark = pytest.mark.anyio
THREAD = "11111111-1111-4111-8111-111111111111"
OTHER = "44444444-4444-4444-8444-444444444444"
SIDE = "33333333-3333-4333-8333-333333333333"
TURNS = [TurnDigest(1, "remember: the release codename is PLOVER-8812, the staging port moved to 6543",
                    ("Noted.",)),
         TurnDigest(2, "now list the files", ("Listed.",))]
RECENT = [TurnDigest(3, "what was the release codename for the staging deploy?", ("Checking.",))]
LESSON = "The release codename is PLOVER-8812, because the staging port moved to 6543."
ANSWER = ("## STATE\nGoal: ship\n## SUMMARY\nThe model noted the codename.\n"
          f"## LESSONS\n- (turn 1, fact) {LESSON}\n- (turn 2, open) Listing the files is not done yet.\n")


# ------------------------------------------------------------------ the request and the answer

def test_the_request_asks_for_lessons_and_a_review_only_when_told() -> None:
    bare = summary_request(TURNS)
    assert "## LESSONS" not in bare and "## REVIEW" not in bare and "Write two sections" in bare
    asked = summary_request(TURNS, lessons=True, review=[("memo-1", "x" * 1000), ("lesson:0123456789", "y")])
    assert asked.startswith(SUMMARY_REQUEST) and "Write four sections" in asked
    assert "## LESSONS" in asked and "## REVIEW" in asked and "at most 200 words" in asked
    notes = asked[asked.index("The notes to review:"):].splitlines()[1:]
    assert notes[0].startswith("- memo-1: ") and len(notes[0]) <= len("- memo-1: ") + NOTE_CHARS
    assert notes[1] == "- lesson:0123456789: y"
    # The answer's lessons and review are no part of the summary or its anchor.
    text, anchor = parse_answer(ANSWER + "## REVIEW\n- memo-1 keep: yes\n")
    assert text == "The model noted the codename." and anchor == "Goal: ship"


def test_lessons_and_verdicts_are_read_from_the_answer() -> None:
    found = parse_lessons(ANSWER + "- none\n- [decision] We use SQLite.\n- (the API) is flaky\n", TURNS)
    assert [(f.turn, f.sort, f.text) for f in found] == [
        (1, "fact", LESSON), (2, "open", "Listing the files is not done yet."),
        (None, "decision", "We use SQLite."), (None, "fact", "(the API) is flaky")]
    assert parse_lessons("## LESSONS\n- (turn 9) not a turn of the range", TURNS)[0].turn is None
    assert parse_lessons("## SUMMARY\nno lessons") == [] and parse_lessons("## LESSONS\n- none") == []
    review = "## REVIEW\n- memo-1 keep: about the release\n* `lesson:0123456789` — DROP — lunch\n- other keep\n"
    assert parse_review(review, ["memo-1", "lesson:0123456789"]) == {
        "memo-1": (True, "about the release"), "lesson:0123456789": (False, "lunch")}
    assert parse_review("## REVIEW\n- memo-1 maybe\n", ["memo-1"]) == {}
    assert parse_review("no review at all", ["memo-1"]) == {}


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=2000),
       st.lists(st.sampled_from(["memo-1", "lesson:0123456789", "thread:x"]), max_size=3))
def test_any_answer_reads_as_bounded_lessons_and_known_verdicts(text: str, keys: list[str]) -> None:
    for answer in (text, f"## LESSONS\n{text}", f"## REVIEW\n{text}", f"## SUMMARY\n{text}\n## LESSONS\n- {text}"):
        found = parse_lessons(answer, TURNS)
        assert len(found) <= LESSONS_MAX
        assert all(f.text.strip() and len(f.text) <= LESSON_CHARS and f.turn in (None, 1, 2) for f in found)
        verdicts = parse_review(answer, keys)
        assert set(verdicts) <= set(keys) and all(len(r) <= 160 for _, r in verdicts.values())
        parse_answer(answer)


# ------------------------------------------------------------------ the first stage's weighing

WORDS = ["release", "codename", "plover", "staging", "port", "deploy", "wiki", "lunch", "cache", "index"]
RECENT_TEXT = "what was the release codename for the staging deploy port"


@st.composite
def pools(draw: st.DrawFn) -> list[Candidate]:
    n = draw(st.integers(1, 12))
    return [Candidate(f"k{i:02d}", draw(st.sampled_from(["memo", "lesson", "tickle", "passage"])),
                      " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))), i,
                      draw(st.floats(0.0, 3.0, allow_nan=False)))
            for i in range(n)]


@settings(max_examples=200, deadline=None)
@given(pools(), st.randoms(use_true_random=False), st.integers(0, 11), st.floats(1.01, 4.0))
def test_the_first_stage_is_deterministic_and_a_heavier_candidate_never_ranks_lower(
        pool: list[Candidate], rng: Any, pick: int, more: float) -> None:
    chosen = select(pool, RECENT_TEXT, 100_000, max_entries=len(pool))
    shuffled = list(pool)
    rng.shuffle(shuffled)
    assert select(shuffled, RECENT_TEXT, 100_000, max_entries=len(pool)) == chosen
    assert all(p.score > 0 for p in chosen)
    weightless = {c.key for c in pool if c.weight <= 0}
    assert not weightless & {p.key for p in chosen}
    one = pool[pick % len(pool)]
    heavier = [replace(c, weight=c.weight * more) if c.key == one.key else c for c in pool]
    again = [p.key for p in select(heavier, RECENT_TEXT, 100_000, max_entries=len(pool))]
    before = [p.key for p in chosen]
    if one.key in before:
        assert one.key in again and again.index(one.key) <= before.index(one.key)


def test_a_placed_candidate_shows_its_tickle_and_says_where_it_came_from() -> None:
    tickle = Candidate("lesson:0123456789", "tickle", "release codename plover staging port", 0, 1.0,
                       'reminds of the conversation "Release prep" (2026-12-07), about: ...', ("a",))
    [placed] = select([tickle], RECENT_TEXT, 1000)
    assert placed.text.startswith("reminds of") and placed.as_dict()["from"] == ["a"]


def test_one_tickle_reminds_of_a_conversation() -> None:
    """Two summaries of one conversation are one reminder of it (its best); a lesson of it is
    placed beside, and another conversation's tickle too."""
    text = "release codename plover staging port"
    pool = [Candidate("summary-1", "tickle", text + " deploy", 0, 1.0, "one", ("a",)),
            Candidate("summary-2", "tickle", text, 1, 1.0, "two", ("a",)),
            Candidate("lesson:0123456789", "lesson", text, 2, 1.0, "", ("a",)),
            Candidate("summary-3", "tickle", text, 3, 1.0, "three", ("b",))]
    assert [p.key for p in select(pool, RECENT_TEXT, 5000)] == [
        "summary-1", "lesson:0123456789", "summary-3"]


def test_a_recall_of_memory_in_the_threads_own_output_is_not_placed_again() -> None:
    """What the model recalled of another conversation is that conversation's words: placed only
    through its own key, read afresh (it may be forgotten or deleted since)."""
    recalled = f"Wall time: 0.5 seconds Output: {RECOLLECTION} lesson:0123456789 (fact): the release codename staging"
    pool = [Candidate("s:u:0", "passage", recalled, 0), Candidate("memo-1", "memo", recalled, 1)]
    assert is_recollection(recalled) and not is_recollection("release codename staging")
    assert [p.key for p in select(pool, RECENT_TEXT, 1000)] == ["memo-1"]


def test_two_lessons_are_one_when_their_words_mostly_agree() -> None:
    assert lessons.words("Port 6543, codename PLOVER-8812; the staging.") == {
        "port", "6543", "codename", "plover-8812", "staging"}
    assert lessons.likeness(LESSON, "Release codename PLOVER-8812 (the staging port moved to 6543).") >= lessons.SAME
    assert lessons.likeness(LESSON, "The staging port is 5432.") < lessons.SAME
    assert lessons.likeness("", LESSON) == 0.0


def test_the_policy_prices_what_rides_the_request() -> None:
    swap, gradient = SwapSettings(summaries=True), GradientSettings()
    pace = Pace()
    with_memory = CostPolicy(swap, gradient, 167_000, side_session_tokens=3_000)
    bare = CostPolicy(swap, gradient, 167_000, side_session_tokens=3_000,
                      memory=MemorySettings(lessons=False, review=False))
    assert with_memory.memory_request() == LESSONS_REQUEST + REVIEW_REQUEST and bare.memory_request() == 0
    difference = with_memory.summary_cost(50_000, 30_000, pace) - bare.summary_cost(50_000, 30_000, pace)
    assert difference == pytest.approx(PRICES.write * (LESSONS_REQUEST + REVIEW_REQUEST)
                                       - PRICES.output * (SUMMARY_OUTPUT - BOUNDED_OUTPUT))
    no_zone = CostPolicy(swap, GradientSettings(zone_tokens=0), 167_000)
    assert no_zone.memory_request() == LESSONS_REQUEST  # nothing to review without a zone


# ------------------------------------------------------------------ through a fake port

class Harness(SummaryHarness):
    """The side summaries' fake harness, over these turns: the first two a swap would consolidate."""

    def ancient(self, path: Path, target_tokens: int, recent_tokens: int | None = None) -> list[TurnDigest]:
        return TURNS

    def digests(self, path: Path) -> list[TurnDigest]:
        return TURNS + RECENT


def agent(port: list[FakePort], prompts: list[str], answer: Any) -> Any:
    def reply(method: str, params: dict[str, Any]) -> Any:
        if method == "session/new":
            return {"sessionId": SIDE}
        if method == "session/prompt":
            prompts.append(params["prompt"][0]["text"])
            text = answer(prompts[-1]) if callable(answer) else answer
            if isinstance(text, Exception):
                raise text
            port[0].from_agent({"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": SIDE, "update": {"sessionUpdate": "agent_message_chunk",
                                              "content": {"type": "text", "text": text}}}})
            return {"stopReason": "end_turn"}
        if method == "session/close":
            return {}
        raise OwnRequestError(method, {"code": -32601, "message": "no"})
    return reply


class EveryTurnAncient(Harness):
    """A session whose every turn with words a swap would consolidate: Codex's just after a
    swap, the next turn begun in its file (no prompt written yet) while the side session reads."""

    def ancient(self, path: Path, target_tokens: int, recent_tokens: int | None = None) -> list[TurnDigest]:
        return TURNS + RECENT

    def digests(self, path: Path) -> list[TurnDigest]:
        return [*TURNS, *RECENT, TurnDigest(4, "")]


async def side(tmp_path: Path, answer: Any, prompts: list[str],
               harness: type[Harness] = Harness) -> tuple[SideSummaries, FakePort, ZoneSource]:
    settings = Settings(home=tmp_path)
    async with open_store(settings, create=True) as store:
        await store.write(Batch(threads=[
            ThreadUpdate(OTHER, 1_000.0, title="Release prep", cwd=str(tmp_path / "project"), backing_ids=(OTHER,)),
            ThreadUpdate(THREAD, 2_000.0, title="Deploy", cwd=str(tmp_path / "project"), backing_ids=(THREAD,))]))
        await lessons.keep(store, OTHER, [lessons.Learned(
            "The staging deploy uses the release codename PLOVER-8812.")], now=1_000.0)

    @asynccontextmanager
    async def opened() -> AsyncIterator[Store]:
        async with open_store(settings) as store:
            yield store

    swap = SwapSettings(high_tokens=10_000, target_tokens=5_000, summaries=True)
    model = ThreadModel()
    model.capabilities = {"sessionCapabilities": {"close": {}}}
    model.threads[THREAD] = ThreadState(THREAD, cwd=str(tmp_path / "project"), context_tokens=8_000)
    summaries = SideSummaries(swap, harness(tmp_path / "session.jsonl"), model,  # type: ignore[arg-type]
                              CostPolicy(swap, GradientSettings(), 167_000), tmp_path, lambda: open_store(settings))
    zone = ZoneSource(opened, MemorySettings(), clock=lambda: 1_000.0)
    summaries.zone = zone
    holder: list[FakePort] = []
    port = FakePort(answer=agent(holder, prompts, answer))
    holder.append(port)
    await summaries.prepare(port)
    port.bind(THREAD, THREAD)
    return summaries, port, zone


async def one_cycle(summaries: SideSummaries, port: FakePort) -> None:
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(summaries.run, port)
        summaries._turn_ended(THREAD, True)
        with anyio.fail_after(20):
            await summaries.wait_for(1)
        summaries._turn_ended(THREAD, True)  # the same cycle: no second side session
        tasks.cancel_scope.cancel()
    await summaries.aclose()


async def test_one_side_session_stores_the_lessons_and_reviews_the_zones_candidates(tmp_path: Path) -> None:
    prompts: list[str] = []

    def answer(request: str) -> str:
        key = next(line.split(":", 2)[0][2:] + ":" + line.split(":", 2)[1] for line in request.splitlines()
                   if line.startswith("- lesson:"))
        return ANSWER + f"## REVIEW\n- {key} drop: the codename is already in this thread\n"

    summaries, port, zone = await side(tmp_path, answer, prompts)
    await one_cycle(summaries, port)
    assert len(prompts) == 1  # one request: the summary, the lessons and the review
    request = prompts[0]
    assert "## LESSONS" in request and "## REVIEW" in request and "PLOVER-8812" in request
    assert summaries.made == 1 and summaries.lessons_kept == 2 and summaries.reviews == 1
    async with open_store(Settings(home=tmp_path)) as store:
        found = {lesson.text: lesson for lesson in await lessons.every(store)}
        kept = found[LESSON]
        assert kept.threads == (THREAD,) and kept.parts[0].said[0].startswith("remember: the release codename")
        assert found["Listing the files is not done yet."].sort == "open"
    [verdict] = zone.verdicts(THREAD, THREAD).values()
    assert not verdict.keep and verdict.reason == "the codename is already in this thread"
    offer = await zone.offer(THREAD, str(tmp_path / "project"), THREAD)
    assert [v.key for v in offer.dropped] == [verdict.key]
    assert verdict.key not in {c.key for c in offer.candidates}


@pytest.mark.parametrize("answer", [ANSWER, OwnRequestError("session/prompt", {"code": -32603, "message": "refused"})],
                         ids=["no review written", "the side session failed"])
async def test_without_a_review_the_first_stage_stands(tmp_path: Path, answer: Any) -> None:
    prompts: list[str] = []
    summaries, port, zone = await side(tmp_path, answer, prompts)
    await one_cycle(summaries, port)
    assert len(prompts) == 1 and summaries.reviews == 0
    assert zone.verdicts(THREAD, THREAD) == {}
    offer = await zone.offer(THREAD, str(tmp_path / "project"), THREAD)
    assert offer.dropped == () and any(c.kind == "lesson" for c in offer.candidates)


async def test_a_review_answered_after_the_swap_leaves_the_first_stages_choice(tmp_path: Path) -> None:
    """The side session took longer than the thread's next turns: the swap it was for came
    first (the thread is on a new session). Its verdicts are of a cycle that has ended: the
    next swap's offer stands on the first stage, and the journal of it holds no drop."""
    prompts: list[str] = []
    ports: list[FakePort] = []
    swapped = "55555555-5555-4555-8555-555555555555"

    def late(request: str) -> str:
        ports[0].bind(THREAD, swapped)  # the swap, while the model was still answering
        key = next(line[2:].split(": ", 1)[0] for line in request.splitlines() if line.startswith("- lesson:"))
        return ANSWER + f"## REVIEW\n- {key} drop: the codename is already in this thread\n"

    summaries, port, zone = await side(tmp_path, late, prompts)
    ports.append(port)
    await one_summary(summaries, port)  # (no turn end after it: the thread is in a new cycle)
    assert len(prompts) == 1 and summaries.reviews == 1  # made, for the cycle on THREAD
    assert zone.verdicts(THREAD, swapped) == {}
    offer = await zone.offer(THREAD, str(tmp_path / "project"), swapped)
    assert offer.dropped == () and any(c.kind == "lesson" and c.why == "" for c in offer.candidates)


async def test_with_every_turn_to_be_consolidated_the_last_said_is_the_reviews_query(tmp_path: Path) -> None:
    prompts: list[str] = []
    summaries, port, _ = await side(tmp_path, ANSWER, prompts, EveryTurnAncient)
    await one_cycle(summaries, port)
    assert "## REVIEW" in prompts[0] and "PLOVER-8812" in prompts[0]
