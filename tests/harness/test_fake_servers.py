"""The fake model servers over real HTTP: streaming, usage, recording, scripts, strictness."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any

import pytest

from fixtures.harness import (
    FakeAnthropic,
    FakeResponses,
    ModelRequest,
    Reply,
    Scenario,
    Shell,
    Text,
    Thinking,
    ToolCall,
    check_input,
    sign_thinking,
)
from fixtures.harness.anthropic import ApiError

TOOLS = [{"name": "Bash"}, {"name": "Read"}]


@pytest.fixture
def anthropic(fake_anthropic: FakeAnthropic) -> FakeAnthropic:
    fake_anthropic.allow_refusals = True  # some tests here are about refusals
    return fake_anthropic


@pytest.fixture
def responses(fake_responses: FakeResponses) -> FakeResponses:
    fake_responses.allow_refusals = True
    return fake_responses


def post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def sse_events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in raw.decode().split("\n\n"):
        if chunk.strip():
            name, data = chunk.split("\n", 1)
            events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


def test_anthropic_json_reply_and_usage_follow_request_size(anthropic: FakeAnthropic) -> None:
    small = {"model": "m", "tools": TOOLS, "messages": [{"role": "user", "content": "hi"}]}
    big = {**small, "messages": [{"role": "user", "content": "x" * 40_000}]}
    _, a = post(anthropic.base_url + "/v1/messages", small)
    _, b = post(anthropic.base_url + "/v1/messages?beta=true", big)
    first, second = json.loads(a), json.loads(b)
    assert first["content"] == [{"type": "text", "text": "pong (n=1)"}]
    assert first["usage"]["input_tokens"] == len(anthropic.requests[0].raw) // 4
    assert 10_000 <= second["usage"]["input_tokens"] <= 10_100
    assert [r.route for r in anthropic.requests] == ["/v1/messages", "/v1/messages"]


def test_anthropic_stream_has_the_real_event_sequence(anthropic: FakeAnthropic) -> None:
    anthropic.script = Scenario().add("go", [Thinking("hmm"), Text("sure"), Shell("ls")])
    status, raw = post(anthropic.base_url + "/v1/messages", {
        "stream": True, "tools": TOOLS, "messages": [{"role": "user", "content": "go"}]})
    assert status == 200
    names = [name for name, _ in sse_events(raw)]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    events = sse_events(raw)
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [s["type"] for s in starts] == ["thinking", "text", "tool_use"]
    assert starts[2]["name"] == "Bash"
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    signatures = [d["signature"] for d in deltas if d["type"] == "signature_delta"]
    assert signatures == [sign_thinking("hmm")]
    assert json.loads(deltas[-1]["partial_json"]) == {"command": "ls", "description": "Run a command"}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_refuses_a_broken_conversation_and_records_it(anthropic: FakeAnthropic) -> None:
    status, raw = post(anthropic.base_url + "/v1/messages", {"tools": TOOLS, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "Bash",
                                           "input": {}}]},
        {"role": "user", "content": "forgot the result"}]})
    assert status == 400
    body = json.loads(raw)
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "toolu_x" in body["error"]["message"]
    assert [r.error for r in anthropic.errors] == [body["error"]["message"]]


def test_anthropic_thinking_round_trip(anthropic: FakeAnthropic) -> None:
    anthropic.script = Scenario().add("think", Reply((Thinking("deep"), Text("ok"))))
    _, raw = post(anthropic.base_url + "/v1/messages", {
        "tools": TOOLS, "messages": [{"role": "user", "content": "think"}]})
    issued = json.loads(raw)["content"]
    follow_up = {"tools": TOOLS, "messages": [
        {"role": "user", "content": "think"}, {"role": "assistant", "content": issued},
        {"role": "user", "content": "again"}]}
    assert post(anthropic.base_url + "/v1/messages", follow_up)[0] == 200
    issued[0]["thinking"] = "shallow"
    assert post(anthropic.base_url + "/v1/messages", follow_up)[0] == 400


def test_count_tokens(anthropic: FakeAnthropic) -> None:
    body = {"messages": [{"role": "user", "content": "y" * 400}]}
    status, raw = post(anthropic.base_url + "/v1/messages/count_tokens", body)
    assert status == 200 and json.loads(raw) == {"input_tokens": len(json.dumps(body)) // 4}


def test_scenario_continues_the_turn_that_made_the_call(anthropic: FakeAnthropic) -> None:
    anthropic.script = Scenario().add(
        "edit", ToolCall("Read", {"file_path": "/a"}),
        lambda req: ToolCall("Edit", {"file_path": "/a", "old_string": req.tool_results[0].text,
                                      "new_string": "B"}),
        "edited")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "please edit"}]
    answers = []
    for output in ("A", "done", None):
        _, raw = post(anthropic.base_url + "/v1/messages", {"tools": TOOLS, "messages": messages})
        content = json.loads(raw)["content"]
        answers.append(content)
        messages.append({"role": "assistant", "content": content})
        if output is not None:
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": content[0]["id"], "content": output}]})
    assert [a[0].get("name") for a in answers[:2]] == ["Read", "Edit"]
    assert answers[1][0]["input"]["old_string"] == "A"
    assert answers[2] == [{"type": "text", "text": "edited"}]
    assert not anthropic.errors


def test_side_requests_get_the_side_reply(anthropic: FakeAnthropic) -> None:
    anthropic.script = Scenario(side_reply="A title").add("go", Shell("ls"))
    _, raw = post(anthropic.base_url + "/v1/messages", {"messages": [{"role": "user", "content": "go"}]})
    assert json.loads(raw)["content"] == [{"type": "text", "text": "A title"}]


def test_a_plain_callable_is_a_script(anthropic: FakeAnthropic) -> None:
    seen: list[ModelRequest] = []

    def script(request: ModelRequest) -> Reply:
        seen.append(request)
        return Reply((Text(f"{len(request.raw)} bytes"),))

    anthropic.script = script
    _, raw = post(anthropic.base_url + "/v1/messages", {"tools": TOOLS, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]}]})
    assert json.loads(raw)["content"][0]["text"] == f"{len(seen[0].raw)} bytes"
    assert seen[0].last_user_text == "hello" and seen[0].tool_names == ("Bash", "Read")


def test_responses_stream_and_shell_tool_choice(responses: FakeResponses) -> None:
    responses.script = Scenario().add("run", Shell("echo hi"))
    tools = [{"type": "function", "name": "shell_command"}]
    status, raw = post(responses.base_url + "/v1/responses", {"stream": True, "tools": tools, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run"}]}]})
    assert status == 200
    events = sse_events(raw)
    assert events[0][0] == "response.created" and events[-1][0] == "response.completed"
    call = events[-1][1]["response"]["output"][0]
    assert call["name"] == "shell_command" and json.loads(call["arguments"]) == {"command": "echo hi"}
    assert [e["sequence_number"] for _, e in events] == list(range(len(events)))
    usage = events[-1][1]["response"]["usage"]
    assert usage["input_tokens"] == len(responses.requests[0].raw) // 4


def test_responses_refuses_an_output_without_its_call(responses: FakeResponses) -> None:
    status, raw = post(responses.base_url + "/v1/responses", {"tools": [{"name": "x"}], "input": [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "function_call_output", "call_id": "call_9", "output": "x"}]})
    assert status == 400
    assert json.loads(raw)["error"] == {
        "message": "No tool call found for function call output with call_id call_9.",
        "type": "invalid_request_error", "param": "input", "code": None}
    assert len(responses.errors) == 1


def test_responses_pairing_rules() -> None:
    check_input("just a string")
    check_input([{"type": "function_call", "call_id": "c1", "name": "x", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "c1", "output": "ok"}])
    with pytest.raises(ApiError, match=re.escape("No tool output found for function call c2.")):
        check_input([{"type": "function_call", "call_id": "c2", "name": "x", "arguments": "{}"}])
    with pytest.raises(ApiError, match=re.escape("No tool call found for function call output with call_id c3.")):
        check_input([{"type": "function_call_output", "call_id": "c3", "output": "x"},
                     {"type": "function_call", "call_id": "c3", "name": "x", "arguments": "{}"}])


def test_wait_for_requests(anthropic: FakeAnthropic) -> None:
    post(anthropic.base_url + "/v1/messages", {"messages": [{"role": "user", "content": "a"}]})
    anthropic.wait_for(lambda requests: len(requests) == 1, timeout=1)
    with pytest.raises(TimeoutError):
        anthropic.wait_for(lambda requests: len(requests) == 2, timeout=0.1)
