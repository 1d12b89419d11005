"""The real Claude Code through ``liminal acp``: the conversation, its tool call and the CLI's
session file (with usage) land in the store."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from fixtures.harness import Rig, Scenario, Shell, Text
from liminal.store.sqlite import SqliteStore
from tests.support.commands import without_liminal_commands, without_liminal_server


@pytest.mark.parametrize("adapter_name", ["claude-zed", "claude-agent"])
def test_a_claude_conversation_is_indexed(adapter_name: str,
                                          make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(adapter_name)
    rig.server.script = Scenario().add("RUN_TOOL", Shell("echo zebra-$((40+2))"),
                                       Text("the tool said zebra-42"))
    with rig.client(via_liminal=True) as client:
        client.initialize()
        session = client.new_session(rig.home.project)["sessionId"]
        result = client.prompt(session, "RUN_TOOL please")
        client.settle()
    assert result.stop_reason == "end_turn"
    received = [f.raw for f in client.received]
    sent = [f.raw for f in client.sent]

    async def check() -> None:
        store = await SqliteStore.open(rig.home.liminal_home / "liminal.db", create=False)
        try:
            frames = await store.frames(limit=100_000)
            # The store keeps what the agent sent; the client got its command lists with
            # liminal's commands added.
            assert [without_liminal_commands(f.raw) for f in frames if f.direction == "a2c"] == [
                without_liminal_commands(r) for r in received]
            # ... and what the client sent, the session request with liminal's MCP server added.
            assert [without_liminal_server(f.raw) for f in frames if f.direction == "c2a"] == [
                without_liminal_server(r) for r in sent]
            [summary] = await store.threads()
            assert summary.thread.id == session and summary.turns == 1
            messages = await store.messages(session)
            tools = [m for m in messages if m.kind == "tool_call"]
            assert tools and tools[-1].status == "completed"
            assert "zebra-42" in tools[-1].text
            assert any(m.kind == "agent" and "zebra-42" in m.text for m in messages)
            records = await store.session_records(session)
            assert records, "the session file was not indexed"
            assert any(r.usage for r in records if r.type == "assistant")
            assert any(r.tool_ids for r in records)
            # The CLI's records are searchable (with messages, a record is merged into the
            # message holding its words: asked for records alone here).
            assert any(h.source == "session" for h in await store.search("zebra", kinds=()))
        finally:
            await store.aclose()

    anyio.run(check)
