"""The dynamic zone (issue 24), with the real Claude Code and Codex.

A person saves two memos (``/memo``), then works through turns that talk about the first one's
subject and read long tool outputs, past a low threshold: liminal swaps. The request the CLI
sends the model after a swap holds the zone, between the compressed history and the recent
turns: the matching memo with its id, never the other one (it shares no word with the turns,
nor do the tool outputs, which are numbers). Each later request holds one zone only (a rewrite
drops the one before), ``/optimise`` places a memo saved since, and ``/context`` lists what
the last move placed.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from fixtures.harness import AcpClient, Adapter, ModelRequest, Rig, Scenario, Shell
from liminal.gradient.zone import ZONE_INTRO
from liminal.kernel.journal import SwapJournal
from tests.acceptance.conftest import adapter_fixture

adapter = adapter_fixture(["claude-agent", "codex-zed", "codex-agent"])
TURNS = 12
MATCHING = "The flux capacitor calibration constant is 1.21 gigawatts"
UNRELATED = "Lunch orders go to the cafeteria desk on Fridays"
LATER = "Recalibrate the flux capacitor after every firmware update"


def scenario() -> Scenario:
    script = Scenario()
    for n in range(TURNS):
        start = 10_000 + 1_000 * n
        script.add(f"step{n:02d}", Shell(f"seq {start} {start + 400}", f"Read part {n}"), f"read part {n}")
    return script


def conversation(request: ModelRequest) -> str:
    """What the model is sent of the conversation, in order, as one string."""
    items: Any = request.body.get("messages") if request.api == "anthropic" else request.body.get("input")
    return json.dumps(items, ensure_ascii=False)


def test_a_matching_memo_is_placed_between_the_history_and_the_recent_turns(
        adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    base = rig.overhead()
    rig.server.script = scenario()
    home = rig.home.liminal_home
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f"[swap]\nhigh_tokens = {base + 7_000}\ntarget_tokens = {base + 4_000}\nhold_timeout_seconds = 60\n"
        "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 4000\nsummary_tokens = 600\n")
    client = AcpClient(rig.home.liminal_argv(), rig.home.env(), rig.home.project,
                       rig.home.logs / "stderr-liminal.log")
    rig.clients.append(client)
    with client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for n in range(TURNS):
            if n == 1:
                # The store exists once the index worker has written the first turn: /memo
                # before it answers "no store" (liminal.kernel.commands opens it, never creates).
                deadline = time.monotonic() + 120
                while not (home / "liminal.db").exists() and time.monotonic() < deadline:
                    time.sleep(0.2)
                for memo in (f"/memo {MATCHING} #physics", f"/memo {UNRELATED} #food"):
                    assert client.prompt(thread, memo, timeout=60).text.startswith("Memo kept"), \
                        rig.stderr_tail()
            result = client.prompt(thread, f"step{n:02d}: check the flux capacitor calibration", timeout=180)
            assert result.stop_reason == "end_turn", rig.stderr_tail()
        # /optimise rewrites with the memos too: one saved now is in the next request.
        assert client.prompt(thread, f"/memo {LATER}", timeout=60).text.startswith("Memo kept")
        assert client.prompt(thread, "/optimise", timeout=120).text.startswith("Context optimised")
        seen = len(rig.server.views())
        result = client.prompt(thread, f"step{TURNS - 1:02d}: check the flux capacitor calibration again",
                               timeout=180)
        assert result.stop_reason == "end_turn", rig.stderr_tail()
        after_optimise = conversation(rig.server.views()[seen])
        context = client.prompt(thread, "/context", timeout=60).text

    swaps = [r for r in SwapJournal(home / "swaps.jsonl").records(thread) if r.outcome == "committed"]
    assert swaps, rig.stderr_tail()
    placed = [entry for swap in swaps for entry in swap.zone or []]
    memo_keys = {e["key"] for e in placed if e["kind"] == "memo" and LATER not in e["text"]}
    assert len(memo_keys) == 1, placed  # the matching memo, the same one at every swap
    key = memo_keys.pop()
    assert all(MATCHING in e["text"] or LATER in e["text"] for e in placed if e["kind"] == "memo")

    requests = rig.server.views()
    texts = [conversation(r) for r in requests]
    zoned = [n for n, t in enumerate(texts) if ZONE_INTRO in t]
    assert zoned, [t[-300:] for t in texts]
    assert all(UNRELATED not in t for t in texts)  # never sent: it matches nothing said
    # From the first swap on, every request has the zone, once (a rewrite drops the old one).
    assert zoned == list(range(zoned[0], len(texts))), zoned
    for n in zoned:
        text = texts[n]
        assert text.count(ZONE_INTRO) == 1, text
        at = text.index(ZONE_INTRO)
        # The memo and its id in it; the compressed history before it (the first turn's
        # prompt, in the preamble or an older band), the latest prompt after it.
        zone = text[at:at + 2_000]
        assert MATCHING in zone and key in zone, zone
        assert "step00" in text[:at], text[:at][-500:]
        latest = max(re.findall(r"step\d\d: check", text))
        assert text.index(latest) > at, (latest, text[at:][:300])
    zone = after_optimise[after_optimise.index(ZONE_INTRO):]
    assert LATER in zone and MATCHING in zone, zone[:1500]
    # /context lists what the last move placed.
    assert "Dynamic zone (" in context and f"memo {key}" in context and "Recalibrate" in context, context
