"""The real Claude Code through ``liminal acp``: the conversation, its tool call and the CLI's
session file (with usage) land in the store (SQLite; MongoDB too, when a server is set), and
``liminal threads``, ``history`` and ``search`` read them back."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

import anyio
import orjson
import pytest

from fixtures.harness import Rig, Scenario, Shell, Text
from liminal import cli
from tests.support.commands import (
    without_liminal_commands,
    without_liminal_ids,
    without_liminal_server,
)
from tests.support.mongo import liminal_on_mongodb, needs_mongo_socket, recorded


@pytest.mark.parametrize(("adapter_name", "store_kind"), [
    ("claude-zed", "sqlite"), ("claude-agent", "sqlite"),
    pytest.param("claude-agent", "mongodb", marks=needs_mongo_socket),
])
def test_a_claude_conversation_is_indexed(adapter_name: str, store_kind: str,
                                          make_rig: Callable[..., Rig],
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    rig = make_rig(adapter_name)
    with ExitStack() as stack:
        if store_kind == "mongodb":
            stack.enter_context(liminal_on_mongodb(rig.home.liminal_home))
        converse_then_read(rig, monkeypatch, capsys)
        assert (rig.home.liminal_home / "liminal.db").exists() == (store_kind == "sqlite")


def converse_then_read(rig: Rig, monkeypatch: pytest.MonkeyPatch,
                       capsys: pytest.CaptureFixture[str]) -> None:
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
        async with recorded(rig.home.liminal_home) as store:
            frames = await store.frames(limit=100_000)
            # The store keeps what the agent sent; the client got its command lists with
            # liminal's commands added, and issue 25's message ids and capabilities.
            assert [without_liminal_commands(without_liminal_ids(f.raw))
                    for f in frames if f.direction == "a2c"] == [
                without_liminal_commands(without_liminal_ids(r)) for r in received]
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

    anyio.run(check)

    # What a person reads: the commands, from the same store.
    monkeypatch.setenv("LIMINAL_HOME", str(rig.home.liminal_home))  # its config.toml names the store
    monkeypatch.delenv("LIMINAL_STORE_URL", raising=False)
    capsys.readouterr()  # what came before (the test's own store, opened above, may log)
    assert cli.main(["threads", "--json"]) == 0
    [thread] = orjson.loads(capsys.readouterr().out)
    assert (thread["id"], thread["turns"], thread["title"]) == (session, 1, "RUN_TOOL please")
    assert cli.main(["history", session]) == 0
    out = capsys.readouterr().out
    assert "> RUN_TOOL please" in out and "the tool said zebra-42" in out
    assert cli.main(["search", "zebra-42", "--json"]) == 0
    hits = orjson.loads(capsys.readouterr().out)
    assert hits and {h["thread_id"] for h in hits} == {session}
