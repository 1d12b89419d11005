"""Gemini CLI's session files read as the CLI reads them (``liminal.harness.gemini.chatfile``), on
files Gemini CLI 0.61.0 wrote (``fixtures/gemini/``) and on what it may write: lossless, the
messages after ``$set``, re-appended messages and rewinds, usage, the turn end, the file the CLI
resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from liminal.harness.gemini.chatfile import (
    ChatFile,
    context_size,
    find,
    has_resumable_content,
    is_function_responses,
    last_usage,
    session_files,
    tool_calls,
    turn_ended,
)

SAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "gemini"
TWO_TURNS = SAMPLES / "two-turns-with-a-tool-call.jsonl"
CONTINUED = SAMPLES / "copied-loaded-and-continued.jsonl"
SESSION = "7e9a58c1-0000-4000-8000-000000000000"


def lines(*objs: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(o, separators=(",", ":")).encode() + b"\n" for o in objs)


def header(session: str = SESSION, **more: Any) -> dict[str, Any]:
    return {"sessionId": session, "projectHash": "ab" * 32, "startTime": "2026-12-07T12:00:00.000Z",
            "lastUpdated": "2026-12-07T12:00:00.000Z", "kind": "main", **more}


def message(mid: str, kind: str, content: Any, **more: Any) -> dict[str, Any]:
    return {"id": mid, "timestamp": "2026-12-07T12:00:01.000Z", "type": kind, "content": content, **more}


CONTEXT = message("ctx", "user", [{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}])


def test_a_file_the_cli_wrote_reads_back_byte_for_byte() -> None:
    for sample in (TWO_TURNS, CONTINUED):
        data = sample.read_bytes()
        assert ChatFile.parse(data).to_bytes() == data
        assert ChatFile.read(sample).to_bytes() == data


def test_the_conversation_of_two_turns_with_a_tool_call() -> None:
    chat = ChatFile.read(TWO_TURNS)
    assert chat.session_id is not None and chat.session_id.startswith("7e9a58c1")
    assert {line.kind for line in chat.lines} == {"header", "update", "message"}
    said = chat.messages()
    assert [m["type"] for m in said] == ["user", "user", "gemini", "gemini", "user", "gemini", "user", "gemini"]
    assert said[0]["content"][0]["text"].startswith("<session_context>")
    [call] = tool_calls(said[3])
    assert call["name"] == "read_file" and call["id"] == "read_file__call_fake00000000000000000001"
    assert is_function_responses(said[4]) and not is_function_responses(said[1])
    assert said[-1]["content"] == "pong (n=5)"
    assert last_usage(said) == {"input": 12456, "output": 6, "cached": 12387, "thoughts": 0, "tool": 0,
                                "total": 12462}
    assert context_size(said) == 12456 + 6
    assert turn_ended(said) and has_resumable_content(said)


def test_a_load_sets_the_whole_history_and_the_turn_after_it_follows() -> None:
    said = ChatFile.read(CONTINUED).messages()
    # The copy left out the user records of function responses and the usage-only record; the
    # resume's $set of the whole history has the responses again, under the call's message id
    # with "_response", and no usage-only record.
    [responses] = [m for m in said if is_function_responses(m)]
    [call] = [m for m in said if tool_calls(m)]
    assert responses["id"] == call["id"] + "_response"
    assert [m["type"] for m in said] == ["user", "user", "gemini", "user", "gemini", "user", "gemini",
                                         "user", "gemini"]
    assert [m["type"] for m in said][-2:] == ["user", "gemini"]
    assert said[-1]["content"] == "pong (n=7)" and context_size(said) == 12481 + 6


def test_where_the_turn_stands() -> None:
    prompt = message("u1", "user", [{"text": "READ_NOTES please"}])
    usage_only = message("g1", "gemini", "", thoughts=[], tokens={"input": 10, "output": 2})
    calls = message("g2", "gemini", "", toolCalls=[{"id": "read_file__c1", "name": "read_file"}])
    responses = message("u2", "user", [{"functionResponse": {"id": "read_file__c1", "name": "read_file",
                                                             "response": {"output": "x"}}}])
    answer = message("g3", "gemini", "done", tokens={"input": 20, "output": 1})
    steps = [CONTEXT, prompt, usage_only, calls, responses, answer]
    ended = [turn_ended(steps[:n]) for n in range(len(steps) + 1)]
    assert ended == [False, False, False, False, False, False, True]
    assert context_size(steps) == 21 and context_size(steps[:2]) is None


def test_set_messages_replaces_a_message_again_replaces_it_and_a_rewind_cuts() -> None:
    a, b, c = (message(i, "user", [{"text": i}]) for i in "abc")
    chat = ChatFile.parse(lines(
        header(), {"$set": {"messages": [CONTEXT]}}, a, b,
        {**b, "content": [{"text": "b, edited"}]},  # appended again under its id: replaces in place
        c, {"$rewindTo": "b"},
    ))
    assert [m["id"] for m in chat.messages()] == ["ctx", "a"]
    chat = ChatFile.parse(lines(header(), a, b, {**b, "content": [{"text": "b2"}]}, c))
    assert [m["content"][0]["text"] for m in chat.messages()] == ["a", "b2", "c"]
    # A $set of the messages starts the list again; an unknown rewind id empties it.
    assert [m["id"] for m in ChatFile.parse(lines(header(), a, {"$set": {"messages": [c]}})).messages()] == ["c"]
    assert ChatFile.parse(lines(header(), a, b, {"$rewindTo": "zz"})).messages() == []
    # Headers and updates merge into the metadata; the last says.
    meta = ChatFile.parse(lines(header(), {"$set": {"lastUpdated": "later", "summary": "s"}})).metadata()
    assert meta["lastUpdated"] == "later" and meta["summary"] == "s" and "messages" not in meta


def test_lines_the_cli_would_skip_are_kept() -> None:
    data = b'{"sessionId":"x"\nnot json\n[1,2]\n{"other":1}\n' + lines(header()) + b'{"id":"m","type":"user"}'
    chat = ChatFile.parse(data)
    assert [line.kind for line in chat.lines] == ["other", "other", "other", "other", "header", "message"]
    assert chat.to_bytes() == data and not chat.ends_with_newline
    # A lone surrogate, as JSON.stringify writes one, still reads.
    odd = b'{"id":"m","type":"user","content":[{"text":"\\ud800"}]}\n'
    assert ChatFile.parse(odd).lines[0].kind == "message"


@given(st.binary(max_size=400))
def test_any_bytes_read_back_as_they_were(data: bytes) -> None:
    chat = ChatFile.parse(data)
    assert chat.to_bytes() == data
    chat.messages()
    chat.metadata()


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from(["id", "type", "content", "$set", "$rewindTo",
                                                              "messages", "sessionId", "projectHash",
                                                              "tokens", "toolCalls", "text"]), inner,
                                             max_size=4),
                           max_leaves=12)


@given(st.lists(json_values, max_size=8))
def test_any_json_lines_are_read_without_an_error(objs: list[Any]) -> None:
    data = b"".join(json.dumps(o).encode() + b"\n" for o in objs)
    chat = ChatFile.parse(data)
    assert chat.to_bytes() == data
    said = chat.messages()
    turn_ended(said)
    context_size(said)
    has_resumable_content(said)


def project(home: Path, slug: str, cwd: str = "/work/proj") -> Path:
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "projects.json").write_text(json.dumps({"projects": {cwd: slug}}))
    chats = home / ".gemini" / "tmp" / slug / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    return chats


def test_find_takes_the_file_the_cli_would_resume(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    chats = project(tmp_path, "proj")
    whole = chats / f"session-2026-12-07T12-00-{SESSION[:8]}.jsonl"
    whole.write_bytes(lines(header(), {"$set": {"messages": [CONTEXT]}},
                            message("u", "user", [{"text": "hi"}]), message("g", "gemini", "hello")))
    # A later recording of the same id holding only the context (what a load leaves in a new
    # minute): nothing to resume, passed over.
    later = chats / f"session-2026-12-07T12-05-{SESSION[:8]}.jsonl"
    later.write_bytes(lines(header(lastUpdated="2026-12-07T12:05:00.000Z"), {"$set": {"messages": [CONTEXT]}}))
    # Another session whose id starts alike.
    (chats / f"session-2026-12-07T12-06-{SESSION[:8]}.jsonl").write_bytes(
        lines(header("7e9a58c1-1111-4111-8111-111111111111"), message("u", "user", [{"text": "x"}])))
    assert len(session_files(SESSION, "/work/proj", env)) == 3
    assert find(SESSION, "/work/proj", env) == whole
    assert find(SESSION, None, env) == whole  # every project's chats when the cwd is not known
    assert find("../../etc/passwd", "/work/proj", env) is None
    assert find(SESSION, "/elsewhere", env) == whole


def test_a_slug_that_is_no_slug_never_becomes_a_path(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    project(tmp_path, "proj")
    (tmp_path / ".gemini" / "projects.json").write_text(json.dumps({"projects": {"/work/proj": "../.."}}))
    assert session_files(SESSION, "/work/proj", env) == []  # not registered: every project's, none here
    (tmp_path / ".gemini" / "projects.json").write_text("not json")
    assert find(SESSION, "/work/proj", env) is None
