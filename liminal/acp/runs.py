"""Runs of streamed updates: what lets the router (``liminal.acp.router``) forward an agent's
stream a read at a time rather than a line at a time.

A run is two or more consecutive lines of one read that are ``session/update`` notifications in
the canonical form every pinned adapter writes (``UPDATE_PREFIX``, the session id, then the
update's kind: ``UPDATE_KIND_AT``), for one session and of one kind, byte for byte up to the end
of that kind. Such lines are routed alike, so the router handles them as one: one join, one pass
that stamps and rewrites, one ``FrameRun`` for the taps. No I/O, no parse.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from liminal.acp.events import UPDATE_KIND_AT, UPDATE_PREFIX
from liminal.acp.framing import Oversized

_PREFIX_LEN = len(UPDATE_PREFIX)
_KIND_AT = len(UPDATE_KIND_AT)
_UPDATE_OPEN = len(b'","update":{')  # from the end of the session id to the update's members


@dataclass(frozen=True, slots=True)
class Run:
    lines: list[bytes]
    joined: bytes  # the lines joined by ``\n``
    backing: str  # the session id the lines carry
    kind: bytes  # the update's kind, as the lines spell it
    head: bytes  # each line's bytes up to its update's ``{`` (where a member can be spliced in)


def find_run(lines: list[bytes | Oversized], at: int, hooked: tuple[bytes, ...]) -> Run | None:
    """The run that starts at ``lines[at]``, or None (fewer than two such lines, a session id or
    kind with an escape, or a kind in ``hooked``: ``liminal.acp.events.kind_markers``)."""
    first = lines[at]
    if not isinstance(first, bytes) or not first.startswith(UPDATE_PREFIX):
        return None
    end = first.find(b'"', _PREFIX_LEN)
    kind_end = first.find(b'"', end + _KIND_AT) if first.startswith(UPDATE_KIND_AT, end) else -1
    raw_id = first[_PREFIX_LEN:end]
    if kind_end < 0 or b"\\" in first[_PREFIX_LEN:kind_end] or not raw_id.isascii() or (
            hooked and first.startswith(hooked, end)):
        return None
    marker = first[:kind_end + 1]
    run: list[bytes] = lines[at:] if at else lines  # type: ignore[assignment]
    try:  # the whole read is one run, nearly always: found without a step per line
        joined = b"\n".join(run)
        whole = joined.count(b"\n" + marker) == len(run) - 1
    except TypeError:  # an ``Oversized`` among them
        whole = False
    if not whole:
        stop = at + 1
        while stop < len(lines) and isinstance(lines[stop], bytes) and lines[stop].startswith(marker):  # type: ignore[union-attr]
            stop += 1
        if stop - at < 2:
            return None
        run = lines[at:stop]  # type: ignore[assignment]
        joined = b"\n".join(run)
    return Run(run, joined, raw_id.decode(), first[end + _KIND_AT:kind_end], first[:end + _UPDATE_OPEN])


def spliced(run: Run, session: str, member: bytes) -> bytes:
    """The run's lines, each with its session id (the first member of its params) spelled as
    ``session`` and ``member`` spliced in after its update's ``{``: one copy of the bytes
    (``bytes.replace`` of the same costs about four times as much)."""
    head = run.head if session == run.backing else (
        UPDATE_PREFIX[:-1] + orjson.dumps(session) + run.head[len(UPDATE_PREFIX) + len(run.backing) + 1:])
    if not member and head is run.head:
        return run.joined
    head += member
    at = len(run.head)
    rests = [line[at:] for line in run.lines]
    rests[0] = head + rests[0]
    return (b"\n" + head).join(rests)
