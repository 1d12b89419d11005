"""The preamble with the model's summaries (``liminal.gradient.summarize.WithSummaries``): the
state anchor on top, the summaries whose whole range is consolidated, the extractive notes for
the rest; the extractive preamble byte for byte when there is nothing of the model's."""

from __future__ import annotations

from liminal.gradient.summarize import (
    ANCHOR_REQUEST,
    FOLD_REQUEST,
    MODEL_HEADING,
    NOTES_HEADING,
    STATE_HEADING,
    SUMMARY_REQUEST,
    ExtractiveSummarizer,
    ModelSummary,
    TurnDigest,
    WithSummaries,
    anchor_request,
    fold_chars,
    fold_request,
    live,
    model_room,
    parse_answer,
    plan_fold,
    section,
    summary_request,
    text_hash,
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


# ------------------------------------------------------------------ folding (issue 24)

def _ranges(count: int, size: int) -> list[ModelSummary]:
    """``count`` summaries of one turn each, ``size`` characters each, oldest first."""
    return [ModelSummary((turn_key(TURNS[n % len(TURNS)]) + str(n),), f"RANGE {n} " + "x" * (size - 8))
            for n in range(count)]


def test_no_fold_while_the_summaries_fit_their_room() -> None:
    budget = 4000  # room: 2800 characters; a fold from 0.8 of it (2240)
    assert plan_fold(_ranges(2, 1000), budget) == []  # two: the newest is never folded, one alone is no fold
    assert plan_fold(_ranges(3, 700), budget) == []  # 2106 characters: under 0.8 of the room


def test_past_most_of_their_room_the_oldest_summaries_are_folded_never_the_newest() -> None:
    budget = 4000  # room 2800; a fold's text at most 700
    summaries = _ranges(5, 700)  # 3510 characters: past the room, the oldest would give way
    assert plan_fold(summaries, budget) == summaries[:4]  # all but the newest
    # The oldest, until what stays beside the fold is at most half the room: 6 of 8 here.
    many = _ranges(8, 300)  # 2416 characters, past 0.8 of the room
    parts = plan_fold(many, budget)
    assert parts == many[:6]
    assert sum(len(s.text) + 2 for s in many[6:]) + fold_chars(budget) <= model_room(budget) // 2
    fold = ModelSummary(tuple(k for p in parts for k in p.keys), "FOLD of the oldest", None,
                        tuple(text_hash(p.text) for p in parts))
    assert live([*many, fold]) == [fold, *many[6:]]
    assert plan_fold([*many, fold], budget) == []  # folded: it fits again


def test_a_fold_replaces_its_parts_in_the_preamble_and_reaches_back_over_the_whole_thread() -> None:
    """Past 70% of the budget the oldest summaries gave way (were left out); a fold of them
    stands in their place, so the preamble still says something of every range."""
    budget = 2400
    ranges = [ModelSummary((turn_key(t),), f"SUMMARY {t.number} " + "x" * 400) for t in TURNS]
    without = WithSummaries(tuple(ranges)).summarize(TURNS, None, budget)
    assert "SUMMARY 1 " not in without and "earlier summaries left out" in without
    parts = ranges[:4]
    fold = ModelSummary(tuple(k for p in parts for k in p.keys), "FOLD: summaries 1-4 in short", None,
                        tuple(text_hash(p.text) for p in parts))
    text = WithSummaries((*ranges, fold)).summarize(TURNS, None, budget)
    model = text.split(MODEL_HEADING, 1)[1].split(NOTES_HEADING, 1)[0]
    assert "FOLD: summaries 1-4 in short" in model and "SUMMARY 5 " in model and "SUMMARY 6 " in model
    assert not any(f"SUMMARY {n} " in model for n in range(1, 5)) and "left out" not in model
    assert model.index("FOLD") < model.index("SUMMARY 5 ")  # where its parts were
    # The next preamble carries the fold, once, and a part that comes again is not put back.
    again = WithSummaries((*ranges, fold)).summarize(TURNS[:4], text, budget)
    assert again.count("FOLD: summaries 1-4") == 1 and "SUMMARY 1 " not in again
    assert "SUMMARY 6 " in again


def test_a_fold_of_a_fold_replaces_it_too() -> None:
    ranges = [ModelSummary((turn_key(t),), f"SUMMARY {t.number}") for t in TURNS[:3]]
    first = ModelSummary(ranges[0].keys + ranges[1].keys, "FIRST FOLD", None,
                         (text_hash(ranges[0].text), text_hash(ranges[1].text)))
    second = ModelSummary(first.keys + ranges[2].keys, "SECOND FOLD", None,
                          (text_hash(first.text), text_hash(ranges[2].text)))
    assert live([*ranges, first, second]) == [second]
    carried = WithSummaries((*ranges, first)).summarize(TURNS[:3], None, 4000)
    text = WithSummaries((*ranges, first, second)).summarize(TURNS[3:4], carried, 4000)
    assert "SECOND FOLD" in text and "FIRST FOLD" not in text and "SUMMARY 3" not in text


def test_a_summary_of_several_paragraphs_is_carried_as_one() -> None:
    """The preamble separates summaries by a blank line and the next swap reads them back so: a
    summary with blank lines of its own came back as several, which a fold could not name."""
    summary = ModelSummary((turn_key(TURNS[0]),), "First finding.\n\n### Decisions\nSecond finding.")
    first = WithSummaries((summary,)).summarize(TURNS[:1], None, 4000)
    fold = ModelSummary(summary.keys, "FOLDED", None, (text_hash(summary.text),))
    text = WithSummaries((summary, fold)).summarize(TURNS[1:2], first, 4000)
    assert "FOLDED" in text and "First finding" not in text and "Second finding" not in text


def test_the_fold_and_anchor_requests_say_what_they_ask() -> None:
    parts = [ModelSummary(("a",), "ONE"), ModelSummary(("b",), "TWO")]
    fold = fold_request(parts, 900)
    assert fold.startswith(SUMMARY_REQUEST) and FOLD_REQUEST in fold and "900 characters" in fold
    assert fold.index("ONE") < fold.index("TWO") and "## SUMMARY" in fold
    anchor = anchor_request(TURNS[:2], parts, "Goal: old")
    assert anchor.startswith(SUMMARY_REQUEST) and ANCHOR_REQUEST in anchor and "## STATE" in anchor
    assert "User: request 2: fix the port" in anchor and "ONE" in anchor and "Goal: old" in anchor
    assert section("## STATE\nGoal: x\n## SUMMARY\ny", "STATE") == "Goal: x"
    assert section("## SUMMARY\nshort", "SUMMARY") == "short" and section("prose", "STATE") is None
