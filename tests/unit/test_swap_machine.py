"""The swap's decisions as transcripts: what the machine is told, and what it asks for.

No file, no agent, no router: ``SwapMachine`` answers a thread's cues (turn end, load, idle
spell) with ``Queue``/``Hold``/``LookForCacheLife``, and a ``SwapRun`` answers each event with
the next command, up to ``Finish``. What each command would have come to is the event fed back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from liminal.config import GradientSettings, SwapSettings
from liminal.kernel.policy import CostPolicy
from liminal.kernel.swapping.book import SwapBook
from liminal.kernel.swapping.machine import CACHE_LOOKS, SwapMachine
from liminal.kernel.swapping.run import (
    UNDECIDED_SETTLE_SECONDS,
    UNHELD_SETTLE_SECONDS,
    SwapRun,
    UnexpectedEvent,
)
from liminal.kernel.swapping.steps import (
    Announce,
    AwaitFile,
    CacheLifeRead,
    Command,
    Done,
    Event,
    Finish,
    Gathered,
    Hold,
    Journal,
    Locate,
    Located,
    Look,
    LookForCacheLife,
    MoveEnded,
    Queue,
    Rewrite,
    Settle,
    Settled,
    SizeRead,
)

T = "thread-1"
FILE = Path("/sessions/s1.jsonl")
SETTLE = 10.0  # the machine's settle timeout for a decided swap


def fixed(**swap: Any) -> SwapMachine:
    """Swaps at 30k, down to 18k (the thresholds set: no idle swaps)."""
    settings = SwapSettings(**{"high_tokens": 30_000, "target_tokens": 18_000, "summaries": False, **swap})
    return SwapMachine(settings, CostPolicy(settings, GradientSettings(), 200_000), settle_timeout=SETTLE)


def priced(**swap: Any) -> SwapMachine:
    """The cost policy's own trigger (about 85k at a 5-minute cache), idle swaps on."""
    settings = SwapSettings(**{"summaries": False, **swap})
    return SwapMachine(settings, CostPolicy(settings, GradientSettings(), 200_000, side_session_tokens=3_000),
                       settle_timeout=SETTLE)


def turn_end(machine: SwapMachine, book: SwapBook, *, tokens: int | None, busy: bool = False) -> list[Any]:
    return machine.turn_ended(book, T, context_tokens=tokens, prompt="fix the bug", new=False, busy=busy)


def play(run: SwapRun, *events: Event) -> list[Command]:
    """The run's commands: its first, then its answer to each event in turn."""
    commands = [run.start()]
    for event in events:
        assert not isinstance(commands[-1], Finish), "an event after the run finished"
        commands.append(run.send(event))
    return commands


def kinds(commands: list[Any]) -> list[str]:
    return [type(c).__name__ for c in commands]


def look_of(cues: list[Any]) -> Look:
    [queue] = [c for c in cues if isinstance(c, Queue)]
    return queue.look


# ------------------------------------------------------------------ turn ends


def test_a_turn_end_below_the_trigger_with_usage_asks_only_for_the_cache_life() -> None:
    machine, book = fixed(), SwapBook()
    assert turn_end(machine, book, tokens=10_000) == [LookForCacheLife(T)]
    assert book.turns_since_swap == 1 and book.last_context == 10_000
    book.cache_looks = CACHE_LOOKS  # the records never said it: not asked again
    assert turn_end(machine, book, tokens=11_000) == []


def test_a_turn_end_above_the_trigger_is_held_and_swaps_with_the_band_and_aim() -> None:
    machine, book = fixed(), SwapBook()
    cues = turn_end(machine, book, tokens=31_000)
    look = look_of(cues)
    assert look.held and look.decision is not None and look.decision.swap and look.prompt == "fix the bug"
    assert machine.queued(book, look) == [Hold(T)] and book.swapping
    run = SwapRun(machine, book, look, context_tokens=31_000)
    commands = play(run, Located(FILE), Settled(True), CacheLifeRead(None, 0.0),
                    Gathered(True, memos=("memo",), kept_out=({"id": "x"},)))
    assert kinds(commands) == ["Locate", "Settle", "ReadCacheLife", "Gather", "Rewrite"]
    assert commands[1] == Settle(FILE, "fix the bug", SETTLE)
    rewrite = commands[-1]
    assert isinstance(rewrite, Rewrite)
    assert (rewrite.path, rewrite.aim, rewrite.band, rewrite.tokens) == (FILE, 18_000, 20_000, 31_000)
    assert rewrite.memos == ("memo",) and rewrite.kept_out == ({"id": "x"},)
    assert rewrite.decision is look.decision and rewrite.reason == look.decision.why  # decided once
    assert run.rewritten(18_500) is None  # it pays: open it
    assert run.send(MoveEnded(True, "s2", 31_000, 18_500)) == Announce("s2", 31_000, 18_500)
    assert run.send(Done()) == Finish(True)
    book.failures = 3
    machine.finished(book, True)
    assert book.failures == 0


def test_a_turn_end_with_work_in_flight_or_a_move_under_way_is_not_looked_at() -> None:
    machine, book = fixed(), SwapBook()
    assert turn_end(machine, book, tokens=31_000, busy=True) == []
    assert book.turns_since_swap == 1  # counted all the same
    book.swapping = True
    assert turn_end(machine, book, tokens=31_000) == []
    assert book.turns_since_swap == 1  # a turn end during a move is not one of the thread's
    assert turn_end(fixed(enabled=False), SwapBook(), tokens=31_000) == []


def test_without_usage_far_below_the_trigger_the_look_is_unheld_and_only_reads_the_size() -> None:
    machine, book = fixed(), SwapBook(file_tokens=5_000)
    look = look_of(turn_end(machine, book, tokens=None))
    assert not look.held and look.decision is None
    assert machine.queued(book, look) == []  # nothing held
    run = SwapRun(machine, book, look, context_tokens=None)
    commands = play(run, Located(FILE), Settled(False), CacheLifeRead(None, 0.0), SizeRead(12_000))
    assert kinds(commands) == ["Locate", "Settle", "ReadCacheLife", "ReadSize", "Finish"]
    assert commands[1] == Settle(FILE, "fix the bug", UNHELD_SETTLE_SECONDS)  # read as is past it
    assert commands[-1] == Finish(None) and book.file_tokens == 12_000 and book.last_context == 12_000


def test_without_usage_and_no_size_yet_the_look_is_held_and_the_file_decides() -> None:
    machine, book = fixed(), SwapBook()
    look = look_of(turn_end(machine, book, tokens=None))
    assert look.held and look.decision is None
    run = SwapRun(machine, book, look, context_tokens=None)
    commands = play(run, Located(FILE), Settled(True), CacheLifeRead(None, 0.0), SizeRead(31_000),
                    Gathered(False))
    assert kinds(commands) == ["Locate", "Settle", "ReadCacheLife", "ReadSize", "Gather", "Rewrite"]
    assert commands[1] == Settle(FILE, "fix the bug", UNDECIDED_SETTLE_SECONDS)
    rewrite = commands[-1]
    assert isinstance(rewrite, Rewrite) and rewrite.tokens == 31_000 and rewrite.decision.context == 31_000
    assert book.file_tokens == 31_000


def test_without_usage_a_file_below_the_trigger_ends_the_look() -> None:
    machine, book = fixed(), SwapBook()
    run = SwapRun(machine, book, look_of(turn_end(machine, book, tokens=None)), context_tokens=None)
    assert play(run, Located(FILE), Settled(True), CacheLifeRead(None, 0.0), SizeRead(20_000))[-1] == Finish(None)
    run = SwapRun(machine, book, look_of(turn_end(machine, book, tokens=None)), context_tokens=None)
    assert play(run, Located(FILE), Settled(True), CacheLifeRead(None, 0.0), SizeRead(None))[-1] == Finish(None)


def test_a_held_look_without_a_file_waits_for_it_then_fails_and_backs_off() -> None:
    machine, book = fixed(), SwapBook()
    run = SwapRun(machine, book, look_of(turn_end(machine, book, tokens=31_000)), context_tokens=31_000)
    commands = play(run, Located(None), Located(None))
    assert commands == [Locate(), AwaitFile(SETTLE), Finish(False)]
    machine.finished(book, False)
    machine.left(book)
    assert (book.failures, book.skip_turns) == (1, 2)
    assert turn_end(machine, book, tokens=31_000) == []  # two turn ends skipped
    assert turn_end(machine, book, tokens=31_000) == []
    assert look_of(turn_end(machine, book, tokens=31_000)).held  # then looked at again


def test_the_back_off_doubles_up_to_32_turn_ends_and_a_look_that_raised_backs_off_too() -> None:
    machine, book = fixed(), SwapBook()
    skipped = []
    for _ in range(7):
        machine.finished(book, False)
        skipped.append(book.skip_turns)
    assert skipped == [2, 4, 8, 16, 32, 32, 32]
    other = SwapBook()
    machine.broke(other)
    assert (other.failures, other.skip_turns) == (1, 2)


def test_a_decided_swap_whose_turn_never_reaches_the_file_is_journaled_abandoned() -> None:
    machine, book = fixed(), SwapBook()
    run = SwapRun(machine, book, look_of(turn_end(machine, book, tokens=31_000)), context_tokens=31_000)
    commands = play(run, Located(FILE), Settled(False), Done())
    assert commands[2] == Journal("abandoned", "the turn did not reach the session file", 31_000)
    assert commands[-1] == Finish(False)
    # Undecided, the look is dropped with nothing journaled; liminal stopping: nothing begun.
    run = SwapRun(machine, book, Look(T, None, True, "p"), context_tokens=None)
    assert play(run, Located(FILE), Settled(False))[-1] == Finish(None)
    run = SwapRun(machine, book, look_of(turn_end(machine, SwapBook(), tokens=31_000)), context_tokens=31_000)
    assert play(run, Located(FILE), Settled(False, stopping=True))[-1] == Finish(None)


def test_a_rewrite_that_does_not_pay_moves_the_trigger_instead_of_backing_off() -> None:
    machine, book = fixed(), SwapBook()
    run = SwapRun(machine, book, look_of(turn_end(machine, book, tokens=31_000)), context_tokens=31_000)
    play(run, Located(FILE), Settled(True), CacheLifeRead(None, 0.0), Gathered(False))
    why = run.rewritten(29_000)
    assert why is not None and "below the trigger" in why
    assert book.trigger_backed_off and book.pace.backed_off_to is not None
    assert run.send(MoveEnded(False)) == Finish(False)
    machine.finished(book, False)
    assert book.skip_turns == 0 and book.failures == 0  # the trigger moved: that is the back-off
    machine.left(book)
    assert not book.trigger_backed_off


def test_the_target_below_the_floor_is_said_once() -> None:
    machine, book = fixed(), SwapBook()
    run = SwapRun(machine, book, look_of(turn_end(machine, book, tokens=31_000)), context_tokens=31_000)
    play(run, Located(FILE), Settled(True), CacheLifeRead(None, 0.0), Gathered(False))
    run.rewritten(19_000)
    assert book.said_above_target


def test_a_summary_priced_but_never_asked_is_journaled_as_none() -> None:
    machine, book = priced(summaries=True), SwapBook()
    look = look_of(turn_end(machine, book, tokens=100_000))
    assert look.decision is not None and look.decision.summary > 0
    run = SwapRun(machine, book, look, context_tokens=100_000)
    rewrite = play(run, Located(FILE), Settled(True), CacheLifeRead(None, 0.0), Gathered(False))[-1]
    assert isinstance(rewrite, Rewrite) and rewrite.decision.summary == 0.0
    run = SwapRun(machine, SwapBook(), look, context_tokens=100_000)
    rewrite = play(run, Located(FILE), Settled(True), CacheLifeRead(None, 0.0), Gathered(True))[-1]
    assert isinstance(rewrite, Rewrite) and rewrite.decision.summary == look.decision.summary


def test_every_turns_decides_without_usage() -> None:
    machine, book = fixed(every_turns=2), SwapBook(file_tokens=1_000)
    first = look_of(turn_end(machine, book, tokens=None))
    assert first.decision is None and not first.held
    second = look_of(turn_end(machine, book, tokens=None))
    assert second.decision is not None and second.decision.every and second.held


# ------------------------------------------------------------------ the cache's life


def test_the_cache_life_is_looked_for_at_most_cache_looks_times_but_always_for_a_decided_swap() -> None:
    machine, book = fixed(), SwapBook()
    assert [machine.may_read_cache_life(book, decided=False) for _ in range(CACHE_LOOKS + 1)] == \
        [True] * CACHE_LOOKS + [False]
    assert machine.may_read_cache_life(book, decided=True)
    run = SwapRun(machine, book, Look(T, None, False, "p"), context_tokens=None)
    assert kinds(play(run, Located(FILE), Settled(True))) == ["Locate", "Settle", "ReadSize"]


def test_a_swap_priced_at_another_cache_life_is_decided_again() -> None:
    machine, book = priced(), SwapBook()
    look = look_of(turn_end(machine, book, tokens=100_000))
    assert look.decision is not None and look.decision.cache_life == 300.0
    run = SwapRun(machine, book, look, context_tokens=100_000)
    rewrite = play(run, Located(FILE), Settled(True), CacheLifeRead(3600.0, 0.0), Gathered(False))[-1]
    assert isinstance(rewrite, Rewrite)
    assert rewrite.decision.cache_life == 3600.0 and run.decision is rewrite.decision
    assert book.pace.cache_life == 3600.0


# ------------------------------------------------------------------ idle spells and loads


def test_an_idle_spell_past_the_cache_is_looked_at_once_and_swaps_when_it_pays() -> None:
    machine, book = priced(), SwapBook()
    assert machine.idle_swaps and not fixed().idle_swaps

    def idle(now: float, tokens: int = 100_000, busy: bool = False) -> list[Any]:
        return machine.idle(book, T, now=now, idle_since=1_000.0, context_tokens=tokens, prompt="p", busy=busy)

    assert idle(1_100.0) == []  # within the cache's life
    look = look_of(idle(1_301.0))
    assert look.held and look.idle_since == 1_000.0 and look.decision is not None and look.decision.idle
    assert idle(1_400.0) == []  # one look per spell
    small = SwapBook()
    assert machine.idle(small, T, now=2_000.0, idle_since=1_000.0, context_tokens=30_000, prompt=None,
                        busy=False) == []  # too small to pay
    held = SwapBook()
    assert machine.idle(held, T, now=2_000.0, idle_since=1_000.0, context_tokens=100_000, prompt=None,
                        busy=True) == []
    # A look that found the thread busy (held, work in flight, no agent) spent nothing: the same
    # spell is looked at again once the thread is free, else it never swaps on idle.
    assert look_of(machine.idle(held, T, now=2_100.0, idle_since=1_000.0, context_tokens=100_000,
                                prompt=None, busy=False)).idle_since == 1_000.0


def test_an_idle_swap_whose_cache_turns_out_to_live_longer_is_dropped_and_the_spell_looked_at_again() -> None:
    machine, book = priced(), SwapBook()
    look = look_of(machine.idle(book, T, now=1_301.0, idle_since=1_000.0, context_tokens=100_000,
                                prompt="p", busy=False))
    machine.queued(book, look)
    run = SwapRun(machine, book, look, context_tokens=100_000)
    commands = play(run, Located(FILE), Settled(True), CacheLifeRead(3600.0, 1_400.0))
    assert commands[-1] == Finish(None) and book.idle_looked is None
    book.swapping = False
    again = dict(idle_since=1_000.0, context_tokens=100_000, prompt="p", busy=False)
    assert machine.idle(book, T, now=1_500.0, **again) == []  # the hour's cache is still there
    assert look_of(machine.idle(book, T, now=4_601.0, **again)).decision is not None  # the hour is out


def test_a_thread_loaded_past_its_trigger_swaps_before_its_first_prompt() -> None:
    machine, book = fixed(), SwapBook()
    look = look_of(machine.opened(book, T, stopping=False, busy=False))
    assert look.loaded and look.held and look.decision is None and look.prompt is None
    run = SwapRun(machine, book, look, context_tokens=None)
    commands = play(run, Located(FILE), CacheLifeRead(None, 0.0), SizeRead(31_000), Gathered(False))
    assert kinds(commands) == ["Locate", "ReadCacheLife", "ReadSize", "Gather", "Rewrite"]  # no turn to settle
    rewrite = commands[-1]
    assert isinstance(rewrite, Rewrite)
    assert rewrite.reason.endswith("(when the thread was loaded, before its first prompt)")
    # No file yet: nothing to read, nothing to back off from.
    assert play(SwapRun(machine, SwapBook(), look, context_tokens=None), Located(None))[-1] == Finish(None)


def test_a_load_is_not_looked_at_while_liminal_stops_or_a_prompt_came_with_it() -> None:
    machine = fixed()
    assert machine.opened(SwapBook(), T, stopping=True, busy=False) == []  # the stop's grace is for moves begun
    assert machine.opened(SwapBook(), T, stopping=False, busy=True) == []
    assert machine.opened(SwapBook(swapping=True), T, stopping=False, busy=False) == []


def test_an_event_the_run_was_not_waiting_for_is_the_drivers_bug() -> None:
    machine, book = fixed(), SwapBook()
    run = SwapRun(machine, book, look_of(turn_end(machine, book, tokens=31_000)), context_tokens=31_000)
    run.start()
    with pytest.raises(UnexpectedEvent):
        run.send(SizeRead(1))


def test_a_committed_move_starts_the_book_over() -> None:
    book = SwapBook(turns_since_swap=4, file_tokens=50_000, last_context=50_000, calls=6)
    book.restart(18_000)
    assert (book.turns_since_swap, book.file_tokens, book.last_context, book.calls) == (0, 18_000, 18_000, 0)
    book.restart(None)  # an empty session: nothing known until its next turn
    assert (book.file_tokens, book.last_context) == (None, None)
