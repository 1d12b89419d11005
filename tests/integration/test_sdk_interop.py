"""The official ACP Python SDK on either side of ``liminal acp``.

The SDK validates every message against the protocol's schema, so a real SDK peer getting
through a whole turn (initialize, session/new, a streamed prompt with a tool call, a permission
request answered by the client, an fs read) shows liminal passes ACP traffic a strict peer
accepts. The SDK re-serialises what it receives, so byte-exactness is checked with a raw client
against the SDK agent's own record of the bytes it wrote and read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import acp
import anyio
import pytest
from acp.schema import AllowedOutcome, ReadTextFileResponse, RequestPermissionResponse

from tests.support.commands import without_liminal_additions, without_liminal_server
from tests.support.proxy_process import ProxyProcess, child_env, liminal_argv

# anyio imports ``anyio.Path`` lazily, on first use. First used in the SDK's worker thread while
# pytest's assertion rewriter parses a module in another, CPython 3.11's parser can fail with
# "AST constructor recursion depth mismatch" (seen in full runs): import it here, once.
_ = anyio.Path

pytestmark = pytest.mark.anyio

SDK_AGENT = Path(__file__).resolve().parents[1] / "support" / "sdk_agent.py"
TIMEOUT = 60


class RecordingClient:
    """An SDK client that allows every permission request and reads files from disk."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.permission_requests: list[dict[str, Any]] = []
        self.reads: list[str] = []
        self.final_chunk = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        text = getattr(getattr(update, "content", None), "text", "")
        if isinstance(text, str) and text.startswith("The file says:"):
            self.final_chunk.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        self.permission_requests.append(
            {"session_id": session_id, "tool_call_id": tool_call.tool_call_id,
             "options": [o.option_id for o in options]}
        )
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id="allow"))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None,
                             limit: int | None = None, **kwargs: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        return ReadTextFileResponse(content=await anyio.Path(path).read_text(encoding="utf-8"))


async def test_the_sdk_client_completes_a_turn_with_an_sdk_agent_through_liminal(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("liminal was here, ünïcode too", encoding="utf-8")
    client = RecordingClient()
    argv = liminal_argv([sys.executable, str(SDK_AGENT)])
    with (tmp_path / "liminal.stderr").open("wb") as stderr, anyio.fail_after(TIMEOUT):
        async with acp.spawn_agent_process(
            client, argv[0], *argv[1:], env=child_env(tmp_path), cwd=str(tmp_path),
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, _process):
            init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            result = await conn.prompt(session_id=session.session_id,
                                       prompt=[acp.text_block(f"read {target}")])
            await client.final_chunk.wait()

    assert init.protocol_version == acp.PROTOCOL_VERSION
    assert init.agent_info is not None and init.agent_info.name == "sdk-agent"
    assert result.stop_reason == "end_turn"
    assert {sid for sid, _ in client.updates} == {session.session_id}
    kinds = [update.session_update for _, update in client.updates]
    assert kinds == ["agent_message_chunk"] * 3 + ["tool_call", "tool_call_update", "agent_message_chunk"]
    texts = [u.content.text for _, u in client.updates if u.session_update == "agent_message_chunk"]
    assert texts == ["Hello", " from the", " SDK agent. ", "The file says: liminal was here, ünïcode too"]
    start, done = client.updates[3][1], client.updates[4][1]
    assert (start.tool_call_id, start.kind, start.status) == ("call-1", "read", "pending")
    assert (done.tool_call_id, done.status) == ("call-1", "completed")
    assert done.content[0].content.text == "liminal was here, ünïcode too"
    assert client.permission_requests == [
        {"session_id": session.session_id, "tool_call_id": "call-1", "options": ["allow", "reject"]}
    ]
    assert client.reads == [str(target)]


def frame(message: dict[str, Any]) -> bytes:
    # Key order and spacing unlike the SDK's own output, so a re-serialising proxy would show.
    return json.dumps(message, ensure_ascii=False, indent=None, separators=(", ", " : ")).encode() + b"\n"


async def test_what_the_sdk_agent_writes_reaches_a_raw_client_byte_for_byte(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    env = child_env(tmp_path)
    process = await anyio.open_process(
        liminal_argv([sys.executable, str(SDK_AGENT)]), env=env, cwd=str(tmp_path),
        start_new_session=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    proxy = ProxyProcess(process)
    sent = bytearray()

    async def send(message: dict[str, Any]) -> None:
        data = frame(message)
        sent.extend(data)
        await proxy.send(data)

    async def request(rpc_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        await send({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
        return await proxy.wait_for(lambda m: m.get("id") == rpc_id and "method" not in m, TIMEOUT)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(proxy.pump)
            tg.start_soon(proxy.pump_stderr)
            with anyio.fail_after(TIMEOUT):
                init = await request(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {
                    "fs": {"readTextFile": True, "writeTextFile": False}, "terminal": False},
                    "_meta": {"odd": [2**70, "\u2028"]}})
                assert init["result"]["protocolVersion"] == 1
                new = await request("s-1", "session/new", {"cwd": str(tmp_path), "mcpServers": []})
                session_id = new["result"]["sessionId"]
                # 2**70 as an id: beyond 64 bits, so any proxy that parsed and re-wrote it would lose it.
                await send({"jsonrpc": "2.0", "id": 2**70, "method": "session/prompt",
                            "params": {"sessionId": session_id,
                                       "prompt": [{"type": "text", "text": f"read {target}"}]}})
                ask = await proxy.wait_for(lambda m: m.get("method") == "session/request_permission", TIMEOUT)
                await send({"jsonrpc": "2.0", "id": ask["id"],
                            "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}})
                read = await proxy.wait_for(lambda m: m.get("method") == "fs/read_text_file", TIMEOUT)
                assert read["params"] == {"sessionId": session_id, "path": str(target)}
                await send({"jsonrpc": "2.0", "id": read["id"],
                            "result": {"content": "déjà vu\n", "_meta": {"big": 2**70}}})
                done = await proxy.wait_for(lambda m: "result" in m and "stopReason" in m["result"], TIMEOUT)
                assert done["result"]["stopReason"] == "end_turn"
                assert b'"id":' + str(2**70).encode() in proxy.lines[-1]
                await proxy.close_stdin()
                await process.wait()
            tg.cancel_scope.cancel()
    finally:
        await proxy.aclose()

    agent_out = await anyio.Path(env["AGENT_LOG_OUT"]).read_bytes()
    agent_in = await anyio.Path(env["AGENT_LOG_IN"]).read_bytes()
    # Byte for byte, but for liminal's message ids and the capabilities liminal answers for in
    # initialize's answer (issue 25).
    assert [without_liminal_additions(line) for line in bytes(proxy.received).splitlines(keepends=True)] == [
        without_liminal_additions(line) for line in agent_out.splitlines(keepends=True)]
    # Byte for byte, but for the session request, which reaches the agent with liminal's server.
    assert b"".join(without_liminal_server(line) for line in agent_in.splitlines(keepends=True)) == b"".join(
        without_liminal_server(line) for line in bytes(sent).splitlines(keepends=True))
    updates = [json.loads(line) for line in agent_out.splitlines() if b'"session/update"' in line]
    assert [u["params"]["update"]["sessionUpdate"] for u in updates] == (
        ["agent_message_chunk"] * 3 + ["tool_call", "tool_call_update", "agent_message_chunk"]
    )
    assert updates[-1]["params"]["update"]["content"]["text"] == "The file says: déjà vu\n"
