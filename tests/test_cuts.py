"""Sessions cut by position (``liminal.harness.claude.cuts``): what /clear MARK, /undo and /fork
write. Every turn kept is the original's, the chain is one, the header names the real source."""

from __future__ import annotations

import json
from pathlib import Path

from liminal.config import GradientSettings
from liminal.harness.base import Turns
from liminal.harness.claude import tail
from liminal.harness.claude.conversation import build
from liminal.harness.claude.cuts import turn_starts, turns, write_cut
from liminal.harness.claude.live import ClaudeSessions
from liminal.harness.claude.paths import locate
from liminal.harness.claude.records import read_session
from tests.transcript import SID, Transcript

NEW = "7e57a11d-0000-4000-8000-0000000000c1"
OTHER = "7e57a11d-0000-4000-8000-0000000000c2"
THIRD = "7e57a11d-0000-4000-8000-0000000000c3"
FOURTH = "7e57a11d-0000-4000-8000-0000000000c4"


def prompts(path: Path) -> list[str]:
    conversation = build(read_session(locate(path)))
    return [" ".join(b.head for b in t.prompt.blocks if b.kind == "text") for t in conversation.turns]


def session(tmp_path: Path, turns: int = 6) -> Path:
    t = Transcript()
    for n in range(turns):
        t.turn(n, parallel=1 + n % 2)
    return t.write(tmp_path)


def test_a_cut_up_to_a_turn_keeps_every_turn_before_it_and_names_its_source(tmp_path: Path) -> None:
    src = session(tmp_path)
    starts = turn_starts(src)
    assert len(starts) == 6 and starts == sorted(starts)
    target = src.with_name(f"{NEW}.jsonl")
    write_cut([(src, 0, starts[4])], target, NEW, GradientSettings())
    before = prompts(src)
    assert prompts(target) == before[:4]  # /undo twice, or /clear to a mark set after turn 3
    header = json.loads(target.read_bytes().splitlines()[0])
    assert header["sourceSessionId"] == src.stem and header["sourcePath"] == str(src)
    assert header["cut"] == [{"path": str(src), "start": 0, "end": starts[4]}]
    records = [json.loads(line) for line in target.read_bytes().splitlines()[1:]]
    assert {r["sessionId"] for r in records if "sessionId" in r} == {NEW}


def test_a_cut_of_what_followed_a_position_links_the_parts_into_one_chain(tmp_path: Path) -> None:
    src = session(tmp_path)
    starts = turn_starts(src)
    target = src.with_name(f"{NEW}.jsonl")
    # What followed turn 2, in two parts (as the rest of one file and a later file's turns).
    write_cut([(src, starts[2], starts[4]), (src, starts[4], None)], target, NEW, GradientSettings())
    assert prompts(target) == prompts(src)[2:]
    chained = [json.loads(line) for line in target.read_bytes().splitlines()[1:]]
    previous = None
    for record in chained:
        if "uuid" in record:
            assert record["parentUuid"] == previous
            previous = record["uuid"]


def attachment(t: Transcript, kind: str, text: str, role: str | None = "system") -> str:
    """An attachment line as Claude Code 2.1.316 writes it after a prompt, on the chain."""
    u = t.uuid()
    t.add({**t._base(t.parent), "attachment": {"type": kind}, "type": "attachment", "uuid": u,
           "timestamp": "2026-01-01T00:00:00.500Z", "rendered": [{"content": text}],
           "renderedRole": role})
    t.parent = u
    return u


def with_context(tmp_path: Path) -> Path:
    """Turn 0 followed by the context attachments of a session's first prompt; turn 1 announces
    a new date; turns 2 and 3 announce nothing."""
    t = Transcript()
    t.prompt("request number 0: please check module m0")
    attachment(t, "environment", "# Environment: /work/project, linux")
    attachment(t, "model", "You are claude-test.")
    attachment(t, "file", "the whole of notes.md")  # large, and the model can read it again
    attachment(t, "remote_session_change", "remote", role="user")
    attachment(t, "date", "Today is 2026-01-01.")
    t.say("Module m0 is fine.")
    t.prompt("request number 1: please check module m1")
    attachment(t, "date", "Today is 2026-01-02.")
    t.say("Module m1 is fine.")
    for n in (2, 3):
        t.turn(n)
    return t.write(tmp_path)


def test_a_cut_after_the_first_turn_carries_its_context_to_the_first_prompt(tmp_path: Path) -> None:
    """/fork MARK: without the context attachments after its first prompt, Claude Code 2.1.316
    sends an empty system message there and the API refuses the session's every request."""
    src = with_context(tmp_path)
    starts = turn_starts(src)
    target = src.with_name(f"{NEW}.jsonl")
    write_cut([(src, starts[2], starts[3]), (src, starts[3], None)], target, NEW, GradientSettings())
    assert prompts(target) == prompts(src)[2:]
    records = [json.loads(line) for line in target.read_bytes().splitlines()[1:]]
    assert records[0]["type"] == "user"
    carried = [(r["attachment"]["type"], r["rendered"][0]["content"]) for r in records[1:4]]
    assert carried == [("environment", "# Environment: /work/project, linux"),
                       ("model", "You are claude-test."), ("date", "Today is 2026-01-02.")]
    assert [r["attachment"]["type"] for r in records if r["type"] == "attachment"] == [
        "environment", "model", "date"]
    assert {r["sessionId"] for r in records if "sessionId" in r} == {NEW}
    previous = None
    for record in records:
        if "uuid" in record:
            assert record["parentUuid"] == previous
            previous = record["uuid"]
    # The conversation Claude Code builds holds them, in the first turn.
    first = build(read_session(locate(target))).turns[0]
    assert [r.subtype for r in first.records if r.type == "attachment"] == [
        "environment", "model", "date"]


def test_a_cut_from_the_start_keeps_the_context_where_it_was(tmp_path: Path) -> None:
    src = with_context(tmp_path)
    starts = turn_starts(src)
    target = src.with_name(f"{NEW}.jsonl")
    write_cut([(src, 0, starts[3])], target, NEW, GradientSettings())
    records = [json.loads(line) for line in target.read_bytes().splitlines()[1:]]
    kinds = [r["attachment"]["type"] for r in records if r["type"] == "attachment"]
    assert kinds == ["environment", "model", "file", "remote_session_change", "date", "date"]


def titled(tmp_path: Path) -> tuple[Path, list[int]]:
    """Six turns; the CLI names the thread after turn 1 and the user renames it after turn 4
    (Claude Code appends these lines wherever the file stands, long after the turns they name)."""
    t = Transcript()
    for n in range(6):
        t.turn(n, parallel=1 + n % 2)
        if n == 1:
            t.add({"type": "ai-title", "aiTitle": "checking modules", "sessionId": SID})
            t.add({"type": "custom-title", "customTitle": "first name", "sessionId": SID})
        if n == 4:
            t.add({"type": "custom-title", "customTitle": "the user's name", "sessionId": SID})
            t.add({"type": "ai-title", "aiTitle": "module checks, later", "sessionId": SID})
            t.add({"type": "agent-name", "agentName": "checker", "sessionId": SID})
            t.add({"type": "permission-mode", "permissionMode": "plan", "sessionId": SID})
    src = t.write(tmp_path)
    return src, turn_starts(src)


def state(path: Path) -> dict[str, str]:
    """What Claude Code reads of a session's own names and modes: the last of each kind."""
    fields = {"custom-title": "customTitle", "ai-title": "aiTitle", "agent-name": "agentName",
              "permission-mode": "permissionMode"}
    out: dict[str, str] = {}
    for line in path.read_bytes().splitlines():
        record = json.loads(line)
        if record.get("type") in fields and record.get("sessionId") == path.stem:
            out[record["type"]] = record[fields[record["type"]]]
    return out


def test_a_cut_the_thread_moves_to_keeps_its_latest_title_wherever_it_was_written(
        tmp_path: Path) -> None:
    src, starts = titled(tmp_path)
    harness = ClaudeSessions(GradientSettings())
    # /undo of the last two turns: the rename came after the cut point.
    moved = harness.cut([(src, 0, starts[4])], src, NEW, keeps_thread=True)
    assert prompts(moved.path) == prompts(src)[:4]
    assert state(moved.path) == {"custom-title": "the user's name", "ai-title": "module checks, later",
                                 "agent-name": "checker", "permission-mode": "plan"}
    # /clear MARK to a mark in an earlier file: the thread's current file names it now.
    later = Transcript(session_id=OTHER)
    later.turn(0)
    later.add({"type": "custom-title", "customTitle": "renamed after the swap", "sessionId": OTHER})
    current = later.write(tmp_path)
    cleared = harness.cut([(src, 0, starts[2])], current, THIRD, keeps_thread=True)
    assert prompts(cleared.path) == prompts(src)[:2]
    assert state(cleared.path)["custom-title"] == "renamed after the swap"
    assert state(cleared.path)["ai-title"] == "module checks, later"


def test_a_fork_does_not_take_the_threads_name(tmp_path: Path) -> None:
    src, _ = titled(tmp_path)
    fork = ClaudeSessions(GradientSettings()).cut([(src, 0, None)], src, NEW)
    assert prompts(fork.path) == prompts(src)
    assert "custom-title" not in state(fork.path) and "ai-title" not in state(fork.path)
    assert "agent-name" not in state(fork.path)


def test_a_cut_starting_at_a_prompt_with_a_lone_surrogate_keeps_that_prompt(tmp_path: Path) -> None:
    """JavaScript strings can hold half an emoji (a text cut in the middle of a pair), which
    JSON.stringify writes as a lone ``\\ud83d`` escape; orjson refuses it. The cut's first
    record is re-linked, and a line that could not be read was left with its old parent: the
    prompt after the mark fell off the chain and out of the fork."""
    t = Transcript()
    for n in range(4):
        t.turn(n)
    src = t.write(tmp_path)
    starts = turn_starts(src)
    data = src.read_bytes()
    line_end = data.index(b"\n", starts[2]) + 1
    line = data[starts[2]:line_end]
    assert b"request number 2" in line
    data = data[:starts[2]] + line.replace(b"request number 2", b"request number 2 \\ud83d") \
        + data[line_end:]
    src.write_bytes(data)
    target = src.with_name(f"{NEW}.jsonl")
    write_cut([(src, starts[2], None)], target, NEW, GradientSettings())
    assert [p.split()[:3] for p in prompts(target)] == [p.split()[:3] for p in prompts(src)[2:]]


def test_the_thread_state_a_cut_carries_is_never_joined_to_a_torn_last_line(tmp_path: Path) -> None:
    src, _ = titled(tmp_path)
    with src.open("ab") as f:
        f.write(b'{"type":"assistant","mess')  # the CLI died mid-write
    cut = ClaudeSessions(GradientSettings()).cut([(src, 0, None)], src, NEW, keeps_thread=True)
    assert prompts(cut.path) == prompts(src)
    assert state(cut.path)["custom-title"] == "the user's name"


def test_a_part_that_ends_in_a_torn_line_does_not_swallow_the_next_parts_first_line(
        tmp_path: Path) -> None:
    """/fork MARK takes the rest of the mark's file, then what the CLI appended to each later
    session of the thread. A file the CLI died writing ends in a torn line; the next part's
    first line (the prompt after the move) was glued to it and lost with it."""
    src = session(tmp_path)
    starts = turn_starts(src)
    first = src.read_bytes()[:starts[4]] + b'{"type":"assistant","mess'
    older = src.with_name("7e57a11d-0000-4000-8000-0000000000d1.jsonl")
    older.write_bytes(first)
    write_cut([(older, starts[2], None), (src, starts[4], None)], src.with_name(f"{NEW}.jsonl"),
              NEW, GradientSettings())
    assert prompts(src.with_name(f"{NEW}.jsonl")) == prompts(src)[2:]


def test_turns_say_whether_a_summary_comes_before_them(tmp_path: Path) -> None:
    src = with_context(tmp_path)
    assert turns(src) == Turns(tuple(turn_starts(src)), False)  # a session's own first prompt
    small = GradientSettings(recent_tokens=0, middle_tokens=0, summary_tokens=200)
    rewritten = ClaudeSessions(small).rewrite(src, 0, OTHER).path
    found = turns(rewritten)
    assert len(found.starts) == 1 and found.earlier  # the preamble, then the last turn whole


def test_a_cut_of_the_one_turn_a_rewrite_kept_leaves_its_summary_and_its_context(tmp_path: Path) -> None:
    """/undo right after a swap that kept one turn whole. The rewrite carried the context
    attachments to that turn's prompt (2.1.316 sends an empty system message without them, which
    the API refuses); the cut keeps the summary and carries them to just after it, where the
    CLI's own compaction puts them and chains the next prompt."""
    src = with_context(tmp_path)
    small = GradientSettings(recent_tokens=0, middle_tokens=0, summary_tokens=200)
    rewritten = ClaudeSessions(small).rewrite(src, 0, OTHER).path
    [start] = turns(rewritten).starts
    target = src.with_name(f"{NEW}.jsonl")
    tokens, _ = write_cut([(rewritten, 0, start)], target, NEW, GradientSettings(), thread=rewritten)
    assert turns(target) == Turns((), True) and prompts(target) == []
    records = [json.loads(line) for line in target.read_bytes().splitlines()[1:]]
    chained = [r for r in records if "uuid" in r]
    assert chained[0]["subtype"] == "compact_boundary" and chained[1].get("isCompactSummary") is True
    assert [(r["attachment"]["type"], r["rendered"][0]["content"]) for r in chained[2:]] == [
        ("environment", "# Environment: /work/project, linux"), ("model", "You are claude-test."),
        ("date", "Today is 2026-01-02.")]
    previous = None
    for record in chained:
        assert record["parentUuid"] == previous and record["sessionId"] == NEW
        previous = record["uuid"]
    # Claude Code 2.1.44 resumes from the newest message: the chain's last, none as new.
    times = [r["timestamp"] for r in chained]
    assert times[-1] > max(times[:-1]), times
    header = json.loads(target.read_bytes().splitlines()[0])
    assert tokens > header["overheadTokens"] and header["tokensAfter"] == tokens
    assert header["lastRecordUuid"] == chained[-1]["uuid"]
    # What the move is journaled with: the context it left, and the one it came from.
    moved = ClaudeSessions(small).cut([(rewritten, 0, start)], rewritten, FOURTH, keeps_thread=True)
    assert (moved.tokens_before, moved.tokens_after) == (
        json.loads(rewritten.read_bytes().splitlines()[0])["tokensAfter"], tokens)
    # No turn is under way in it: the commands need not wait for one.
    assert tail.ends_a_turn(target) and not tail.ends_a_turn(target, "the next prompt")
    # A cut of the whole of it (/clear to a mark set there) keeps them too.
    again = src.with_name(f"{THIRD}.jsonl")
    write_cut([(target, 0, None)], again, THIRD, GradientSettings(), thread=target)
    kinds = [json.loads(line).get("attachment", {}).get("type") for line in again.read_bytes().splitlines()]
    assert [k for k in kinds if k] == ["environment", "model", "date"]
