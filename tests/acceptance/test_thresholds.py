"""Thresholds that mean what they say (issue 20), with the real CLIs.

``swap.high_tokens`` / ``swap.target_tokens`` set, a conversation whose turns grow the context
as the issue's did (long tool outputs) runs through ``liminal acp``. The gradient's recent band is
left at its default (20k), larger than the room under the targets: it must fit under them (the
last turn whole), or every rewrite lands past the trigger and is skipped, the context growing
without bound (Claude Code under 9000/5000: every swap skipped; Codex under 20000/12000: 0 swaps
in 20 turns, the context at 42.6k). Where the CLI's own prompt alone is above the target, swaps
land on the floor (the prompt, the preamble, the last turn) and back off so that each has room:
the context stays bounded, and the thread does not swap at every turn.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

from fixtures.harness import AcpClient, Adapter, Reply, Rig, Scenario, Shell, Text, adapters
from fixtures.harness.anthropic import tokens
from liminal.kernel.journal import SwapJournal, SwapRecord
from tests.acceptance.conftest import adapter_fixture
from tests.support.listing import LISTING

THRESHOLD_ADAPTERS = ["claude-agent", *sorted(n for n, a in adapters().items() if a.model_api == "openai")]
adapter = adapter_fixture(THRESHOLD_ADAPTERS)

# Two long tool outputs every five turns: about 1.6k tokens a turn, as in the Codex run
# (20 turns from 10k to 42.6k). The first turn is short: its context is the CLI's own prompt.
KINDS = ["plain question", "BIG read", "BASH list", "BIG read", "PAR count"]
BIG = 3_600  # the BIG turn's tokens (its output, about 12 KB, and the answer): the largest turn
# How far what a rewrite says it left may be from the next request: the gradient estimates (Claude
# Code's from its calibration, up to 770 tokens under in these runs; Codex's within 300).
ESTIMATE = 1_000


def scenario() -> Scenario:
    return (
        Scenario()
        .add("BASH", Shell(LISTING, "List"), "listed them")
        .add("PAR", Reply((Text("Three at once."), Shell("seq 1 40", "a"), Shell("seq 1 60", "b"),
                           Shell("seq 1 80", "c"))), "counted all three")
        .add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")
    )


@dataclass
class Run:
    prompt_tokens: int  # the CLI's own prompt: the first turn's context
    contexts: list[list[int]] = field(default_factory=list)  # each turn's model calls, in tokens
    swaps: list[SwapRecord] = field(default_factory=list)
    context_command: str = ""  # what /context said at the end

    @property
    def committed(self) -> list[SwapRecord]:
        return [s for s in self.swaps if s.outcome == "committed"]

    @property
    def swapped(self) -> list[int]:
        """The turns at whose end the model's context was swapped: the next turn starts smaller."""
        return [n for n in range(len(self.contexts) - 1) if self.contexts[n + 1][0] < self.contexts[n][-1]]

    def after(self, n: int) -> list[int]:
        """Every context the model saw after the end of turn ``n``."""
        return [c for turn in self.contexts[n + 1:] for c in turn]


def converse(rig: Rig, high: int, target: int, turns: int) -> Run:
    rig.server.script = scenario()
    home = rig.home.liminal_home
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f"[swap]\nhigh_tokens = {high}\ntarget_tokens = {target}\nhold_timeout_seconds = 60\n")
    journal = SwapJournal(home / "swaps.jsonl")
    client = AcpClient(rig.home.liminal_argv(), rig.home.env(), rig.home.project,
                       rig.home.logs / "stderr-liminal.log")
    rig.clients.append(client)
    run: Run | None = None
    with client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for n in range(turns):
            seen = len(rig.server.views())
            result = client.prompt(thread, f"turn {n}: {KINDS[n % len(KINDS)]} please", timeout=180)
            assert result.stop_reason == "end_turn" and result.text, rig.stderr_tail()
            sizes = [tokens(len(v.raw)) for v in rig.server.views()[seen:]]
            if run is None:
                run = Run(sizes[0])
            run.contexts.append(sizes)
        assert run is not None
        result = client.prompt(thread, "/context", timeout=60)
        run.context_command = result.text
    run.swaps = journal.records()
    assert client.session_ids() == {thread}
    return run


def said_of(run: Run) -> str:
    return json.dumps({"turns": run.contexts, "swapped": run.swapped, "prompt": run.prompt_tokens,
                       "swaps": [(s.outcome, s.tokens_before, s.tokens_after, s.reason) for s in run.swaps]})


def swaps_spaced(run: Run) -> bool:
    """Each committed swap moved the model's context, and no two came at consecutive turn ends."""
    swapped = run.swapped
    return len(swapped) == len(run.committed) and all(b - a >= 2 for a, b in itertools.pairwise(swapped))


def test_swaps_land_under_the_target_the_recent_band_fitted(adapter: Adapter, rig: Rig) -> None:
    """The thresholds above the CLI's own prompt by the issue's figures (swap at 9k more, down to
    5k more), the recent band at its default 20k. Before: every rewrite kept the 20k band whole,
    left more than the trigger and was skipped: no swap, the context growing. Now every swap
    lands at or under the target and the context stays under the trigger and a turn.

    The room under the target must hold the preamble and the last turn whole, whichever turn it
    is: at prompt + 5,000 a swap right after the 3.6k turn landed on that floor, 10 tokens past
    the target (codex-zed, once in a CI run: Codex's context messages and a 1.25k preamble leave
    3.9k), so the target here is prompt + 7,000."""
    prompt = rig.overhead()
    high, target = prompt + 11_000, prompt + 7_000
    run = converse(rig, high, target, 16)
    assert len(run.committed) >= 2 and swaps_spaced(run), said_of(run)
    for n, swap in zip(run.swapped, run.committed, strict=True):
        assert swap.tokens_after is not None and swap.tokens_after <= target, said_of(run)
        # What the model saw next: what the swap said it left (and the next prompt), about.
        assert abs(run.contexts[n + 1][0] - swap.tokens_after) <= ESTIMATE, said_of(run)
    # Never past the trigger by more than a turn once the first swap is made.
    assert max(run.after(run.swapped[0])) <= high + BIG + 200, said_of(run)
    assert "fitted under the target" in run.context_command, run.context_command
    # A 4k leeway over an 18k-odd target: each swap repays its rebuild in some fifty calls and the
    # next comes after a few turns. /context says these settings lose money, and what to change.
    assert "lose money" in run.context_command and "Raise swap.high_tokens" in run.context_command, \
        run.context_command


def test_a_target_below_the_clis_own_prompt_still_bounds_the_context(adapter: Adapter, rig: Rig) -> None:
    """The issue's figures as given. Claude Code's prompt in this rig is 11.7k tokens, Codex's
    10.4k: no rewrite can go under them. Claude Code under 9000/5000 skipped every swap (the
    rewrite left more than the trigger) and Codex under 20000/12000 made 0 swaps in 20 turns, the
    context growing without bound. Now swaps land on the floor (the CLI's prompt, the least
    preamble, the last turn whole), the trigger backs off to leave each swap room, the context
    stays within the floor, the leeway and a turn, and /context says why."""
    claude = adapter.model_api == "anthropic"
    high, target = (9_000, 5_000) if claude else (20_000, 12_000)
    run = converse(rig, high, target, 20)
    assert len(run.committed) >= 3 and swaps_spaced(run), said_of(run)
    floor = run.prompt_tokens + 1_000 + BIG + 200  # the prompt, the least preamble, the last turn
    for n, swap in zip(run.swapped, run.committed, strict=True):
        assert swap.tokens_after is not None and swap.tokens_after <= max(target, floor), said_of(run)
        assert abs(run.contexts[n + 1][0] - swap.tokens_after) <= ESTIMATE, said_of(run)
    # Bounded from the first swap on: past the trigger (backed off above the floor where the
    # floor leaves no room under it) by no more than a turn. Without swaps it reached 42k.
    bound = max(high, floor + (high - target)) + BIG + 200
    assert run.swapped[0] <= 10 and max(run.after(run.swapped[0])) <= bound, said_of(run)
    assert "above the target" in run.context_command, run.context_command
    if claude:  # the prompt alone is past the trigger: it backed off, and says so
        assert "backed off from 9,000" in run.context_command, run.context_command
