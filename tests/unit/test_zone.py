"""The dynamic zone: what is chosen (deterministic, stopwords, budget, ties) and where each
CLI's rewrite puts it (between the compressed history and the recent band, in a form that is
no prompt, dropped by the next rewrite)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from liminal.config import ConfigError, GradientSettings, load
from liminal.gradient.recall import RecallKey
from liminal.gradient.zone import ZONE_INTRO, Candidate, block, is_zone, select, terms, tokens
from liminal.harness.claude import cuts
from liminal.harness.claude.gradient.render import Preamble
from liminal.harness.claude.gradient.rewrite import rewrite_session
from liminal.harness.claude.recall import resolve
from liminal.harness.codex import gradient
from liminal.harness.codex.rollout import is_prompt, read_rollout, split
from liminal.kernel.zone import described
from tests.support.codex_rollouts import Call, RolloutBuilder, TurnSpec
from tests.transcript import Transcript, read_lines

NEW = "7e57a11d-0000-4000-8000-000000000001"
NEWER = "7e57a11d-0000-4000-8000-000000000002"
MEMO = Candidate("memo-1", "memo", "The staging database listens on port 6543 behind pgbouncer", 0)
OTHER = Candidate("memo-2", "memo", "Release notes are drafted in the wiki every Friday", 1)


def test_the_memo_that_shares_the_recent_turns_words_is_chosen() -> None:
    chosen = select([OTHER, MEMO], "Which port does the staging database use?", 500)
    assert [p.key for p in chosen] == ["memo-1"]
    text = block(chosen)
    assert text.startswith(ZONE_INTRO) and is_zone(text) and "memo memo-1: The staging" in text


def test_conversational_words_pull_nothing_in() -> None:
    """std::slop's failure: "continue", "next", "ok", "please" matched everything."""
    chatter = Candidate("memo-3", "memo", "ok please continue with the next one, thanks, go ahead", 0)
    assert terms("OK, please continue with the next step. Thanks!") == ["step"]
    assert select([chatter, MEMO], "ok please continue, next one thanks", 500) == []
    # One shared word is not enough either: it matches too much to mean anything.
    assert select([MEMO], "the database is slow", 500) == []


def test_the_choice_is_deterministic_and_ties_go_to_the_lower_order_then_the_key() -> None:
    same = [Candidate(f"k{n}", "passage", "flux capacitor wiring diagram", n) for n in (3, 1, 2)]
    recent = "check the flux capacitor"
    first = select(same, recent, 500)
    assert [p.key for p in first] == ["k1", "k2", "k3"]
    pool = [*same, MEMO, OTHER, *(Candidate(f"p{n}", "passage", f"flux log {n} capacitor {n % 3}", 10 + n)
                                  for n in range(20))]
    for _ in range(5):
        random.shuffle(pool)
        assert select(pool, recent, 500) == select(sorted(pool, key=lambda c: c.key), recent, 500)
    tie = [Candidate("b", "passage", "flux capacitor", 0), Candidate("a", "passage", "flux capacitor", 0)]
    assert [p.key for p in select(tie, recent, 500)] == ["a", "b"]


def test_the_budget_and_the_count_bound_the_block() -> None:
    many = [Candidate(f"p{n:02d}", "passage", f"flux capacitor reading {n} " + "x" * 400, n)
            for n in range(30)]
    recent = "the flux capacitor readings"
    for budget in (120, 300, 1000, 5000):
        chosen = select(many, recent, budget)
        assert tokens(block(chosen)) <= budget + len(chosen) + 1
        assert len(chosen) <= 5
    assert select(many, recent, 0) == [] and select(many, recent, 10) == []
    # An entry is clipped, so a long passage still fits a small zone.
    long = Candidate("long", "passage", "flux capacitor " + "y" * 20_000, 0)
    assert len(select([long], recent, 400)[0].text) <= 600


def claude_session(tmp_path: Path, *, port_talk: bool = True) -> Path:
    t = Transcript()
    t.prompt("set up the staging environment for module m0")
    t.tools([("Bash", {"command": "cat staging.conf"}, "staging database host db.internal port 6543 "
              "via pgbouncer\n" + "filler line\n" * 300)])
    t.say("The staging database is configured.")
    for n in range(1, 12):
        t.turn(n, size=3000)
    t.prompt("which port does the staging database use?" if port_talk else "tidy module m11")
    t.say("Let me look at the staging database settings." if port_talk else "Tidied.")
    return t.write(tmp_path)


SETTINGS = GradientSettings(target_tokens=12_000, recent_tokens=1_500, middle_tokens=3_000,
                            summary_tokens=1_500, zone_tokens=600)


def test_a_claude_rewrite_places_the_zone_before_the_recent_band(tmp_path: Path) -> None:
    src = claude_session(tmp_path)
    result = rewrite_session(src, 0, NEW, settings=SETTINGS, preamble=Preamble(memos=[OTHER, MEMO]))
    keys = [p.key for p in result.zone]
    assert keys[0] == "memo-1" and "memo-2" not in keys
    passage = next(p for p in result.zone if p.kind == "passage")
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path)}
    assert b"port 6543" in resolve(passage.key, env=env)  # its key gets the whole output back
    records = read_lines(result.path)
    zone_at = next(n for n, r in enumerate(records) if r.get("isMeta")
                   and is_zone(r["message"]["content"][0]["text"]))
    zone = records[zone_at]
    assert zone["type"] == "user" and zone["sessionId"] == NEW
    text = zone["message"]["content"][0]["text"]
    assert "memo memo-1: The staging database" in text and f"passage {passage.key}" in text
    # Right after the compressed history, right before the recent band's prompt, on the chain.
    first_recent = records[zone_at + 1]
    assert first_recent["message"]["content"][0]["text"].startswith("request number")
    assert first_recent["parentUuid"] == zone["uuid"]
    assert b"filler line\nfiller line\nfiller line" not in result.path.read_bytes()  # cut or gone
    # No turn of the person's: the turns /undo sees start at prompts, the zone is none of them.
    data = result.path.read_bytes()
    started = [json.loads(data[s:data.index(b"\n", s)])["uuid"] for s in cuts.turns(result.path).starts]
    assert first_recent["uuid"] in started and zone["uuid"] not in started
    assert result.as_json()["zone"][0]["key"] == "memo-1"  # type: ignore[index]
    # The next rewrite chooses again and keeps no copy of this one.
    again = rewrite_session(result.path, 0, NEWER, settings=SETTINGS, preamble=Preamble(memos=[MEMO]))
    texts = [json.dumps(r) for r in read_lines(again.path)]
    assert sum(ZONE_INTRO[:30] in t for t in texts) == 1


def test_what_claude_code_adds_itself_is_no_query(tmp_path: Path) -> None:
    """A ``<system-reminder>`` in a prompt and an ``isMeta`` note are the CLI's words, the same
    in every thread: they choose nothing."""
    t = Transcript()
    t.prompt("set up module m0")
    t.tools([("Bash", {"command": "cat notes.txt"}, "reminder: the following context answers questions "
              "about the system\n" + "filler line\n" * 300)])
    t.say("Done.")
    for n in range(1, 12):
        t.turn(n, size=3000)
    t.prompt("<system-reminder>As you answer the user's questions, you can use the following context "
             "about the system</system-reminder>", isMeta=True)
    t.prompt("tidy module m11 <system-reminder>the following context answers questions about the "
             "system</system-reminder>")
    t.say("Tidied.")
    done = rewrite_session(t.write(tmp_path), 0, NEW, settings=SETTINGS, dry_run=True)
    assert not [p for p in done.zone if "reminder" in p.text], done.zone


def test_no_zone_when_off_or_when_nothing_matches(tmp_path: Path) -> None:
    src = claude_session(tmp_path)
    off = rewrite_session(src, 0, NEW, settings=replace(SETTINGS, zone_tokens=0), preamble=Preamble(memos=[MEMO]))
    assert off.zone == () and ZONE_INTRO[:30].encode() not in off.path.read_bytes()
    quiet = tmp_path / "quiet"
    src = claude_session(quiet, port_talk=False)
    none = rewrite_session(src, 0, NEW, settings=SETTINGS, preamble=Preamble(memos=[MEMO]))
    assert all(p.key != "memo-1" for p in none.zone)


def test_under_a_target_the_zone_fits_under_it_too(tmp_path: Path) -> None:
    src = claude_session(tmp_path)
    for target in (3_000, 6_000, 10_000):
        done = rewrite_session(src, None, NEW, settings=replace(SETTINGS, target_tokens=target),
                               preamble=Preamble(memos=[MEMO]), dry_run=True)
        # Room is made for it under the target: the bands give way, the target holds.
        assert done.zone and done.tokens_after <= target
    # A target the whole session fits under compresses nothing: no zone.
    whole = rewrite_session(src, None, NEW, settings=replace(SETTINGS, target_tokens=60_000),
                            preamble=Preamble(memos=[MEMO]), dry_run=True)
    assert whole.turns["recent"] == 13 and not whole.zone


def codex_rollout(tmp_path: Path) -> Path:
    builder = RolloutBuilder("0.137")
    builder.turn(TurnSpec("set up staging", [Call("cat staging.conf", "staging database host db.internal "
                                                  "port 6543 via pgbouncer\n" + "filler\n" * 400)]))
    for n in range(1, 10):
        builder.turn(TurnSpec(f"question {n}: item {n}?", [Call(f"seq {n}", "\n".join(map(str, range(300))))],
                              f"answer {n}."))
    builder.turn(TurnSpec("which port does the staging database use?", (), "Looking at staging settings."))
    return builder.write(tmp_path)


def test_a_codex_rewrite_places_the_zone_before_the_recent_band(tmp_path: Path) -> None:
    rollout = read_rollout(codex_rollout(tmp_path))
    result = gradient.rewrite(rollout, 0, NEW, replace(SETTINGS, recent_tokens=200), [OTHER, MEMO])
    assert [p.key for p in result.zone][:1] == ["memo-1"]
    passage = next(p for p in result.zone if p.kind == "passage")
    assert RecallKey.parse(passage.key).session_id == rollout.session_id
    rewritten = split([line for line in read_rollout_lines(result.lines)])
    texts = [json.dumps(line.payload) for line in rewritten.lines]
    at = next(n for n, t in enumerate(texts) if ZONE_INTRO[:30] in t)
    assert "which port" in "".join(texts[at + 1:]) and "which port" not in "".join(texts[:at])
    # Not a prompt of the person's (liminal's readers), and the next rewrite drops it.
    assert not any(is_prompt(line) and is_zone(str(line.payload)) for line in rewritten.lines)
    assert [t.prompt for t in rewritten.turns][-1].startswith("which port")
    again = gradient.rewrite(rewritten, 0, NEWER, replace(SETTINGS, recent_tokens=200), [MEMO])
    assert sum(ZONE_INTRO[:30].encode() in line for line in again.lines) == 1
    gradient.check(again.lines, NEWER)


def read_rollout_lines(raw: tuple[bytes, ...]) -> list:  # type: ignore[type-arg]
    from liminal.harness.codex.rollout import parse_lines

    return parse_lines(b"".join(raw))


def test_context_lists_what_the_last_move_placed() -> None:
    assert described(None) == ["Dynamic zone: nothing placed by the last move."]
    lines = described([{"key": "memo-1", "kind": "memo", "score": 1.5, "text": "The staging db " * 20}])
    assert lines[0].startswith("Dynamic zone (1 placed") and lines[1].startswith("  memo memo-1: The staging")
    assert len(lines[1]) < 110
    assert described(["damaged", {"key": "k", "kind": "passage", "text": 3}]) == [
        "Dynamic zone (1 placed by the last move, best first; each shares words with the recent turns):",
        "  passage k: 3", "    why: not reviewed by the model"]
    # Why each was placed, and what the model's review kept out (``kernel.zone.Verdict``).
    lines = described([
        {"key": "lesson:0123456789", "kind": "lesson", "score": 2.25, "text": "the codename is PLOVER-8812",
         "why": "the model's review kept it: the release"},
        {"key": "memo-2", "kind": "memo", "score": 0.0, "text": "lunch on Fridays", "placed": False,
         "why": "dropped by the model's review: unrelated"}])
    assert lines == [
        "Dynamic zone (1 placed by the last move, best first; each shares words with the recent turns):",
        "  lesson lesson:0123456789: the codename is PLOVER-8812",
        "    why: score 2.25; the model's review kept it: the release",
        "Kept out by the model's review (1):",
        "  memo memo-2: lunch on Fridays\n    why: dropped by the model's review: unrelated"]


@pytest.mark.parametrize("value", ["-1", "x", "200000"])
def test_a_bad_zone_budget_is_one_line(value: str, tmp_path: Path) -> None:

    with pytest.raises(ConfigError) as err:
        load(env={"LIMINAL_GRADIENT_ZONE_TOKENS": value, "LIMINAL_HOME": str(tmp_path)})
    assert "gradient.zone_tokens" in str(err.value) and "\n" not in str(err.value)
