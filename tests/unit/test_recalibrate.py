"""A thread a new liminal process opens has its pace learned again (``liminal.kernel.recalibrate``):
the CLI's own prompt from the thread's first session file, then each swap's rewrite from the
journal, in the order the process that made them learned them; what a process learned itself
is never replaced."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from liminal.config import GradientSettings, SwapSettings
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.policy import CostPolicy, Pace
from liminal.kernel.recalibrate import Recalibrator, restore
from liminal.kernel.threads import ThreadModel, ThreadState
from tests.support.fakeport import FakePort

THREAD = "11111111-1111-4111-8111-111111111111"


def policy() -> CostPolicy:
    return CostPolicy(SwapSettings(high_tokens=20_000, summaries=False),
                      GradientSettings(recent_tokens=600, summary_tokens=600), 230_000)


def record(outcome: str, after: int | None, *, move: str | None = "swap", reason: str = "context") -> SwapRecord:
    return SwapRecord(THREAD, THREAD, "22222222-2222-4222-8222-222222222222", outcome, reason, 0.0, 0.1,
                      24_000, after, "codex", move=move)


RECORDS = [record("committed", 14_100), record("failed", None), record("committed", 13_900, move="/undo"),
           record("committed", 13_000, move=None, reason="/clear A"), record("skipped", 13_600)]


def test_the_pace_is_learned_again_as_the_process_that_swapped_learned_it() -> None:
    cost = policy()
    live = Pace(overhead=12_436)
    for after, committed in ((14_100, True), (13_600, False)):  # what the swaps told it, in order
        cost.rewritten(live, after, committed=committed)
    fresh = Pace()
    assert restore(cost, fresh, RECORDS, 12_436)
    assert (fresh.overhead, fresh.floor, fresh.landed, fresh.backed_off_to) == \
        (live.overhead, live.floor, live.landed, live.backed_off_to)
    assert cost.trigger(fresh) == cost.trigger(live) > 20_000 and cost.target(fresh) == 14_100
    # What a process learned itself stays: a thread it started, or one it has swapped since.
    assert not restore(cost, live, RECORDS, 99_999) and live.overhead == 12_436
    # The cache's life first: an hour's sets the smaller recent band the floors were measured at.
    hour = Pace()
    assert restore(cost, hour, RECORDS, 12_436, 3600.0)
    assert hour.cache_life == 3600.0 and hour.floor == 14_100
    assert not restore(policy(), Pace(), [], None)


class Harness:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.located: list[str] = []

    def locate(self, backing_id: str, cwd: str | None) -> Path | None:
        self.located.append(backing_id)
        return self.path

    def first_context_tokens(self, path: Path) -> int | None:
        return 12_436

    def cache_life(self, path: Path) -> float | None:
        return 300.0


@pytest.mark.anyio
async def test_a_thread_opened_by_load_has_its_pace_read_off_the_flush(tmp_path: Path) -> None:
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    for made in RECORDS:
        journal.append(made)
    model = ThreadModel()
    state = model.threads[THREAD] = ThreadState(THREAD, cwd=str(tmp_path))
    harness = Harness(tmp_path / "first.jsonl")
    cost = policy()
    recalibrator = Recalibrator(model, cost, journal, harness)  # type: ignore[arg-type]
    port = FakePort()
    await recalibrator.prepare(port)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(recalibrator.run, port)
        for listener in model.on_opened:  # the client's load answered, then liminal's own resume
            listener(THREAD, "session/load", 1, False)
            listener(THREAD, "session/resume", None, True)
        with anyio.fail_after(10):
            await recalibrator.settled(THREAD)
        model.on_opened[0](THREAD, "session/load", 2, False)  # opened again: read once
        tasks.cancel_scope.cancel()
    assert recalibrator.attempts == recalibrator.restored == 1
    # The thread's first session (its id is the thread's), then the one it is on now.
    assert harness.located == [THREAD, port.backing_of(THREAD)]
    assert (state.pace.overhead, state.pace.floor, state.pace.landed) == (12_436, 14_100, 13_600)
    assert state.pace.cache_life == 300.0
