"""The scratchpad at the head of the preamble (docs/memory.md): written by every rewrite, kept as
it is by one that does not know it, replaced where a rewrite or a cut keeps an earlier preamble,
taken out when emptied, for Claude Code sessions and Codex rollouts; its room left under a
target; nothing changed when a thread has none."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from liminal.config import GradientSettings
from liminal.gradient.summarize import (
    PREAMBLE_INTRO,
    scratchpad_section,
    split_scratchpad,
    with_scratchpad,
)
from liminal.harness.claude.cuts import turns
from liminal.harness.claude.gradient.render import Preamble
from liminal.harness.claude.gradient.rewrite import rewrite_session
from liminal.harness.claude.live import ClaudeSessions
from liminal.harness.codex.live import CodexSessions
from liminal.harness.codex.rollout import read_rollout, text_of
from tests.support.codex_rollouts import conversation
from tests.test_gradient import NEW, SMALL, chain_ok, long_session
from tests.transcript import read_lines

PAD = "the release codename is PLOVER-8812\n### Scratchpad (3 characters, a line that looks like ours"
CUT = "7e57a11d-0000-4000-8000-00000000000f"


@given(st.text(), st.text())
@example(pad="0", rest="\n")  # a body of blank lines only
def test_a_scratchpad_comes_out_of_a_preamble_exactly_as_it_went_in(pad: str, rest: str) -> None:
    body = with_scratchpad(rest, pad)
    found, left = split_scratchpad(body)
    if not pad.strip():
        assert body == rest
        return
    assert found == pad.strip()
    had, rest_after = split_scratchpad(rest)
    assert left == (rest_after if had is not None else rest.lstrip("\n"))
    assert with_scratchpad(body, None) == body  # not known: the one it holds stays
    assert with_scratchpad(body, "") == left


def summary_of(path: Path) -> str:
    [summary] = [r for r in read_lines(path) if r.get("isCompactSummary")]
    content = summary["message"]["content"]
    assert isinstance(content, str)
    return content


def test_a_claude_rewrite_heads_its_preamble_with_the_scratchpad_under_its_target(tmp_path: Path) -> None:
    src = long_session(150).write(tmp_path)
    first = rewrite_session(src, new_id=NEW, settings=SMALL, preamble=Preamble(scratchpad=PAD * 40))  # 3.6k characters
    assert first.tokens_after <= SMALL.target_tokens
    text = summary_of(first.path)
    assert text.startswith(PREAMBLE_INTRO + scratchpad_section(PAD * 40) + "\n\nWhat the user asked")
    chain_ok(read_lines(first.path))
    # A rewrite that does not know it (liminal compress, the store down) keeps it; a new one
    # replaces it; an empty one takes it out.
    kept = summary_of(rewrite_session(first.path, 11_000, settings=SMALL).path)
    assert split_scratchpad(kept.removeprefix(PREAMBLE_INTRO))[0] == (PAD * 40).strip()
    second = rewrite_session(first.path, 11_000, settings=SMALL, preamble=Preamble(scratchpad="staging port 6543"))
    body = summary_of(second.path).removeprefix(PREAMBLE_INTRO)
    assert split_scratchpad(body)[0] == "staging port 6543" and "PLOVER" not in body
    assert body.count("What the user asked") == 1
    emptied = summary_of(rewrite_session(second.path, 10_000, settings=SMALL, preamble=Preamble(scratchpad="")).path)
    assert "Scratchpad" not in emptied and emptied.startswith(PREAMBLE_INTRO + "What the user asked")


def test_a_thread_without_a_scratchpad_is_rewritten_as_before(tmp_path: Path) -> None:
    src = long_session(60).write(tmp_path)
    unknown = rewrite_session(src, new_id=NEW, settings=SMALL)
    before = unknown.path.read_bytes().split(b"\n", 1)[1]  # (the header has the time)
    unknown.path.unlink()
    empty = rewrite_session(src, new_id=NEW, settings=SMALL, preamble=Preamble(scratchpad=""))
    assert empty.path.read_bytes().split(b"\n", 1)[1] == before


def test_a_cut_keeping_a_preamble_takes_the_scratchpad_in_place_and_adds_none(tmp_path: Path) -> None:
    src = long_session(40).write(tmp_path)
    sessions = ClaudeSessions(SMALL)
    rewritten = sessions.rewrite(src, 0, NEW, scratchpad="before")
    [*_, last] = turns(rewritten.path).starts
    undo = sessions.cut([(rewritten.path, 0, last)], rewritten.path, CUT, keeps_thread=True,
                        scratchpad="after the swap")
    body = summary_of(undo.path).removeprefix(PREAMBLE_INTRO)
    assert split_scratchpad(body)[0] == "after the swap" and "before" not in body.split("\n", 2)[1]
    lines = read_lines(undo.path)
    chain_ok(lines[1:])
    old = {r["uuid"] for r in read_lines(rewritten.path) if r.get("isCompactSummary")}
    assert not old & {r["uuid"] for r in lines if r.get("isCompactSummary")}  # its text changed
    # A session no swap has written has no preamble: a cut adds none.
    [*_, last] = turns(src).starts
    plain = sessions.cut([(src, 0, last)], src, "7e57a11d-0000-4000-8000-00000000000e",
                         keeps_thread=True, scratchpad="after the swap")
    assert not [r for r in read_lines(plain.path) if r.get("isCompactSummary")]


def codex_summary(path: Path) -> str:
    found = [text_of(line.payload) for line in read_rollout(path).lines
             if line.is_item and text_of(line.payload).startswith(PREAMBLE_INTRO)]
    assert len(found) == 1, found
    return found[0].removeprefix(PREAMBLE_INTRO)


@pytest.mark.parametrize("dialect", ["0.137", "0.166"])
def test_a_codex_rewrite_and_cut_carry_the_scratchpad(tmp_path: Path, dialect: str) -> None:
    home = tmp_path / ".codex"
    path = conversation(dialect, 8, output_lines=200).write(home)
    sessions = CodexSessions(GradientSettings(recent_tokens=0, middle_tokens=0, summary_tokens=300),
                             {"CODEX_HOME": str(home)})
    rewritten = sessions.rewrite(path, 0, NEW, scratchpad=PAD)
    assert split_scratchpad(codex_summary(rewritten.path))[0] == PAD.strip()
    found = sessions.turns(rewritten.path)
    assert len(found.starts) == 1 and found.earlier  # the summary turn is still no turn of the person's
    again = sessions.rewrite(rewritten.path, 0, NEW.replace("5", "7"))
    assert split_scratchpad(codex_summary(again.path))[0] == PAD.strip()
    undo = sessions.cut([(rewritten.path, 0, found.starts[0])], rewritten.path, NEW.replace("5", "6"),
                        keeps_thread=True, scratchpad="staging port 6543")
    body = codex_summary(undo.path)
    assert split_scratchpad(body)[0] == "staging port 6543" and "PLOVER" not in body
    plain = sessions.cut([(path, 0, sessions.turns(path).starts[-1])], path, NEW.replace("5", "8"),
                         keeps_thread=True, scratchpad="staging port 6543")
    assert "6543" not in plain.path.read_text()
