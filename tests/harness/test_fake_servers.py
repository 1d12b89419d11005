"""The fake model servers over real HTTP: streaming, usage, recording, scripts, strictness."""

from __future__ import annotations

import itertools
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
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


def marked(text: str, ttl: str | None = None) -> dict[str, Any]:
    mark: dict[str, Any] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return {"type": "text", "text": text, "cache_control": mark}


def conversation(turns: int, ttl: str | None = None) -> dict[str, Any]:
    """A request as Claude Code marks it: its system blocks and the newest message."""
    messages: list[dict[str, Any]] = []
    for n in range(turns):
        messages += [{"role": "user", "content": [{"type": "text", "text": f"question {n} " * 200}]},
                     {"role": "assistant", "content": [{"type": "text", "text": f"answer {n} " * 200}]}]
    messages.append({"role": "user", "content": [marked(f"question {turns} " * 200, ttl),
                                                 {"type": "text", "text": "tail"}]})
    return {"model": "m", "tools": TOOLS, "system": [{"type": "text", "text": "billing"},
                                                     marked("You are Claude Code. " * 300, ttl)],
            "messages": messages}


def test_anthropic_usage_is_split_as_the_prompt_cache_would(anthropic: FakeAnthropic) -> None:
    """The first request writes its prompt up to the last mark; the next reads what an earlier
    mark wrote and writes the rest; what follows the last mark is uncached. The three add up to
    the request's bytes / 4 as before, and the written part is split by the marks' ``ttl``, as
    the API does (Claude Code copies the split into its session file)."""
    usages = []
    for turns in (0, 1, 2):
        _, raw = post(anthropic.base_url + "/v1/messages", conversation(turns))
        usages.append(json.loads(raw)["usage"])
    for usage, request in zip(usages, anthropic.requests, strict=True):
        parts = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        assert sum(usage[k] for k in parts) == len(request.raw) // 4
        assert usage["cache_creation"] == {"ephemeral_5m_input_tokens": usage["cache_creation_input_tokens"],
                                           "ephemeral_1h_input_tokens": 0}
        assert 0 < usage["input_tokens"] < 100  # "tail", the request's other fields
    assert usages[0]["cache_read_input_tokens"] == 0 < usages[0]["cache_creation_input_tokens"]
    # Each reads the system prompt and the conversation up to the previous request's mark, and
    # writes the answer and the new question.
    for before, after in itertools.pairwise(usages):
        assert after["cache_read_input_tokens"] == before["cache_read_input_tokens"] \
            + before["cache_creation_input_tokens"]
        assert 900 < after["cache_creation_input_tokens"] < 1_200


def test_anthropic_cache_writes_follow_the_marks_ttl(anthropic: FakeAnthropic) -> None:
    _, raw = post(anthropic.base_url + "/v1/messages", conversation(1, "1h"))
    usage = json.loads(raw)["usage"]
    assert usage["cache_creation"] == {"ephemeral_5m_input_tokens": 0,
                                       "ephemeral_1h_input_tokens": usage["cache_creation_input_tokens"]}
    # A 1-hour system prompt, then a 5-minute conversation: each life gets its own bytes.
    body = conversation(2)
    body["system"][1]["cache_control"]["ttl"] = "1h"
    body["system"][1]["text"] += " (changed)"
    _, raw = post(anthropic.base_url + "/v1/messages", body)
    split = json.loads(raw)["usage"]["cache_creation"]
    assert split["ephemeral_1h_input_tokens"] > 1_500 and split["ephemeral_5m_input_tokens"] > 500


def test_anthropic_side_requests_and_summaries_stay_out_of_the_cache(anthropic: FakeAnthropic) -> None:
    """A side request (no tools) keeps its fixed usage; liminal's summary request (the CLI's
    tools, its own text) counts whole as input and writes nothing another request could read:
    its race with the turn must not move the turn's numbers."""
    from fixtures.harness.script import SUMMARY_REQUEST

    side = {**conversation(0)}
    del side["tools"]
    summary = conversation(0)
    summary["messages"][-1]["content"][1]["text"] = SUMMARY_REQUEST
    for body in (side, summary, conversation(0)):
        post(anthropic.base_url + "/v1/messages", body)
    usages = [r.usage for r in anthropic.requests]
    none = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
    assert usages[0] == {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                         "cache_creation": none, "output_tokens": 0}
    assert usages[1]["input_tokens"] == len(anthropic.requests[1].raw) // 4
    assert usages[1]["cache_creation"] == none and usages[1]["cache_read_input_tokens"] == 0
    assert usages[2]["cache_read_input_tokens"] == 0  # nothing was written before it


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


def test_the_rig_takes_only_the_lives_claude_code_knows(tmp_path: Path) -> None:
    from fixtures.harness import Rig, adapters

    adapter = adapters()["claude-agent"]
    with pytest.raises(ValueError, match="prompt_cache_ttl"):
        Rig.start(adapter, tmp_path / "r", prompt_cache_ttl="2h")
    rig = Rig.start(adapter, tmp_path / "ok", prompt_cache_ttl="1h")
    try:
        assert rig.home.env()["CLAUDE_CODE_PROMPT_CACHE_TTL"] == "1h"
    finally:
        rig.stop()
    plain = Rig.start(adapter, tmp_path / "plain")
    try:
        assert "CLAUDE_CODE_PROMPT_CACHE_TTL" not in plain.home.env()
    finally:
        plain.stop()
