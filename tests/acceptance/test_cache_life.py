"""The prompt cache's life, as the real Claude Code's session file says it (issue 24).

Through ``liminal acp``, a turn with a tool call (two model calls) against the fake Messages API,
which answers each call with the cache it wrote split by the life the request's
``cache_control`` marks ask (``fixtures/harness/promptcache.py``), as the real API does. Claude
Code 2.1.316 and 2.1.318 ask for an hour when ``CLAUDE_CODE_PROMPT_CACHE_TTL=1h`` is in their
environment (the rig's ``prompt_cache_ttl``), and for 5 minutes without it on an API key;
2.1.44 knows no such variable and always asks for 5 minutes. ``ClaudeSessions.cache_life``
reads the answer from the file (docs/facts.md, "The prompt cache's life"), also from liminal's
rewrite after a swap."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fixtures.harness import Rig, Scenario, Shell, Text
from liminal.config import GradientSettings
from liminal.harness.claude.live import ClaudeSessions
from liminal.kernel.journal import SwapJournal
from tests.acceptance.conftest import CLAUDE_NAMES

PROMPT = "RUN_TOOL please"


def settled_file(rig: Rig, sessions: ClaudeSessions, session: str) -> Path:
    """The session's file once the turn is on disk (2.1.44 writes it after answering)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        path = sessions.locate(session, str(rig.home.project))
        if path is not None and sessions.turn_settled(path, PROMPT):
            return path
        time.sleep(0.05)
    raise AssertionError(f"the turn of {session} was not on disk within 60 s\n{rig.stderr_tail()}")


@pytest.mark.parametrize("ttl", [None, "1h"])
@pytest.mark.parametrize("adapter_name", CLAUDE_NAMES)
def test_the_session_file_says_how_long_the_cache_lives(adapter_name: str, ttl: str | None,
                                                         make_rig: Callable[..., Rig]) -> None:
    script = Scenario().add("RUN_TOOL", Shell("echo zebra"), Text("the tool said zebra"))
    rig = make_rig(adapter_name, script, prompt_cache_ttl=ttl)
    with rig.client(via_liminal=True) as client:
        client.initialize()
        session = client.new_session(rig.home.project)["sessionId"]
        assert client.prompt(session, PROMPT, timeout=180).stop_reason == "end_turn"
        sessions = ClaudeSessions(GradientSettings(), env=rig.home.env())
        path = settled_file(rig, sessions, session)

    honoured = ttl == "1h" and adapter_name != "claude-zed"  # 2.1.44 ignores the variable
    life, field = (3600.0, "ephemeral_1h_input_tokens") if honoured else (300.0, "ephemeral_5m_input_tokens")
    asked = {str((m.get("cache_control") or {}).get("ttl", "5m"))
             for r in rig.server.messages_requests() for m in _blocks(r.json)}
    assert asked == {"1h" if honoured else "5m"}, asked
    calls = [json.loads(line)["message"]["usage"] for line in path.read_text().splitlines()
             if json.loads(line).get("type") == "assistant"]
    assert len(calls) == 2  # the tool call, then the answer
    for usage in calls:  # what the server answered, as the CLI copied it
        assert usage["cache_creation"][field] == usage["cache_creation_input_tokens"] > 0
    assert sessions.cache_life(path) == life


def test_a_swapped_session_still_says_it(make_rig: Callable[..., Rig], tmp_path: Path) -> None:
    """After a swap the thread is on liminal's rewrite. Its recent turns are the CLI's lines
    byte for byte, usage and all, so the rewrite says the cache's life before the resumed CLI
    has made a call; the CLI's calls on it go on asking for, and writing, an hour."""
    script = Scenario().add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")
    rig = make_rig("claude-agent", script, prompt_cache_ttl="1h")
    base = rig.overhead()
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        f"[swap]\nhigh_tokens = {base + 9_000}\ntarget_tokens = {base + 4_000}\n"
        "hold_timeout_seconds = 60\n"
        "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 600\nsummary_tokens = 600\n")
    journal = SwapJournal(rig.home.liminal_home / "swaps.jsonl")
    sessions = ClaudeSessions(GradientSettings(), env=rig.home.env())
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for n in range(12):
            assert client.prompt(thread, f"turn {n}: BIG read please", timeout=180).stop_reason == "end_turn"
            if any(r.outcome == "committed" for r in journal.records()):
                break
        swap = next(r for r in journal.records() if r.outcome == "committed")
        requests_before = len(rig.server.messages_requests())
        assert client.prompt(thread, "turn after: BIG read please", timeout=180).stop_reason == "end_turn"
    assert swap.new_backing_id is not None and swap.size
    path = sessions.locate(swap.new_backing_id, str(rig.home.project))
    assert path is not None
    written = tmp_path / "rewrite.jsonl"  # the file as liminal wrote it, before the CLI's calls
    written.write_bytes(path.read_bytes()[: swap.size])
    assert sessions.cache_life(written) == 3600.0
    assert sessions.cache_life(path) == 3600.0
    after = rig.server.messages_requests()[requests_before:]
    assert after and all(r.usage["cache_creation"]["ephemeral_1h_input_tokens"] > 0 for r in after)
    assert {str((b.get("cache_control") or {}).get("ttl")) for r in after for b in _blocks(r.json)} == {"1h"}


def _blocks(body: object) -> list[dict[str, object]]:
    """The request's blocks that carry a ``cache_control`` mark."""
    if not isinstance(body, dict):
        return []
    blocks = [b for b in body.get("system") or [] if isinstance(b, dict)]
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks += [b for b in content or [] if isinstance(b, dict)] if isinstance(content, list) else []
    return [b for b in blocks if "cache_control" in b]
