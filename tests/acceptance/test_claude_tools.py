"""Claude Code's file tools and thinking blocks, through ``liminal acp``, against the strict server.

Write, Read and Edit go through the client (``fs/*``) when the adapter offers its ACP-routed
``mcp__acp__*`` tools; the thinking block the fake model issues comes back, signed, in the next
request of the turn, and the server checks it. A proxy (or later a rewrite) that altered either
fails here.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fixtures.harness import ModelRequest, Rig, Scenario, Text, Thinking, ToolCall


def tool(name: str) -> Callable[[ModelRequest], str]:
    """The adapter's ACP-routed variant of a built-in tool when it offers one."""
    return lambda request: f"mcp__acp__{name}" if f"mcp__acp__{name}" in request.tool_names else name


def call(name: str, **arguments: object) -> Callable[[ModelRequest], ToolCall]:
    return lambda request: ToolCall(tool(name)(request), arguments)


@pytest.mark.parametrize("adapter_name", ["claude-zed", "claude-agent"])
def test_write_read_edit_with_thinking(adapter_name: str, make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(adapter_name)
    target = rig.home.project / "notes.txt"
    rig.server.script = Scenario().add(
        "EDIT_FILE",
        lambda r: [Thinking("I will write, read back, then edit."),
                   call("Write", file_path=str(target), content="alpha\n")(r)],
        call("Read", file_path=str(target)),
        call("Edit", file_path=str(target), old_string="alpha", new_string="beta"),
        Text("edited"),
    )
    with rig.client(via_liminal=True) as client:
        client.initialize()
        session = client.new_session(rig.home.project)["sessionId"]
        result = client.prompt(session, "EDIT_FILE notes.txt please")
        client.settle()
    assert result.stop_reason == "end_turn" and result.text.endswith("edited")
    assert target.read_text() == "beta\n"
    main = rig.server.messages_requests()
    # The thinking block came back with the tool result, unaltered (else the server said 400).
    assert any(b'"type": "thinking"' in r.raw or b'"type":"thinking"' in r.raw for r in main[1:])
    offered = {name for r in main for name in tool_names(r.json)}
    methods = [r["method"] for r in client.agent_requests]
    if "mcp__acp__Write" in offered:
        assert "fs/write_text_file" in methods and "fs/read_text_file" in methods
    assert "session/request_permission" in methods  # Write and Edit ask in the default mode


def tool_names(body: object) -> list[str]:
    tools = body.get("tools") if isinstance(body, dict) else None
    return [str(t.get("name")) for t in tools or [] if isinstance(t, dict)]
