"""Gemini CLI's harness (``liminal.harness.gemini.live``, ``records``) on files Gemini CLI 0.61.0
wrote (``fixtures/gemini/``): chosen for a ``gemini`` agent, where a session is, its context and
turns, its lines as store records, recall keys, the session written back from its lines,
removal."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

import pytest

from liminal.config import GradientSettings
from liminal.gradient.bands import Band
from liminal.gradient.recall import KEY_IN_MARKER, MARKER_PREFIX, RecallError, RecallKey
from liminal.gradient.summarize import PREAMBLE_INTRO
from liminal.gradient.zone import Candidate, is_zone
from liminal.harness.base import HarnessChoice
from liminal.harness.gemini import chatfile, gradient, records
from liminal.harness.gemini.chatfile import ChatFile, text_of, tool_calls
from liminal.harness.gemini.live import GeminiSessions
from liminal.harness.known import (
    conversation_record_types,
    find_session_file,
    harness_of,
    known_harnesses,
    line_parser,
    record_role,
)
from liminal.sessionfiles import RewriteError

SAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "gemini"
TWO_TURNS = SAMPLES / "two-turns-with-a-tool-call.jsonl"
CONTINUED = SAMPLES / "copied-loaded-and-continued.jsonl"
TWO_ID = "7e9a58c1-6c90-4cf8-9768-0c1c28c193d5"
CONTINUED_ID = "44b689d4-0fd2-4832-91b4-b19c34569652"
CALL = "read_file__call_fake00000000000000000001"
CWD = "/work/proj"


def home(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A HOME whose Gemini CLI has the project ``CWD`` (slug ``proj``) with both samples."""
    gemini = tmp_path / ".gemini"
    chats = gemini / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    (gemini / "projects.json").write_text(json.dumps({"projects": {CWD: "proj"}}))
    shutil.copy(TWO_TURNS, chats / f"session-2026-12-07T12-33-{TWO_ID[:8]}.jsonl")
    shutil.copy(CONTINUED, chats / f"session-2000-01-01T00-00-{CONTINUED_ID[:8]}.jsonl")
    return {"HOME": str(tmp_path)}, chats


def harness(env: dict[str, str]) -> GeminiSessions:
    return GeminiSessions(GradientSettings(), env)


def test_a_gemini_agent_chooses_the_gemini_harness() -> None:
    factories = known_harnesses(GradientSettings())
    assert HarnessChoice(factories, argv=["/x/.harness/gemini/node_modules/.bin/gemini", "--acp"]).chosen == "gemini"
    choice = HarnessChoice(factories, argv=["my-agent"])
    assert choice.chosen == "claude"
    choice.agent_said({"name": "gemini-cli", "title": "Gemini CLI", "version": "0.61.0"})
    assert choice.chosen == "gemini" and choice.current.name == "gemini"


def test_where_a_session_is_and_whose_file_it_is(tmp_path: Path) -> None:
    env, chats = home(tmp_path)
    path = chats / f"session-2026-12-07T12-33-{TWO_ID[:8]}.jsonl"
    sessions = harness(env)
    assert sessions.locate(TWO_ID, CWD) == path
    assert sessions.locate(TWO_ID, None) == path
    assert sessions.locate("../../../etc/passwd", CWD) is None
    assert find_session_file(TWO_ID, CWD, env) == path
    assert harness_of(path, env).name == "gemini"
    assert line_parser(path) is records.parse_line
    assert sessions.names(path) == TWO_ID
    renamed = chats / "session-2026-12-07T12-33-00000000.jsonl"
    shutil.copy(path, renamed)
    assert sessions.names(renamed) is None  # the name's id is not the one its headers hold
    assert sessions.names(tmp_path / f"{TWO_ID}.jsonl") is None


def test_context_turns_and_the_turn_end(tmp_path: Path) -> None:
    env, chats = home(tmp_path)
    sessions = harness(env)
    path = chats / f"session-2026-12-07T12-33-{TWO_ID[:8]}.jsonl"
    assert sessions.context_tokens(path) == 12456 + 6
    assert sessions.first_context_tokens(path) == 12444 + 9
    assert sessions.cache_life(path) is None
    assert sessions.turns(path).starts == (1824, 3533) and not sessions.turns(path).earlier
    assert sessions.position(path) == path.stat().st_size
    assert not sessions.turn_settled(path, "hello")  # first look: not yet seen holding still
    assert sessions.turn_settled(path, "hello")
    assert not sessions.turn_settled(path, "something else")
    digests = sessions.digests(path)
    assert [d.prompt for d in digests] == ["READ_NOTES please", "hello"]
    assert digests[0].tools == (("read_file", "/tmp/gemini-sample/project/notes.txt"),)
    assert digests[0].replies == ("the file says zebra-42",) and digests[1].replies == ("pong (n=5)",)
    # After a load, the history is a $set of the whole of it, the same messages under the same
    # ids: each prompt's own line still starts its turn.
    loaded = chats / f"session-2000-01-01T00-00-{CONTINUED_ID[:8]}.jsonl"
    turns = sessions.turns(loaded)
    assert turns.starts == (1848, 3306, 6354) and not turns.earlier
    # A history only a $set holds (its prompts have no line of their own) is earlier conversation.
    data = loaded.read_bytes()
    only_set = loaded.with_name(f"session-2000-01-01T00-01-{CONTINUED_ID[:8]}.jsonl")
    only_set.write_bytes(data[:228] + data[3852:])
    assert sessions.turns(only_set).starts == (6354 - 3852 + 228,) and sessions.turns(only_set).earlier
    with loaded.open("ab") as handle:
        handle.write(json.dumps({"id": "u9", "type": "user", "content": [{"text": "more"}]}).encode() + b"\n")
    sessions.turn_settled(loaded, "more")
    assert not sessions.turn_settled(loaded, "more")  # asked, not answered


def test_every_line_becomes_a_store_record_of_its_kind() -> None:
    data = TWO_TURNS.read_bytes()
    offset, found = 0, []
    for raw in data.split(b"\n")[:-1]:
        record = records.parse_line(raw, TWO_ID, "thread", offset)
        assert record.raw == raw and record.offset == offset and record.backing_id == TWO_ID
        found.append(record)
        offset += len(raw) + 1
    kinds = [r.type for r in found]
    assert kinds == ["gemini:header", "gemini:update", "gemini:header", "gemini:update", "gemini:user",
                     "gemini:update", "gemini:model", "gemini:update", "gemini:model:calls",
                     "gemini:user:responses", "gemini:update", "gemini:model", "gemini:update",
                     "gemini:user", "gemini:update", "gemini:model", "gemini:update"]
    prompt, usage_only, calls, responses = found[4], found[6], found[8], found[9]
    assert prompt.text == "READ_NOTES please" and record_role(prompt.type, prompt.tool_ids) == "you"
    assert usage_only.usage is not None and usage_only.usage["input"] == 12352
    assert calls.tool_ids == (CALL,) and calls.uuid == CALL
    assert "notes.txt" in calls.text and "zebra-42" in calls.text
    assert record_role(calls.type, calls.tool_ids) == "tool call"
    assert responses.tool_ids == (CALL,) and responses.text == "the notes say: zebra-42\n"
    assert record_role(responses.type, responses.tool_ids) == "tool output"
    assert found[15].text == "pong (n=5)" and found[15].usage is not None
    assert {"gemini:user", "gemini:model", "gemini:model:calls"} <= conversation_record_types()
    assert record_role("gemini:header", ()) is None
    broken = records.parse_line(b'{"id": ', TWO_ID, None, 0)
    assert broken.type is None and broken.raw == b'{"id": '


def test_recall_keys_name_a_calls_result_and_its_arguments(tmp_path: Path) -> None:
    env, _chats = home(tmp_path)
    sessions = harness(env)
    assert sessions.recall(RecallKey(TWO_ID, CALL, 0)) == b"the notes say: zebra-42\n"
    assert json.loads(sessions.recall(RecallKey(TWO_ID, CALL, 1)) or b"") == {
        "file_path": "/tmp/gemini-sample/project/notes.txt"}
    assert sessions.recall(RecallKey(TWO_ID, CALL, 1, ("file_path",))) == b"/tmp/gemini-sample/project/notes.txt"
    with pytest.raises(RecallError):
        sessions.recall(RecallKey(TWO_ID, "read_file__nothing", 0))
    assert sessions.recall(RecallKey("00000000-0000-4000-8000-000000000000", CALL, 0)) is None
    # A stored line of a resume's $set of the whole history holds the call too.
    whole = [raw for raw in CONTINUED.read_bytes().split(b"\n") if raw.startswith(b'{"$set":{"messages"')]
    assert any(sessions.recall_in_line(raw, RecallKey(CONTINUED_ID, CALL, 0)) == b"the notes say: zebra-42\n"
               for raw in whole)
    assert sessions.recall_in_line(b'{"id":"x","type":"user","content":"hi"}', RecallKey(TWO_ID, CALL, 0)) is None


def test_a_session_written_back_from_its_lines_resumes_as_it_was(tmp_path: Path) -> None:
    """The stored lines byte for byte, in a file named for no minute a load can be in, then a
    ``$set`` of the messages without the response records the CLI would send twice."""
    env, chats = home(tmp_path)
    sessions = harness(env)
    path = chats / f"session-2026-12-07T12-33-{TWO_ID[:8]}.jsonl"
    data = path.read_bytes()
    messages = ChatFile.read(path).messages()
    path.unlink()
    restored = sessions.restore(TWO_ID, CWD, data.split(b"\n")[:-1])
    assert restored.parent == chats and restored.name.endswith(f"-{TWO_ID[:8]}.jsonl")
    assert not restored.name.startswith(time.strftime("session-%Y-%m-%dT%H-%M", time.gmtime()))
    written = restored.read_bytes()
    assert written.startswith(data) and written.count(b"\n") == data.count(b"\n") + 1
    assert restored.stat().st_mode & 0o777 == 0o600
    assert sessions.locate(TWO_ID, CWD) == restored
    resumed = ChatFile.read(restored).messages()
    assert resumed == [m for m in messages if records.message_type(m) != "gemini:user:responses"]
    with pytest.raises(ValueError):
        sessions.restore("../x", CWD, [])
    # A session the CLI would resume as it was is written back byte for byte, nothing added.
    plain = [raw for raw in data.split(b"\n")[:-1] if b"functionResponse" not in raw or b'"toolCalls"' in raw]
    again = "99999999-0000-4000-8000-000000000000"
    assert sessions.restore(again, CWD, plain).read_bytes() == b"".join(raw + b"\n" for raw in plain)


def test_a_file_is_made_ready_before_a_load(tmp_path: Path) -> None:
    """``prepare_load``: a file the CLI would resume with its responses twice, or beside a
    load's empty recording (for which the CLI's next start deletes every file of the id), is
    written again under a name no file had, its bytes a prefix, then the ``$set`` that resumes
    it as it was; the other files of the id go. A file that needs neither is left alone."""
    env, chats = home(tmp_path)
    sessions = harness(env)
    path = chats / f"session-2026-12-07T12-33-{TWO_ID[:8]}.jsonl"
    data = path.read_bytes()
    messages = ChatFile.read(path).messages()
    empty_load = chats / f"session-2026-12-07T13-00-{TWO_ID[:8]}.jsonl"
    empty_load.write_text(json.dumps({"sessionId": TWO_ID, "projectHash": "ab", "kind": "main"}) + "\n")
    before = {p.name for p in chats.iterdir()}
    sessions.prepare_load(TWO_ID, CWD)
    ready = sessions.locate(TWO_ID, CWD)
    assert ready is not None and ready.name not in before
    assert not path.exists() and not empty_load.exists()
    assert [p for p in chats.iterdir() if p.name.endswith(f"-{TWO_ID[:8]}.jsonl")] == [ready]
    written = ready.read_bytes()
    assert written.startswith(data) and written.count(b"\n") == data.count(b"\n") + 1
    assert ready.stat().st_mode & 0o777 == 0o600
    assert ChatFile.read(ready).messages() == [
        m for m in messages if records.message_type(m) != "gemini:user:responses"]
    sessions.prepare_load(TWO_ID, CWD)  # ready already: left as it is
    assert sessions.locate(TWO_ID, CWD) == ready and ready.read_bytes() == written
    sessions.prepare_load("99999999-0000-4000-8000-000000000000", CWD)  # no file: nothing


def test_a_file_is_made_ready_where_it_is_before_the_cli_starts(tmp_path: Path) -> None:
    """``started=False`` (a fresh process about to start: the recycle): the same ``$set`` appended
    to the file where it is (the process in use may still append to it), the id's other files
    removed before the start lists the folder."""
    env, chats = home(tmp_path)
    sessions = harness(env)
    path = chats / f"session-2026-12-07T12-33-{TWO_ID[:8]}.jsonl"
    data = path.read_bytes()
    empty_load = chats / f"session-2026-12-07T13-00-{TWO_ID[:8]}.jsonl"
    empty_load.write_text(json.dumps({"sessionId": TWO_ID, "projectHash": "ab", "kind": "main"}) + "\n")
    sessions.prepare_load(TWO_ID, CWD, started=False)
    assert sessions.locate(TWO_ID, CWD) == path and not empty_load.exists()
    written = path.read_bytes()
    assert written.startswith(data) and written.count(b"\n") == data.count(b"\n") + 1
    sessions.prepare_load(TWO_ID, CWD, started=False)
    assert path.read_bytes() == written


def test_removal_takes_every_file_of_the_session_and_only_them(tmp_path: Path) -> None:
    env, chats = home(tmp_path)
    sessions = harness(env)
    empty_load = chats / f"session-2026-12-07T13-00-{TWO_ID[:8]}.jsonl"
    empty_load.write_text(json.dumps({"sessionId": TWO_ID, "projectHash": "ab", "kind": "main"}) + "\n")
    (chats / TWO_ID).mkdir()  # its subagents'
    gone = sessions.remove(TWO_ID, CWD)
    assert len(gone) == 3 and not empty_load.exists() and not (chats / TWO_ID).exists()
    assert sessions.locate(TWO_ID, CWD) is None
    assert sessions.locate(CONTINUED_ID, CWD) is not None
    assert sessions.remove("../../x", CWD) == []


def long_session(chats: Path, session: str, turns: int = 12, output_chars: int = 4000) -> Path:
    """A session of ``turns`` turns, each a prompt, a ``read_file`` call with a long result
    (its usage record, its calls record, the user record of its response, as 0.61.0 writes
    them) and an answer. As 0.61.0 does, each turn's calls record is the first one's again,
    its id and every call so far."""
    lines: list[dict[str, object]] = [
        {"sessionId": session, "projectHash": "ab" * 32, "startTime": "2026-12-07T12:00:00.000Z",
         "lastUpdated": "2026-12-07T12:00:00.000Z", "kind": "main"},
        {"$set": {"messages": [{"id": "ctx", "timestamp": "t", "type": "user",
                                "content": [{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}]}]}}]
    used = 12_000
    so_far: list[dict[str, object]] = []
    for n in range(turns):
        call = f"read_file__call_{n:04d}"
        result = [{"functionResponse": {"id": call, "name": "read_file",
                                        "response": {"output": f"file {n} line\n" * (output_chars // 12)}}}]
        used += 2 * output_chars // 4
        lines += [
            {"id": f"p{n}", "timestamp": "t", "type": "user", "content": [{"text": f"prompt {n}: read file {n}"}]},
            {"id": f"u{n}", "timestamp": "t", "type": "gemini", "content": "", "thoughts": [],
             "tokens": {"input": used, "output": 10, "cached": 0}},
            {"id": "calls", "timestamp": "t", "type": "gemini", "content": "", "thoughts": [{"subject": "s", "description": "d"}],
             "toolCalls": (so_far := [*so_far, {"id": call, "name": "read_file", "args": {"file_path": f"/p/file{n}.txt"},
                                                "result": result, "status": "success"}])},
            {"id": f"r{n}", "timestamp": "t", "type": "user", "content": result},
            {"id": f"a{n}", "timestamp": "t", "type": "gemini", "content": f"answer {n}: the file is read",
             "thoughts": [], "tokens": {"input": used + 5, "output": 8, "cached": used - 100}},
        ]
    path = chats / f"session-2026-12-07T12-00-{session[:8]}.jsonl"
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    return path


def test_a_rewrite_keeps_recent_turns_whole_cuts_older_output_with_keys_and_summarises_the_oldest(
        tmp_path: Path) -> None:
    env, chats = home(tmp_path)
    sessions = harness(env)
    original = "11111111-2222-4333-8444-555555555555"
    path = long_session(chats, original)
    before = path.read_bytes()
    new_id = "66666666-7777-4888-8999-000000000000"
    target = sessions.target_path(path, new_id)
    assert target.parent == chats and target.name.endswith(f"-{new_id[:8]}.jsonl")
    assert not target.name.startswith(time.strftime("session-%Y-%m-%dT%H-%M", time.gmtime()))  # not this minute
    done = sessions.rewrite(path, 25_000, new_id, recent_tokens=3_000)
    assert done.path == target and path.read_bytes() == before  # the original untouched
    assert done.tokens_after < done.tokens_before and done.tokens_before == 12_000 + 12 * 2000 + 5 + 8
    assert target.stat().st_mode & 0o777 == 0o600

    chat = ChatFile.read(target)
    assert chat.session_id == new_id and chatfile.find(new_id, CWD, env) == target
    messages = chat.messages()
    # No user record of function responses (the CLI would send each twice), no usage.
    assert not [m for m in messages if records.message_type(m) == "gemini:user:responses"]
    assert not [m for m in messages if "tokens" in m] and sessions.context_tokens(target) is None
    prompts = [text_of(m["content"]) for m in messages if records.message_type(m) == "gemini:user"]
    assert prompts[-1] == "prompt 11: read file 11" and "prompt 0: read file 0" not in prompts
    # Each call in its own turn (the CLI's reader would put them all in the first), once.
    assert [len(tool_calls(m)) for m in messages if tool_calls(m)] == [1] * len([m for m in messages if tool_calls(m)])
    assert len({m["id"] for m in messages}) == len(messages)
    last_turn = messages[[n for n, m in enumerate(messages) if records.message_type(m) == "gemini:user"][-1]:]
    assert [c["id"] for m in last_turn for c in tool_calls(m)] == ["read_file__call_0011"]
    # The last turn whole; an older one's result cut to a head and a key that recalls it whole.
    calls = {c["id"]: c for m in messages for c in tool_calls(m)}
    last = "read_file__call_0011"
    assert calls[last]["result"][0]["functionResponse"]["response"]["output"] == "file 11 line\n" * 333
    cut = [c for c in calls.values() if MARKER_PREFIX in json.dumps(c["result"])]
    assert cut
    text = cut[0]["result"][0]["functionResponse"]["response"]["output"]
    key = RecallKey.parse(KEY_IN_MARKER.search(text).group(1))  # type: ignore[union-attr]
    assert key.session_id == original and key.uuid == cut[0]["id"] and key.block == 0
    n = int(key.uuid[-4:])
    assert sessions.recall(key) == (f"file {n} line\n" * 333).encode()
    # The oldest turns summarised in the context message, the first content the model is sent.
    assert [records.message_type(m) for m in messages[:3]] == ["gemini:user:context", "gemini:user:summary", "gemini:user"]
    assert text_of(messages[1]["content"]).startswith(PREAMBLE_INTRO) and "prompt 0" in text_of(messages[1]["content"])
    assert sessions.turns(target).earlier
    bands = sessions.bands(path, 25_000, recent_tokens=3_000)
    assert all(bands[band]["turns"] for band in ("recent", "middle", "old", "ancient")), bands
    assert sum(b["turns"] for b in bands.values()) == 12
    assert next(d.prompt for d in sessions.ancient(path, 25_000, recent_tokens=3_000)) == "prompt 0: read file 0"

    # Rewritten again: the first key stays, the earlier summary is carried, one summary part.
    again_id = "77777777-7777-4888-8999-000000000000"
    again = sessions.rewrite(target, 0, again_id, recent_tokens=3_000, scratchpad="notes to self")
    summaries = [m for m in ChatFile.read(again.path).messages() if records.message_type(m) == "gemini:user:summary"]
    assert len(summaries) == 1 and "notes to self" in text_of(summaries[0]["content"])
    assert str(key) in again.path.read_text() or not [
        c for m in ChatFile.read(again.path).messages() for c in tool_calls(m) if c["id"] == key.uuid]
    sessions.discard(again)
    assert not again.path.exists()


def test_a_rewrite_places_a_dynamic_zone_before_the_recent_band(tmp_path: Path) -> None:
    """Memos and the passages the rewrite cuts, matched against the recent turns' words, as a
    ``user`` message of their own just before the recent band's first prompt (the CLI sends it
    with that prompt); no prompt to liminal's readers; a later rewrite chooses its own."""
    env, chats = home(tmp_path)
    sessions = harness(env)
    path = long_session(chats, "11111111-2222-4333-8444-555555555555")
    memo = Candidate("memo-1", "memo", "the file is read with care: line by line", 0)
    other = Candidate("memo-2", "memo", "deploys need the VPN", 1)
    done = sessions.rewrite(path, 25_000, "66666666-7777-4888-8999-000000000000", recent_tokens=3_000,
                            memos=[memo, other])
    assert done.zone and done.zone[0].key == "memo-1" and "memo-2" not in [p.key for p in done.zone]
    # A cut passage matching the recent words is a candidate too: its key recalls it whole.
    session = gradient.Session.read(path)
    bands = [Band.OLD] * 11 + [Band.RECENT]
    passages = [p for p in gradient.choose_zone(session, bands, [], 1_000) if p.kind == "passage"]
    assert not passages  # "file 10 line" shares one word with the recent turn: too few
    lines = session.turns[-1][0]["content"][0]["text"] + " line"
    session = dataclasses.replace(session, turns=(*session.turns[:-1], (
        {**session.turns[-1][0], "content": [{"text": lines}]}, *session.turns[-1][1:])))
    [best, *_] = [p for p in gradient.choose_zone(session, bands, [], 1_000) if p.kind == "passage"]
    assert sessions.recall(RecallKey.parse(best.key)) is not None
    messages = ChatFile.read(done.path).messages()
    kinds = [records.message_type(m) for m in messages]
    at = kinds.index("gemini:user:zone")
    assert kinds[at + 1] == "gemini:user" and is_zone(text_of(messages[at]["content"]))
    recent_first = text_of(messages[at + 1]["content"])
    assert recent_first == "prompt " + recent_first.split()[1] + " read file " + recent_first.split()[1].rstrip(":")
    assert len(sessions.turns(done.path).starts) == kinds.count("gemini:user")  # the zone starts no turn
    again = sessions.rewrite(done.path, 0, "77777777-7777-4888-8999-000000000000", recent_tokens=3_000)
    assert "gemini:user:zone" not in [records.message_type(m) for m in ChatFile.read(again.path).messages()]


def test_cuts_for_undo_clear_and_fork(tmp_path: Path) -> None:
    env, chats = home(tmp_path)
    sessions = harness(env)
    path = chats / f"session-2026-12-07T12-33-{TWO_ID[:8]}.jsonl"
    first, second = sessions.turns(path).starts
    # /undo: everything before the last turn.
    undo_id = "88888881-0000-4000-8000-000000000000"
    undone = sessions.cut([(path, 0, second)], path, undo_id, keeps_thread=True)
    said = ChatFile.read(undone.path).messages()
    assert ChatFile.read(undone.path).session_id == undo_id and chatfile.find(undo_id, CWD, env) == undone.path
    assert [records.message_type(m) for m in said] == ["gemini:user:context", "gemini:user", "gemini:model:calls",
                                                       "gemini:model"]
    assert undone.tokens_after < undone.tokens_before == 12456 + 6
    # /fork from the second turn: the file's head (its context), then that turn.
    fork_id = "88888882-0000-4000-8000-000000000000"
    forked = ChatFile.read(sessions.cut([(path, second, None)], path, fork_id).path).messages()
    assert [text_of(m["content"]) for m in forked][1:] == ["hello", "pong (n=5)"]
    assert records.message_type(forked[0]) == "gemini:user:context"
    # A cut of a session a resume wrote back (its history a $set with the response records).
    loaded = chats / f"session-2000-01-01T00-00-{CONTINUED_ID[:8]}.jsonl"
    last = sessions.turns(loaded).starts[-1]
    cut = ChatFile.read(sessions.cut([(loaded, 0, last)], loaded, "88888883-0000-4000-8000-000000000000").path)
    assert [records.message_type(m) for m in cut.messages()].count("gemini:user:responses") == 0
    assert [text_of(m["content"]) for m in cut.messages() if records.message_type(m) == "gemini:user"] == [
        "READ_NOTES please", "hello"]
    with pytest.raises(RewriteError):
        sessions.cut([], path, "88888884-0000-4000-8000-000000000000")
    with pytest.raises(RewriteError):
        sessions.cut([(path, 0, first)], path, "88888885-0000-4000-8000-000000000000")  # no turn in it


def test_the_models_summaries_are_off_for_gemini(tmp_path: Path) -> None:
    """Each side session would be a Gemini CLI process of its own, whose start deletes the files
    of the sessions loaded in the project, the live thread's among them (docs/facts.md)."""
    from liminal.config import SwapSettings
    from liminal.kernel.policy import CostPolicy

    env, _ = home(tmp_path)
    sessions = harness(env)
    assert sessions.side_sessions is False
    assert not CostPolicy.of(SwapSettings(summaries=True), GradientSettings(), sessions).summaries


def test_inspect_and_compress_read_a_gemini_session(tmp_path: Path) -> None:
    """``liminal inspect`` and ``liminal compress`` on a Gemini CLI session file (detected by its
    first line, whatever its name): what it holds, and a compressed copy beside it, 0600."""
    from liminal.harness.gemini import report

    _, chats = home(tmp_path)
    path = long_session(chats, "11111111-2222-4333-8444-555555555555")
    assert report.detect(str(path)) == path
    assert report.detect(str(TWO_TURNS)) == TWO_TURNS
    claude_line = tmp_path / "claude.jsonl"
    claude_line.write_text(json.dumps({"type": "user", "sessionId": "x", "message": {}}) + "\n")
    assert report.detect(str(claude_line)) is None
    data = report.inspect(path, GradientSettings(target_tokens=25_000))
    assert (data["harness"], data["turns"], data["tool_calls"], data["context_tokens"]) == ("gemini", 12, 12, 36_013)
    assert not data["resumes_as_written"] and data["name_matches_id"]
    assert "Gemini CLI" in report.table(data)
    done = report.compress(path, GradientSettings(target_tokens=25_000), None, dry_run=False)
    written = Path(done["path"])
    assert done["tokens_after"] < done["tokens_before"] and written.parent == chats
    assert written.stat().st_mode & 0o777 == 0o600 and ChatFile.read(written).session_id == done["new_session_id"]


def test_the_cost_policy_prices_gemini_at_its_implicit_caches_rules(tmp_path: Path) -> None:
    """Hits at a tenth of an input token, the tokens that fill the cache at an input token's
    price (no write premium, no storage), output at 8: not Anthropic's 1.25 for a write."""
    from liminal.config import SwapSettings
    from liminal.kernel.policy import CostPolicy

    env, _ = home(tmp_path)
    prices = CostPolicy.of(SwapSettings(), GradientSettings(), harness(env)).prices
    assert (prices.read, prices.write, prices.output) == (0.10, 1.0, 8.0)
    assert prices.input(20_000, 12_000) == pytest.approx(0.10 * 12_000 + 8_000)
