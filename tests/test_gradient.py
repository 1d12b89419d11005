"""The gradient on literal transcripts: one test per rule, then the invariants under fuzzing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liminal.config import GradientSettings
from liminal.gradient.bands import Band
from liminal.gradient.recall import RecallKey
from liminal.harness.claude.gradient.plan import assign_bands
from liminal.harness.claude.gradient.rewrite import prepare, rewrite_session
from liminal.harness.claude.gradient.validate import ValidationError, validate
from liminal.harness.claude.paths import locate
from liminal.harness.claude.recall import resolve, resolve_in
from liminal.sessionfiles import RewriteError
from tests.support.gradient import recent_intact
from tests.transcript import SID, Transcript, read_lines

NEW = "7e57a11d-0000-4000-8000-000000000001"
SMALL = GradientSettings(target_tokens=12_000, recent_tokens=3_000, middle_tokens=3_000,
                         summary_tokens=1_500)
ROOMY = GradientSettings(target_tokens=20_000, recent_tokens=3_000, middle_tokens=3_000,
                         summary_tokens=4_000)


def long_session(turns: int = 40, prose: int = 30, **kw: Any) -> Transcript:
    t = Transcript()
    for n in range(turns):
        t.turn(n, parallel=1 + n % 3, think=n % 4 == 0, prose=prose, **kw)
    return t


def chain_ok(records: list[dict[str, Any]]) -> None:
    previous = None
    for rec in records:
        if "uuid" in rec:
            assert rec["parentUuid"] == previous
            previous = rec["uuid"]


def test_bands_are_assigned_youngest_first_by_budget() -> None:
    costs = [(100, 10, 30)] * 10
    bands = assign_bands(costs, budget=400, recent=250, middle=30, reserve=50)
    assert bands[-2:] == [Band.RECENT] * 2
    assert bands[-5:-2] == [Band.MIDDLE] * 3
    assert bands.count(Band.OLD) == 4 and bands[0] is Band.ANCIENT
    # The youngest turn stays whole even when it alone is over every budget.
    assert assign_bands([(10_000, 1, 1)], budget=100, recent=10, middle=10, reserve=0) == [
        Band.RECENT]
    # The configured recent band (keep) is whole whatever the budget; a widened one is not.
    costs = [(100, 10, 1)] * 10
    assert assign_bands(costs, budget=150, recent=300, middle=0, reserve=0, keep=300).count(
        Band.RECENT) == 3
    assert assign_bands(costs, budget=150, recent=900, middle=0, reserve=0, keep=300).count(
        Band.RECENT) == 3
    assert assign_bands(costs, budget=650, recent=900, middle=0, reserve=0, keep=300).count(
        Band.RECENT) == 6


def test_rewrite_reaches_the_target_and_keeps_every_invariant(tmp_path: Path) -> None:
    t = long_session(150)
    src = t.write(tmp_path)
    result = rewrite_session(src, new_id=NEW, settings=SMALL)
    assert result.written and result.path == src.with_name(f"{NEW}.jsonl")
    assert result.tokens_after <= SMALL.target_tokens < result.tokens_before
    assert all(result.turns[b.value] for b in Band)
    out = read_lines(result.path)
    assert {r["sessionId"] for r in out if "sessionId" in r} == {NEW}
    chain_ok(out)
    assert out[0]["type"] == "liminal-rewrite" and out[0]["sourceSessionId"] == SID
    boundary, summary = out[1], out[2]
    assert boundary["subtype"] == "compact_boundary" and boundary["parentUuid"] is None
    assert summary["isCompactSummary"] is True and summary["parentUuid"] == boundary["uuid"]
    assert src.read_bytes() == b"".join(t.lines())  # the original is untouched


def test_recent_band_is_byte_for_byte(tmp_path: Path) -> None:
    t = long_session()
    src = t.write(tmp_path)
    result = rewrite_session(src, new_id=NEW, settings=SMALL)
    assert result.turns["recent"] >= 1
    # Every record of the recent turns, identical apart from sessionId and parentUuid.
    assert recent_intact(src, result.path, result.turns["recent"])


def test_a_target_is_met_by_shrinking_the_recent_band_never_below_the_last_turn(
    tmp_path: Path,
) -> None:
    """A target below the configured recent band (20k) is met: the band shrinks to what fits
    under it with the preamble, down to the last turn whole. Kept whole past the target, it
    made every swap under ``swap.target_tokens`` 5000 land at the band's size (issue 20: 'the
    rewrite leaves 9086 tokens, not below 9000', every swap skipped). 0 asks for the floor,
    which keeps the configured band whole."""
    src = long_session(80).write(tmp_path)
    settings = GradientSettings(summary_tokens=1_500, middle_tokens=3_000)  # recent band 20k
    floor = rewrite_session(src, 0, NEW, settings=settings)
    assert floor.turns["recent"] >= 10 and floor.tokens_after > 20_000
    assert recent_intact(src, floor.path, floor.turns["recent"])
    kept = []
    for n, target in enumerate((5_000, 8_000, 12_000)):
        result = rewrite_session(src, target, NEW[:-1] + str(n + 2), settings=settings)
        assert result.tokens_after <= target, (target, result.turns)
        assert 1 <= result.turns["recent"] < floor.turns["recent"]
        assert recent_intact(src, result.path, result.turns["recent"])
        assert result.target_tokens == target
        kept.append(result.turns["recent"])
    assert kept == sorted(kept) and kept[0] < kept[-1]  # a larger target keeps more whole
    # Below what the CLI's prompt, the least preamble and the last turn take: the last turn
    # whole, everything older in the preamble, and no more.
    least = rewrite_session(src, 2_000, NEW[:-1] + "9", settings=settings)
    assert least.turns["recent"] == 1 and least.turns["middle"] == least.turns["old"] == 0
    assert recent_intact(src, least.path, 1)


def test_middle_band_cuts_with_recall_keys_that_resolve(tmp_path: Path) -> None:
    t = long_session(size=3000)
    src = t.write(tmp_path)
    result = rewrite_session(src, new_id=NEW, settings=SMALL)
    assert result.recall_keys > 0
    keys = re.findall(r"with key ([0-9a-f-]{36}:[0-9a-f-]{36}:\d+(?::[\w.]+)?)\]",
                      result.path.read_text())
    assert len(keys) == result.recall_keys
    originals = {r["uuid"]: r for r in t.records if "uuid" in r}
    for text in keys:
        key = RecallKey.parse(text)
        block = originals[key.uuid]["message"]["content"][key.block]
        expected = block["content"] if not key.path else block["input"][key.path[-1]]
        assert resolve(text, env={"CLAUDE_CONFIG_DIR": str(tmp_path)}) == expected.encode()
    for rec in read_lines(result.path):
        content = (rec.get("message") or {}).get("content")
        if isinstance(content, list) and any("[liminal: " in str(b.get("content")) for b in content):
            assert "toolUseResult" not in rec
            cut = content[0]["content"]
            assert len(cut.split("\n[liminal: ")[0]) <= SMALL.truncate_chars


def test_tool_input_leaves_are_cut_in_the_middle_band(tmp_path: Path) -> None:
    t = Transcript()
    big = "x = 1\n" * 400
    for n in range(30):
        t.prompt(f"edit {n}")
        t.tools([("Edit", {"file_path": f"/f{n}.py", "old_string": big, "new_string": big},
                  "updated")])
        t.say("edited")
    result = rewrite_session(t.write(tmp_path), new_id=NEW, settings=SMALL)
    text = result.path.read_text()
    assert ":input.old_string]" in text and '"file_path":"/f' in text
    key = re.search(r"with key (\S+:input\.new_string)\]", text)
    assert key is not None
    assert resolve_in(locate(tmp_path / "projects" / "-work-project" / f"{SID}.jsonl"),
                      RecallKey.parse(key.group(1))) == big.encode()


def test_old_band_removes_tool_pairs_and_keeps_prose(tmp_path: Path) -> None:
    t = long_session(150, size=400)
    result = rewrite_session(t.write(tmp_path), new_id=NEW, settings=SMALL)
    assert result.turns["old"] > 0
    out = read_lines(result.path)
    uses = [b["id"] for r in out for b in (r.get("message") or {}).get("content") or []
            if isinstance(b, dict) and b.get("type") == "tool_use"]
    results = [b["tool_use_id"] for r in out for b in (r.get("message") or {}).get("content") or []
               if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert sorted(uses) == sorted(results)
    prose = [b["text"] for r in out if r.get("type") == "assistant"
             for b in r["message"]["content"] if b.get("type") == "text"]
    kept_turns = result.turns["recent"] + result.turns["middle"] + result.turns["old"]
    assert sum(p.startswith("Module m") for p in prose) == kept_turns


def test_preamble_holds_every_consolidated_prompt(tmp_path: Path) -> None:
    t = long_session(150)
    prepared = prepare(t.write(tmp_path), new_id=NEW, settings=ROOMY)
    preamble = prepared.rendered.preamble or ""
    out = b"".join(prepared.rendered.lines).decode()
    for rec in t.records:
        if rec["type"] == "user" and rec["message"]["content"][0].get("type") == "text":
            text = rec["message"]["content"][0]["text"]
            assert text in preamble or json.dumps(text)[1:-1] in out
    assert "Files touched" not in preamble  # Bash only in this session
    assert "Commands run:" in preamble and "`cat m0_0.py`" in preamble
    assert "We decided to keep m" in preamble


def test_thinking_is_dropped_before_the_recent_band_only(tmp_path: Path) -> None:
    t = long_session()
    t.prompt("last")
    t.tools([("Bash", {"command": "ls"}, "a\nb")], thinking="recent thought")
    t.say("end")
    result = rewrite_session(t.write(tmp_path), new_id=NEW, settings=SMALL)
    thinking = [r for r in read_lines(result.path) if r.get("type") == "assistant"
                and r["message"]["content"][0].get("type") == "thinking"]
    kept = [r["message"]["content"][0]["thinking"] for r in thinking]
    assert kept[-1] == "recent thought" and 0 < len(kept) < 11
    assert result.turns["recent"] >= len(kept)


def test_unknown_and_bookkeeping_records(tmp_path: Path) -> None:
    t = long_session()
    t.add({"type": "custom-title", "customTitle": "my work", "sessionId": SID})
    t.add({"type": "api-request", "sessionId": SID, "params": {"model": "x"}})
    t.add({"type": "from-the-future", "sessionId": SID, "nested": {"sessionId": SID}})
    result = rewrite_session(t.write(tmp_path), new_id=NEW, settings=SMALL)
    out = read_lines(result.path)
    types = [r["type"] for r in out]
    assert "custom-title" in types and "from-the-future" in types and "api-request" not in types
    assert out[types.index("from-the-future")]["nested"]["sessionId"] == NEW


@pytest.mark.parametrize("message", [None, "not an object", {"role": "assistant"},
                                     {"role": "assistant", "content": []}])
def test_a_message_with_nothing_in_it_does_not_stop_the_rewrite(tmp_path: Path,
                                                                 message: Any) -> None:
    """An old line whose message holds no content (null, no content, an empty list): the model
    reads nothing of it, and a rewrite leaves it out rather than fail on it every time."""
    t = long_session(40)
    at = next(n for n, r in enumerate(t.records) if n > 40 and r["type"] == "assistant")
    t.records.insert(at + 1, {**t.records[at], "uuid": t.uuid(), "message": message})
    t.records[at + 2]["parentUuid"] = t.records[at + 1]["uuid"]
    result = rewrite_session(t.write(tmp_path), new_id=NEW, settings=SMALL)
    assert result.turns["old"] + result.turns["ancient"] > 0
    chain_ok(read_lines(result.path))


@pytest.mark.parametrize("target", [8_000, 12_000, 16_000])
def test_two_answers_in_a_row_do_not_stop_the_rewrite_in_any_band(tmp_path: Path,
                                                                  target: int) -> None:
    """Claude Code can write two assistant messages with no user line between (an API error and
    the answer after it); the recent band keeps them as written. Once that turn is older, the
    rewrite joins them into one message as it does in the old band, in the middle band too:
    refusing it failed every swap of the thread while the turn sat in the middle band."""
    t = Transcript()
    for n in range(30):
        if n == 24:
            t.prompt("do the thing")
            t.tools([("Read", {"file_path": "/a"}, "y" * 3000)], order=[0], text="calling")
            t.say("API Error: 529 overloaded")
            t.say("Retried: here is the answer")
            continue
        t.turn(n, parallel=1 + n % 3)
    settings = GradientSettings(recent_tokens=2_000, middle_tokens=8_000, summary_tokens=1_000)
    result = rewrite_session(t.write(tmp_path), target, new_id=NEW, settings=settings)
    out = read_lines(result.path)
    chain_ok(out)
    assert result.turns["middle"] + result.turns["old"] > 0
    assert "Retried: here is the answer" in result.path.read_text()


@pytest.mark.parametrize("new_id", ["../../elsewhere/x", "not a session", "x" * 300,
                                    NEW.upper() + "\n"])
def test_a_new_id_that_is_not_a_session_id_never_becomes_a_file_name(tmp_path: Path,
                                                                      new_id: str) -> None:
    src = long_session(10).write(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(RewriteError):
        rewrite_session(src, new_id=new_id, settings=SMALL)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_unpaired_tool_use_is_removed(tmp_path: Path) -> None:
    t = long_session(10)
    t.prompt("interrupted")
    t.assistant({"type": "text", "text": "trying"},
                {"type": "tool_use", "id": "toolu_lost", "name": "Bash", "input": {}})
    t.prompt("again")
    t.say("fine")
    result = rewrite_session(t.write(tmp_path), new_id=NEW, settings=SMALL)
    assert "toolu_lost" not in result.path.read_text()
    assert any("unpaired" in note for note in result.notes)


def test_compress_twice_in_a_row(tmp_path: Path) -> None:
    t = long_session(150)
    first = rewrite_session(t.write(tmp_path), new_id=NEW, settings=ROOMY)
    second = rewrite_session(first.path, 16_000, settings=ROOMY)
    assert second.tokens_after <= 16_000 and second.turns["ancient"] > 0
    out = read_lines(second.path)
    chain_ok(out)
    assert [r["type"] for r in out[:3]] == ["liminal-rewrite", "system", "user"]
    summary = out[2]["message"]["content"]
    assert summary.count("What the user asked") == 1
    for n in range(first.turns["ancient"]):  # consolidated by the first pass, still there
        assert f"request number {n}: please check module m{n}" in summary
    assert sum(r.get("subtype") == "compact_boundary" for r in out) == 1
    # Keys written by the first pass still point at the original file.
    assert re.findall(r"with key ([0-9a-f-]{36}):", second.path.read_text())[0] in (SID, NEW)


def test_torn_tail_is_survivable(tmp_path: Path) -> None:
    t = long_session(10)
    result = rewrite_session(t.write(tmp_path, tail=b'{"type":"assistant","uu'), new_id=NEW,
                             settings=SMALL)
    assert any("torn" in n for n in result.notes)
    assert b'"uu\n' not in result.path.read_bytes()


def test_existing_target_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    t = long_session(10)
    src = t.write(tmp_path)
    src.with_name(f"{NEW}.jsonl").write_text("occupied")
    with pytest.raises(RewriteError):
        rewrite_session(src, new_id=NEW, settings=SMALL)
    assert sorted(p.name for p in src.parent.iterdir()) == sorted([src.name, f"{NEW}.jsonl"])
    with pytest.raises(RewriteError):
        rewrite_session(src, new_id=SID)


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    src = long_session(10).write(tmp_path)
    result = rewrite_session(src, dry_run=True, settings=SMALL)
    assert not result.written and not result.path.exists()
    assert list(src.parent.iterdir()) == [src]


def _lines(*records: dict[str, Any]) -> list[bytes]:
    return [json.dumps(r).encode() + b"\n" for r in records]


def _user(u: str, parent: str | None, content: Any, **kw: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": u, "parentUuid": parent, "sessionId": NEW,
            "message": {"role": "user", "content": content}, **kw}


def _asst(u: str, parent: str | None, block: dict[str, Any], mid: str = "m1") -> dict[str, Any]:
    return {"type": "assistant", "uuid": u, "parentUuid": parent, "sessionId": NEW,
            "message": {"id": mid, "role": "assistant", "content": [block]}}


USE = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}
RESULT = [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        (_lines(_user("a", None, "hi"), _asst("b", "zzz", {"type": "text", "text": "x"})),
         "breaks the chain"),
        (_lines(_user("a", None, "hi"), {**_asst("b", "a", USE), "sessionId": "other"}),
         "sessionId other"),
        (_lines(_user("a", None, "hi"), _asst("b", "a", USE)), "never answered"),
        (_lines(_user("a", None, "hi"), _asst("b", "a", USE), _user("c", "b", "next")),
         "unanswered before a prompt"),
        (_lines(_user("a", None, "hi"), _user("c", "a", RESULT)), "answers nothing"),
        (_lines(_user("a", None, "hi"), _asst("b", "a", USE), _user("c", "b", RESULT),
                _asst("d", "c", {"type": "text", "text": "more"})),
         "continues after its results"),
        (_lines(_user("a", None, "hi"), _asst("b", "a", {"type": "thinking", "thinking": "t"}),
                _user("c", "b", "recent")), "thinking block before"),
        (_lines(_user("a", None, "hi"), _user("a", "a", "dup")), "duplicate uuid"),
        (_lines(_user("a", None, "hi"), _asst("b", "a", {"type": "text", "text": "x"}),
                _asst("d", "b", {"type": "text", "text": "y"}, mid="m2"), _user("c", "d", "r")),
         "assistant message follows another"),
        ([b'{"type":"user"'], "not a JSON object"),
    ],
)
def test_validator_refuses_broken_output(lines: list[bytes], problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate(lines, NEW, thinking_from="c")
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_a_broken_plan_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import liminal.harness.claude.gradient.render as render

    src = long_session(20).write(tmp_path)
    real = render._patch
    monkeypatch.setattr(render, "_patch",
                        lambda raw, rec, new, parent, old=(): real(raw, rec, new, None, old))
    with pytest.raises(ValidationError):
        rewrite_session(src, new_id=NEW, settings=SMALL)
    assert list(src.parent.iterdir()) == [src]


turn_shapes = st.lists(
    st.tuples(
        st.integers(0, 3),  # parallel calls (0: prose only)
        st.integers(10, 5000),  # output size
        st.booleans(),  # thinking
        st.randoms(use_true_random=False),
    ),
    min_size=1,
    max_size=40,
)


def transcript_of(shapes: list[Any]) -> Transcript:
    """A session of ``turn_shapes``: a prompt a turn, parallel tool calls answered in a shuffled
    order, thinking on some, a reply."""
    t = Transcript()
    for n, (parallel, size, think, rnd) in enumerate(shapes):
        t.prompt(f"prompt {n}")
        if parallel:
            order = list(range(parallel))
            rnd.shuffle(order)
            t.tools([("Read", {"file_path": f"/p{n}_{i}"}, "y" * size) for i in range(parallel)],
                    order=order, thinking="th" if think else None, text="calling")
        t.say(f"reply {n}")
    return t


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes=turn_shapes, target=st.integers(2_000, 30_000))
def test_any_session_rewrites_into_a_valid_one(tmp_path_factory: pytest.TempPathFactory,
                                               shapes: list[Any], target: int) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    t = transcript_of(shapes)
    prepared = prepare(t.write(folder), target, new_id=NEW, settings=SMALL)
    out = [json.loads(line) for line in prepared.rendered.lines]
    chain_ok(out)
    text = b"".join(prepared.rendered.lines).decode()
    for n in range(len(shapes)):
        assert f"prompt {n}" in text  # verbatim, in a kept turn or in the preamble
    assert out[-1]["uuid"] == t.records[-1]["uuid"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes=turn_shapes, again=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1,
                                          max_size=12), target=st.integers(2_000, 30_000))
def test_a_session_with_records_written_twice_rewrites_into_a_valid_one(
        tmp_path_factory: pytest.TempPathFactory, shapes: list[Any],
        again: list[tuple[float, float]], target: int) -> None:
    """Claude Code writes some records again, same uuid, same bytes, further down the file (a
    reopened editor replays its entries, a hook re-emits its attachment): one record per
    uuid, the first line of it (``conversation.build``). A rewrite must read such a file as the
    CLI does, not refuse it."""
    folder = tmp_path_factory.mktemp("again")
    t = transcript_of(shapes)
    for which, where in again:
        source = int(which * (len(t.records) - 1))
        at = source + 1 + int(where * (len(t.records) - source - 1))
        t.records.insert(at, dict(t.records[source]))
    prepared = prepare(t.write(folder), target, new_id=NEW, settings=SMALL)
    out = [json.loads(line) for line in prepared.rendered.lines]
    chain_ok(out)
    text = b"".join(prepared.rendered.lines).decode()
    for n in range(len(shapes)):
        assert f"prompt {n}" in text


def test_a_copy_with_stale_session_ids_gets_the_new_one_everywhere(tmp_path: Path) -> None:
    t = long_session(20)
    t.add({"type": "progress-like", "sessionId": SID, "data": {"message": {"sessionId": SID}}})
    copied = t.write(tmp_path).rename(tmp_path / "projects" / "-work-project" /
                                      "11111111-2222-4333-8444-555555555555.jsonl")
    result = rewrite_session(copied, new_id=NEW, settings=SMALL)
    text = result.path.read_text()
    assert all(r.get("sessionId") in (None, NEW) for r in read_lines(result.path))
    assert f'"sessionId":"{SID}"' not in text


def test_omitted_requests_are_counted_not_listed_and_add_up_across_folds() -> None:
    from liminal.gradient.summarize import ExtractiveSummarizer, TurnDigest

    summarizer = ExtractiveSummarizer()
    turns = [TurnDigest(n, f"request number {n} " + "x" * 40) for n in range(60)]
    first = summarizer.summarize(turns, None, 2000)

    def listed(text: str) -> tuple[int, int, int]:
        lines = text.splitlines()
        header = next(line for line in lines if line.startswith("What the user asked"))
        said = int(header.split("(")[1].split()[0])
        omitted = sum(int(line.split("(")[1].split()[0]) for line in lines if "omitted" in line)
        return said, sum(1 for line in lines if line.startswith("- request number")), omitted

    said, shown, omitted = listed(first)
    assert said == shown and shown + omitted == 60 and omitted > 0
    more = [TurnDigest(n, f"request number {n} " + "x" * 40) for n in range(60, 80)]
    said, shown, omitted = listed(summarizer.summarize(more, first, 2000))
    assert said == shown and shown + omitted == 80


@settings(max_examples=200, deadline=None)
@given(first=st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=8),
       then=st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=8))
def test_every_request_survives_a_second_fold_whatever_its_lines(first: list[str],
                                                                then: list[str]) -> None:
    """A prompt of several lines (pasted code, a list) is a request like any other: the next
    rewrite, which reads the requests back from the first preamble, must find all of them."""
    from liminal.gradient.summarize import ExtractiveSummarizer, TurnDigest, _split_previous

    summarizer = ExtractiveSummarizer()
    turns = [TurnDigest(n, p) for n, p in enumerate(first)]
    one = summarizer.summarize(turns, None, 100_000)
    more = [TurnDigest(len(first) + n, p) for n, p in enumerate(then)]
    two = summarizer.summarize(more, one, 100_000)
    requests, omitted, _ = _split_previous(two)
    asked = [p for p in first + then if p.strip()]
    assert omitted == 0 and len(requests) == len(asked)
    for request, prompt in zip(requests, asked, strict=True):
        assert request.split() == prompt.split()  # the words, line breaks as they may be


def test_a_rewrites_context_read_from_its_tail_ignores_the_usage_it_carried_over(tmp_path: Path) -> None:
    # The recent band keeps assistant records with usage measured on the longer original: the
    # swap reads the size from the tail at every turn end, and must not see that stale figure
    # (it would hold the next turn for a swap that is not due).
    from liminal.harness.claude import tail

    t = long_session(150)
    src = t.write(tmp_path)
    result = rewrite_session(src, new_id=NEW, settings=SMALL)
    assert tail.context_tokens(result.path) == result.tokens_after
    # A model call on the new session makes its own usage the answer.
    fresh = {"type": "assistant", "uuid": "fresh-1", "isSidechain": False,
             "message": {"id": "msg_fresh", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
                         "usage": {"input_tokens": 7, "cache_creation_input_tokens": 0,
                                   "cache_read_input_tokens": 0, "output_tokens": 1}}}
    with result.path.open("ab") as f:
        f.write(json.dumps(fresh).encode() + b"\n")
    assert tail.context_tokens(result.path) == 7


def _sans_links(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("sessionId", "parentUuid")}


def test_a_record_the_rewrite_changed_has_a_fresh_uuid_and_unchanged_ones_keep_theirs(
    tmp_path: Path,
) -> None:
    # Renderers key on uuid: a cut copy under the original's uuid would be shown in its place.
    src = long_session(150).write(tmp_path)
    original = {r["uuid"]: r for r in read_lines(src) if r.get("uuid")}
    result = rewrite_session(src, new_id=NEW, settings=SMALL)
    out = read_lines(result.path)
    changed = kept = 0
    for record in out:
        if not record.get("uuid"):
            continue
        if record["uuid"] in original:
            assert _sans_links(record) == _sans_links(original[record["uuid"]])
            kept += 1
        else:
            changed += 1
    assert kept and changed > 2  # more than the preamble's two records
    chain_ok(out)
    uuids = [r["uuid"] for r in out if r.get("uuid")]
    assert len(uuids) == len(set(uuids))


def usage_report(folder: Path) -> int:
    """What a usage reporter such as ccusage totals over a projects folder: every assistant
    line's usage, once per (message.id, requestId) pair; lines without both count every time."""
    seen: set[tuple[str, str]] = set()
    total = 0
    for path in sorted(folder.rglob("*.jsonl")):
        for record in read_lines(path):
            message = record.get("message") if record.get("type") == "assistant" else None
            usage = message.get("usage") if isinstance(message, dict) else None
            if not isinstance(usage, dict):
                continue
            key = (message.get("id"), record.get("requestId"))
            if key[0] and key[1]:
                if key in seen:
                    continue
                seen.add(key)
            total += sum(v for k, v in usage.items() if k.endswith("tokens") and isinstance(v, int))
    return total


def test_a_usage_report_over_the_folder_is_the_same_after_a_rewrite(tmp_path: Path) -> None:
    # A rewrite makes no model call: ccusage must not count spend again (it did, +5.6%, when
    # merged old assistant lines paired one line's message.id with another's requestId).
    src = long_session(150).write(tmp_path)
    before = usage_report(src.parent)
    result = rewrite_session(src, new_id=NEW, settings=SMALL)
    assert before > 0
    assert usage_report(result.path.parent) == before
