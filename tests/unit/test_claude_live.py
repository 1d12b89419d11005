from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liminal.harness.claude.tail import SettleWatch, context_tokens, ends_a_turn


def write(path: Path, *records: dict[str, Any], torn: bytes = b"") -> Path:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + torn)
    return path


def assistant(blocks: list[str], usage: tuple[int, int, int] | None = (10, 20, 30), **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": [{"type": b} for b in blocks], "stop_reason": None}
    if usage:
        message["usage"] = {"input_tokens": usage[0], "cache_creation_input_tokens": usage[1],
                            "cache_read_input_tokens": usage[2], "output_tokens": 5}
    return {"type": "assistant", "message": message, **extra}


USER = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}}


def test_context_tokens_from_the_last_main_chain_usage(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", USER, assistant(["text"], (1, 2, 3)), USER,
                 assistant(["text"], (100, 200, 300)), assistant(["text"], (9, 9, 9), isSidechain=True),
                 {"type": "cost-state"})
    assert context_tokens(path) == 600


def test_context_tokens_ignores_usage_before_a_compact_boundary(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", assistant(["text"]), {"type": "system", "subtype": "compact_boundary"}, USER)
    assert context_tokens(path) is None


def test_a_turn_ends_on_an_answer_not_on_a_tool_call_or_a_torn_line(tmp_path: Path) -> None:
    assert ends_a_turn(write(tmp_path / "a.jsonl", USER, assistant(["text"]), {"type": "last-prompt"}))
    assert not ends_a_turn(write(tmp_path / "b.jsonl", USER, assistant(["tool_use"])))
    assert not ends_a_turn(write(tmp_path / "c.jsonl", USER, assistant(["text"]), USER))
    assert not ends_a_turn(write(tmp_path / "d.jsonl", USER, assistant(["text"]), torn=b'{"type":"assi'))


def test_settled_needs_the_size_to_hold_still(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", USER, assistant(["text"]))
    watch = SettleWatch()
    assert not watch.settled(path)
    assert watch.settled(path)
    with path.open("ab") as f:
        f.write(b'{"type":"cost-state"}\n')
    assert not watch.settled(path)
    assert watch.settled(path)


def prompt(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>ctx</system-reminder>"}, {"type": "text", "text": text}]}}


def test_the_turn_that_just_ended_must_be_on_disk(tmp_path: Path) -> None:
    # Claude Code 2.1.44 answers the ACP prompt before it writes the turn: the file still ends,
    # cleanly, with the previous turn, and must not count as settled for the new prompt.
    path = write(tmp_path / "s.jsonl", prompt("turn 1"), assistant(["text"]))
    assert ends_a_turn(path)
    assert ends_a_turn(path, "turn 1")
    assert not ends_a_turn(path, "turn 2")
    write(tmp_path / "s.jsonl", prompt("turn 1"), assistant(["text"]), prompt("turn  2\nmore"),
          assistant(["tool_use"]), {"type": "user", "message": {"content": [{"type": "tool_result"}]}},
          assistant(["text"]), {"type": "last-prompt"})
    assert ends_a_turn(path, "turn 2 more")
    assert not ends_a_turn(write(tmp_path / "t.jsonl", prompt("turn 2")), "turn 2")


def test_the_clis_own_compact_ends_its_turn_once_its_lines_are_on_disk(tmp_path: Path) -> None:
    """``/compact`` as Claude Code writes it (``fixtures/claude/zed-compact.jsonl``): its boundary,
    summary, caveat, command line, then the command's output. The prompt answered before those
    lines are on disk still ends with the turn before, which is not the command's: a swap then
    rewrote the file without the compaction, and the model was sent every turn it took out."""
    lines = (Path(__file__).parents[2] / "fixtures/claude/zed-compact.jsonl").read_text().splitlines(keepends=True)
    boundary = next(n for n, line in enumerate(lines) if '"compact_boundary"' in line)
    output = next(n for n, line in enumerate(lines) if "<local-command-stdout>" in line)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(lines[:boundary]))
    assert not ends_a_turn(path, "/compact")
    path.write_text("".join(lines[:output + 1]))
    assert ends_a_turn(path, "/compact") and ends_a_turn(path)


def test_a_cancelled_turn_ends_where_claude_code_notes_the_interruption(tmp_path: Path) -> None:
    """What Claude Code (2.1.44 and 2.1.316) writes when the user cancels a turn during a tool
    call: the tool's error result, then a user line "[Request interrupted by user for tool use]".
    The turn has ended there (a swap or /undo may go on), and that line starts no turn."""
    from liminal.harness.claude.conversation import build
    from liminal.harness.claude.paths import locate
    from liminal.harness.claude.records import read_session

    stopped = {"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "[Request interrupted by user for tool use]"}]}}
    path = write(tmp_path / "s.jsonl", prompt("turn 1"), assistant(["text"]), prompt("turn 2"),
                 assistant(["tool_use"]),
                 {"type": "user", "message": {"content": [{"type": "tool_result", "is_error": True}]}}, stopped)
    assert ends_a_turn(path) and ends_a_turn(path, "turn 2")
    assert not ends_a_turn(path, "turn 3")
    sid = "11111111-1111-4111-8111-111111111111"
    lines = [dict(r, uuid=f"{sid[:-2]}{n:02d}", parentUuid=f"{sid[:-2]}{n - 1:02d}" if n else None, sessionId=sid)
             for n, r in enumerate(json.loads(line) for line in path.read_text().splitlines())]
    named = write(tmp_path / f"{sid}.jsonl", *lines)
    turns = build(read_session(locate(named))).turns
    assert len(turns) == 2 and turns[1].records[-1].is_interruption


def test_lines_orjson_refuses_are_read_from_the_tail_too(tmp_path: Path) -> None:
    """JavaScript writes half an emoji as a lone ``\\ud83d`` escape (a pasted text, a cut
    output), which orjson refuses. Skipped, the prompt line made the turn look unfinished (the
    swap and the commands waited on a turn that had ended), the answer line hid its usage."""
    path = write(tmp_path / "s.jsonl", prompt("turn 1"), assistant(["text"]),
                 prompt("turn 2 \ud83d"), assistant(["text"], usage=(1, 2, 3)))
    assert b"\\ud83d" in path.read_bytes()
    assert ends_a_turn(path, "turn 2")
    path = write(tmp_path / "t.jsonl", prompt("turn 1"), assistant(["text"]), prompt("turn 2"),
                 {**assistant(["text"], usage=(1, 2, 3)), "note": "\udc00"})
    assert context_tokens(path) == 6


# Any JSON in the fields the tail readers look at, and around them.
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "message", "usage", "content", "text", "isSidechain", "isMeta",
                         "uuid", "subtype", "lastRecordUuid", "tokensAfter", "input_tokens",
                         "cache_creation", "ephemeral_1h_input_tokens"]) | st.text(max_size=4),
        inner, max_size=5),
    max_leaves=20)
_RECORD = st.one_of(
    _JSON,
    st.builds(lambda kind, m: {"type": kind, "message": m}, st.sampled_from(["user", "assistant"]), _JSON),
    st.builds(lambda kind, c: {"type": kind, "message": {"content": c}},
              st.sampled_from(["user", "assistant"]), _JSON),
    st.builds(lambda b: {"type": "user", "message": {"content": [b]}},
              st.builds(lambda t: {"type": "text", "text": t}, _JSON)),
    st.builds(lambda u: {"type": "assistant", "message": {"usage": u}}, _JSON))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(_RECORD, max_size=6), torn=st.binary(max_size=20))
def test_any_json_in_any_field_is_an_answer_not_an_error(tmp_path: Path, records: list[Any], torn: bytes) -> None:
    """Bad input never crashes the proxy: a line whose ``message`` is a number, whose text is
    a list, is a line that says nothing, for every question asked of a file's tail."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + torn)
    tokens = context_tokens(path)
    assert tokens is None or isinstance(tokens, int)
    assert ends_a_turn(path) in (True, False)
    assert ends_a_turn(path, "hi") in (True, False)
