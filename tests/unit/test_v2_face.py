"""``liminal.acp.v2.V2Face``: each v1 shape liminal sends a v2 client, turned into v2's, and each
checked against the v2 schema the pinned SDK ships (``fixtures.harness.acp_schema``)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixtures.harness import acp_schema
from liminal.acp.v2 import V2Face, asks_v2

V2_INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": 2, "info": {"name": "c", "version": "1"}, "capabilities": {}}}


def conforming(sent_by_client: list[dict[str, Any]], to_client: list[dict[str, Any]]) -> None:
    """Every message the face wrote the client conforms to v2 (the client's side of a v2
    initialize, so the schema check judges it by v2)."""
    check = acp_schema.checker("v2")
    if check is None:
        pytest.skip("the pinned SDK's schema is not installed here")
    answered = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2, "info": {"name": "l", "version": "1"}}}
    problems = acp_schema.frames_problems(check, [json.dumps(m) for m in [V2_INITIALIZE, *sent_by_client]],
                                          [json.dumps(m) for m in [answered, *to_client]], [])
    assert not problems, problems


def face() -> V2Face:
    made = V2Face()
    made.from_client(V2_INITIALIZE)
    return made


def update(body: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": body}}


def test_only_an_initialize_asking_for_two_or_more_is_v2() -> None:
    assert asks_v2(V2_INITIALIZE)
    assert asks_v2({"method": "initialize", "params": {"protocolVersion": 3}})
    for params in ({"protocolVersion": 1}, {"protocolVersion": True}, {"protocolVersion": "2"}, {}, None):
        assert not asks_v2({"method": "initialize", "params": params})
    assert not asks_v2({"method": "session/new", "params": {"protocolVersion": 2}})


def test_initialize_both_ways() -> None:
    made = V2Face()
    asked = made.from_client(V2_INITIALIZE).to_liminal[0]["params"]
    assert asked["protocolVersion"] == 1 and asked["clientInfo"] == {"name": "c", "version": "1"}
    assert asked["clientCapabilities"]["terminal"] is False
    v1 = {"protocolVersion": 1, "agentInfo": {"name": "a", "version": "2"},
          "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True, "audio": False},
                                "mcpCapabilities": {"http": True, "sse": True},
                                "sessionCapabilities": {"delete": {}, "list": {}},
                                "_meta": {"rewindSession": {"supported": True}}},
          "authMethods": [{"id": "login", "name": "Log in", "description": None}]}
    [answer] = made.to_client({"jsonrpc": "2.0", "id": 0, "result": v1}).to_client
    result = answer["result"]
    assert result["protocolVersion"] == 2 and result["info"] == {"name": "a", "version": "2"}
    assert result["capabilities"]["session"] == {"prompt": {"image": {}}, "mcp": {"stdio": {}, "http": {}},
                                                 "delete": {}}
    assert result["capabilities"]["_meta"] == {"rewindSession": {"supported": True}}
    assert result["authMethods"] == [{"type": "agent", "methodId": "login", "name": "Log in", "description": None}]
    check = acp_schema.checker("v2")
    if check is not None:
        assert not acp_schema.frames_problems(check, [json.dumps(V2_INITIALIZE)], [json.dumps(answer)], [])


def test_a_prompt_is_running_then_echoed_answered_and_idle() -> None:
    made = face()
    prompt = {"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
              "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}}
    out = made.from_client(prompt)
    assert out.to_liminal == [prompt]
    running = out.to_client
    ended = made.to_client({"jsonrpc": "2.0", "id": 7,
                            "result": {"stopReason": "max_tokens", "_meta": {"userMessageId": "m1"}}}).to_client
    bodies = [m["params"]["update"] for m in [*running, *ended] if "method" in m]
    assert [(b["sessionUpdate"], b.get("state")) for b in bodies] == [
        ("state_update", "running"), ("user_message", None), ("state_update", "idle")]
    assert bodies[1]["messageId"] == "m1" and bodies[2]["stopReason"] == "max_tokens"
    [answer] = [m for m in ended if "result" in m]
    assert answer["result"]["messageId"] == "m1"
    conforming([prompt], [*running, *ended])


def test_a_refused_prompt_is_an_error_and_the_work_ends() -> None:
    made = face()
    prompt = {"jsonrpc": "2.0", "id": 8, "method": "session/prompt",
              "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}}
    running = made.from_client(prompt).to_client
    ended = made.to_client({"jsonrpc": "2.0", "id": 8, "error": {"code": -32603, "message": "no"}}).to_client
    assert ended[0]["error"]["message"] == "no"
    assert ended[1]["params"]["update"] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "error",
                                            "error": {"code": -32603, "message": "no"}}
    conforming([prompt], [*running, *ended])


def test_a_resume_with_replay_is_a_load_and_ends_with_the_current_state() -> None:
    made = face()
    resume = {"jsonrpc": "2.0", "id": 3, "method": "session/resume",
              "params": {"sessionId": "s", "cwd": "/w", "replayFrom": {"type": "start"}}}
    [load] = made.from_client(resume).to_liminal
    assert load["method"] == "session/load" and load["params"] == {"sessionId": "s", "cwd": "/w", "mcpServers": []}
    plain = {"jsonrpc": "2.0", "id": 4, "method": "session/resume", "params": {"sessionId": "s", "cwd": "/w"}}
    assert made.from_client(plain).to_liminal[0]["method"] == "session/resume"
    out = made.to_client({"jsonrpc": "2.0", "id": 3, "result": {"modes": {"currentModeId": "x", "availableModes": []},
                                                                "configOptions": []}}).to_client
    assert out[0]["params"]["update"] == {"sessionUpdate": "state_update", "state": "idle"}
    assert out[1]["result"] == {"configOptions": []}
    conforming([resume], out)


def test_updates_liminal_sends_become_v2s() -> None:
    made = face()
    call = {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run", "kind": "execute",
            "status": "pending", "rawInput": {"command": "ls"}}
    out = [*made.to_client(update(call)).to_client,
           *made.to_client(update({"sessionUpdate": "tool_call_update", "toolCallId": "t1",
                                   "status": "completed"})).to_client,
           *made.to_client(update({"sessionUpdate": "plan", "entries": [
               {"content": "a", "priority": "high", "status": "pending"}]})).to_client,
           *made.to_client(update({"sessionUpdate": "agent_message_chunk",
                                   "content": {"type": "text", "text": "x"}})).to_client,
           *made.to_client(update({"sessionUpdate": "agent_thought_chunk", "messageId": "k",
                                   "content": {"type": "text", "text": "y"}})).to_client,
           *made.to_client(update({"sessionUpdate": "usage_update", "used": 1, "size": 2})).to_client]
    assert made.to_client(update({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})).to_client == []
    kinds = [m["params"]["update"]["sessionUpdate"] for m in out]
    assert kinds == ["tool_call_update", "tool_call_update", "plan_update", "agent_message_chunk",
                     "agent_thought_chunk", "usage_update"]
    assert out[4]["params"]["update"]["messageId"] == "k"  # liminal's (or the agent's) id kept
    conforming([], out)


def test_a_permission_names_its_tool_call_and_file_requests_are_refused_here() -> None:
    made = face()
    asked = {"jsonrpc": "2.0", "id": "p1", "method": "session/request_permission",
             "params": {"sessionId": "s", "toolCall": {"toolCallId": "t1", "title": "Write a file"},
                        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]}}
    [permission] = made.to_client(asked).to_client
    assert permission["params"]["title"] == "Write a file"
    assert permission["params"]["subject"] == {"type": "tool_call", "toolCall": {"toolCallId": "t1",
                                                                                 "title": "Write a file"}}
    conforming([], [permission])
    read = {"jsonrpc": "2.0", "id": "r1", "method": "fs/read_text_file", "params": {"sessionId": "s", "path": "/a"}}
    out = made.to_client(read)
    assert out.to_client == [] and out.to_liminal[0]["error"]["code"] == -32601


SESSION_UPDATES = st.sampled_from([
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "t"}},
    {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "t"}},
    {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "t"}},
    {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "x"},
    {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "failed"},
    {"sessionUpdate": "plan", "entries": []},
    {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "a", "description": "b"}]},
    {"sessionUpdate": "current_mode_update", "currentModeId": "m"},
    {"sessionUpdate": "session_info_update", "title": "t"},
    {"sessionUpdate": "usage_update", "used": 3, "size": 9},
    {"sessionUpdate": "available_commands_update", "availableCommands": [
        {"name": "mark", "description": "a mark", "input": {"hint": "NAME"}}]},
    {"sessionUpdate": "config_option_update", "configOptions": [
        {"id": "model", "name": "Model", "type": "select", "currentValue": "a", "options": [{"value": "a", "name": "A"}]},
        {"id": "fast", "name": "Fast", "type": "boolean", "currentValue": False}]},
    {"sessionUpdate": "tool_call", "toolCallId": "d", "title": "Edit", "kind": "edit", "content": [
        {"type": "diff", "path": "/w/a.py", "oldText": "a", "newText": "b"},
        {"type": "content", "content": {"type": "text", "text": "done"}}], "locations": [{"path": "/w/a.py", "line": 1}]},
    {"sessionUpdate": "notice", "severity": "info", "title": "t"},
    {"sessionUpdate": "compaction_update", "compactionId": "c", "status": "completed"},
])


@given(st.lists(SESSION_UPDATES, max_size=12))
def test_any_run_of_v1_updates_reaches_a_v2_client_in_v2(bodies: list[dict[str, Any]]) -> None:
    made = face()
    out = [m for body in bodies for m in made.to_client(update(body)).to_client]
    conforming([], out)


def test_a_diff_is_a_change_and_a_git_patch() -> None:
    made = face()
    call = {"sessionUpdate": "tool_call_update", "toolCallId": "e", "locations": [{"path": "/w/a", "line": 0}],
            "content": [{"type": "diff", "path": "/w/a", "oldText": "one\ntwo\n", "newText": "one\n2\n"},
                        {"type": "diff", "path": "/w/b", "oldText": None, "newText": "new"}]}
    [out] = made.to_client(update(call)).to_client
    body = out["params"]["update"]
    assert body["locations"] == [{"path": "/w/a"}]  # v2's lines are 1-based: no line 0
    modify, add = body["content"]
    assert modify["changes"] == [{"operation": "modify", "path": "/w/a", "fileType": "text"}]
    assert modify["patch"]["text"].splitlines() == [
        "diff --git /w/a /w/a", "--- /w/a", "+++ /w/a", "@@ -1,2 +1,2 @@", " one", "-two", "+2"]
    assert add["changes"][0]["operation"] == "add"
    assert add["patch"]["text"].splitlines()[1:] == ["--- /dev/null", "+++ /w/b", "@@ -0,0 +1 @@", "+new",
                                                     "\\ No newline at end of file"]
    conforming([], [out])


@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\x00", b"\n")), max_size=20),
       st.integers(min_value=1, max_value=30))
def test_lines_keep_every_byte_in_order_and_hold_at_most_the_cap(chunks: list[bytes], cap: int) -> None:
    """A v2 client's bytes, however they come: every byte passed on once, in order; a whole
    line to parse is never past the cap; what waits for its newline is never past it."""
    from liminal.transport.versioned import Lines

    lines = Lines(cap)
    passed = b""
    for chunk in chunks:
        for piece, whole in lines.feed(chunk):
            assert not whole or len(piece) <= cap
            passed += piece + b"\n" if whole else piece
        assert len(lines._rest) <= cap
    assert passed + bytes(lines._rest) == b"".join(chunks)


def test_v2_requests_liminal_gets_in_v1s_shapes() -> None:
    made = face()
    new = made.from_client({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {
        "cwd": "/w", "mcpServers": [{"type": "stdio", "name": "m", "command": "/bin/m"},
                                    {"type": "http", "name": "h", "url": "http://127.0.0.1:1/"}]}})
    assert new.to_liminal[0]["params"]["mcpServers"] == [
        {"args": [], "env": [], "name": "m", "command": "/bin/m"},
        {"headers": [], "type": "http", "name": "h", "url": "http://127.0.0.1:1/"}]
    none = made.from_client({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/w", "mcpServers": None}})
    assert none.to_liminal[0]["params"]["mcpServers"] == []
    other = made.from_client({"jsonrpc": "2.0", "id": 3, "method": "session/resume",
                              "params": {"sessionId": "s", "cwd": "/w", "replayFrom": {"type": "message", "id": "m"}}})
    assert other.to_liminal == [] and other.to_client[0]["error"]["code"] == -32602
    grouped = made.to_client({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s", "configOptions": [
        {"id": "model", "name": "Model", "type": "select", "currentValue": "a",
         "options": [{"group": "g", "name": "G", "options": [{"value": "a", "name": "A"}]}]}]}}).to_client
    assert grouped[0]["result"]["configOptions"][0]["options"][0]["groupId"] == "g"
    conforming([], [update({"sessionUpdate": "config_option_update",
                            "configOptions": grouped[0]["result"]["configOptions"]})])
    for bad in (5, "x", None, [5, None]):  # an agent's odd values: never an exception
        made.to_client(update({"sessionUpdate": "available_commands_update", "availableCommands": bad}))
        made.to_client(update({"sessionUpdate": "config_option_update", "configOptions": bad}))


class _End:
    """A client end for ``VersionedClient``: what it is given to read, what is written to it."""

    closed = False

    def __init__(self) -> None:
        self.written = bytearray()
        self.on_data: Any = None
        self.on_eof: Any = None

    async def open(self, on_data: Any, on_eof: Any, on_flow: Any) -> None:
        self.on_data, self.on_eof = on_data, on_eof

    def write(self, data: bytes) -> None:
        self.written += data

    def pause_reading(self, pause: bool) -> None:
        pass

    def close(self) -> None:
        pass


async def _versioned(max_line: int = 1 << 20) -> tuple[Any, _End, list[bytes], list[bool]]:
    from liminal.transport.versioned import VersionedClient

    end, got, ended = _End(), [], []
    client = VersionedClient(end, max_line)
    await client.open(got.append, lambda: ended.append(True), lambda pause: None)
    return client, end, got, ended


V2_LINE = json.dumps(V2_INITIALIZE).encode() + b"\n"


@pytest.mark.anyio
async def test_the_last_line_without_its_newline_still_goes_on() -> None:
    _, end, got, ended = await _versioned()
    end.on_data(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}')
    end.on_eof()
    assert got == [b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'] and ended
    _, end, got, ended = await _versioned()
    end.on_data(V2_LINE + b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w"}}')
    end.on_eof()
    assert json.loads(b"".join(got).splitlines()[-1])["params"]["mcpServers"] == [] and ended


@pytest.mark.anyio
async def test_lines_the_face_cannot_take_go_on_as_they_came() -> None:
    """An id past 64 bits (orjson reads it as a float) and a message nested past what orjson
    writes: the bytes as sent, and the prompt beside them still goes on."""
    _, end, got, _ = await _versioned()
    big = b'{"jsonrpc":"2.0","id":18446744073709551617,"method":"session/new","params":{"cwd":"/w"}}'
    deep = b'{"jsonrpc":"2.0","id":6,"method":"x","params":' + b"[" * 300 + b"]" * 300 + b"}"
    prompt = b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}'
    end.on_data(V2_LINE + big + b"\n" + deep + b"\n" + prompt + b"\n")
    lines = b"".join(got).splitlines()
    assert lines[1:] == [big, deep, prompt]
    assert b'"state":"running"' in end.written


@pytest.mark.anyio
async def test_an_answer_of_the_faces_own_waits_for_the_end_of_a_line_past_the_cap() -> None:
    client, end, got, _ = await _versioned(max_line=200)
    end.on_data(V2_LINE + b'{"jsonrpc":"2.0","id":9,"method":"x","params":"' + b"a" * 300)  # past the cap, unended
    client.write(b'{"jsonrpc":"2.0","id":"r1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/a"}}\n')
    await anyio.sleep(0.01)  # the face's answer is sent on the loop's next turn
    assert b"fs/read_text_file" not in b"".join(got)
    end.on_data(b'"}\n')
    read = b"".join(got)
    assert read.index(b'"}\n') < read.index(b'"id":"r1"')


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)
ANY_MESSAGE = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.just("2.0"), "id": st.integers(0, 3) | st.text(max_size=2),
    "method": st.sampled_from(["initialize", "session/prompt", "session/resume", "session/new", "session/update",
                               "session/request_permission", "fs/read_text_file", "auth/login",
                               "session/set_config_option", "x"]),
    "params": JSON, "result": JSON, "error": JSON})


@given(st.lists(st.tuples(st.booleans(), ANY_MESSAGE), max_size=12))
def test_no_message_either_way_makes_the_face_fail(steps: list[tuple[bool, dict[str, Any]]]) -> None:
    """Bad input never crashes the proxy: whatever either side sends, in any order."""
    made = face()
    for from_client, message in steps:
        (made.from_client if from_client else made.to_client)(message)
