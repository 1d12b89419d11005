"""A session compressed by liminal resumes in the real Claude Code, both adapter generations.

The real CLI writes a 32-turn session with single and parallel tool calls, long tool output and
thinking; liminal rewrites it to a target; a fresh adapter loads the new id and takes a prompt.
The strict fake model (tool pairing, role alternation, thinking signatures) must accept the
request, the recent turns in it must be the original's, older tool output must be cut or gone,
and every prompt the user typed must still be there, verbatim or in the preamble. Then the same
again on the compressed session (compress twice in a row).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fixtures.harness import Reply, Rig, Scenario, Shell, Text, Thinking
from liminal.config import GradientSettings
from liminal.gradient.bands import MARKER_CHARS
from liminal.harness.claude.conversation import build
from liminal.harness.claude.gradient.rewrite import RewriteResult, prepare, rewrite_session
from liminal.harness.claude.paths import locate
from liminal.harness.claude.records import read_session
from tests.acceptance.conftest import CLAUDE_NAMES as CLAUDE
from tests.acceptance.conftest import adapter_fixture
from tests.support.listing import LONG_LISTING

KINDS = ["plain question", "BASH list", "PAR count", "BIG read", "THINK design", "plain follow-up"]
PROMPTS = [f"turn {n}: {KINDS[n % len(KINDS)]} please" for n in range(32)]
# Small bands, so that a 32-turn session has all four; the target is set per session from its
# fixed overhead (system prompt and tools), which differs between the two CLI versions.
SETTINGS = GradientSettings(recent_tokens=1_500, middle_tokens=1_500, summary_tokens=1_500)


def target(source: Path, first: bool = True) -> int:
    """The loosest target at which the plan consolidates; the first pass must also cut."""
    plan = prepare(source, settings=SETTINGS).plan
    overhead = plan.calibration.overhead_tokens
    for share in (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.25, 0.2, 0.17, 0.15, 0.12, 0.1):
        tokens = overhead + int((plan.tokens_before - overhead) * share)
        result = prepare(source, tokens, settings=SETTINGS).result
        if result.turns["ancient"] and result.tokens_after <= tokens and (
                not first or (result.turns["middle"] and result.recall_keys)):
            return tokens
    pytest.fail(f"no target gives every band for {source}")


adapter = adapter_fixture(CLAUDE)


def scenario() -> Scenario:
    return (
        Scenario()
        .add("BASH", Shell(LONG_LISTING, "List"), "listed them")
        .add("PAR", Reply((Text("Three at once."), Shell("seq 1 40", "a"), Shell("seq 1 60", "b"),
                           Shell("seq 1 80", "c"))), "counted all three")
        .add("BIG", Shell("seq 1000 1400", "Read a lot"), "read it")
        .add("THINK", Reply((Thinking("weighing the options for the design"),
                             Text("We decided to keep the design simple."))))
    )


def atoms(blocks: list[Any]) -> list[str]:
    """What the model reads from content blocks, in order (thinking and reminders aside)."""
    out = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and not block["text"].startswith("<system-reminder>"):
            out.append("text:" + block["text"])
        elif kind == "tool_use":
            out.append("use:" + block["id"] + json.dumps(block["input"], sort_keys=True))
        elif kind == "tool_result":
            content = block.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            out.append("result:" + block["tool_use_id"] + ":" + text)
    return out


def request_atoms(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        out += atoms([{"type": "text", "text": content}] if isinstance(content, str) else content)
    return out


def is_subsequence(needle: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(h == n for h in it) for n in needle)


def resume(rig: Rig, session_id: str, text: str) -> dict[str, Any]:
    """Load the session in a fresh adapter, prompt once, return the model request it caused."""
    before = len(rig.server.messages_requests())
    with rig.client(via_liminal=False) as client:
        client.initialize()
        client.load_session(session_id, rig.home.project)
        assert client.prompt(session_id, text).stop_reason == "end_turn"
    requests = rig.server.messages_requests()[before:]
    assert requests, rig.stderr_tail()
    body: dict[str, Any] = requests[0].json
    return body


def check(rig: Rig, source: Path, result: RewriteResult, body: dict[str, Any]) -> None:
    assert not rig.server.errors, [r.error for r in rig.server.errors]
    assert result.tokens_after <= result.target_tokens
    sent = request_atoms(body)
    everything = json.dumps(body["messages"])
    # Every prompt the user typed: verbatim in a kept turn, or in the preamble.
    for prompt in PROMPTS:
        assert prompt in everything, prompt
    # The recent turns are the original's, in order.
    conv = build(read_session(locate(source)))
    recent = conv.turns[-result.turns["recent"]:]
    expected = [a for t in recent for r in t.records if r.uuid
                for a in atoms(conv.session.parse(r).get("message", {}).get("content") or [])]
    assert expected and is_subsequence(expected, sent)
    # Older tool output is cut (with a recall key) or gone.
    recent_ids = {b.tool_id for t in recent for r in t.records for b in r.tool_results}
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and block["tool_use_id"] not in recent_ids:
                content = block.get("content")
                text = content if isinstance(content, str) else json.dumps(content)
                # Short output is left alone: the marker would cost more than it saves.
                assert "[liminal: " in text or len(text) <= SETTINGS.truncate_chars + MARKER_CHARS


def test_compressed_session_resumes_twice(rig: Rig) -> None:
    rig.server.script = scenario()
    with rig.client(via_liminal=False) as client:
        client.initialize()
        session_id = client.new_session(rig.home.project)["sessionId"]
        for prompt in PROMPTS:
            assert client.prompt(session_id, prompt).stop_reason == "end_turn"
    env = {"CLAUDE_CONFIG_DIR": str(rig.home.claude_config)}
    source = locate(session_id, cwd=rig.home.project, env=env).path
    original = source.read_bytes()

    first = rewrite_session(source, target(source), settings=SETTINGS)
    assert first.turns["ancient"] and first.turns["middle"] and first.recall_keys, str({k: v for k, v in first.as_json().items() if "path" not in k})
    check(rig, source, first, resume(rig, first.new_session_id, "after the first swap"))

    second = rewrite_session(first.path, target(first.path, first=False), settings=SETTINGS)
    assert second.turns["ancient"], second.turns
    check(rig, first.path, second, resume(rig, second.new_session_id, "after the second swap"))
    assert source.read_bytes() == original
