"""A move is one record: what the mover is given and gives back (``MoveAttempt``), and the
journal record made from it (``MoveRecords``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from liminal.config import GradientSettings, SwapSettings
from liminal.kernel.attempt import MoveAttempt, MoveRecords
from liminal.kernel.journal import SwapJournal
from liminal.kernel.policy import CostPolicy, Decision, Pace
from liminal.kernel.threads import ThreadState


def decision() -> Decision:
    policy = CostPolicy(SwapSettings(high_tokens=30_000, target_tokens=18_000, summaries=False),
                        GradientSettings(), 200_000)
    return policy.decide(31_000, Pace())


def test_an_end_record_says_the_attempt_and_the_attempt_says_its_end(tmp_path: Path) -> None:
    priced: list[Any] = []

    def price(state: ThreadState, made: Decision, after: int) -> dict[str, Any]:
        priced.append((state.thread_id, made.context, after))
        return {"target": after}

    journal = SwapJournal(tmp_path / "swaps.jsonl")
    records = MoveRecords(journal, lambda: "claude", priced=price)
    state = ThreadState("t", cwd="/work")
    attempt = MoveAttempt(state, "old", "context 31k tokens >= 30k", "swap", started=1_000.0, t0=0.0,
                          tokens_before=31_000, decision=decision())
    attempt.new_backing = "new"
    record = records.made(attempt, "committed", attempt.reason, before=31_000, after=18_000,
                          decision=attempt.decision, size=4_096)
    assert (record.thread_id, record.old_backing_id, record.new_backing_id) == ("t", "old", "new")
    assert (record.outcome, record.reason, record.move, record.harness, record.cwd) == \
        ("committed", "context 31k tokens >= 30k", "swap", "claude", "/work")
    assert (record.started_at, record.tokens_before, record.tokens_after, record.size) == (1_000.0, 31_000, 18_000, 4_096)
    assert record.cost is not None and record.cost["target"] == 18_000 and priced == [("t", 31_000, 18_000)]
    assert record.opened is None

    # An end without a move: journaled, the attempt says it, and nothing is priced.
    failed = MoveAttempt(state, "old", "/undo", "/undo", tokens_before=None)
    assert records.ended(failed, "failed", "the agent did not open the new session") is failed
    assert (failed.outcome, failed.said, failed.committed) == ("failed", "the agent did not open the new session", False)
    assert [r.outcome for r in journal.records()] == ["failed"] and len(priced) == 1


def test_a_move_onto_an_empty_session_is_journaled_opened_empty(tmp_path: Path) -> None:
    records = MoveRecords(SwapJournal(tmp_path / "swaps.jsonl"), lambda: "codex")
    attempt = MoveAttempt(ThreadState("t"), "old", "/clear", "/clear")
    attempt.opened_by, attempt.new_backing = "session/new", "empty-1"
    record = records.made(attempt, "committed", "/clear", before=None, after=None)
    assert (record.opened, record.move, record.new_backing_id, record.cost) == ("empty", "/clear", "empty-1", None)
    assert attempt.ended(record).committed and attempt.new_backing_id == "empty-1"
