"""The fake Gemini API over real HTTP: the key, streaming and whole answers, usage with the
implicit cache, scripted tool calls continued by their responses, and the real API's refusals."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from fixtures.harness import FakeGemini, Scenario, Shell, Text, Thinking, ToolCall, check_contents
from fixtures.harness.anthropic import ApiError
from fixtures.harness.gemini import FAKE_GEMINI_KEY, IMPLICIT_CACHE_MIN_TOKENS

TOOLS = [{"functionDeclarations": [{"name": "read_file"}, {"name": "run_shell_command"}]}]
STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
WHOLE = "/v1beta/models/gemini-2.5-flash:generateContent"


@pytest.fixture
def gemini(fake_gemini: FakeGemini) -> FakeGemini:
    fake_gemini.allow_refusals = True  # some tests here are about refusals
    return fake_gemini


def post(server: FakeGemini, path: str, body: dict[str, Any], key: str = FAKE_GEMINI_KEY) -> tuple[int, bytes]:
    request = urllib.request.Request(server.base_url + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json", "x-goog-api-key": key})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def chunks(raw: bytes) -> list[dict[str, Any]]:
    """The SSE stream as @google/genai reads it: ``data: <json>`` events, blank-line separated."""
    events = [e for e in raw.decode().split("\r\n\r\n") if e.strip()]
    assert all(e.startswith("data: ") for e in events), events
    return [json.loads(e.removeprefix("data: ")) for e in events]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def call(call_id: str, name: str = "read_file") -> dict[str, Any]:
    return {"role": "model", "parts": [{"functionCall": {"id": call_id, "name": name, "args": {}}}]}


def answer(*call_ids: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"functionResponse": {"id": i, "name": "read_file",
                                                           "response": {"output": f"out {i}"}}}
                                      for i in call_ids]}


def test_a_request_without_the_fakes_key_is_refused(gemini: FakeGemini) -> None:
    status, body = post(gemini, STREAM, {"contents": [user("hi")]}, key="AIza-a-real-looking-key")
    assert status == 400 and json.loads(body)["error"]["status"] == "INVALID_ARGUMENT"
    assert gemini.errors and gemini.errors[0].error == "API key not valid"


def test_a_streamed_reply_of_thoughts_text_and_a_call(gemini: FakeGemini) -> None:
    gemini.script = Scenario().add("GO", [Thinking("let me see"), Text("reading it"),
                                          ToolCall("read_file", {"file_path": "/x"})])
    status, raw = post(gemini, STREAM, {"contents": [user("GO now")], "tools": TOOLS})
    assert status == 200
    got = chunks(raw)
    parts = [p for c in got for p in c["candidates"][0]["content"]["parts"]]
    assert "".join(p["text"] for p in parts if p.get("thought")) == "let me see"
    assert "".join(p["text"] for p in parts if "text" in p and not p.get("thought")) == "reading it"
    [fc] = [p["functionCall"] for p in parts if "functionCall" in p]
    assert fc == {"id": "call_fake00000000000000000001", "name": "read_file", "args": {"file_path": "/x"}}
    # Only the last chunk finishes and carries the usage; the counts add up.
    assert [c["candidates"][0].get("finishReason") for c in got][-1] == "STOP"
    assert all("usageMetadata" not in c for c in got[:-1])
    usage = got[-1]["usageMetadata"]
    assert usage["totalTokenCount"] == (usage["promptTokenCount"] + usage["candidatesTokenCount"]
                                        + usage["thoughtsTokenCount"])


def test_the_whole_answer_joins_the_pieces(gemini: FakeGemini) -> None:
    status, raw = post(gemini, WHOLE, {"contents": [user("what is this")]})
    reply = json.loads(raw)
    assert status == 200 and reply["candidates"][0]["content"]["parts"] == [{"text": "ok"}]
    assert reply["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in reply


def test_a_function_response_continues_the_turn_that_called(gemini: FakeGemini) -> None:
    gemini.script = Scenario().add("RUN", Shell("echo hi"), "it ran")
    _, raw = post(gemini, STREAM, {"contents": [user("RUN it")], "tools": TOOLS})
    [fc] = [p["functionCall"] for c in chunks(raw) for p in c["candidates"][0]["content"]["parts"]
            if "functionCall" in p]
    assert fc["name"] == "run_shell_command" and fc["args"]["command"] == "echo hi"
    contents = [user("RUN it"), call(fc["id"], "run_shell_command"), answer(fc["id"])]
    _, raw = post(gemini, STREAM, {"contents": contents, "tools": TOOLS})
    assert "".join(p["text"] for c in chunks(raw) for p in c["candidates"][0]["content"]["parts"]) == "it ran"
    views = gemini.views()
    assert views[-1].tool_results[0].call_id == fc["id"] and views[-1].tool_results[0].text == f"out {fc['id']}"


def test_the_implicit_cache_counts_a_shared_prefix(gemini: FakeGemini) -> None:
    long = "x" * (IMPLICIT_CACHE_MIN_TOKENS * 4 + 400)
    first = {"contents": [user(long), user("one")], "tools": TOOLS}
    second = {"contents": [user(long), user("one"), {"role": "model", "parts": [{"text": "ok"}]},
                           user("two")], "tools": TOOLS}
    usages = [chunks(post(gemini, STREAM, body)[1])[-1]["usageMetadata"] for body in (first, second)]
    assert "cachedContentTokenCount" not in usages[0]
    assert IMPLICIT_CACHE_MIN_TOKENS <= usages[1]["cachedContentTokenCount"] < usages[1]["promptTokenCount"]
    # A short prompt shares too little to be cached.
    short = chunks(post(gemini, STREAM, {"contents": [user("one"), user("two")], "tools": TOOLS})[1])
    assert "cachedContentTokenCount" not in short[-1]["usageMetadata"]


@pytest.mark.parametrize(("contents", "words"), [
    ([], "contents is not specified"),
    ([user("a"), answer("c1")], "function response turn comes immediately after a function call turn"),
    ([user("a"), call("c1"), call("c2")], "function call turn comes immediately after a user turn"),
    ([user("a"), call("c1")], "function call turn comes immediately after a user turn"),
    ([user("a"), call("c1"), answer("c1", "c1")], "number of function response parts is equal"),
    ([user("a"), call("c1"), answer()], "number of function response parts is equal"),
    ([user("a"), call("c1"), answer("c9")], "do not answer the function calls"),
])
def test_what_the_real_api_refuses(gemini: FakeGemini, contents: list[dict[str, Any]], words: str) -> None:
    with pytest.raises(ApiError, match=words):
        check_contents(contents)
    status, body = post(gemini, STREAM, {"contents": contents, "tools": TOOLS})
    error = json.loads(body)["error"]
    assert status == 400 and error["status"] == "INVALID_ARGUMENT" and words in error["message"]
    assert error["errors"][0]["reason"] == "badRequest"


def test_a_well_formed_conversation_passes(gemini: FakeGemini) -> None:
    check_contents([user("a"), call("c1"), answer("c1"), {"role": "model", "parts": [{"text": "b"}]},
                    user("c")])
    status, _ = post(gemini, STREAM, {"contents": [user("a"), call("c1"), answer("c1")], "tools": TOOLS})
    assert status == 200 and not gemini.errors


def test_other_routes(gemini: FakeGemini) -> None:
    status, raw = post(gemini, "/v1beta/models/gemini-2.5-flash:countTokens", {"contents": [user("a")]})
    assert status == 200 and json.loads(raw)["totalTokens"] >= 1
    status, raw = post(gemini, "/v1beta/cachedContents", {})
    assert status == 404 and json.loads(raw)["error"]["status"] == "NOT_FOUND"
