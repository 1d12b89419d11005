"""liminal's tools for the model with the real Claude Code and Codex (issue 13): the fake model
calls ``mcp__liminal__*`` as a model would (the Responses server names Codex's namespace and the
tool apart), and the answers it gets are checked at the model server.

One conversation: a fact said early, a big tool output, ``/optimise`` (a gradient swap now: the
big output is cut to a marker with a recall key), then the model recalls the key (the original
bytes come back), searches for the early fact, saves a memo that a second session finds, and
marks its own context with ``slash``, which liminal runs when the turn ends.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from fixtures.harness import AcpClient, Adapter, ModelRequest, Rig, Scenario, Shell, Text, ToolCall
from liminal.gradient.recall import KEY_IN_MARKER
from tests.acceptance.conftest import ADAPTER_NAMES, adapter_fixture

adapter = adapter_fixture(ADAPTER_NAMES)
ORIGINAL = "\n".join(str(i) for i in range(10000, 12001))
FACT = "the launch word is zanzibar-77"
TOOLS = tuple(f"mcp__liminal__{n}" for n in ("recall", "search_history", "slash", "memo_save", "memo_find"))


def recall_first_key(request: ModelRequest) -> ToolCall | Text:
    keys = KEY_IN_MARKER.findall(json.dumps(request.body))
    # (No key: an answer the test sees at once; a failing script would make the CLI retry.)
    return ToolCall("mcp__liminal__recall", {"key": keys[0]}) if keys else Text("NO RECALL KEY")


def scenario() -> Scenario:
    return (
        Scenario()
        .add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")
        .add("RECALL", recall_first_key, "recalled")
        .add("SEARCH", ToolCall("mcp__liminal__search_history", {"query": "zanzibar"}), "searched")
        .add("MEMO", ToolCall("mcp__liminal__memo_save", {"content": "the build needs the VPN",
                                                           "tags": ["ops"]}), "saved")
        .add("FIND", ToolCall("mcp__liminal__memo_find", {"tags": ["ops"]}), "found")
        .add("SLASH", ToolCall("mcp__liminal__slash", {"command": "mark", "args": "M"}), "marked")
    )


def offers(request: ModelRequest) -> bool:
    """The request offers liminal's tools: in its tool list, or named among deferred tools
    (Claude Code 2.1.3xx behind its ToolSearch, Codex 0.166 behind its tool_search). Claude Code
    names them ``mcp__liminal__recall``; Codex puts ``recall`` in a namespace ``mcp__liminal``, or
    the server's instructions (which name every tool) in tool_search's description."""
    body = request.body
    if request.api == "anthropic":
        listed = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
        text = json.dumps(body.get("messages")) + json.dumps(body.get("system"))
        return all(name in listed or name in text for name in TOOLS)
    tools = json.dumps(body.get("tools"))
    return "liminal" in tools and all(f"`{name.rsplit('__', 1)[1]}`" in tools
                                      or f'"{name.rsplit("__", 1)[1]}"' in tools for name in TOOLS)


def said(client: AcpClient, thread: str, text: str) -> str:
    result = client.prompt(thread, text, timeout=180)
    assert result.stop_reason == "end_turn", text
    return result.text


def tool_answer(rig: Rig) -> tuple[str, bool]:
    """The text of the last tool result the model received, and whether it was an error.
    Codex puts its timing before an MCP tool's answer ("Wall time: ... Output:"), and 0.137 the
    answer's content blocks as JSON after it."""
    results = rig.server.views()[-1].tool_results
    assert results, "no tool result in the last request"
    text = results[-1].text
    head, found, rest = text.partition("Output:")
    if found and head.startswith("Wall time"):
        rest = rest.lstrip("\n")
        try:
            blocks = json.loads(rest)
            text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        except ValueError:
            text = rest
    return text, results[-1].is_error


def test_the_model_recalls_searches_keeps_memos_and_marks(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    base = rig.overhead()
    rig.server.script = scenario()
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    # No automatic swap; /optimise rewrites to a target the big output does not fit in: the
    # recent band (two short turns) whole, the big output cut to a marker.
    (rig.home.liminal_home / "config.toml").write_text(
        f"[swap]\nhigh_tokens = 10000000\ntarget_tokens = {base + 3000}\nhold_timeout_seconds = 60\n"
        "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 40000\nsummary_tokens = 600\n")
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, f"remember: {FACT}")
        said(client, thread, "BIG please")
        assert offers(rig.server.views()[-1]), "liminal's tools are offered"
        said(client, thread, "a short turn")
        said(client, thread, "another short turn")
        assert "Context optimised" in said(client, thread, "/optimise")

        assert "NO RECALL KEY" not in said(client, thread, "RECALL the cut output")
        # The swap's resume carried liminal's server: its tools are still offered.
        assert offers(rig.server.views()[-1])
        # What the CLI's shell tool gave back, byte-exact: Claude Code's is the output alone,
        # Codex's has its command's exit code and timing around it.
        text, failed = tool_answer(rig)
        assert not failed and ORIGINAL in text and len(text) < len(ORIGINAL) + 400, text[:300]

        # /clear: the fact is out of the model's context; search finds it in the history.
        said(client, thread, "/clear")
        said(client, thread, "SEARCH for the early fact")
        assert "zanzibar" not in json.dumps(rig.server.views()[-2].body)
        text, failed = tool_answer(rig)
        assert not failed and "zanzibar-77" in text, text
        # What the person said, once, with when and which turn; none of the CLI's bookkeeping
        # (Claude Code's api-request-blob holds a copy of the prompt), nor the model's own call.
        assert text.count(FACT) == 1 and re.search(
            rf"\[you, \d{{4}}-\d\d-\d\d \d\d:\d\d, turn 1\] remember: {FACT}", text), text
        for word in ("api-request", "system-reminder", "response_item", "event_msg", "search_history"):
            assert word not in text, (word, text)

        said(client, thread, "MEMO this")
        assert not tool_answer(rig)[1]

        said(client, thread, "SLASH mark here")
        text, failed = tool_answer(rig)
        assert not failed and "when this turn ends" in text
        # Run when the turn ended: the mark is there for the user too.
        assert "M (" in said(client, thread, "/marks")

        other = client.new_session(rig.home.project)["sessionId"]
        said(client, other, "FIND the memo")
        text, failed = tool_answer(rig)
        assert not failed and "the build needs the VPN" in text, text


@pytest.mark.parametrize("adapter_name", ["claude-agent", "codex-agent"])
def test_a_client_without_liminals_server_still_gets_it_on_load(adapter_name: str, make_rig: Any) -> None:
    """A restarted liminal (or a client that reconnects) loads the thread: the load carries the
    server too, bound by the thread id."""
    rig: Rig = make_rig(adapter_name)
    rig.server.script = Scenario().add("SEARCH", ToolCall("mcp__liminal__search_history",
                                                         {"query": "zanzibar"}), "searched")
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, f"remember: {FACT}")
    with rig.client(via_liminal=True) as client:
        client.initialize()
        client.load_session(thread, rig.home.project)
        said(client, thread, "SEARCH again")
        text, failed = tool_answer(rig)
        assert not failed and "zanzibar-77" in text, text
