"""What a person reads from liminal's commands: a table or a transcript.

Drawn with rich when stdout is a terminal (the terminal's width, a little colour), and as plain
text of at most ``WIDTH`` columns when it is piped or redirected: no escape codes, and nothing
wider than a pager, a review or a mail shows whole (a table cuts its longest free-text cells
with an ellipsis; a transcript wraps). ``--json`` is what programs read. Why rich and not our
own drawing: ``docs/commands.md``, "What the commands print".
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

WIDTH = 100


def terminal() -> bool:
    """Whether a person's terminal is reading: stdout is a TTY."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def console() -> Console:
    from rich.console import Console

    return Console(file=sys.stdout, highlight=False)


# What a stored text may hold that a terminal would obey rather than show: a tool's colours and
# cursor moves (CSI), a window title or a hyperlink (OSC), other control characters. rich
# passes them through as they are; a transcript of a tool's output must not retitle the
# window or clear the screen of the person reading it.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without terminal escape sequences; any other control character shown as �."""
    if "\x1b" in text:
        text = _ESCAPES.sub("", text)
    return _CONTROLS.sub("\ufffd", text)


def cells(text: str) -> int:
    """The columns ``text`` takes on a terminal (a CJK character or an emoji takes two)."""
    from rich.cells import cell_len

    return cell_len(text)


def cut(text: str, width: int, *, at_start: bool = False) -> str:
    """``text`` on one line in at most ``width`` columns, an ellipsis where it was cut (at the
    start for a path, whose end says most)."""
    text = " ".join(text.split())
    if cells(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    return "…" + _clip(text[-2 * width:], width - 1, at_start=True) if at_start \
        else _clip(text[: 2 * width], width - 1) + "…"


def _clip(text: str, width: int, *, at_start: bool = False) -> str:
    """``text`` without the characters past ``width`` columns (before them, ``at_start``)."""
    while cells(text) > width:
        text = text[1:] if at_start else text[:-1]
    return text


def _pad(text: str, width: int, right: bool) -> str:
    room = " " * max(0, width - cells(text))
    return room + text if right else text + room


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    right: bool = False  # numbers, aligned on the right
    # May give way to make the table fit: cut at its end (titles, reasons) or its start
    # (paths), or wrapped onto more lines (what must be read whole: a check's finding).
    fit: str = ""  # "", "end", "start", "wrap"
    least: int = 10  # never cut narrower than this
    keep: int = 0  # of the columns that give way, those keeping less give first
    # Long text that a narrow table has no room for (a swap's reason): under its row, indented
    # and wrapped, in plain text; a column that wraps on a terminal.
    below: bool = False


def plain_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int = WIDTH) -> str:
    """The table as text no wider than ``width``: its cuttable columns, widest first, give way."""
    if any(c.below for c in columns):
        side = [n for n, c in enumerate(columns) if not c.below]
        notes = [" ".join(" ".join(printable(r[n]).split()) for n, c in enumerate(columns) if c.below)
                 for r in rows]
        drawn = plain_table([columns[n] for n in side], [[r[n] for n in side] for r in rows], width)
        lines = drawn.split("\n")
        out = lines[:1]
        for line, note in zip(lines[1:], notes, strict=True):  # one line a row: no column wraps
            out.append(line)
            out += textwrap.wrap(note, width, initial_indent="    ", subsequent_indent="    ",
                                 break_on_hyphens=False)
        return "\n".join(out)
    grid = [[c.header for c in columns], *[[" ".join(printable(cell).split()) for cell in r] for r in rows]]
    widths = [max(cells(row[i]) for row in grid) for i in range(len(columns))]
    room = width - 2 * (len(columns) - 1)
    while sum(widths) > room:
        giving = [i for i, c in enumerate(columns) if c.fit and widths[i] > max(c.least, len(c.header))]
        if not giving:
            break
        widths[max(giving, key=lambda i: (-columns[i].keep, widths[i]))] -= 1
    lines = []
    for row in grid:
        pieces = [textwrap.wrap(cell, w, break_on_hyphens=False) or [""] if column.fit == "wrap"
                  else [cut(cell, w, at_start=column.fit == "start")]
                  for cell, w, column in zip(row, widths, columns, strict=True)]
        for n in range(max(len(p) for p in pieces)):
            parts = []
            for piece, w, column in zip(pieces, widths, columns, strict=True):
                parts.append(_pad(piece[n] if n < len(piece) else "", w, column.right))
            line = "  ".join(parts).rstrip()  # too wide only when no column could give way:
            lines.append(line if cells(line) <= width else _clip(line, width - 1) + "…")
    return "\n".join(lines)


def table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    if not terminal():
        sys.stdout.write(plain_table(columns, rows) + "\n")
        return
    from rich import box
    from rich.table import Table
    from rich.text import Text

    shown = console()
    if any(c.below for c in columns):  # rows with lines under them: no grid draws that
        header, *body = plain_table(columns, rows, max(shown.width, 40)).split("\n")
        shown.print(Text(header, style="bold"), no_wrap=True, crop=False)
        for line in body:
            shown.print(Text(line, style="dim" if line.startswith("    ") else ""), no_wrap=True,
                        crop=False)
        return
    drawn = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for n, c in enumerate(columns):
        # Only the columns that may give way are shrunk by rich; the others keep their width.
        natural = max([len(c.header), *(len(r[n]) for r in rows)])
        drawn.add_column(c.header, justify="right" if c.right else "left", no_wrap=not c.fit,
                         min_width=min(c.least, natural) if c.fit else natural)
    for row in rows:
        drawn.add_row(*(Text(printable(cell), no_wrap=c.fit in ("end", "start"), overflow="ellipsis")
                        for cell, c in zip(row, columns, strict=True)))
    shown.print(drawn)


class Transcript:
    """Lines a person reads in order (a thread's history, search finds): on a terminal through
    rich, which wraps them to its width; otherwise wrapped at ``WIDTH``, continuation lines
    indented like the first."""

    def __init__(self) -> None:
        self._console = console() if terminal() else None

    def line(self, text: str = "", *, indent: int = 0, style: str = "", wrap: bool = True,
             hang: int = 0) -> None:
        """One line of the source (no newlines in ``text``); ``wrap=False`` cuts it instead;
        ``hang`` indents the lines it wraps onto further than the first."""
        text = printable(text)
        if self._console is not None:
            from rich.padding import Padding
            from rich.text import Text

            body = Text(text, style=style, no_wrap=not wrap, overflow="ellipsis")
            self._console.print(Padding(body, (0, 0, 0, indent), expand=False) if indent else body)
            return
        room = WIDTH - indent
        if not wrap or not text.strip():
            sys.stdout.write(" " * indent + (cut(text, room) if text.strip() else "") + "\n")
            return
        lines = textwrap.wrap(text, width=room, break_on_hyphens=False, replace_whitespace=False,
                              expand_tabs=True, tabsize=4, drop_whitespace=True,
                              subsequent_indent=" " * hang)
        sys.stdout.write("".join(" " * indent + piece + "\n" for piece in lines or [""]))

    def lines(self, text: str, *, indent: int = 0, style: str = "", wrap: bool = True) -> None:
        for piece in text.splitlines() or [""]:
            self.line(piece, indent=indent, style=style, wrap=wrap)

    def rule(self, title: str) -> None:
        """A turn's heading."""
        if self._console is not None:
            from rich.text import Text

            self._console.rule(Text(title), align="left", style="dim")  # a Text: no markup
        else:
            sys.stdout.write(cut(f"── {title}", WIDTH) + "\n")
