"""What a person reads of a search's find (``liminal.store.base.snippet``): the excerpt holds the
match, in the middle where the text allows, in whole words, with an ellipsis exactly where text
was left out; a CLI's record of a tool call reads as its fields, not as JSON.

Found as a new user: ``…lease remember these design notes…`` (cut in the middle of a word, and
the words searched for not in it: the window began a third of its width before the first term),
and Codex's tool calls found as ``{"cmd": "seq 10000 12000", "login": false}``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from liminal.store.base import readable, snippet

WORDS = st.text(alphabet="abcdefghij", min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(WORDS, st.sampled_from([" ", "\n", "  ", "\t"])), min_size=1, max_size=300),
       st.data())
def test_an_excerpt_holds_the_match_in_whole_words(spaced: list[tuple[str, str]], data: st.DataObject) -> None:
    words = [w for w, _ in spaced]
    text = "".join(w + space for w, space in spaced)
    term = data.draw(st.sampled_from(words))
    shown = snippet(text, [term.upper()], 160)  # the case of the query is not the text's
    body = shown.removeprefix("…").removesuffix("…")
    assert term in body and len(body) <= 160, shown
    assert all(piece in words for piece in body.split()), shown  # never a word cut
    flat = " ".join(text.split())
    assert shown.startswith("…") == (not flat.startswith(body)), shown
    assert shown.endswith("…") == (not flat.endswith(body)), shown


def test_the_match_is_in_the_middle_of_a_long_text() -> None:
    filler = " ".join(f"word{n}" for n in range(100))
    shown = snippet(f"{filler} please remember these design notes: the flux capacitor needs 1.21 "
                    f"gigawatts {filler}", ["1.21", "gigawatts"], 80)
    assert shown.startswith("…") and shown.endswith("…") and " word" in shown, shown
    middle = shown.index("1.21 gigawatts") + len("1.21 gigawatts") // 2
    assert abs(middle - len(shown) / 2) < 12, shown


def test_the_place_with_most_of_the_terms_wins() -> None:
    text = "flux " + "x " * 200 + "the flux capacitor is here " + "y " * 200
    assert "flux capacitor" in snippet(text, ["flux", "capacitor"], 60)


def test_no_match_shows_the_start() -> None:
    assert snippet("one two three four", ["zzz"], 160) == "one two three four"
    assert snippet("", ["a"], 160) == ""


def test_a_tool_calls_json_reads_as_its_fields() -> None:
    # Codex's function_call record, Claude Code's "Name {input}" as liminal indexes it.
    assert snippet('{"cmd": "seq 10000 12000", "login": false}', ["seq"]) == "cmd: seq 10000 12000; login: false"
    assert snippet('Bash {"command":"seq 1 3","description":"Count"}', ["seq"]) == \
        "Bash command: seq 1 3; description: Count"
    assert readable('{"output": "ok\\nfine", "metadata": {"exit_code": 0}, "args": [1, "a"]}') == \
        "output: ok\nfine; metadata: (exit_code: 0); args: [1, a]"
    for text in ("not {json}", "{broken", '"a string"', "[1, 2", "plain words"):
        assert readable(text) == text
