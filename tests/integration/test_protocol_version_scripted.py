"""A client that asks for ACP v2, on a real ``liminal acp`` over the scripted agent keeping Claude
Code's files, the agent answering v2 when asked for it (``$AGENT_SPEAKS_V2``, as codex-acp
does). liminal speaks v1 to the agent (it is asked for 1) and v2 to the client
(``liminal.acp.v2``): the client is answered 2, and everything liminal does works for it in v2's
shapes: a prompt acknowledged with its user message's id and ended by ``state_update`` idle, the
swap invisible (one session id), commands, the thread replayed from the store on
``session/resume`` with ``replayFrom``. Every frame liminal wrote the client is checked against
the v2 schema, every one it wrote the agent against v1's."""

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
    """Every frame to the client checked against v2's schema (none taken as passed on: v1's
    shapes are not v2's), every one to the agent against v1's."""
    agent_sent = agent_lines(tmp_path, "agent_out.bin")
    acp_schema.assert_conforms([(proxy.sent, proxy.lines, []),
                                (agent_sent, agent_lines(tmp_path, "agent_in.bin"), proxy.sent)])


def updates(proxy: ProxyProcess, start: int, kind: str) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in proxy.messages()[start:] if m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") == kind]


async def told(proxy: ProxyProcess, thread: str, text: str) -> str:
    """A v2 prompt: acknowledged with its user message's id, which the echoed user message
    carries, and ended by ``idle`` with the stop reason after ``running``; the text the thread
    was told."""
    start = len(proxy.messages())
    answer = await proxy.prompt(thread, text)
    message_id = answer["result"]["messageId"]
    await proxy.wait_for(lambda m: m.get("method") == "session/update"
                         and m["params"]["update"].get("state") == "idle"
                         and m["params"]["update"].get("stopReason") == "end_turn")
    states = [u["state"] for u in updates(proxy, start, "state_update")]
    assert states == ["running", "idle"], states
    echoed = updates(proxy, start, "user_message")
    assert [u["messageId"] for u in echoed] == [message_id], echoed
    assert echoed[0]["content"] == [{"type": "text", "text": text}]
    return "".join(u["content"]["text"] for u in updates(proxy, start, "agent_message_chunk"))


def session_ids(proxy: ProxyProcess) -> set[str]:
    return {m["params"]["sessionId"] for m in proxy.messages()
            if isinstance(m.get("params"), dict) and "sessionId" in m["params"]}


async def test_a_v2_client_is_answered_v2_and_everything_works_for_it(tmp_path: Path) -> None:
    state: dict[str, Any] = {}

    async def first(proxy: ProxyProcess) -> None:
        answer = await proxy.request("initialize", V2_INITIALIZE)
        assert answer["result"]["protocolVersion"] == 2, answer
        assert "agentCapabilities" not in answer["result"] and "info" in answer["result"]
        assert answer["result"]["capabilities"]["_meta"]["rewindSession"]["supported"] is True
        thread = state["thread"] = str((await proxy.request(
            "session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"])
        for text in ("turn alpha used:5000", "turn bravo used:130000"):  # past the trigger: a swap
            await told(proxy, thread, text)
        journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
        with anyio.fail_after(30):
            while not [r for r in journal.records() if r.outcome == "committed"]:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        await told(proxy, thread, "turn charlie used:21000")
        context = await told(proxy, thread, "/context")
        assert "Last move: swap compressed the model's context (" in context, context
        assert session_ids(proxy) == {thread}  # the swap unseen: one session id throughout
        # The swap told as a compaction (v2 gives every client compactions), never a thought.
        told_of = [u["status"] for u in updates(proxy, 0, "compaction_update")]
        assert told_of == ["in_progress", "completed"] and not updates(proxy, 0, "agent_thought_chunk"), told_of
        await proxy.close_stdin()
        conforms(proxy, tmp_path)

    assert await run(tmp_path, first, **ENV) == 0
    thread = state["thread"]
    # The agent was asked in v1 for the version liminal speaks, never the client's 2.
    [asked] = [json.loads(line) for line in agent_lines(tmp_path, "agent_in.bin")
               if b'"initialize"' in line]
    assert asked["params"]["protocolVersion"] == 1
    assert asked["params"]["clientInfo"] == V2_INITIALIZE["info"]
    assert asked["params"]["clientCapabilities"]["fs"] == {"readTextFile": False, "writeTextFile": False}

    async def again(proxy: ProxyProcess) -> None:
        answer = await proxy.request("initialize", V2_INITIALIZE)
        assert answer["result"]["protocolVersion"] == 2, answer
        start = len(proxy.messages())
        resumed = await proxy.request("session/resume", {"sessionId": thread, "cwd": CWD,
                                                         "replayFrom": {"type": "start"}})
        assert "result" in resumed, resumed
        typed = [u["content"]["text"] for u in updates(proxy, start, "user_message_chunk")]
        assert typed == ["turn alpha used:5000", "turn bravo used:130000", "turn charlie used:21000",
                         "/context"], typed
        # A current state after the replay, before the answer.
        replayed = proxy.messages()[start:]
        idle = next(i for i, m in enumerate(replayed) if m.get("method") == "session/update"
                    and m["params"]["update"].get("sessionUpdate") == "state_update")
        assert replayed[idle]["params"]["update"]["state"] == "idle"
        assert idle < next(i for i, m in enumerate(replayed) if "result" in m)
        await told(proxy, thread, "turn delta used:22000")
        assert session_ids(proxy) == {thread}
        await proxy.close_stdin()
        conforms(proxy, tmp_path)

    (tmp_path / "agent_in.bin").unlink()
    (tmp_path / "agent_out.bin").unlink()
    assert await run(tmp_path, again, **ENV) == 0


async def test_a_v1_client_is_answered_as_ever(tmp_path: Path) -> None:
    """Nothing of the face for a client that asks for 1: its bytes pass as they came."""
    async def body(proxy: ProxyProcess) -> None:
        answer = await proxy.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert answer["result"]["protocolVersion"] == 1 and "agentCapabilities" in answer["result"]
        thread = str((await proxy.request("session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"])
        start = len(proxy.messages())
        await said(proxy, thread, "turn alpha used:5000")
        assert not updates(proxy, start, "state_update")
        await proxy.close_stdin()

    assert await run(tmp_path, body, **ENV) == 0


@pytest.mark.parametrize("version", [1, 2])
async def test_a_last_line_without_its_newline_is_answered(tmp_path: Path, version: int) -> None:
    """``printf '{...}' | liminal acp``: the client's only line has no newline, and its input
    ends; the line is read all the same (the client's end held it waiting for a newline)."""
    async def body(proxy: ProxyProcess) -> None:
        params = V2_INITIALIZE if version == 2 else {"protocolVersion": 1, "clientCapabilities": {}}
        await proxy.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode())
        await proxy.close_stdin()
        answer = await proxy.wait_for(lambda m: m.get("id") == 1)
        assert answer["result"]["protocolVersion"] == version, answer

    assert await run(tmp_path, body, **ENV) == 0
