"""The tables the commands print (``liminal.commands._out``): at any width no line is wider, no
column is dropped, a value that may not be cut is there whole; below the width a table needs,
a block a row. (What each command prints: ``tests/store/test_reading.py``.)"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liminal.commands._out import Column, cells, table_lines, wrap

TEXT = st.text(alphabet=st.sampled_from("abc /-.日"), min_size=0, max_size=60).map(lambda t: t.strip() or "x")
COLUMNS = st.lists(st.builds(Column, header=st.sampled_from(["ID", "TITLE", "CWD", "N", "WHY"]),
                             right=st.booleans(), fit=st.sampled_from(["", "end", "start", "wrap"]),
                             least=st.integers(4, 16), lead=st.booleans(), below=st.booleans()),
                   min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(COLUMNS, st.data(), st.integers(20, 120))
def test_no_line_is_wider_and_nothing_that_may_not_be_cut_is_lost(
        columns: list[Column], data: st.DataObject, width: int) -> None:
    rows = data.draw(st.lists(st.lists(TEXT, min_size=len(columns), max_size=len(columns)), max_size=4))
    lines = [line for line, _ in table_lines(columns, rows, width)]
    assert all(cells(line) <= width for line in lines), lines
    flat = re.sub(r"\s+", "", "".join(lines))
    for row in rows:
        for cell, column in zip(row, columns, strict=True):
            if column.fit == "" or column.below:  # neither cut nor wrapped in a column: whole
                assert re.sub(r"\s+", "", cell) in flat, (cell, lines)
            elif column.fit == "wrap":  # on lines of its own column: every character of it
                assert not Counter(re.sub(r"\s+", "", cell)) - Counter(flat), (cell, lines)


def test_a_table_too_wide_is_a_block_a_row_with_every_field_labelled() -> None:
    columns = [Column("THREAD", lead=True), Column("TITLE", fit="end", least=16, lead=True),
               Column("TURNS", right=True, label="{} turns"), Column("LAST ACTIVITY", label="last active {}")]
    rows = [["0436155c", "alpha topic first prompt", "11", "2026-12-07 05:37"]]
    wide = [line for line, _ in table_lines(columns, rows, 80)]
    assert wide[0].split() == ["THREAD", "TITLE", "TURNS", "LAST", "ACTIVITY"]  # a table
    narrow = table_lines(columns, rows, 40)
    assert narrow == [("0436155c  alpha topic first prompt", "bold"),
                      ("    11 turns · last active 2026-12-07", ""), ("    05:37", "")]


def test_a_long_word_wraps_after_a_slash() -> None:
    assert wrap("from /home/someone/projects/payments", 20) == ["from /home/someone/", "projects/payments"]


def test_a_transcripts_long_path_wraps_where_its_folders_meet(capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``liminal inspect`` and ``liminal doctor`` broke a path in the middle of a name
    (``...a93219e272.jso`` / ``nl``): textwrap cuts a word longer than the line anywhere."""
    from liminal.commands import _out

    monkeypatch.setattr(_out, "terminal", lambda: False)
    path = "/home/someone/.claude/projects/-home-someone-work-flux/efe01d09-9daa-4c2b-8e4f-10a93219e272.jsonl"
    _out.Transcript().line(f"file      {path} (314,314 bytes, 81 records)", hang=10)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(len(line) <= 100 for line in lines), lines
    assert lines[0].endswith("/") and lines[1].startswith("          efe01d09-9daa-4c2b-8e4f-10a93219e272.jsonl"), lines
