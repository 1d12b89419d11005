"""The transcript model: lossless reading and the conversation as Claude Code builds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from liminal.harness.claude.conversation import build
from liminal.harness.claude.paths import SessionNotFound, encode_cwd, locate
from liminal.harness.claude.records import SessionFormatError, read_session
from liminal.harness.claude.tokens import calibrate, context_size, estimate
from tests.transcript import SID, Transcript


def session(t: Transcript, tmp_path: Path, tail: bytes = b"") -> object:
    return read_session(locate(t.write(tmp_path, tail=tail)))


def test_encode_cwd_replaces_every_unsafe_character() -> None:
    assert encode_cwd("/home/a.b/my_proj x") == "-home-a-b-my-proj-x"


def test_locate_by_id_by_cwd_and_by_scan(tmp_path: Path) -> None:
    t = Transcript()
    t.turn(0)
    path = t.write(tmp_path)
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path)}
    assert locate(SID, cwd="/work/project", env=env).path == path
    assert locate(SID, cwd="/elsewhere", env=env).path == path  # the scan fallback
    assert locate(str(path)).session_id == SID
    with pytest.raises(SessionNotFound):
        locate("0b5c7a10-1111-4a2b-9c3d-00000000ffff", env=env)
    with pytest.raises(SessionNotFound):
        locate("not-an-id", env=env)


def test_unchanged_bytes_come_back_identical(tmp_path: Path) -> None:
    t = Transcript()
    t.turn(0)
    t.add({"type": "brand-new-type", "sessionId": SID, "payload": {"x": [1, 2.5, "é"]}})
    s = read_session(locate(t.write(tmp_path)))
    raw = s.raw(s.records)
    assert b"".join(raw[r.line] for r in s.records) == b"".join(t.lines())
    assert s.records[-1].type == "brand-new-type"


def test_torn_last_line_is_reported_not_fatal(tmp_path: Path) -> None:
    t = Transcript()
    t.turn(0)
    s = read_session(locate(t.write(tmp_path, tail=b'{"parentUuid":"00000000-0000-4000')))
    assert s.torn_tail is not None and s.torn_tail.reason == "last line is incomplete"
    assert len(s.records) == len(t.records)


def test_corrupt_middle_line_is_skipped_and_counted(tmp_path: Path) -> None:
    t = Transcript()
    for n in range(5):
        t.turn(n)
    path = t.write(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(3, b"{not json\n")
    path.write_bytes(b"".join(lines))
    s = read_session(locate(path))
    assert s.corrupt_lines == (3,)


def test_a_file_without_conversation_is_refused(tmp_path: Path) -> None:
    path = tmp_path / f"{SID}.jsonl"
    path.write_text('{"type":"queue-operation","sessionId":"x"}\n')
    with pytest.raises(SessionFormatError):
        read_session(locate(path))


def test_parallel_results_off_the_pure_chain_are_gathered_and_linearised(tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("run three")
    ids = t.tools([("Bash", {"command": f"c{i}"}, f"out{i}") for i in range(3)], order=[2, 0, 1])
    t.say("done")
    conv = build(read_session(locate(t.write(tmp_path))))
    # Pure walk from the leaf: reply <- result 1 <- use 1 <- use 0 <- prompt; use 2 and two
    # results hang off it. The gathered conversation has all of them.
    assert conv.gathered == 3
    assert set(conv.tool_uses) == set(ids) == set(conv.tool_results)
    kinds = [(r.type, r.blocks[0].kind) for r in conv.records]
    assert kinds == [("user", "text")] + [("assistant", "tool_use")] * 3 + [
        ("user", "tool_result")] * 3 + [("assistant", "text")]
    assert len(conv.turns) == 1 and conv.head == ()


def test_results_never_precede_the_last_line_of_their_message(tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("go")
    u1, u2 = t.assistant({"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": {}},
                         {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {}})
    # Written before the second tool_use line in the file (a streaming race).
    result = {"parentUuid": u1, "isSidechain": False, "sessionId": SID, "type": "user",
              "uuid": "00000000-0000-4000-8000-0000000000aa", "message": {"role": "user",
              "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "a"}]}}
    t.records.insert(len(t.records) - 1, result)
    t.parent = u2
    t.add({**result, "parentUuid": u2, "uuid": "00000000-0000-4000-8000-0000000000bb",
           "message": {"role": "user", "content": [
               {"type": "tool_result", "tool_use_id": "toolu_b", "content": "b"}]}})
    t.parent = "00000000-0000-4000-8000-0000000000bb"
    t.say("ok")
    conv = build(read_session(locate(t.write(tmp_path))))
    order = [r.uuid for r in conv.records]
    assert order.index(u2) < order.index("00000000-0000-4000-8000-0000000000aa")


def test_walk_stops_at_the_last_compact_boundary(tmp_path: Path) -> None:
    t = Transcript()
    t.turn(0)
    t.turn(1)
    last = t.parent
    b = t.uuid()
    t.add({"parentUuid": None, "logicalParentUuid": last, "isSidechain": False, "sessionId": SID,
           "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
           "uuid": b, "compactMetadata": {"trigger": "manual", "preTokens": 5000}})
    t.parent = b
    t.add({"parentUuid": b, "isSidechain": False, "sessionId": SID, "type": "user",
           "message": {"role": "user", "content": "This session is being continued..."},
           "isCompactSummary": True, "isVisibleInTranscriptOnly": True, "uuid": t.uuid()})
    t.parent = t.records[-1]["uuid"]
    t.turn(2)
    conv = build(read_session(locate(t.write(tmp_path))))
    assert conv.boundary is not None
    assert [r.type for r in conv.head] == ["system", "user"]
    assert len(conv.turns) == 1
    assert conv.turns[0].prompt.blocks[0].head.startswith("request number 2")


def test_sidechains_and_dead_branches_are_not_the_conversation(tmp_path: Path) -> None:
    t = Transcript()
    t.turn(0)
    fork = t.parent
    t.prompt("abandoned branch")
    t.say("abandoned reply")
    t.add({"parentUuid": None, "isSidechain": True, "sessionId": SID, "type": "user",
           "uuid": t.uuid(), "message": {"role": "user", "content": "subagent task"}})
    t.parent = fork
    t.prompt("the edited prompt")
    t.say("final")
    conv = build(read_session(locate(t.write(tmp_path))))
    texts = [b.head for r in conv.records for b in r.blocks if b.kind == "text"]
    assert "abandoned branch" not in texts and "subagent task" not in texts
    assert "the edited prompt" in texts


def test_a_record_written_again_later_is_one_record_and_not_the_end(tmp_path: Path) -> None:
    """Claude Code writes some records twice, same uuid and bytes, the copy further down (an
    editor reopened replays its entries). A copy of the first prompt at the end is not where the
    conversation ends: taken for the leaf, every later turn was left out of a rewrite."""
    t = Transcript()
    for n in range(4):
        t.turn(n, parallel=2)
    t.records.insert(9, dict(t.records[7]))  # a tool line again, a little later
    t.add(dict(t.records[0]))  # the first prompt again, at the end
    conv = build(read_session(locate(t.write(tmp_path))))
    assert len(conv.turns) == 4 and conv.leaf.uuid == t.records[-2]["uuid"]
    uuids = [r.uuid for r in conv.records]
    assert len(uuids) == len(set(uuids))


def test_broken_parent_is_reported(tmp_path: Path) -> None:
    t = Transcript()
    t.turn(0)
    t.parent = "00000000-0000-4000-8000-999999999999"
    t.turn(1)
    conv = build(read_session(locate(t.write(tmp_path))))
    assert conv.broken_parent == "00000000-0000-4000-8000-999999999999"
    assert len(conv.turns) == 1


def test_context_size_and_estimate(tmp_path: Path) -> None:
    t = Transcript()
    for n in range(20):
        t.turn(n, size=4000)
    conv = build(read_session(locate(t.write(tmp_path))))
    size = context_size(conv)
    assert size == json.loads(t.lines()[-1])["message"]["usage"]["cache_read_input_tokens"] + 3
    cal = calibrate(conv)
    assert cal.measured and 3.0 < cal.chars_per_token < 5.0
    est = estimate(conv.records, cal)
    assert est.by_category["tool_results"] > est.by_category["assistant_text"] > 0
    assert abs(est.total - size) < size * 0.1


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_lines_straddling_read_chunks_come_back_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    import liminal.harness.claude.records as records

    monkeypatch.setattr(records, "CHUNK_BYTES", chunk)
    t = Transcript()
    for n in range(3):
        t.turn(n, size=300)
    s = read_session(locate(t.write(tmp_path, tail=b'{"torn')))
    assert len(s.records) == len(t.records) and s.torn_tail is not None
    assert [r.offset for r in s.records][:2] == [0, len(t.lines()[0])]
    raw = s.raw(s.records)
    assert b"".join(raw[r.line] for r in s.records) == b"".join(t.lines())
