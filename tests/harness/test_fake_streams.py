"""The fake model servers' streams as the real APIs write them (one event a chunk, pings), the
failures a test scripts (``fail``: HTTP errors, an error event mid-stream, a cut), and their
prompt caches expiring by the servers' clock."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from fixtures.harness import (
    OVERLOADED,
    SERVER_ERROR,
    FakeAnthropic,
    FakeGemini,
    FakeResponses,
    Fault,
    Scenario,
    Shell,
    Text,
    Thinking,
    cut,
)
from fixtures.harness.gemini import FAKE_GEMINI_KEY
from fixtures.harness.httpserver import FakeServer
from tests.harness.test_fake_servers import TOOLS, conversation, post, sse_events


@pytest.fixture
def anthropic(fake_anthropic: FakeAnthropic) -> FakeAnthropic:
    return fake_anthropic


@pytest.fixture
def responses(fake_responses: FakeResponses) -> FakeResponses:
    return fake_responses


def raw_exchange(server: FakeServer, path: str, body: dict[str, Any],
                 extra: bytes = b"") -> tuple[bytes, list[bytes], bool]:
    """POST over a plain socket (``extra``: more header lines): (the head, the body's chunks as
    the server framed them, whether the stream ended with its last chunk rather than a dropped
    connection)."""
    payload = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST %s HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\n%s"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                     % (path.encode(), extra, len(payload), payload))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), None)
    if length is not None:  # not chunked: whole or cut short
        return head, [rest], len(rest) == length
    chunks: list[bytes] = []
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return head, chunks, True
        if len(rest) < size + 2:
            break
        chunks.append(rest[:size])
        rest = rest[size + 2:]
    return head, chunks, False


def text_of_stream(raw: bytes) -> str:
    return "".join(d["delta"].get("text", "") for n, d in sse_events(raw) if n == "content_block_delta")


def stream_body(text: str = "go") -> dict[str, Any]:
    return {"stream": True, "model": "m", "tools": TOOLS, "messages": [{"role": "user", "content": text}]}


def test_anthropic_streams_one_event_a_chunk_with_pings(anthropic: FakeAnthropic) -> None:
    anthropic.script = Scenario().add("go", [Thinking("hmm"), Text("sure"), Shell("ls")])
    head, chunks, finished = raw_exchange(anthropic, "/v1/messages", stream_body())
    assert finished and b"Transfer-Encoding: chunked" in head and b"Content-Length" not in head
    events = [sse_events(chunk) for chunk in chunks]
    assert all(len(one) == 1 for one in events), "each event is written (and flushed) on its own"
    names = [one[0][0] for one in events]
    assert names[:2] == ["message_start", "ping"]  # as the API sends it
    # A ping between blocks, none inside one.
    assert [n for n in names if n in ("ping", "content_block_start")] == [
        "ping", "content_block_start", "ping", "content_block_start", "ping", "content_block_start"]
    assert names[-2:] == ["message_delta", "message_stop"]


def test_anthropic_overloaded_then_answered(anthropic: FakeAnthropic) -> None:
    anthropic.script = Scenario().add("go", "answered")
    anthropic.fail(OVERLOADED)
    side = {"model": "m", "messages": [{"role": "user", "content": "a title"}]}
    assert post(anthropic.base_url + "/v1/messages", side)[0] == 200  # no tools: not the loop's
    status, raw = post(anthropic.base_url + "/v1/messages", stream_body())
    assert status == 529
    error = json.loads(raw)
    assert error["type"] == "error" and error["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert error["request_id"].startswith("req_fake")
    status, raw = post(anthropic.base_url + "/v1/messages", stream_body())
    assert status == 200 and text_of_stream(raw) == "answered"
    assert [r.status for r in anthropic.faulted] == [529]
    assert anthropic.errors == []  # a fault is no refusal: the conversation was fine


def test_anthropic_errors_by_status_say_to_retry(anthropic: FakeAnthropic) -> None:
    anthropic.fail(SERVER_ERROR, Fault(status=429, headers=(("retry-after", "0"),)))
    head, _, _ = raw_exchange(anthropic, "/v1/messages", stream_body())
    assert head.startswith(b"HTTP/1.1 500") and b"x-should-retry: true" in head
    status, raw = post(anthropic.base_url + "/v1/messages", stream_body())
    assert status == 429 and json.loads(raw)["error"]["type"] == "rate_limit_error"


def test_anthropic_overloaded_mid_stream_is_an_error_event(anthropic: FakeAnthropic) -> None:
    anthropic.script = Scenario().add("go", "a long answer")
    anthropic.fail(Fault(status=529, after=3))
    _, chunks, finished = raw_exchange(anthropic, "/v1/messages", stream_body())
    assert finished
    events = [sse_events(chunk)[0] for chunk in chunks]
    assert [name for name, _ in events] == ["message_start", "ping", "content_block_start", "error"]
    assert events[-1][1]["error"] == {"type": "overloaded_error", "message": "Overloaded"}


def test_anthropic_stream_cut_mid_answer(anthropic: FakeAnthropic) -> None:
    anthropic.script = Scenario().add("go", "a long answer")
    anthropic.fail(cut(after=4))
    _, chunks, finished = raw_exchange(anthropic, "/v1/messages", stream_body())
    assert not finished and len(chunks) == 4  # the connection dropped, no message_stop
    # Not streamed: half a body, then nothing.
    anthropic.fail(cut())
    _, chunks, finished = raw_exchange(anthropic, "/v1/messages", {**stream_body(), "stream": False})
    assert not finished
    head, _, _ = raw_exchange(anthropic, "/v1/messages", stream_body())  # the next is answered
    assert head.startswith(b"HTTP/1.1 200")
    assert len(anthropic.faulted) == 2


def test_anthropic_cache_expires_by_the_servers_clock(anthropic: FakeAnthropic) -> None:
    """A prefix lives 5 minutes (or its mark's hour) from its last use by the server's clock:
    read before that, written again whole after."""
    def usage(body: dict[str, Any]) -> dict[str, Any]:
        return json.loads(post(anthropic.base_url + "/v1/messages", body)[1])["usage"]

    first = usage(conversation(0))
    assert anthropic.advance_clock(299) == 299
    warm = usage(conversation(1))
    assert warm["cache_read_input_tokens"] == first["cache_creation_input_tokens"] > 0
    anthropic.advance_clock(299)  # 598 s from the first, 299 from the read that refreshed it
    assert usage(conversation(2))["cache_read_input_tokens"] > 0
    anthropic.advance_clock(301)
    cold = usage(conversation(3))
    assert cold["cache_read_input_tokens"] == 0
    assert cold["cache_creation_input_tokens"] + cold["input_tokens"] == len(anthropic.requests[-1].raw) // 4
    # The hour's marks outlive five minutes, not the hour; the control endpoint moves the clock.
    usage(conversation(0, "1h"))
    status, raw = post(anthropic.base_url + "/_fake/clock", {"advance": 301})
    assert status == 200 and json.loads(raw) == {"now": 598 + 301 + 301}
    assert usage(conversation(1, "1h"))["cache_read_input_tokens"] > 0
    anthropic.advance_clock(3601)
    assert usage(conversation(2, "1h"))["cache_read_input_tokens"] == 0
    with pytest.raises(ValueError, match="does not go back"):
        anthropic.advance_clock(-1)


def responses_body(turns: int, *, stream: bool = False, **extra: Any) -> dict[str, Any]:
    """A Codex-like request: long instructions and tools, the conversation so far."""
    items: list[dict[str, Any]] = []
    for n in range(turns + 1):
        items.append({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"question {n} " * 100}]})
        if n < turns:
            items.append({"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": f"answer {n} " * 100}]})
    return {"model": "gpt-fake", "stream": stream, "instructions": "You are Codex. " * 400,
            "tools": [{"type": "function", "name": "shell_command"}], "input": items, **extra}


def cached_tokens(responses: FakeResponses, body: dict[str, Any]) -> tuple[int, int]:
    usage = json.loads(post(responses.base_url + "/v1/responses", body)[1])["usage"]
    return usage["input_tokens_details"]["cached_tokens"], usage["input_tokens"]


def test_responses_report_the_cached_prefix(responses: FakeResponses) -> None:
    first, _ = cached_tokens(responses, responses_body(0))
    assert first == 0
    second, total = cached_tokens(responses, responses_body(1))
    # The instructions, the tools and the first question, in steps of 128 tokens.
    assert 1024 <= second < total and second % 128 == 0
    # A prompt under 1,024 tokens is never cached; no tools (a side request): left out.
    short = {"model": "m", "tools": [{"type": "function", "name": "x"}], "input": "hi"}
    assert cached_tokens(responses, short)[0] == cached_tokens(responses, short)[0] == 0
    side = responses_body(2)
    del side["tools"]
    assert cached_tokens(responses, side)[0] == 0


def test_responses_cache_expires_unless_kept_a_day(responses: FakeResponses) -> None:
    cached_tokens(responses, responses_body(0))
    responses.advance_clock(301)
    assert cached_tokens(responses, responses_body(1))[0] == 0  # expired: written again
    assert cached_tokens(responses, responses_body(2))[0] > 0
    cached_tokens(responses, responses_body(0, prompt_cache_retention="24h"))
    responses.advance_clock(3600)
    assert cached_tokens(responses, responses_body(1, prompt_cache_retention="24h"))[0] > 0


def test_responses_stream_one_event_a_chunk_and_failures(responses: FakeResponses) -> None:
    responses.script = Scenario().add("question", "the answer")
    head, chunks, finished = raw_exchange(responses, "/v1/responses", responses_body(0, stream=True))
    assert finished and b"Transfer-Encoding: chunked" in head
    events = [sse_events(chunk) for chunk in chunks]
    assert all(len(one) == 1 for one in events)
    assert [one[0][1]["sequence_number"] for one in events] == list(range(len(events)))
    responses.fail(SERVER_ERROR, Fault(status=500, after=2), cut(after=2))
    status, raw = post(responses.base_url + "/v1/responses", responses_body(0, stream=True))
    assert status == 500 and json.loads(raw)["error"]["type"] == "server_error"
    _, chunks, finished = raw_exchange(responses, "/v1/responses", responses_body(0, stream=True))
    failed = [sse_events(chunk)[0] for chunk in chunks]
    assert finished and [n for n, _ in failed] == ["response.created", "response.output_item.added",
                                                   "response.failed"]
    assert failed[-1][1]["response"]["error"]["code"] == "server_error"
    _, chunks, finished = raw_exchange(responses, "/v1/responses", responses_body(0, stream=True))
    assert not finished and len(chunks) == 2
    assert [r.fault for r in responses.faulted] == [SERVER_ERROR, Fault(status=500, after=2), cut(after=2)]


def test_gemini_streams_one_chunk_a_write(fake_gemini: FakeGemini) -> None:
    fake_gemini.script = Scenario().add("go", [Thinking("hmm"), Text("sure")])
    body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "read_file"}]}]}
    head, chunks, finished = raw_exchange(
        fake_gemini, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body,
        f"x-goog-api-key: {FAKE_GEMINI_KEY}\r\n".encode())
    assert finished and b"Transfer-Encoding: chunked" in head, head
    assert len(chunks) > 1 and all(c.startswith(b"data: ") and c.count(b"data: ") == 1 for c in chunks)


def test_gemini_fails_as_the_api_does_and_cuts_a_stream(fake_gemini: FakeGemini) -> None:
    """429, 500 and 503 in Google's error shape (the 429 a per-minute quota with a retry delay),
    a stream cut after its first chunk; a request without tools (a side request) is not
    counted."""
    fake_gemini.script = Scenario().add("go", Text("sure thing"))
    stream = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    key = f"x-goog-api-key: {FAKE_GEMINI_KEY}\r\n".encode()
    body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "read_file"}]}]}
    faults = [Fault(status=429), SERVER_ERROR, Fault(status=503), cut(after=1)]
    fake_gemini.fail(*faults)
    head, _, finished = raw_exchange(fake_gemini, stream, {"contents": body["contents"]}, key)
    assert head.startswith(b"HTTP/1.1 200") and finished, head
    for status, kind in [(429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"), (503, "UNAVAILABLE")]:
        head, [raw], _ = raw_exchange(fake_gemini, stream, body, key)
        error = json.loads(raw)["error"]
        assert head.startswith(b"HTTP/1.1 %d" % status) and (error["code"], error["status"]) == (status, kind)
        if status == 429:
            assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"} in error["details"]
    _, chunks, finished = raw_exchange(fake_gemini, stream, body, key)
    assert not finished and len(chunks) == 1 and b'"sure' in chunks[0], chunks
    _, chunks, finished = raw_exchange(fake_gemini, stream, body, key)
    assert finished and len(chunks) == 2
    assert [r.fault for r in fake_gemini.faulted] == faults
    with pytest.raises(NotImplementedError, match="no error inside a stream"):
        fake_gemini.fail(Fault(status=500, after=1))
