"""Swaps that pay for themselves, with the real Claude Code (issue 12).

A long scripted conversation runs through ``liminal acp`` with the default settings (the cost
policy chooses when and how deep). Each turn reads a file of facts with a tool and the model's
answer quotes the fact of this turn and of the one before it, found in the context the CLI sent:
so every answer shows the recent band reached the model whole, across every swap. The requests
the fake model saw are priced as made (a prefix repeated from the previous request is a cache
read, the rest a cache write) and set against Claude Code's own auto-compact replayed on the same
conversation's growth: liminal's defaults must cost at most 0.85 of it, with the context under
the model's window throughout.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys

from bench.support.costmodel import Request, growth, measure, replay
from fixtures.harness import Adapter, ModelRequest, Reply, Rig, Scenario, Shell, Text
from liminal.kernel.journal import SwapJournal
from tests.acceptance.conftest import adapter_fixture

TURNS = 100
WINDOW = 200_000
AUTO_COMPACT_AT = 167_000  # Claude Code's own compaction (the rig turns it off)

# One adapter of each generation's file handling: the newer reports usage, the older does not
# (the swap manager reads the session file instead).
adapter = adapter_fixture(["claude-agent", "claude-zed"])


def fact(turn: int) -> str:
    return hashlib.sha256(f"fact {turn}".encode()).hexdigest()[:10]


def current_turn(request: ModelRequest) -> int:
    turns = re.findall(r"turn (\d+): COST", json.dumps(request.body.get("messages")))
    return int(turns[-1])


def facts_seen(request: ModelRequest) -> dict[int, str]:
    seen = json.dumps(request.body.get("messages"))
    return {int(n): v for n, v in re.findall(r"FACT (\d+)=([0-9a-f]{10})", seen)}


def read_facts(request: ModelRequest) -> Reply:
    k = current_turn(request)
    # ~9 KB of output (about 2.3k tokens), the fact on its first line; every seventh turn three
    # times as much.
    lines = 1500 if k % 7 == 3 else 500
    return Reply((Shell(f"echo 'FACT {k}={fact(k)}'; seq 1 {lines} | sed 's/^/note line /'",
                        f"Read the facts of turn {k}"),))


def check_notes(request: ModelRequest) -> Reply:
    k = current_turn(request)
    return Reply((Shell(f"seq 1 250 | sed 's/^/check {k} /'", "Check"),))


def answer(request: ModelRequest) -> Reply:
    k = current_turn(request)
    seen = facts_seen(request)
    before = seen.get(k - 1, "missing") if k else "none"
    return Reply((Text(f"fact {k} is {seen.get(k, 'missing')}; fact {k - 1} was {before}."),))


def scenario() -> Scenario:
    return Scenario().add("COST", read_facts, check_notes, answer)


def test_default_settings_cost_less_than_claude_codes_auto_compact(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for k in range(TURNS):
            result = client.prompt(thread, f"turn {k}: COST please", timeout=180)
            assert result.stop_reason == "end_turn", rig.stderr_tail()
            expected = f"fact {k} is {fact(k)}; fact {k - 1} was {fact(k - 1) if k else 'none'}."
            assert expected in result.text, (k, result.text, rig.stderr_tail())

    served = rig.server.messages_requests()
    assert not [r for r in served if r.error]
    requests = [Request.from_body(r.t, r.json, r.usage["output_tokens"]) for r in served]
    with (rig.home.logs / "requests.jsonl").open("w") as log:  # for bench/cost.py --requests
        for r in served:
            log.write(json.dumps({"t": r.t, "body": r.json, "output": r.usage["output_tokens"]}) + "\n")
    ends = [not r.reply.calls_tools for r in served]
    assert ends == [c.turn_end for c in growth(requests)]  # what bench/cost.py infers from a log
    made = measure(requests, "liminal defaults")
    overhead = requests[0].parts[0][1]
    auto = replay(growth(requests, ends), "auto-compact", None, overhead=overhead,
                  auto_compact_at=AUTO_COMPACT_AT)
    none = replay(growth(requests, ends), "none", None, overhead=overhead)

    swaps = SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()
    committed = [s for s in swaps if s.outcome == "committed"]
    peak = max(r.size for r in requests)
    print(f"\n{adapter.name}: {len(requests)} calls, {TURNS} turns, overhead {overhead}; "
          f"liminal {made.cost / 1e6:.2f}M ({len(committed)} swaps, mean {made.mean_context:.0f}, "
          f"peak {peak}); auto-compact {auto.cost / 1e6:.2f}M ({auto.swaps}, mean "
          f"{auto.mean_context:.0f}); none {none.cost / 1e6:.2f}M; "
          f"ratio {made.cost / auto.cost:.3f}", file=sys.stderr)
    assert len(committed) >= 2, (swaps, rig.stderr_tail())
    assert all(s.cost is not None and "pays back" in s.reason for s in committed), swaps
    assert made.swaps == len(committed)
    assert auto.swaps >= 1  # the conversation is long enough for the CLI to compact on its own
    assert peak < WINDOW and peak < AUTO_COMPACT_AT
    assert made.cost <= 0.85 * auto.cost, (made, auto)
