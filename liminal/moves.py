"""A move of a thread (liminal's swap, ``/undo``, ``/clear``, ...) as a person reads it, one
line, the same in ``/context``, ``liminal swaps``, ``liminal history`` and search:

    swap committed, 131.2k -> 38.5k tokens: context 131.2k tokens >= 120k: ...
    /undo committed, 15.4k -> 8.8k tokens
    /clear committed
    /undo failed: the last turn is not on disk yet

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

# Reasons journaled before they were said in words (``liminal.kernel.errors``): a failure began
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
    """``131.2k -> 38.5k tokens``, ``at 131.2k tokens`` when only the size before is known, or
    nothing."""
    before, after = _int(record.get("tokens_before")), _int(record.get("tokens_after"))
    if before is not None and after is not None:
        return f"{tokens(before)} -> {tokens(after)} tokens"
    if before is not None:
        return f"at {tokens(before)} tokens"
    return ""


def describe(record: Mapping[str, Any], *, committed_why: bool = True, took: bool = False) -> str:
    """The whole line: the move and its outcome, the tokens, with ``took`` how long it held the
    thread, then why (for a committed move only with ``committed_why``)."""
    outcome = str(record.get("outcome") or "?")
    head = [f"{what(record)} {outcome}"]
    if size(record):
        head.append(size(record))
    seconds = record.get("duration_s")
    if took and isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        head.append(f"in {seconds:.2f} s")
    reason = why(record) if committed_why or outcome != "committed" else ""
    return ", ".join(head) + (f": {reason}" if reason else "")
