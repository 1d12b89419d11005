"""A move of a thread (liminal's swap, ``/undo``, ``/clear``, ...) as a person reads it, one
line, the same in ``/context``, ``liminal history`` and search:

    swap compressed the model's context (131.2k -> 38.5k tokens): context 131.2k tokens >= 120k: ...
    /undo took the last turn out of the model's context (15.4k -> 8.8k tokens)
    /clear emptied the model's context
    /undo failed: the last turn is not on disk yet

A swap is liminal's compression of the context, on its own or asked for with ``/optimise``; a
move is any change of the session a thread is on: a swap, ``/clear``, ``/undo``, a reopen.

From a swap journal record as a mapping (``SwapRecord`` as a dict, which is also the ``data``
of a ``swap`` message in the store), records journaled before ``move`` existed too. A move with
no token figures (``/clear``'s empty session, a move refused before it wrote anything) shows
none, never "unknown -> unknown".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from liminal.units import tokens

# Reasons journaled before they were said in words (``liminal.errors``): a failure began
# with its exception's class name, and a move cut short by liminal's stop named the cancellation.
_OLD_CLASS = re.compile(r"^[A-Z]\w*(?:Error|Exception): ")
_OLD_STOPPED = re.compile(r"^stopped during the swap \(\w+\)$")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def what(record: Mapping[str, Any]) -> str:
    """The move: ``swap`` (liminal's own), the command as given (``/undo``, ``/clear A``), or
    ``reopen``. An older record's: a committed one's reason names its command; a move the cost
    policy decided has its terms (``cost``); anything else is a ``move``."""
    move = record.get("move")
    if isinstance(move, str) and move:
        return move
    reason = str(record.get("reason") or "")
    if record.get("outcome") == "committed":
        if reason.startswith("/"):
            return reason
        return "reopen" if reason.startswith("reopened") else "swap"
    return "swap" if isinstance(record.get("cost"), dict) else "move"


# liminal's own rewrites of the context; the other moves (/clear, /undo, reopen) are the person's,
# and the CLI without liminal has them too.
REWRITES = ("swap", "/optimise")


def is_rewrite(record: Mapping[str, Any]) -> bool:
    """A move that is liminal's rewrite of the context: a swap, or ``/optimise`` (with its words,
    ``/optimise hard``, too): what the dashboard counts as swaps."""
    words = what(record).split(None, 1)
    return bool(words) and words[0] in REWRITES


def why(record: Mapping[str, Any]) -> str:
    """Why it happened, or why not: empty when the reason only repeats the command's name."""
    reason = _OLD_CLASS.sub("", str(record.get("reason") or ""))
    if _OLD_STOPPED.match(reason):
        reason = "liminal stopped during the swap (its client had closed its connection, or it was signalled)"
    return "" if reason == what(record) else reason


def size(record: Mapping[str, Any]) -> str:
    """``131.2k -> 38.5k tokens``, ``about 13.7k tokens before and after`` when the two read
    the same, ``at 131.2k tokens`` when only the size before is known, or nothing."""
    before, after = _int(record.get("tokens_before")), _int(record.get("tokens_after"))
    if before is not None and after is not None:
        if tokens(before) == tokens(after):
            return f"about {tokens(before)} tokens before and after"
        return f"{tokens(before)} -> {tokens(after)} tokens"
    if before is not None:
        return f"at {tokens(before)} tokens"
    return ""


def done(record: Mapping[str, Any]) -> str:
    """A committed move in words, what it did to the model's context: ``/undo took the last turn
    out of the model's context``, ``swap compressed the model's context``."""
    move = what(record)
    name, _, mark = move.partition(" ")
    if name == "/undo" and record.get("opened") == "empty":
        return "/undo took out the only turn: the model's context is empty"
    if name == "/undo":
        return "/undo took the last turn out of the model's context"
    if name in REWRITES:
        return f"{move} compressed the model's context"
    if name == "/clear":
        return f"{move} took the model's context back to mark {mark}" if mark else \
            "/clear emptied the model's context"
    return f"{move} committed"


def unchanged(record: Mapping[str, Any]) -> str:
    """Why a committed move left the context the size it was, as the tokens read (one turn
    taken out of a thousand tokens or more can be a tenth of a thousand), or nothing."""
    before, after = _int(record.get("tokens_before")), _int(record.get("tokens_after"))
    if before is None or after is None or tokens(before) != tokens(after):
        return ""
    return "what it took out held less than 0.1k tokens" if before >= 1000 else ""


def describe(record: Mapping[str, Any], *, committed_why: bool = True, took: bool = False) -> str:
    """The whole line: the move, what it did (or that it did not happen), its tokens, with
    ``took`` how long it held the thread, then why (for a committed move only with
    ``committed_why``)."""
    outcome = str(record.get("outcome") or "?")
    seconds = record.get("duration_s")
    timed = f"in {seconds:.2f} s" if took and isinstance(seconds, (int, float)) \
        and not isinstance(seconds, bool) else ""
    if outcome == "committed":
        sized = size(record)  # ("at" only a move that did not happen stays at)
        aside = ", ".join(p for p in (sized.replace("at ", "from ", 1) if sized.startswith("at ") else sized,
                                      timed) if p)
        reason = (why(record) if committed_why else "") or unchanged(record)
        return done(record) + (f" ({aside})" if aside else "") + (f": {reason}" if reason else "")
    head = [f"{what(record)} {outcome}", *(p for p in (size(record), timed) if p)]
    reason = why(record)
    return ", ".join(head) + (f": {reason}" if reason else "")
