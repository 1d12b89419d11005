"""``/undo`` with the real CLIs where the session holds one turn of the person's.

Found by the lead as a new user (claude-agent, thresholds as in test_one_thread): right after a
swap whose rewrite kept one turn whole (the preamble, then that turn), ``/undo`` answered
"SwapError: there is no earlier turn to go back to (nothing changed)", and ``/context`` then
said "Last swap: failed, unknown -> unknown tokens, SwapError: ...". A person expects the turn
out of the model's context and the summary of the older ones kept; and the first prompt of a
fresh session taken out leaves the context empty, as ``/clear`` does (docs/commands.md).
"""

from __future__ import annotations

import json

from fixtures.harness import Adapter, Rig
from liminal.gradient.summarize import PREAMBLE_INTRO
from liminal.units import tokens
from tests.acceptance.conftest import ADAPTER_NAMES, adapter_fixture
from tests.support.acp_thread import configure, liminal, liminal_client, records, said, scenario

adapter = adapter_fixture(ADAPTER_NAMES)

PREAMBLE = "This session is being continued from a previous conversation"
assert PREAMBLE_INTRO.startswith(PREAMBLE)


def still(rig: Rig) -> None:
    """The lead's gradient (each BIG turn, 3-5k tokens, is past the recent band: a rewrite
    keeps the last turn whole and summarises the rest) with a trigger no turn here reaches:
    the swap is ``/optimise``'s, so the test knows when it has happened."""
    configure(rig, high=100_000, target=4_000)


def last_request(rig: Rig) -> str:
    """What the model was sent last by the agent loop (a title request is no part of it)."""
    return json.dumps(rig.server.views()[-1].body)


def test_undo_right_after_a_swap_that_kept_one_turn(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    still(rig)
    prompts = ["first prompt alpha", *(f"turn {n} BIG read please" for n in range(3)),
               "turn 3 BIG read please xray"]
    with liminal_client(rig) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for prompt in prompts:
            said(client, thread, prompt)
        assert "Context optimised" in said(client, thread, "/optimise"), records(rig)
        # What the swap left: the summary of the older turns, then the last turn whole.
        answer = said(client, thread, "/undo")
        assert answer.startswith("Took the last turn out of the model's context ("), answer
        [swap, undo] = records(rig)
        assert (swap.move, swap.outcome, undo.move, undo.outcome) == (
            "/optimise", "committed", "/undo", "committed"), (swap, undo)
        said(client, thread, "after the undo zulu")
        seen = last_request(rig)
        assert "zulu" in seen and PREAMBLE in seen and "xray" not in seen, seen[-3000:]
        assert "/undo took the last turn out of the model's context (" in said(client, thread, "/context")

        # Again: zulu goes, the summary stays; then only the summary is left, and /undo says so.
        assert "out of the model's context" in said(client, thread, "/undo")
        refused = said(client, thread, "/undo")
        assert refused.startswith("no turn is left in the model's context, only the summary"), refused
        assert len(records(rig)) == 3, records(rig)  # the refusal journals nothing
        said(client, thread, "after two undos yankee")
        seen = last_request(rig)
        assert "yankee" in seen and PREAMBLE in seen and "zulu" not in seen and "xray" not in seen
        # Out again, and the thread left there: what it shows as its context is the move's.
        assert "out of the model's context" in said(client, thread, "/undo")
        context = said(client, thread, "/context")
        assert "Last move: /undo took the last turn out of the model's context (" in context and "unknown" not in context, context
        client.settle()
    shown = liminal(rig, "history", thread[:8])
    for prompt in [*prompts, "after the undo zulu", "after two undos yankee"]:
        assert prompt in shown, (prompt, shown)
    assert "[liminal: /undo took the last turn out of the model's context (" in shown and "failed" not in shown, shown
    assert "/undo" in liminal(rig, "swaps")
    # liminal threads said 22.9k (the last usage point, from before the move) where /context
    # said 15.4k: both say the context the last move left.
    [listed] = json.loads(liminal(rig, "threads", "--json"))
    last = records(rig)[-1]
    assert listed["context_used"] == last.tokens_after, (listed, last)
    assert f"Context: {tokens(last.tokens_after)} tokens." in context, (context, last)


def test_undo_of_a_sessions_first_turn_leaves_an_empty_context(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    with liminal_client(rig) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, "first prompt alpha")
        answer = said(client, thread, "/undo")
        assert answer.startswith("Took out the only turn: the model's context is empty now"), answer
        [moved] = records(rig)
        assert (moved.move, moved.outcome, moved.opened) == ("/undo", "committed", "empty"), moved
        assert said(client, thread, "/undo") == (
            "the model's context is empty: there is no turn to take out (nothing changed)")
        context = said(client, thread, "/context")
        assert "Context: empty" in context, context
        assert "Last move: /undo took out the only turn: the model's context is empty" in context, context
        said(client, thread, "after the undo bravo")
        seen = last_request(rig)
        assert "bravo" in seen and "alpha" not in seen, seen[-3000:]
        # Its one turn out again: the thread's own first prompt is no history either.
        assert "the model's context is empty now" in said(client, thread, "/undo")
        said(client, thread, "after the second undo charlie")
        seen = last_request(rig)
        assert "charlie" in seen and "bravo" not in seen and "alpha" not in seen
        client.settle()
    shown = liminal(rig, "history", thread[:8])
    for prompt in ("first prompt alpha", "after the undo bravo", "after the second undo charlie"):
        assert prompt in shown, (prompt, shown)
