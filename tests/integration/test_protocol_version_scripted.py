"""A client that asks for ACP v2, on a real ``liminal acp`` over the scripted agent keeping Claude
Code's files, the agent answering v2 when asked for it (``$AGENT_SPEAKS_V2``, as codex-acp
does). liminal speaks v1 (``liminal.kernel.version``): the agent is asked for 1, the client is
answered 1 and goes on in v1 as ACP's version negotiation says, and everything liminal does
works for it: the swap invisible (one session id), commands, the thread replayed from the store
on ``session/load``. Every frame liminal wrote, both ways, is checked against the v1 schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from fixtures.harness import acp_schema
from liminal.kernel.journal import SwapJournal
from tests.integration.test_commands_scripted import said
from tests.support.proxy_process import ProxyProcess
from tests.support.proxy_process import run_liminal as run

pytestmark = pytest.mark.anyio

CWD = "/work/project"
V2_INITIALIZE = {"protocolVersion": 2, "info": {"name": "a-v2-client", "version": "1.0.0"},
                 "capabilities": {"auth": {"terminal": {}}}}
ENV = {"LIMINAL_MCP_ENABLED": "false", "LIMINAL_SWAP_HIGH_TOKENS": "100000",
       "LIMINAL_SWAP_TARGET_TOKENS": "20000", "AGENT_SPEAKS_V2": "1"}


def agent_lines(tmp_path: Path, name: str) -> list[bytes]:
    return (tmp_path / name).read_bytes().splitlines()


def conforms(proxy: ProxyProcess, tmp_path: Path) -> None:
    agent_sent = agent_lines(tmp_path, "agent_out.bin")
    acp_schema.assert_conforms([(proxy.sent, proxy.lines, agent_sent),
                                (agent_sent, agent_lines(tmp_path, "agent_in.bin"), proxy.sent)])


def session_ids(proxy: ProxyProcess) -> set[str]:
    return {m["params"]["sessionId"] for m in proxy.messages()
            if isinstance(m.get("params"), dict) and "sessionId" in m["params"]}


async def test_a_v2_client_is_answered_v1_and_everything_works_for_it(tmp_path: Path) -> None:
    state: dict[str, Any] = {}

    async def first(proxy: ProxyProcess) -> None:
        answer = await proxy.request("initialize", V2_INITIALIZE)
        assert answer["result"]["protocolVersion"] == 1, answer
        assert "agentCapabilities" in answer["result"]  # a v1 answer, whole
        thread = state["thread"] = str((await proxy.request(
            "session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"])
        for text in ("turn alpha used:5000", "turn bravo used:130000"):  # past the trigger: a swap
            await said(proxy, thread, text)
        journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
        with anyio.fail_after(30):
            while not [r for r in journal.records() if r.outcome == "committed"]:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        await said(proxy, thread, "turn charlie used:21000")
        context = await said(proxy, thread, "/context")
        assert "Last move: swap compressed the model's context (" in context, context
        assert session_ids(proxy) == {thread}  # the swap unseen: one session id throughout
        await proxy.close_stdin()
        conforms(proxy, tmp_path)

    assert await run(tmp_path, first, **ENV) == 0
    thread = state["thread"]
    # The agent was asked for the version liminal speaks, never the client's 2.
    [asked] = [json.loads(line) for line in agent_lines(tmp_path, "agent_in.bin")
               if b'"initialize"' in line]
    assert asked["params"]["protocolVersion"] == 1
    assert asked["params"]["info"] == V2_INITIALIZE["info"]  # the rest as the client wrote it

    async def again(proxy: ProxyProcess) -> None:
        answer = await proxy.request("initialize", V2_INITIALIZE)
        assert answer["result"]["protocolVersion"] == 1, answer
        start = len(proxy.messages())
        loaded = await proxy.request("session/load", {"sessionId": thread, "cwd": CWD, "mcpServers": []})
        assert "result" in loaded, loaded
        typed = [m["params"]["update"]["content"]["text"] for m in proxy.messages()[start:]
                 if m.get("method") == "session/update"
                 and m["params"]["update"].get("sessionUpdate") == "user_message_chunk"]
        assert typed == ["turn alpha used:5000", "turn bravo used:130000", "turn charlie used:21000",
                         "/context"], typed
        await said(proxy, thread, "turn delta used:22000")
        assert session_ids(proxy) == {thread}
        await proxy.close_stdin()
        conforms(proxy, tmp_path)

    (tmp_path / "agent_in.bin").unlink()
    (tmp_path / "agent_out.bin").unlink()
    assert await run(tmp_path, again, **ENV) == 0
