"""A thread's moves as a person reads them (``liminal.moves``): ``/context``, ``liminal swaps``,
``liminal history`` and search say them the same way.

Found by the lead: after an ``/undo`` that failed, ``/context`` said "Last swap: failed,
unknown -> unknown tokens, SwapError: there is no earlier turn to go back to": not which
command, figures that were never there, and an exception's name."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

import pytest

from liminal import moves
from liminal.acp.port import OwnRequestError
from liminal.cli import main
from liminal.errors import in_words
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.mover import SwapError, failure


def record(outcome: str, reason: str, before: int | None = None, after: int | None = None,
           move: str | None = None, cost: dict[str, object] | None = None) -> SwapRecord:
    return SwapRecord(thread_id="7e57a11d-0000-4000-8000-000000000001", old_backing_id="a",
                      new_backing_id="b", outcome=outcome, reason=reason, started_at=1_700_000_000.0,
                      duration_s=0.21, tokens_before=before, tokens_after=after, cost=cost, move=move)


@pytest.mark.parametrize(("fields", "said"), [
    (record("failed", "the last turn is not on disk yet", move="/undo"),
     "/undo failed: the last turn is not on disk yet"),
    # A committed move says what it did in words (it said "/undo committed, 13.7k -> 13.7k").
    (record("committed", "/undo", 15_400, 8_800, move="/undo"),
     "/undo took the last turn out of the model's context (15.4k -> 8.8k tokens)"),
    (record("committed", "/clear", move="/clear"), "/clear emptied the model's context"),
    (record("committed", "context 131.2k tokens >= 120k", 131_200, 38_500, move="swap", cost={}),
     "swap compressed the model's context (131.2k -> 38.5k tokens): context 131.2k tokens >= 120k"),
    (record("failed", "the rewrite could not be made: the rewrite would lose a turn", 131_200,
            move="swap", cost={}),
     "swap failed, at 131.2k tokens: the rewrite could not be made: the rewrite would lose a turn"),
    # Journaled before reasons were words: the exception's name is left out when shown.
    (record("failed", "RewriteError: the rewrite would lose a turn", 131_200, move="swap", cost={}),
     "swap failed, at 131.2k tokens: the rewrite would lose a turn"),
    (record("abandoned", "stopped during the swap (CancelledError)", 44_800, move="swap", cost={}),
     "swap abandoned, at 44.8k tokens: liminal stopped during the swap (its client had closed its "
     "connection, or it was signalled)"),
    # Journaled before ``move``: what each was, as well as the record tells.
    (record("failed", "SwapError: there is no earlier turn to go back to"),
     "move failed: there is no earlier turn to go back to"),
    (record("committed", "/clear A", 20_000, 9_000),
     "/clear A took the model's context back to mark A (20k -> 9k tokens)"),
    (record("skipped", "the rewrite would not pay back", 120_000, 118_000, cost={}),
     "swap skipped, 120k -> 118k tokens: the rewrite would not pay back"),
    # The same size before and after, as the tokens read: why.
    (record("committed", "/undo", 13_712, 13_690, move="/undo"),
     "/undo took the last turn out of the model's context (about 13.7k tokens before and after): "
     "what it took out held less than 0.1k tokens"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_move_says_what_it_was_what_it_did_and_why(fields: SwapRecord, said: str) -> None:
    assert moves.describe(asdict(fields)) == said
    assert "unknown" not in said and not re.search(r"[A-Z]\w*(Error|Exception)", said) and "committed" not in said


def test_liminals_rewrites_are_swaps_and_optimise_the_rest_the_persons() -> None:
    rewrites = [asdict(record("committed", "/optimise hard", 90_000, 30_000)),
                asdict(record("committed", "context 120k", 120_000, 40_000, cost={})),
                {"move": "/optimise", "outcome": "committed"}, {"move": "swap", "outcome": "failed"}]
    theirs = [asdict(record("committed", "/clear A", 20_000, 9_000)), {"move": "/undo"}, {"move": "reopen"}]
    assert [moves.is_rewrite(r) for r in rewrites + theirs] == [True] * 4 + [False] * 3


def test_a_failed_moves_reason_is_its_words() -> None:
    # Found with acpx: "abandoned swap 44.8k ... stopped during the swap (CancelledError)" reached
    # liminal swaps, liminal history and the dashboard. A reason says what happened, never the
    # exception's class (the log has that).
    assert failure(SwapError("the last turn is not on disk yet")) == "the last turn is not on disk yet"
    assert failure(ValueError("bad line 3"), "the rewrite could not be made") == \
        "the rewrite could not be made: bad line 3"
    assert failure(TimeoutError(), "the agent did not open the new session") == \
        "the agent did not open the new session: no answer in time"
    refused = OwnRequestError("session/resume", {"code": -32603, "message": "Internal error",
                                                 "data": {"details": "no such session"}})
    assert failure(refused, "the agent did not open the new session") == (
        "the agent did not open the new session: the agent refused session/resume: Internal error: "
        "no such session (error -32603)")
    assert in_words(OwnRequestError("", "the agent is gone")) == "the agent is gone"
    assert in_words(FileNotFoundError(2, "No such file or directory", "/x/y.jsonl")) == \
        "No such file or directory (/x/y.jsonl)"
    assert in_words(KeyError()) == "an error inside liminal (its log has the details)"
    assert in_words(RuntimeError("x" * 1000)).endswith("...")


def test_liminal_swaps_names_each_move(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    journal.append(record("committed", "/undo", 15_400, 8_800, move="/undo"))
    journal.append(record("failed", "SwapError: there is no earlier turn to go back to"))
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    assert main(["swaps"]) == 0
    out = capsys.readouterr().out
    header, done, failed, why = out.splitlines()
    assert "MOVE" in header and "TOKENS" in header
    assert " /undo " in done and "15.4k -> 8.8k" in done and "committed" not in done
    assert " move failed " in failed
    assert why.strip() == "there is no earlier turn to go back to"  # no type name, no "-"
