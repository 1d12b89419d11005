"""A frame too large to parse whole, made small enough to derive: its JSON with long strings cut.

Parsing a 1.5 GB frame (a streamed answer's one chunk, with ``proxy.max_frame_bytes`` raised)
made a second copy as large as the frame, in Python strings up to four times its size, and the
messages derived from it a third. The deriver needs the frame's shape and the start of its texts,
not a gigabyte of one string: ``cut_strings`` copies the JSON with every string value longer
than ``keep`` bytes cut (at a boundary that splits no escape and no UTF-8 character) and a note
after it, and keeps every object key whole. The copy is a few megabytes, parsed as any frame.

The scan is C-level: ``bytes.find`` between strings, a possessive regular expression inside
them, in windows of ``WINDOW`` bytes so a caller in a thread yields the interpreter between
them. A frame that is not valid JSON stays invalid (its copy does not parse either).
"""

from __future__ import annotations

import re

WINDOW = 8 * 1024 * 1024
# A string's content up to its closing quote: runs of plain bytes, or an escape (two bytes).
_BODY = re.compile(rb'(?:[^"\\]++|\\.)*+', re.DOTALL)
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_SPACE = b" \t\r\n"


def string_end(raw: bytes, start: int) -> int:
    """The index of the quote that closes the JSON string whose content starts at ``start``;
    -1 if it is not closed."""
    pos, size = start, len(raw)
    while pos < size:
        found = _BODY.match(raw, pos, min(size, pos + WINDOW))
        end = found.end() if found else pos
        if end < size and raw[end] == 0x22:  # '"'
            return end
        if end == pos:  # a backslash at the very end: nothing more can be read
            return -1
        pos = end  # the window's end, or an escape across it: go on from there
    return -1


def safe_cut(raw: bytes, start: int, at: int) -> int:
    """``at``, or the nearest point before it (not before ``start``) that splits no escape
    (``\\n``, ``\\uXXXX``, a surrogate pair of them) and no UTF-8 character."""
    for back in range(max(start, at - 6), at):
        if raw[back] != 0x5C or not _escape_starts(raw, start, back):
            continue
        length = 6 if raw[back + 1:back + 2] == b"u" else 2
        if back + length > at:
            at = back
            break
    # A high surrogate's escape left alone would be a lone surrogate: cut before it too.
    if at - 6 >= start and _HIGH_SURROGATE.fullmatch(raw, at - 6, at) \
            and _escape_starts(raw, start, at - 6):
        at -= 6
    while at > start and raw[at] & 0xC0 == 0x80:  # a UTF-8 continuation byte
        at -= 1
    return at


def _escape_starts(raw: bytes, start: int, backslash: int) -> bool:
    """Whether the backslash at ``backslash`` begins an escape (an even run of them before it)."""
    run = 0
    i = backslash
    while i > start and raw[i - 1] == 0x5C:
        run += 1
        i -= 1
    return run % 2 == 0


def cut_strings(raw: bytes, keep: int) -> bytes:
    """``raw`` (JSON) with every string value longer than ``keep`` bytes (as written, escapes
    and all) cut to about ``keep`` and followed by a note of how much was cut."""
    out: list[bytes] = []
    pos, size = 0, len(raw)
    while pos < size:
        quote = raw.find(b'"', pos)
        if quote < 0:
            out.append(raw[pos:])
            break
        out.append(raw[pos:quote + 1])
        start = quote + 1
        end = string_end(raw, start)
        if end < 0:
            out.append(raw[start:])
            break
        after = end + 1
        while after < size and raw[after] in _SPACE:
            after += 1
        is_key = raw[after:after + 1] == b":"
        if end - start > keep and not is_key:
            cut = safe_cut(raw, start, start + keep)
            out.append(raw[start:cut])
            out.append(f" [liminal: {end - cut:,} bytes cut; the frame holds them]".encode())
        else:
            out.append(raw[start:end])
        out.append(b'"')
        pos = end + 1
    return b"".join(out)
