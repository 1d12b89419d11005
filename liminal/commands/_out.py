"""What a person reads from liminal's commands: a table or a transcript.

Drawn with rich when stdout is a terminal (the terminal's width, a little colour), and as plain
text of at most ``WIDTH`` columns when it is piped or redirected: no escape codes, and nothing
wider than a pager, a review or a mail shows whole. A table never loses a column: its free-text
cells give way (a title cut at its end, a folder at its start, a value wrapped between words or
after a path's slashes), and a table that cannot fit even so is printed a block a row, every
field on it labelled (``table_lines``); a transcript wraps. ``--json`` is what programs read.
Why rich and not our own drawing: ``docs/commands.md``, "What the commands print".
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

WIDTH = 100
MARKED = "bold reverse"  # a search's terms in what it found, on a terminal


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
    if width <= 0:
        return ""
    text = text[-width:] if at_start else text[:width]  # (no character takes less than one)
    while cells(text) > width:
        text = text[1:] if at_start else text[:-1]
    return text


def _pad(text: str, width: int, right: bool) -> str:
    room = " " * max(0, width - cells(text))
    return room + text if right else text + room


GAP = 2  # columns between two cells


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    right: bool = False  # numbers, aligned on the right
    # May give way to make the table fit: cut at its end (titles, reasons) or its start
    # (paths), or wrapped onto more lines at its words, a path at its slashes (what must be
    # read whole: a setting's value, a check's finding).
    fit: str = ""  # "", "end", "start", "wrap"
    least: int = 10  # never cut narrower than this
    keep: int = 0  # of the columns that give way, those keeping less give first
    # Long text that a narrow table has no room for (a swap's reason): under its row, indented
    # and wrapped, in plain text; a column that wraps on a terminal.
    below: bool = False
    # A table too wide for the width even with every column given way is printed a block a
    # row (``stacked``): the ``lead`` columns on its first line, the others after it as
    # ``label`` with ``{}`` for the value ("{} turns"; empty: the header in lower case, then
    # the value), a ``-`` left out.
    lead: bool = False
    label: str | Callable[[str], str] = ""

    def labelled(self, value: str) -> str:
        if callable(self.label):
            return self.label(value)
        return self.label.format(value) if self.label else f"{self.header.lower()} {value}"


def wrap(text: str, width: int, indent: str = "", hang: str | None = None) -> list[str]:
    """``text`` on lines of at most ``width`` columns (counted as a terminal does), broken at
    spaces; a word too long for a line after a slash in it (``/home/me/`` ``projects``), else
    after a dot, a comma or a hyphen, else wherever it must. The first line starts with
    ``indent``, the others with ``hang`` (default: ``indent``)."""
    lines: list[str] = []
    line, prefix = "", indent
    rest = indent if hang is None else hang

    def room() -> int:
        return max(1, width - cells(prefix))

    for word in text.split():
        queue, spaced = _SLASHED.findall(word), bool(line)
        while queue:
            piece = queue.pop(0)
            joined = f"{line} {piece}" if spaced else line + piece
            spaced = False
            if cells(joined) <= room():
                line = joined
                continue
            if line:
                lines.append(prefix + line)
                line, prefix = "", rest
            if cells(piece) <= room():
                line = piece
                continue
            finer = _FINER.findall(piece)
            if len(finer) > 1:
                queue[:0] = finer
                continue
            head = _clip(piece, room()) or piece[:1]  # (a wide character on a narrow line)
            lines.append(prefix + head)
            prefix = rest
            if piece[len(head):]:
                queue.insert(0, piece[len(head):])
    if line or not lines:
        lines.append(prefix + line)
    return [line.rstrip() for line in lines]


# Where a word too long for a line may go on to the next: after a run of slashes (a path), and
# only when a piece between them is too long still, after a dot, a comma or a hyphen.
_SLASHED = re.compile(r"[^/]*/+|[^/]+")
_FINER = re.compile(r"[^.,-]*[.,-]+|[^.,-]+")


def _pieces(word: str, room: int) -> list[str]:
    """``word`` in the pieces a line may end after (``_SLASHED``, then ``_FINER``)."""
    return [finer for piece in _SLASHED.findall(word)
            for finer in (_FINER.findall(piece) if len(piece) > room else [piece])]


class _Wrapper(textwrap.TextWrapper):
    """textwrap's wrapping, but a word longer than a line is broken after a slash in it, else a
    dot, a comma or a hyphen (``_pieces``), before anywhere else."""

    def _split(self, text: str) -> list[str]:
        line = self.width - max(len(self.initial_indent), len(self.subsequent_indent))
        return [piece for chunk in super()._split(text)
                for piece in (_pieces(chunk, line) if len(chunk) > line and not chunk.isspace() else [chunk])]


def _cell_lines(text: str, width: int, column: Column) -> list[str]:
    if column.fit == "wrap":
        return wrap(text, width)
    return [cut(text, width, at_start=column.fit == "start")]


def _widths(columns: Sequence[Column], grid: Sequence[Sequence[str]], width: int) -> list[int] | None:
    """Each column's width for the table to fit ``width``: the columns that may give way, widest
    first, down to their least; None when even that is too wide."""
    widths = [max(cells(row[i]) for row in grid) for i in range(len(columns))]
    room = width - GAP * (len(columns) - 1)
    while sum(widths) > room:
        giving = [i for i, c in enumerate(columns) if c.fit and widths[i] > max(c.least, cells(c.header))]
        if not giving:
            return None
        widths[max(giving, key=lambda i: (-columns[i].keep, widths[i]))] -= 1
    return widths


def _grid(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[list[str]]:
    return [[c.header for c in columns], *[[" ".join(printable(cell).split()) for cell in r] for r in rows]]


def _drawn(columns: Sequence[Column], grid: Sequence[Sequence[str]], widths: Sequence[int]) -> list[list[str]]:
    """Each row of ``grid`` as its lines of text, the cells padded to their widths."""
    out = []
    for row in grid:
        pieces = [_cell_lines(cell, w, c) for cell, w, c in zip(row, widths, columns, strict=True)]
        out.append(["  ".join(_pad(piece[n] if n < len(piece) else "", w, c.right)
                              for piece, w, c in zip(pieces, widths, columns, strict=True)).rstrip()
                    for n in range(max(len(p) for p in pieces))])
    return out


def _stacked(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[tuple[str, str]]:
    """The rows as blocks (a table too wide for ``width``): the lead columns on the first line,
    the others labelled on the lines under it, nothing left out; each line with its style."""
    out: list[tuple[str, str]] = []
    for row in rows:
        cells_ = [" ".join(printable(cell).split()) for cell in row]
        first, *lead = [c.labelled(v) if c.label else v for c, v in zip(columns, cells_, strict=True)
                        if c.lead and v not in ("", "-")] or [""]
        head = wrap(" · ".join(lead), width, indent=f"{first}  ", hang="    ") if cells(first) + 2 <= width // 2 \
            else wrap(" · ".join([first, *lead]), width, hang="    ")  # (a first cell too wide to indent by)
        out += [(line, "bold") for line in head]
        rest = " · ".join(c.labelled(v) for c, v in zip(columns, cells_, strict=True)
                          if not c.lead and not c.below and v not in ("", "-"))
        if rest:
            out += [(line, "") for line in wrap(rest, width, indent="    ")]
        for c, v in zip(columns, cells_, strict=True):
            if c.below and v:
                out += [(line, "dim") for line in wrap(v, width, indent="    ")]
    return out


def table_lines(columns: Sequence[Column], rows: Sequence[Sequence[str]],
                width: int = WIDTH) -> list[tuple[str, str]]:
    """The table as lines no wider than ``width``, each with its style (``bold`` for the
    header): as a table whose columns that may give way give way, with a ``below`` column's
    text under its row; or, when even that is too wide, a block a row (``Column.lead``)."""
    side = [n for n, c in enumerate(columns) if not c.below]
    kept = [columns[n] for n in side]
    grid = _grid(kept, [[r[n] for n in side] for r in rows])
    widths = _widths(kept, grid, width) if kept else None
    if widths is None:
        return _stacked(columns, rows, width)
    header, *body = _drawn(kept, grid, widths)
    out = [(line, "bold") for line in header]
    for row, lines in zip(rows, body, strict=True):
        out += [(line, "") for line in lines]
        for n, c in enumerate(columns):
            if c.below and row[n].strip():
                out += [(line, "dim") for line in wrap(" ".join(printable(row[n]).split()), width,
                                                        indent="    ")]
    return out


def plain_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int = WIDTH) -> str:
    """The table as plain text no wider than ``width`` (``table_lines``)."""
    return "\n".join(line for line, _ in table_lines(columns, rows, width))


def table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    """The table on stdout: plain text of at most ``WIDTH`` columns when piped; on a terminal,
    drawn by rich at the terminal's width, laid out the same way (``table_lines``: no column
    dropped, a block a row where the table cannot fit)."""
    if not terminal():
        sys.stdout.write(plain_table(columns, rows) + "\n")
        return
    from rich import box
    from rich.table import Table
    from rich.text import Text

    shown = console()
    width = max(shown.width, 20)
    side = [n for n, c in enumerate(columns) if not c.below]
    kept = [columns[n] for n in side]
    grid = _grid(kept, [[r[n] for n in side] for r in rows])
    widths = _widths(kept, grid, width) if kept else None
    if widths is None or len(side) < len(columns):  # blocks, or rows with lines under them:
        for line, style in table_lines(columns, rows, width):  # no grid draws those
            shown.print(Text(line, style=style), no_wrap=True, crop=False)
        return
    drawn = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold",
                  padding=(0, GAP - 1, 0, 0))
    for c, w in zip(kept, widths, strict=True):
        drawn.add_column(c.header, justify="right" if c.right else "left", width=w, no_wrap=True,
                         overflow="crop")
    for row in grid[1:]:
        drawn.add_row(*(Text("\n".join(_cell_lines(cell, w, c)))
                        for cell, w, c in zip(row, widths, kept, strict=True)))
    shown.print(drawn)


class Transcript:
    """Lines a person reads in order (a thread's history, search finds): wrapped at the
    terminal's width, drawn by rich, or at ``WIDTH`` when piped; between words, a word too long
    for a line after a slash, a dot, a comma or a hyphen in it (a path), continuation lines
    indented like the first."""

    def __init__(self) -> None:
        self._console = console() if terminal() else None

    def line(self, text: str = "", *, indent: int = 0, style: str = "", wrap: bool = True,
             hang: int = 0, marks: Sequence[str] = ()) -> None:
        """One line of the source (no newlines in ``text``); ``wrap=False`` cuts it instead;
        ``hang`` indents the lines it wraps onto further than the first; ``marks``: words shown
        highlighted on a terminal, wherever they occur in any case (a search's terms)."""
        text = printable(text)
        room = max((self._console.width if self._console is not None else WIDTH) - indent, 10)
        pieces = [text]
        if wrap and text.strip():
            pieces = _Wrapper(width=room, break_on_hyphens=False, replace_whitespace=False, expand_tabs=True,
                              tabsize=4, drop_whitespace=True, subsequent_indent=" " * hang).wrap(text) or [""]
        if self._console is not None:
            from rich.padding import Padding
            from rich.text import Text

            for piece in pieces:
                body = Text(piece, style=style, no_wrap=True, overflow="ellipsis")
                if any(marks):
                    body.highlight_words([m for m in marks if m], MARKED, case_sensitive=False)
                self._console.print(Padding(body, (0, 0, 0, indent), expand=False) if indent else body)
            return
        if not wrap or not text.strip():
            sys.stdout.write(" " * indent + (cut(text, room) if text.strip() else "") + "\n")
            return
        sys.stdout.write("".join(" " * indent + piece + "\n" for piece in pieces))

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
