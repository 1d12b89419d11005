"""liminal's MCP server, its protocol side: what each message gets, without processes."""

from __future__ import annotations

from typing import Any

import pytest

from liminal.mcp.protocol import INVALID_PARAMS, METHOD_NOT_FOUND, Call, McpServer, Tool, ToolError

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def echo(args: dict[str, Any]) -> list[str]:
    if args["text"] == "fail":
        raise ToolError("as asked")
    if args["text"] == "bug":
        raise RuntimeError("boom")
    if args["text"] == "slow":
        raise TimeoutError
    return [args["text"]]


SERVER = McpServer([Tool("echo", "says it back", {"text": {"type": "string"}, "n": {"type": "integer"}},
                         ("text",), echo)], "use echo")


def request(method: str, params: Any = None, rpc_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, **({"params": params} if params is not None else {})}


async def test_initialize_takes_the_clients_version_and_offers_tools() -> None:
    answer = await SERVER.handle(request("initialize", {"protocolVersion": "2025-03-26"}))
    assert answer is not None
    result = answer["result"]
    assert result["protocolVersion"] == "2025-03-26"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "liminal" and result["instructions"] == "use echo"


async def test_tools_list_and_ping_are_answered_at_once() -> None:
    listed = SERVER.answer(request("tools/list", rpc_id="x"))
    assert isinstance(listed, dict) and listed["id"] == "x"
    tool = listed["result"]["tools"][0]
    assert tool["name"] == "echo" and tool["inputSchema"]["required"] == ["text"]
    assert SERVER.answer(request("ping")) == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_notifications_and_responses_get_no_answer() -> None:
    assert SERVER.answer({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    assert SERVER.answer({"jsonrpc": "2.0", "id": 4, "result": {}}) is None


async def test_a_call_is_run_later_and_its_failure_is_the_models_to_read() -> None:
    call = SERVER.answer(request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
    assert isinstance(call, Call)
    ok = await call.run()
    assert ok["result"] == {"content": [{"type": "text", "text": "hi"}], "isError": False}
    # What happened, in words: the model read "echo failed: TimeoutError: " (the class's name,
    # nothing after it); the class goes to stderr, which the CLI keeps.
    for text, said in (("fail", "as asked"), ("bug", "echo failed: boom"),
                       ("slow", "echo failed: no answer in time")):
        answer = await SERVER.handle(request("tools/call", {"name": "echo", "arguments": {"text": text}}))
        assert answer is not None and answer["result"]["isError"] is True
        assert answer["result"]["content"][0]["text"] == said


@pytest.mark.parametrize("params", [
    {"name": "nope", "arguments": {}},
    {"name": "echo", "arguments": {}},
    {"name": "echo", "arguments": {"text": 5}},
    {"name": "echo", "arguments": {"text": "a", "n": True}},
    {"name": "echo", "arguments": {"text": "a", "other": 1}},
    {"name": "echo", "arguments": []},
])
async def test_calls_the_schema_refuses_are_errors(params: dict[str, Any]) -> None:
    answer = SERVER.answer(request("tools/call", params))
    assert isinstance(answer, dict) and answer["error"]["code"] == INVALID_PARAMS


async def test_unknown_methods_and_junk() -> None:
    answer = SERVER.answer(request("resources/list"))
    assert isinstance(answer, dict) and answer["error"]["code"] == METHOD_NOT_FOUND
    junk = SERVER.answer([1, 2])
    assert isinstance(junk, dict) and "error" in junk


def test_a_call_that_never_ends_does_not_keep_the_server_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    import anyio

    from liminal.mcp import server

    class Stuck:
        def tools(self) -> list[Tool]:
            async def forever(args: dict[str, Any]) -> list[str]:
                await anyio.sleep_forever()
                return []

            return [Tool("stuck", "never answers", {}, (), forever)]

        async def aclose(self) -> None:
            pass

    monkeypatch.setattr(server, "CLOSE_SECONDS", 0.2)
    stdin = io.BytesIO(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"stuck"}}\n')
    assert server.serve(Stuck(), stdin, io.BytesIO()) == 0  # type: ignore[arg-type]
