"""Codex rollouts: lossless reading, the gradient's bands, cuts, recall and the harness choice,
on synthetic rollouts of both dialects (tests/support/codex_rollouts.py). The real CLIs resume
what this writes in tests/acceptance/test_codex.py."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liminal.config import GradientSettings
from liminal.gradient.bands import Band
from liminal.gradient.recall import KEY_IN_MARKER, RecallError, RecallKey
from liminal.gradient.summarize import PREAMBLE_INTRO
from liminal.harness.base import HarnessChoice, Turns
from liminal.harness.codex import gradient
from liminal.harness.codex.live import CodexSessions
from liminal.harness.codex.rollout import (
    RolloutError,
    find,
    parse_lines,
    read_lines,
    read_rollout,
    split,
)
from liminal.harness.known import known_harnesses
from tests.support.codex_rollouts import Call, RolloutBuilder, TurnSpec, conversation

DIALECTS = ["0.137", "0.166"]
NEW = "11111111-2222-4333-8444-555555555555"
SMALL = GradientSettings(recent_tokens=300, middle_tokens=1500, truncate_chars=40, summary_tokens=300)


def lines_of(raw: tuple[bytes, ...]) -> list[dict[str, object]]:
    return [json.loads(line) for line in raw]


def items(raw: tuple[bytes, ...]) -> list[dict[str, object]]:
    return [v["payload"] for v in lines_of(raw) if v["type"] == "response_item"]  # type: ignore[misc]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_reading_is_lossless_and_finds_the_turns(tmp_path: Path, dialect: str) -> None:
    builder = conversation(dialect, 6)
    path = builder.write(tmp_path)
    lines = read_lines(path)
    assert b"".join(line.raw for line in lines) == path.read_bytes()
    rollout = split(lines)
    assert rollout.session_id == builder.session_id
    assert [t.prompt for t in rollout.turns] == [f"question {n}: what about item {n}?" for n in range(6)]
    assert all(t.complete for t in rollout.turns)
    with pytest.raises(RolloutError):
        split(lines[1:])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_bands_and_what_each_does(tmp_path: Path, dialect: str) -> None:
    path = conversation(dialect, 14).write(tmp_path)
    rollout = read_rollout(path)
    # The file's context is 10.8k tokens, 8.7k of them instructions and tools (not in the file);
    # the middle band's 1k runs out before the target's room does, so the old band has turns.
    result = gradient.rewrite(rollout, 9_800, NEW, replace(SMALL, middle_tokens=1_000))
    bands = result.bands
    assert bands[-1] is Band.RECENT and bands[0] is Band.ANCIENT and Band.OLD in bands
    assert list(bands) == sorted(bands, key=[Band.ANCIENT, Band.OLD, Band.MIDDLE, Band.RECENT].index)
    assert Band.MIDDLE in bands
    out = lines_of(result.lines)
    meta = out[0]["payload"]
    assert out[0]["type"] == "session_meta" and meta["id"] == NEW  # type: ignore[index]
    assert meta["forked_from_id"] == rollout.session_id  # type: ignore[index]
    if dialect == "0.166":
        assert meta["session_id"] == NEW  # type: ignore[index]
        assert [line["ordinal"] for line in out] == list(range(len(out)))
        assert all(line["payload"].get("thread_id") in (None, NEW) for line in out)  # type: ignore[union-attr]
    # Usage is not copied; the model's view keeps Codex's context messages first.
    assert not [line for line in out if line["type"] == "token_usage_record"
                or line["payload"].get("type") == "token_count"]  # type: ignore[union-attr]
    seen = items(result.lines)
    assert seen[0]["role"] == "developer" and "<environment_context>" in json.dumps(seen[1])
    summary = json.dumps(seen[2])
    assert PREAMBLE_INTRO[:40] in summary and "question 0" in summary
    # The recent band byte for byte (but its ordinals and thread ids); older outputs cut with
    # recall keys.
    last = rollout.turns[-1]
    kept = [line for line in last.lines if line.type != "token_usage_record"
            and not line.is_event("token_count")]

    def strip(raw: bytes) -> object:
        return json.loads(raw.replace(rollout.session_id.encode(), NEW.encode())) | {"ordinal": 0}

    assert [strip(b) for b in result.lines[-len(kept):]] == [strip(line.raw) for line in kept]
    cut = [i for i in seen if i.get("type") == "function_call_output" and "[liminal: " in str(i["output"])]
    assert cut and result.recall_keys >= len(cut)
    assert result.tokens_after < result.tokens_before
    # Nothing the strict API refuses: every call has its output after it, and no reasoning
    # survives outside the recent band.
    gradient.check(result.lines, NEW)
    reasoning_turns = [n for n, b in enumerate(bands) if b is not Band.RECENT and n % 3 == 0]
    assert reasoning_turns and sum(1 for i in seen if i.get("type") == "reasoning") <= sum(
        1 for n, b in enumerate(bands) if b is Band.RECENT and n % 3 == 0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_target_is_met_by_shrinking_the_recent_band_never_below_the_last_turn(dialect: str) -> None:
    """Under a target the recent band holds what fits with the summary, down to the last turn
    whole. Kept at its 20k whatever the target, it made Codex under ``swap.high_tokens`` 20000 /
    ``swap.target_tokens`` 12000 skip every swap ('the rewrite leaves 20369 tokens, not below
    20000'): 0 swaps in 20 turns while the context grew (issue 20). 0 asks for the floor, which
    keeps the configured band whole."""
    rollout = split(parse_lines(conversation(dialect, 60, output_lines=200).bytes()))
    config = GradientSettings(summary_tokens=1_500, middle_tokens=3_000)  # recent band 20k
    floor = gradient.rewrite(rollout, 0, NEW, config)
    assert set(floor.bands) == {Band.RECENT}  # all of it fits the 20k band
    kept = []
    for target in (10_000, 12_000, 15_000):
        result = gradient.rewrite(rollout, target, NEW, config)
        assert result.tokens_after <= target < floor.tokens_after, (target, result.bands)
        assert result.bands[-1] is Band.RECENT and Band.ANCIENT in result.bands
        gradient.check(result.lines, NEW)
        kept.append(result.bands.count(Band.RECENT))
    assert kept == sorted(kept) and kept[0] < kept[-1]  # a larger target keeps more whole
    # Below what the instructions, the least summary and the last turn take: the last turn
    # whole, everything older in the summary.
    least = gradient.rewrite(rollout, 1_000, NEW, config)
    assert least.bands[-1] is Band.RECENT and set(least.bands[:-1]) == {Band.ANCIENT}
    last = [line.raw for line in rollout.turns[-1].items()]
    assert items(least.lines)[-len(last):] == [json.loads(raw)["payload"] for raw in last]


def as_codex_agent_writes_it(builder: RolloutBuilder, prompt_tokens: int) -> None:
    """Make a synthetic rollout look as codex-agent's do to the model: a long developer message
    in the first turn, metadata on every item that the model is not sent, and usage that counts
    what the model is sent (``prompt_tokens`` of instructions and tools, and the items' payloads
    as the fake model counts them: bytes / 4)."""
    sent = 0
    for line in builder.lines:
        payload = line["payload"]
        if line["type"] == "response_item":
            if payload.get("role") == "developer":
                payload["content"][0]["text"] = "<permissions instructions>" + "be careful. " * 800
            sent += len(json.dumps(payload, separators=(",", ":"))) // 4 + 1
            if builder.dialect == "0.166":
                payload["internal_chat_message_metadata_passthrough"] = {
                    "turn_id": "01a215aa-c887-7b92-a4f1-2013a6981d1b", "create_time": 1795659843.77,
                    "content_item_kinds": ["permissions.instructions"]}
        elif payload.get("type") == "token_count":
            payload["info"]["last_token_usage"]["total_tokens"] = prompt_tokens + sent


@pytest.mark.parametrize("dialect", DIALECTS)
def test_what_a_rewrite_says_it_leaves_is_what_the_model_is_sent(dialect: str) -> None:
    """A rewrite's ``tokens_after`` is what the model is sent, and lands under the target. Counted
    by the rollout's lines, the wrapper of each item (timestamp, type, 0.166's ordinal and the
    metadata Codex keeps for itself) made the rewrite report 1.2k tokens less than the model
    saw; and Codex's context messages, kept with the summary, were not budgeted (2.6k tokens with
    codex-agent): swaps landed above the target (issue 20)."""
    builder = conversation(dialect, 30, output_lines=200)
    as_codex_agent_writes_it(builder, prompt_tokens=8_000)
    rollout = split(parse_lines(builder.bytes()))
    config = GradientSettings(summary_tokens=1_500, middle_tokens=3_000)
    for target in (12_000, 16_000):
        result = gradient.rewrite(rollout, target, NEW, config)
        assert Band.ANCIENT in result.bands
        sent = 8_000 + sum(len(json.dumps({k: v for k, v in item.items()
                                           if k != "internal_chat_message_metadata_passthrough"},
                                          separators=(",", ":"))) // 4 + 1
                           for item in items(result.lines))
        assert abs(result.tokens_after - sent) <= 0.01 * sent, (result.tokens_after, sent)
        assert sent <= target, (sent, target)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_marker_key_recalls_the_original_output(tmp_path: Path, dialect: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / ".codex"
    path = conversation(dialect, 14).write(home)
    env = {"CODEX_HOME": str(home)}
    sessions = CodexSessions(SMALL, env)
    rewritten = sessions.rewrite(path, 9_800, NEW)
    text = rewritten.path.read_text()
    keys = KEY_IN_MARKER.findall(text)
    assert keys
    key = RecallKey.parse(keys[0].replace("\\n", ""))
    value = sessions.recall(key)
    original = next(line for line in path.read_bytes().splitlines() if key.uuid.encode() in line
                    and b"_output" in line)
    assert value == json.loads(original)["payload"]["output"].encode() and len(value) > 200
    assert sessions.recall_in_line(original, key) == value
    # Through the choice, whichever CLI is chosen: the key names a Codex session.
    choice = HarnessChoice(known_harnesses(SMALL, env))
    assert choice.chosen == "claude" and choice.harness.recall(key) == value
    with pytest.raises(RecallError):
        sessions.recall(RecallKey(key.session_id, "call_nope", 0))
    assert sessions.recall(RecallKey(NEW.replace("1", "9"), "call_0001", 0)) is None


def test_the_rewrite_is_private_and_lands_where_codex_looks(tmp_path: Path) -> None:
    home = tmp_path / ".codex"
    path = conversation("0.166", 6).write(home, day="2025/01/02")
    sessions = CodexSessions(SMALL, {"CODEX_HOME": str(home)})
    target = sessions.target_path(path, NEW)
    assert target.parent.parent.parent.parent == home / "sessions"
    assert target.parent == home / "sessions" / time.strftime("%Y/%m/%d")
    rewritten = sessions.rewrite(path, 0, NEW)
    assert rewritten.path == target and target.stat().st_mode & 0o777 == 0o600
    assert find(NEW, {"CODEX_HOME": str(home)}) == target
    sessions.discard(rewritten)
    assert not target.exists() and find(NEW, {"CODEX_HOME": str(home)}) is None
    assert find("../../etc/passwd", {"CODEX_HOME": str(home)}) is None


def test_a_named_thread_keeps_its_name_on_the_rewrite(tmp_path: Path) -> None:
    home = tmp_path / ".codex"
    builder = conversation("0.137", 4)
    path = builder.write(home)
    (home / "session_index.jsonl").write_text(json.dumps(
        {"id": builder.session_id, "thread_name": "my work", "updated_at": "2026-11-25T00:00:00Z"}) + "\n")
    index = home / "session_index.jsonl"
    sessions = CodexSessions(SMALL, {"CODEX_HOME": str(home)})
    before = index.read_bytes()
    # A rewrite the thread never moves onto (skipped as not paying, failed, discarded) leaves
    # Codex's index as it was: a line naming it would name a rollout that is not there.
    sessions.discard(sessions.rewrite(path, 0, NEW.replace("5", "7")))
    assert index.read_bytes() == before
    rewritten = sessions.rewrite(path, 0, NEW)
    assert index.read_bytes() == before  # not before the thread is on it
    sessions.adopted(rewritten)
    entries = [json.loads(line) for line in index.read_text().splitlines()]
    assert entries[-1]["id"] == NEW and entries[-1]["thread_name"] == "my work"
    assert len(entries) == 2


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cuts_by_position(tmp_path: Path, dialect: str) -> None:
    home = tmp_path / ".codex"
    builder = conversation(dialect, 5)
    path = builder.write(home)
    sessions = CodexSessions(SMALL, {"CODEX_HOME": str(home)})
    starts = sessions.turns(path).starts
    assert len(starts) == 5 and sessions.position(path) == path.stat().st_size
    # /undo: everything before the last turn.
    undo = sessions.cut([(path, 0, starts[-1])], path, NEW)
    prompts = [t.prompt for t in read_rollout(undo.path).turns]
    assert prompts == [f"question {n}: what about item {n}?" for n in range(4)]
    # /fork from a mark: starts after the first turn, still a rollout with Codex's context.
    other = NEW.replace("5", "6")
    fork = sessions.cut([(path, starts[2], None)], path, other)
    forked = read_rollout(fork.path)
    assert forked.session_id == other and forked.turns[0].prompt.startswith("question 2")
    head_items = [line.payload for line in forked.head if line.is_item]
    assert head_items and head_items[0]["role"] == "developer"
    gradient.check(tuple(line.raw for line in read_lines(fork.path)), other)


def test_a_turn_is_settled_once_it_ended_and_the_file_held_still(tmp_path: Path) -> None:
    builder = RolloutBuilder("0.137")
    builder.turn(TurnSpec("first"))
    builder.turn(TurnSpec("second", [Call("ls", "a\nb")], complete=False))
    path = builder.write(tmp_path)
    sessions = CodexSessions(SMALL, {"CODEX_HOME": str(tmp_path)})
    assert not sessions.turn_settled(path, "second") and not sessions.turn_settled(path, "second")
    done = RolloutBuilder("0.137", builder.session_id)
    done.turn(TurnSpec("first")).turn(TurnSpec("second", [Call("ls", "a\nb")]))
    path.write_bytes(done.bytes())
    assert not sessions.turn_settled(path, "second")  # it just changed
    assert sessions.turn_settled(path, "second")
    assert not sessions.turn_settled(path, "third")  # not written yet
    assert sessions.turn_settled(path, None)


def test_the_harness_is_chosen_by_setting_agent_and_command() -> None:
    factories = known_harnesses(GradientSettings())
    assert HarnessChoice(factories).chosen == "claude"
    assert HarnessChoice(factories, argv=["npx", "@zed-industries/codex-acp"]).chosen == "codex"
    assert HarnessChoice(factories, argv=["/home/codex-fan/bin/claude-agent-acp"]).chosen == "claude"
    choice = HarnessChoice(factories, argv=["/opt/bin/my-agent"])
    choice.agent_said({"name": "@agentclientprotocol/codex-acp", "title": "Codex"})
    assert choice.harness.name == "codex" and choice.harness.ceiling_tokens == CodexSessions.ceiling_tokens
    forced = HarnessChoice(factories, forced="claude", argv=["codex-acp"])
    forced.agent_said({"name": "codex-acp"})
    assert forced.harness.name == "claude"
    neutral = HarnessChoice(factories, argv=["codex-acp"])
    neutral.agent_said({"name": "claude-codex-bridge"})  # names both: no change
    assert neutral.harness.name == "codex"


turn_specs = st.lists(
    st.builds(TurnSpec,
              prompt=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)
              .filter(lambda s: s.strip() and not s.lstrip().startswith("<")),
              calls=st.lists(st.builds(Call, st.just("ls"), st.text(max_size=400)), max_size=3),
              reasoning=st.booleans()),
    min_size=1, max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=turn_specs, target=st.sampled_from([0, 9_500, 12_000, 50_000]),
       dialect=st.sampled_from(DIALECTS), recent=st.sampled_from([0, 100, 2_000]))
def test_any_rewrite_is_a_rollout_codex_and_the_api_accept(specs: list[TurnSpec], target: int,
                                                          dialect: str, recent: int) -> None:
    builder = RolloutBuilder(dialect)
    for spec in specs:
        builder.turn(spec)
    rollout = split(parse_lines(builder.bytes()))
    config = GradientSettings(recent_tokens=recent, middle_tokens=300, truncate_chars=20, summary_tokens=200)
    result = gradient.rewrite(rollout, target, NEW, config)
    gradient.check(result.lines, NEW)  # session_meta first, the new id, pairs, ordinals
    # The last turn is always kept whole, its prompt verbatim.
    assert result.bands[-1] is Band.RECENT
    assert specs[-1].prompt in [m.get("content", [{}])[0].get("text")  # type: ignore[union-attr,index]
                                for m in items(result.lines) if m.get("type") == "message"]


def test_inspect_and_compress_detect_a_codex_rollout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from liminal.cli import main

    home = tmp_path / ".codex"
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path / "liminal-home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    builder = conversation("0.166", 14)
    path = builder.write(home)
    assert main(["inspect", builder.session_id, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["harness"] == "codex" and data["turns"] == 14 and data["context_tokens"] == 10_809
    assert main(["inspect", str(path)]) == 0
    assert "Codex 0.166" in capsys.readouterr().out
    assert main(["compress", str(path), "--target-tokens", "9800", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["written"] and out["tokens_after"] < out["tokens_before"]
    assert find(out["new_session_id"], {"CODEX_HOME": str(home)}) == Path(out["path"])
    gradient.check(tuple(Path(out["path"]).read_bytes().splitlines(keepends=True)), out["new_session_id"])
    assert main(["compress", builder.session_id, "--dry-run"]) == 0
    assert "codex resume" not in capsys.readouterr().out  # dry: nothing to resume


def test_rollout_lines_become_store_records_recall_can_read() -> None:
    from liminal.harness.codex.records import parse_line
    from liminal.harness.known import line_parser

    builder = conversation("0.166", 2)
    raw = builder.bytes().splitlines()
    records = [parse_line(line, builder.session_id, "T", n) for n, line in enumerate(raw)]
    output = next(r for r in records if r.type == "response_item:function_call_output")
    assert output.uuid == "call_0001" and output.tool_ids == ("call_0001",) and "\n2\n" in output.text
    assert next(r for r in records if r.type == "event_msg:token_count").usage == {
        "input_tokens": 9100, "total_tokens": 9100}
    assert any("question 1" in r.text for r in records if r.type == "response_item:message:user")
    key = RecallKey(builder.session_id, "call_0001", 0)
    assert CodexSessions(SMALL).recall_in_line(output.raw, key) == json.loads(output.raw)["payload"]["output"].encode()
    assert parse_line(b"not json", "b", None, 0).text == ""
    assert line_parser(Path(f"rollout-2026-11-25T05-49-08-{builder.session_id}.jsonl")) is parse_line


def test_a_cut_across_a_swap_names_only_its_own_thread(tmp_path: Path) -> None:
    """/fork MARK on a swapped thread cuts from the original and from the copy the thread moved
    to: the events of both name the fork, not the rollouts it was cut from."""
    home = tmp_path / ".codex"
    builder = conversation("0.166", 4)
    path = builder.write(home)
    sessions = CodexSessions(SMALL, {"CODEX_HOME": str(home)})
    copy_id = NEW.replace("5", "7")
    copy = sessions.rewrite(path, 0, copy_id).path
    own = copy.stat().st_size
    later = RolloutBuilder("0.166", copy_id).turn(TurnSpec("after the swap", [Call("ls", "x")]))
    appended = [line.raw for line in read_lines(later.write(tmp_path / "scratch")) if line.type != "session_meta"]
    with copy.open("ab") as out:  # what Codex appends to the copy it resumed
        out.write(b"".join(appended))
    fork_id = NEW.replace("5", "8")
    starts = sessions.turns(path).starts
    fork = sessions.cut([(path, starts[2], None), (copy, own, None)], copy, fork_id)
    named = {str(line.payload.get("thread_id")) for line in read_lines(fork.path) if "thread_id" in line.payload}
    assert named == {fork_id}, named
    assert [t.prompt for t in read_rollout(fork.path).turns][-1] == "after the swap"


def test_a_long_last_turn_settles_and_tells_its_context(tmp_path: Path) -> None:
    """A turn that read a few large files is megabytes long: its ``task_started`` (and, when it
    was cancelled after a large output, its last ``token_count``) lie far before the file's end."""
    builder = RolloutBuilder("0.166")
    builder.turn(TurnSpec("first"))
    builder.turn(TurnSpec("read the logs", [Call(f"cat log{n}", "x" * 100_000) for n in range(4)]))
    path = builder.write(tmp_path)
    sessions = CodexSessions(SMALL, {"CODEX_HOME": str(tmp_path)})
    assert not sessions.turn_settled(path, "read the logs")  # the first look
    assert sessions.turn_settled(path, "read the logs")
    tokens = sessions.context_tokens(path)
    assert tokens is not None
    # Cancelled after a large output: no token_count after it, the one before still counts.
    aborted = RolloutBuilder("0.166", builder.session_id)
    aborted.lines = list(builder.lines)
    aborted._event({"type": "task_started", "turn_id": "t3"})
    aborted._item({"type": "function_call", "name": "exec_command", "call_id": "call_big", "arguments": "{}"})
    aborted._item({"type": "function_call_output", "call_id": "call_big", "output": "y" * 400_000})
    aborted._event({"type": "turn_aborted", "turn_id": "t3", "reason": "interrupted"})
    path.write_bytes(aborted.bytes())
    assert sessions.context_tokens(path) == tokens
    assert not sessions.turn_settled(path, None) and sessions.turn_settled(path, None)


def _json_or_none(line: bytes) -> object:
    try:
        return json.loads(line)
    except ValueError:
        return None


junk_lines = st.sampled_from([
    b'{"timestamp":"2026-11-25T05:49:09.000Z","ordinal":7,"type":"response_item","payload":{"type":"mess',
    b'{"timestamp":"2026-11-25T05:49:09.000Z","type":"event_msg","payload":{"ty',
    b"[1, 2]", b'"just a string"', b"\x00\xff garbage", b"{}",
])


@settings(max_examples=40, deadline=None)
@given(specs=turn_specs, dialect=st.sampled_from(DIALECTS), target=st.sampled_from([0, 12_000]),
       junk=st.lists(st.tuples(st.integers(min_value=1), junk_lines), min_size=1, max_size=3))
def test_a_rollout_with_damaged_lines_is_rewritten_and_cut(specs: list[TurnSpec], dialect: str, target: int,
                                                           junk: list[tuple[int, bytes]]) -> None:
    """A line Codex could not parse (a write cut short by a crash, then appended to on resume)
    is skipped by Codex and kept as it is by liminal: it neither blocks a rewrite or a cut of a
    0.166 rollout nor takes an ordinal (Codex numbers the lines it can read, contiguously)."""
    builder = RolloutBuilder(dialect)
    for spec in specs:
        builder.turn(spec)
    raw = builder.bytes().splitlines(keepends=True)
    for at, line in junk:
        raw.insert(1 + at % len(raw), line + b"\n")
    rollout = split(parse_lines(b"".join(raw)))
    result = gradient.rewrite(rollout, target, NEW, SMALL)
    undo = gradient.finish(rollout.lines, rollout.session_id, NEW)
    for out in (result.lines, undo):
        gradient.check(out, NEW)
        records = [value for value in map(_json_or_none, out) if isinstance(value, dict) and "type" in value]
        numbered = [r["ordinal"] for r in records if "ordinal" in r]
        assert numbered == (list(range(len(records))) if dialect == "0.166" else [])
    assert all(line + b"\n" in undo for _, line in junk)  # kept whole in a verbatim cut


@pytest.mark.parametrize("torn", [b'{"id":"01a21140-2e66-7191-845c-da15011596e2","thread_na', b""])
def test_the_name_goes_on_a_line_of_its_own(tmp_path: Path, torn: bytes) -> None:
    """Codex's session_index.jsonl may end in a line a crash cut short: the name liminal carries
    over starts a line of its own instead of joining it (where neither would parse), and every
    line Codex wrote stays as it was."""
    home = tmp_path / ".codex"
    builder = conversation("0.166", 3)
    path = builder.write(home)
    index = home / "session_index.jsonl"
    # A newer line Codex cannot read as an entry (its name is no string) does not hide the name.
    before = "".join(json.dumps({"id": builder.session_id, "thread_name": name, "updated_at": "2026-11-25T00:00:00Z"})
                     + "\n" for name in ("my work", 42)).encode() + torn
    index.write_bytes(before)
    sessions = CodexSessions(SMALL, {"CODEX_HOME": str(home)})
    sessions.adopted(sessions.rewrite(path, 0, NEW))
    after = index.read_bytes()
    assert after.startswith(before) and after.endswith(b"\n")
    added = after[len(before):].splitlines()
    assert [bool(line) for line in added] == ([False, True] if torn else [True])  # ends the torn line
    entry = json.loads(added[-1])
    assert entry["id"] == NEW and entry["thread_name"] == "my work"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_local_shell_call_keeps_its_output(tmp_path: Path, dialect: str) -> None:
    """Codex answers a ``local_shell_call`` (the shell of the codex-mini models) with a
    ``function_call_output`` of the same call_id: a rewrite or cut keeps the pair whole."""
    builder = conversation(dialect, 3)
    builder._event({"type": "task_started", "turn_id": "t-last"})
    builder._add("turn_context", {"turn_id": "t-last", "cwd": "/p", "model": "codex-mini-latest"})
    builder._message("user", "list the files")
    builder._item({"type": "local_shell_call", "call_id": "call_sh1", "status": "completed",
                   "action": {"type": "exec", "command": ["ls"]}})
    builder._item({"type": "function_call_output", "call_id": "call_sh1", "output": "a\nb"})
    # An older form: no call_id, the output names the call by its id.
    builder._item({"type": "local_shell_call", "id": "lsh_2", "status": "completed",
                   "action": {"type": "exec", "command": ["pwd"]}})
    builder._item({"type": "function_call_output", "call_id": "lsh_2", "output": "/p"})
    builder._message("assistant", "two files")
    builder._event({"type": "task_complete", "turn_id": "t-last"})
    rollout = split(parse_lines(builder.bytes()))
    for out in (gradient.rewrite(rollout, 0, NEW, SMALL).lines,
                gradient.finish(rollout.lines, rollout.session_id, NEW)):
        kinds = [(i.get("type"), i.get("call_id") or i.get("id")) for i in items(out)
                 if i.get("type") in ("local_shell_call", "function_call_output")]
        assert ("local_shell_call", "call_sh1") in kinds and ("function_call_output", "call_sh1") in kinds
        assert ("local_shell_call", "lsh_2") in kinds and ("function_call_output", "lsh_2") in kinds
        gradient.check(out, NEW)


def test_a_thread_named_in_codex_keeps_its_name_when_undo_moves_it(tmp_path: Path) -> None:
    """/undo and /clear MARK move the thread to a cut, as a swap moves it to a rewrite: the cut
    gets the name, so ``codex resume NAME`` opens the rollout the thread goes on in, not the one
    it left. A /fork is a thread of its own and gets no name."""
    home = tmp_path / ".codex"
    builder = conversation("0.166", 4)
    path = builder.write(home)
    index = home / "session_index.jsonl"
    index.write_text(json.dumps({"id": builder.session_id, "thread_name": "my work",
                                 "updated_at": "2026-11-25T00:00:00Z"}) + "\n")
    sessions = CodexSessions(SMALL, {"CODEX_HOME": str(home)})
    starts = sessions.turns(path).starts
    fork = NEW.replace("5", "6")
    sessions.cut([(path, 0, None)], path, fork)
    sessions.adopted(sessions.cut([(path, 0, starts[-1])], path, NEW, keeps_thread=True))
    named = {entry["id"]: entry["thread_name"] for entry in map(json.loads, index.read_text().splitlines())}
    assert named == {builder.session_id: "my work", NEW: "my work"}


def test_every_folder_the_rewrite_makes_is_private(tmp_path: Path) -> None:
    """The first rewrite of a month makes ``sessions/YYYY/MM/DD``: each of them 0700 whatever
    the umask (with 0, Python's ``parents=True`` made the year and month world-writable)."""
    import os

    home = tmp_path / ".codex"
    path = conversation("0.137", 3).write(home, day="2025/01/02")
    sessions = CodexSessions(SMALL, {"CODEX_HOME": str(home)})
    (home / "sessions").chmod(0o755)
    previous = os.umask(0)
    try:
        rewritten = sessions.rewrite(path, 0, NEW)
    finally:
        os.umask(previous)
    made = [rewritten.path.parent, rewritten.path.parent.parent, rewritten.path.parent.parent.parent]
    assert made[2].parent == home / "sessions" and made[2].name != "2025"
    assert {oct(folder.stat().st_mode & 0o777) for folder in made} == {"0o700"}
    assert (home / "sessions").stat().st_mode & 0o777 == 0o755  # Codex's own: left as it was


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arg_key=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12),
       call_id=st.sampled_from(["call_1", "functions.exec_command:0", "call 2", "call]3", "call.4"]))
def test_every_marker_names_a_key_that_recalls_what_it_cut(tmp_path_factory: pytest.TempPathFactory,
                                                          arg_key: str, call_id: str) -> None:
    """A cut is made only when its marker's key comes back whole: a call id or a JSON key with
    a ':' or '.' (a provider's ``functions.exec_command:0``, an argument keyed by a file name) or
    a space split or ended the key, so recall could not find what the model was told to ask for."""
    home = tmp_path_factory.mktemp("codex") / ".codex"
    builder = RolloutBuilder("0.166")
    builder._event({"type": "task_started", "turn_id": "t1"})
    builder._message("user", "write it")
    builder._item({"type": "function_call", "name": "write", "call_id": call_id,
                   "arguments": json.dumps({"files": {arg_key: "x" * 500}})})
    builder._item({"type": "function_call_output", "call_id": call_id, "output": "y" * 500})
    builder._event({"type": "task_complete", "turn_id": "t1"})
    builder.turn(TurnSpec("next", [Call("ls", "z" * 2000)]))
    path = builder.write(home)
    sessions = CodexSessions(GradientSettings(recent_tokens=300, middle_tokens=100_000, truncate_chars=40),
                             {"CODEX_HOME": str(home)})
    result = gradient.rewrite(read_rollout(path), 100_000, NEW, sessions.settings)
    assert result.bands[0] is Band.MIDDLE
    told = [text for payload in items(result.lines) if payload.get("call_id") == call_id
            for text in (payload.get("output"), *json.loads(str(payload.get("arguments") or "{}"))
                         .get("files", {}).values()) if isinstance(text, str)]
    assert len(told) == 2
    for text in told:
        if "recall tool" in text:  # cut: the model reads the key in the marker and asks for it
            assert sessions.recall(RecallKey.parse(KEY_IN_MARKER.findall(text)[-1])) in (b"x" * 500, b"y" * 500)
        else:  # left whole
            assert text in ("x" * 500, "y" * 500)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_undo_after_a_swap_that_kept_one_turn(tmp_path: Path, dialect: str) -> None:
    """A rewrite's first turn holds the summary of the older ones: history, no turn of the
    person's (a second /undo took it out: the summary of every older turn went with one
    keystroke). The cut to the one turn kept keeps it, and says the context it leaves with the
    instructions and tools the model is sent besides, though the rewrite has no usage line of
    its own (it said 2.6k of a 14k context)."""
    home = tmp_path / ".codex"
    builder = conversation(dialect, 8, output_lines=200)
    as_codex_agent_writes_it(builder, prompt_tokens=8_000)
    path = builder.write(home)
    sessions = CodexSessions(GradientSettings(recent_tokens=0, middle_tokens=0, summary_tokens=300),
                             {"CODEX_HOME": str(home)})
    first = sessions.turns(path)
    assert len(first.starts) == 8 and not first.earlier  # a session's own first prompt
    rewritten = sessions.rewrite(path, 0, NEW)
    found = sessions.turns(rewritten.path)
    assert len(found.starts) == 1 and found.earlier
    assert [t.prompt.startswith(PREAMBLE_INTRO) for t in read_rollout(rewritten.path).turns] == [True, False]
    undo = sessions.cut([(rewritten.path, 0, found.starts[0])], rewritten.path, NEW.replace("5", "6"),
                        keeps_thread=True)
    assert sessions.turns(undo.path) == Turns((), True)
    assert [t.prompt.startswith(PREAMBLE_INTRO) for t in read_rollout(undo.path).turns] == [True]
    assert 8_000 < undo.tokens_after < rewritten.tokens_after, (undo.tokens_after, rewritten.tokens_after)
    assert undo.tokens_before == rewritten.tokens_after  # where the move started from
