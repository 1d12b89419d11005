"""The preamble with the model's summaries (``liminal.gradient.summarize.WithSummaries``): the
state anchor on top, the summaries whose whole range is consolidated, the extractive notes for
the rest; the extractive preamble byte for byte when there is nothing of the model's."""

from __future__ import annotations

from liminal.gradient.summarize import (
    MODEL_HEADING,
    NOTES_HEADING,
    STATE_HEADING,
    ExtractiveSummarizer,
    ModelSummary,
    TurnDigest,
    WithSummaries,
    parse_answer,
    summary_request,
    turn_key,
)

TURNS = [TurnDigest(n, f"request {n}: fix the port", (f"reply {n}: we decided on it.",), (("Bash", f"make {n}"),))
         for n in range(1, 7)]


def test_the_request_holds_the_turns_and_asks_for_no_tools() -> None:
    from fixtures.harness.script import SUMMARY_REQUEST as SCRIPTED

    text = summary_request(TURNS[:2])
    assert text.startswith(SCRIPTED)  # the fake models tell it by its start
    assert "Do not use any tools" in text and "## STATE" in text and "## SUMMARY" in text
    assert "User: request 1: fix the port" in text and "Tool Bash: make 2" in text


def test_an_answer_splits_into_summary_and_anchor() -> None:
    assert parse_answer("## STATE\nGoal: port\n## SUMMARY\nThey fixed it.") == ("They fixed it.", "Goal: port")
    assert parse_answer("just prose") == ("just prose", None)


def test_nothing_of_the_models_is_the_extractive_preamble_byte_for_byte() -> None:
    other = ModelSummary(("not-a-turn-here",), "elsewhere")
    expected = ExtractiveSummarizer().summarize(TURNS, "carried", 4000)
    assert WithSummaries(()).summarize(TURNS, "carried", 4000) == expected
    assert WithSummaries((other,)).summarize(TURNS, "carried", 4000) == expected


def test_a_summary_covers_its_turns_and_the_rest_is_extracted() -> None:
    summary = ModelSummary(tuple(turn_key(t) for t in TURNS[:4]), "MODEL SAID: the port is 8080", "Goal: port")
    text = WithSummaries((summary,), "Goal: port").summarize(TURNS, None, 4000)
    assert text.startswith(STATE_HEADING + "\nGoal: port")
    assert MODEL_HEADING in text and "MODEL SAID: the port is 8080" in text
    notes = text.split(NOTES_HEADING, 1)[1]
    assert "request 5" in notes and "reply 5" in notes
    assert "request 1:" in notes and "reply 1" not in notes and "make 1" not in notes  # the person's words stay


def test_a_summary_whose_range_is_not_all_consolidated_waits() -> None:
    summary = ModelSummary(tuple(turn_key(t) for t in TURNS[:4]), "MODEL SAID")
    text = WithSummaries((summary,)).summarize(TURNS[:3], None, 4000)
    assert "MODEL SAID" not in text and text == ExtractiveSummarizer().summarize(TURNS[:3], None, 4000)


def test_the_next_preamble_carries_the_summary_once_and_the_newest_anchor() -> None:
    first = ModelSummary(tuple(turn_key(t) for t in TURNS[:2]), "FIRST RANGE", "Goal: one")
    preamble = WithSummaries((first,), "Goal: one").summarize(TURNS[:3], None, 4000)
    second = ModelSummary(tuple(turn_key(t) for t in TURNS[3:5]), "SECOND RANGE", "Goal: two")
    again = WithSummaries((first, second), "Goal: two").summarize(TURNS[3:6], preamble, 4000)
    assert again.count("FIRST RANGE") == 1 and again.count("SECOND RANGE") == 1
    assert again.index("FIRST RANGE") < again.index("SECOND RANGE")
    assert "Goal: two" in again and "Goal: one" not in again
    assert "request 3" in again  # the first preamble's extracted notes are carried too


def test_over_budget_the_oldest_summaries_give_way() -> None:
    many = tuple(ModelSummary((turn_key(t),), f"SUMMARY {t.number} " + "x" * 300) for t in TURNS)
    text = WithSummaries(many).summarize(TURNS, None, 1200)
    assert "SUMMARY 6" in text and "SUMMARY 1 " not in text and "earlier summaries left out" in text
    assert len(text) <= 1600
