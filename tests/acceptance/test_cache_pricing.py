"""A thread priced at its own prompt cache (issue 24), with the real Claude Code.

Claude Code on a subscription writes a prompt cache that lives an hour, at 2x the input price
rather than 1.25x: every swap's rebuild costs more, so the policy keeps a smaller recent band on
such a thread (``gradient.long_cache_recent_tokens``, 10k, against ``recent_tokens``' 20k) and
prices its decisions at that write. It learns the cache's life from the session file's usage,
which says what the server wrote (``docs/gradient.md``, "Cache lives"). Here the rig has Claude
Code ask for the hour (``CLAUDE_CODE_PROMPT_CACHE_TTL=1h``, ``prompt_cache_ttl``) or not, and the
fake Messages API answers as the real one does (``fixtures/harness/promptcache.py``).

``swap.high_tokens`` alone is set (a trigger the rig reaches in a few turns); the target is the
policy's, the floor, whose recent band is what the cache chooses.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fixtures.harness import AcpClient, Rig, Scenario, Shell
from liminal.config import GradientSettings
from liminal.kernel.journal import SwapJournal

BIG = 3_600  # a turn's tokens: a 12 KB tool output and the answer
TURNS = 12
# How far what a rewrite says it left may be from the band's bound: the gradient's estimate
# (Claude Code's, from its calibration) and the preamble of the turns it consolidated.
PREAMBLE = GradientSettings().summary_tokens


def scenario() -> Scenario:
    return Scenario().add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")


@pytest.mark.parametrize("ttl", [None, "1h"])
def test_a_swap_keeps_the_recent_band_its_threads_cache_chooses(ttl: str | None,
                                                                make_rig: Callable[..., Rig]) -> None:
    rig = make_rig("claude-agent", scenario(), prompt_cache_ttl=ttl)
    prompt = rig.overhead()
    home = rig.home.liminal_home
    home.mkdir(parents=True, exist_ok=True)
    high = prompt + 30_000
    (home / "config.toml").write_text(f"[swap]\nhigh_tokens = {high}\nhold_timeout_seconds = 60\n")
    client = AcpClient(rig.home.liminal_argv(), rig.home.env(), rig.home.project,
                       rig.home.logs / "stderr-liminal.log")
    rig.clients.append(client)
    journal = SwapJournal(home / "swaps.jsonl")
    with client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for n in range(TURNS):
            result = client.prompt(thread, f"turn {n}: BIG read please", timeout=180)
            assert result.stop_reason == "end_turn", rig.stderr_tail()
            if [r for r in journal.records() if r.outcome == "committed"]:
                break
        context = client.prompt(thread, "/context", timeout=60).text
    committed = [r for r in journal.records() if r.outcome == "committed"]
    assert committed, (journal.records(), rig.stderr_tail())
    swap = committed[0]
    assert swap.cost is not None and swap.tokens_after is not None
    gradient = GradientSettings()
    if ttl == "1h":
        assert swap.cost["cache_life"] == 3600.0, swap
        # Two whole turns (a third would pass 10k), the preamble: under 10k and the preamble.
        assert swap.tokens_after - prompt <= gradient.long_cache_recent_tokens + PREAMBLE, swap
        assert "This thread's prompt cache lives 1 hour" in context, context
        assert "(gradient.long_cache_recent_tokens, at least the last turn)" in context, context
    else:
        assert swap.cost["cache_life"] == 300.0, swap
        # Five whole turns (18k): more than the hour's band and its preamble.
        assert swap.tokens_after - prompt > gradient.long_cache_recent_tokens + PREAMBLE, swap
        assert "This thread's prompt cache lives 5 minutes" in context, context
        assert "(gradient.recent_tokens, at least the last turn)" in context, context
