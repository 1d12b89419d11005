"""liminal's tools for the model with the real Gemini CLI: liminal adds its MCP server to the
``mcpServers`` of the session the client opens, Gemini CLI starts it and offers its tools to the
model as ``mcp_liminal_<tool>`` (docs/facts.md), and the fake Gemini API's script calls them as a
model would. What the CLI sends back in its function response is liminal's answer.

One conversation: a fact said early, a big file read, ``/optimise`` (the big output cut to a
marker with a recall key), then the model recalls the key (the file's bytes come back) and
searches the history for the early fact.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from fixtures.harness import AcpClient, ModelRequest, Rig, Scenario, Text, ToolCall
from liminal.gradient.recall import KEY_IN_MARKER
from tests.support.acp_thread import configure

FACT = "the launch word is zanzibar-77"
BIG = "".join(f"line {i} of the big file\n" for i in range(1500))
TOOLS = tuple(f"mcp_liminal_{n}" for n in ("recall", "search_history", "slash", "memo_save", "memo_find"))


def recall_first_key(request: ModelRequest) -> ToolCall | Text:
    keys = KEY_IN_MARKER.findall(json.dumps(request.body))
    return ToolCall("mcp_liminal_recall", {"key": keys[0]}) if keys else Text("NO RECALL KEY")


def said(rig: Rig, client: AcpClient, thread: str, text: str) -> str:
    turn = client.prompt(thread, text, timeout=180)
    assert turn.stop_reason == "end_turn", (text, rig.stderr_tail())
    return turn.text


def tool_answer(rig: Rig) -> str:
    """The text of the last function response the model received (it must not be an error)."""
    results = rig.server.views()[-1].tool_results
    assert results, "no function response in the last request"
    assert not results[-1].is_error, results[-1].text[:500]
    return results[-1].text


def test_the_model_recalls_and_searches_through_gemini_clis_mcp_client(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig("gemini")
    big = rig.home.project / "big.txt"
    big.write_text(BIG)

    def scenario() -> Scenario:
        return (Scenario()
                .add("BIG", ToolCall("read_file", {"file_path": str(big)}), Text("read it"))
                .add("RECALL", recall_first_key, Text("recalled"))
                .add("SEARCH", ToolCall("mcp_liminal_search_history", {"query": "zanzibar"}), Text("searched")))

    rig.server.script = scenario()
    # No automatic swap; /optimise rewrites to a target the big file does not fit in.
    configure(rig, high=10_000_000, target=3000, middle=40_000)
    rig.server.script = scenario()
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = str(client.new_session(rig.home.project)["sessionId"])
        said(rig, client, thread, f"remember: {FACT}")
        said(rig, client, thread, "BIG please")
        # Gemini CLI declares an MCP server's tools as ``mcp_<server>_<tool>``.
        assert set(TOOLS) <= set(rig.server.views()[-1].tool_names), rig.server.views()[-1].tool_names
        said(rig, client, thread, "a short turn")
        said(rig, client, thread, "another short turn")
        assert "Context optimised" in said(rig, client, thread, "/optimise")

        assert said(rig, client, thread, "RECALL the cut file").endswith("recalled")
        # The load of the rewrite carried liminal's server: its tools are still offered.
        assert set(TOOLS) <= set(rig.server.views()[-1].tool_names)
        # Before the recall, the model's request held the big file cut to a marker, not whole.
        asked = json.dumps(rig.server.views()[-2].body["contents"])
        assert KEY_IN_MARKER.search(asked) and "line 1499 of the big file" not in asked
        text = tool_answer(rig)
        assert "line 0 of the big file" in text and "line 1499 of the big file" in text, text[:500]

        said(rig, client, thread, "/clear")
        assert said(rig, client, thread, "SEARCH for the early fact").endswith("searched")
        assert "zanzibar" not in json.dumps(rig.server.views()[-2].body["contents"])
        text = tool_answer(rig)
        assert text.count(FACT) == 1, text
        client.settle()
        # Gemini CLI asks the client before each call of an MCP server's tool (the rig's client
        # allows once; the read_file call it ran without asking).
        asked = [f.msg["params"]["toolCall"].get("title") for f in client.received
                 if f.method == "session/request_permission"]
        assert asked == ["recall (liminal MCP Server)", "search_history (liminal MCP Server)"], asked
    assert client.session_ids() == {thread}
    assert not rig.server.errors, rig.server.errors
