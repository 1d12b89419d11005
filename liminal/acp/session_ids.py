"""Rule 2 of the router (``liminal.acp.router``) at the byte level: a line's ``sessionId``
members rewritten, the rest of its bytes untouched (big integers, key order, whitespace), so a
forwarded frame is never re-serialised. Session ids are UUIDs in practice: the quoted form is
what orjson writes."""

from __future__ import annotations

import re

import orjson

_SESSION_ID_MEMBER = re.compile(rb'("sessionId"\s*:\s*)("(?:[^"\\]|\\.)*")')
_REWRITE_CACHE: dict[tuple[str, str], tuple[bytes, bytes, bytes, bytes, re.Pattern[bytes]]] = {}


def rewrite(line: bytes, old: str, new: str) -> bytes:
    """Replace ``"sessionId": "<old>"`` by ``"sessionId": "<new>"`` anywhere in the line.

    The compact spelling every adapter writes is replaced as bytes (a streamed chunk of a moved
    thread pays a few hundred nanoseconds, where the regular expression's substitution cost
    microseconds); the expression handles what is left, if the old id is still in the line."""
    replaced, left = _compact(line, old, new)
    if not left:
        return replaced
    quoted_new, pattern = _spellings(old, new)[3:]
    return pattern.sub(lambda found: found.group(1) + quoted_new, replaced)


def rewrite_lines(lines: bytes, old: str, new: str) -> bytes:
    """``rewrite`` of each of ``lines`` (lines joined by ``\\n``): one pass where the compact
    spelling is all there is (it cannot span two lines); else line by line, since the
    expression's spaces could."""
    replaced, left = _compact(lines, old, new)
    return b"\n".join([rewrite(line, old, new) for line in lines.split(b"\n")]) if left else replaced


def _compact(data: bytes, old: str, new: str) -> tuple[bytes, bool]:
    """``data`` with the compact spelling of ``old`` replaced, and whether ``old`` is still in it."""
    if old == new or not old:
        return data, False
    compact_old, compact_new, quoted_old = _spellings(old, new)[:3]
    data = data.replace(compact_old, compact_new)
    return data, quoted_old in data


def _spellings(old: str, new: str) -> tuple[bytes, bytes, bytes, bytes, re.Pattern[bytes]]:
    cached = _REWRITE_CACHE.get((old, new))
    if cached is None:
        quoted_old, quoted_new = orjson.dumps(old), orjson.dumps(new)
        pattern = re.compile(rb'("sessionId"\s*:\s*)' + re.escape(quoted_old))
        cached = (b'"sessionId":' + quoted_old, b'"sessionId":' + quoted_new, quoted_old, quoted_new, pattern)
        if len(_REWRITE_CACHE) > 1024:
            _REWRITE_CACHE.clear()
        _REWRITE_CACHE[(old, new)] = cached
    return cached


def map_all(line: bytes, mapping: dict[str, str]) -> bytes:
    """Every ``"sessionId": "<id>"`` whose id ``mapping`` knows, rewritten to its value, in one
    pass over the line, whatever the number of mappings (a journal of many swaps adopts every
    backing id it ever committed)."""

    def swap(found: re.Match[bytes]) -> bytes:
        try:
            old = orjson.loads(found.group(2))
        except orjson.JSONDecodeError:
            return found.group(0)
        new = mapping.get(old) if isinstance(old, str) else None
        return found.group(0) if new is None else found.group(1) + orjson.dumps(new)

    return _SESSION_ID_MEMBER.sub(swap, line)
