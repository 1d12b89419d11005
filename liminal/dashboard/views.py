"""What the dashboard shows, as JSON-ready values computed from the store (read only).

The same reading as the commands: ``Store.threads`` for the list (``liminal threads``),
``conversation`` and ``turn_numbers`` for a transcript (``liminal history``), ``moves`` for a
move's words (``liminal swaps``), and in the Reader ``liminal.lookup.search.find`` for search
(``liminal search``) and ``liminal.lookup.memos.find_memos`` for the memos. What is new here is
the chart's points, where moves and marks fall on them, what the model still sees of each turn,
and the savings estimate (``savings``), each a pure function of the thread's messages.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from liminal import moves
from liminal.kernel.policy import (
    PAYBACK_LEAST,
    PRICES,
    CostPolicy,
    Moved,
    Pace,
    Prices,
    auto_compact,
    cache_prices,
    measure_payback,
    still_cached,
)
from liminal.lookup.scratchpad import KIND as SCRATCHPAD
from liminal.lookup.shown import cli_name, tool_output
from liminal.store.records import (
    MessageRecord,
    Thread,
    ThreadSummary,
    context_now,
    conversation,
    turn_numbers,
)

# What a transcript carries of a tool's output; the rest on request (``/api/message``).
OUTPUT_CHARS = 1_500
OUTPUT_LINES = 12


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


# -- the chart ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Point:
    order: str
    time: float
    turn: int | None
    used: int
    size: int | None


def points(messages: Sequence[MessageRecord], numbers: dict[str, int]) -> list[Point]:
    """The context at every model call: the usage points recorded live, a repeat of the same
    size in the same turn left out (the adapters send one several times a call)."""
    out: list[Point] = []
    for m in messages:
        used = _int(m.data.get("used"))
        if m.kind != "usage" or m.replayed or used is None:
            continue
        turn = numbers.get(m.turn_id or "")
        if out and out[-1].used == used and out[-1].turn == turn:
            continue
        out.append(Point(m.order, m.time, turn, used, _int(m.data.get("size"))))
    return out


def at_call(orders: list[str], order: str) -> int:
    """How many model calls came before something recorded at ``order``: where it is drawn."""
    return bisect.bisect_left(orders, order)


def move_view(m: MessageRecord, at: int, turn: int | None) -> dict[str, Any]:
    record = {"outcome": m.status, **m.data}
    found = m.data.get("cost")
    cost: dict[str, Any] = found if isinstance(found, dict) else {}
    payback = cost.get("payback_calls")
    return {
        "id": m.id, "at": at, "turn": turn, "time": m.time, "move": moves.what(record),
        "rewrite": moves.is_rewrite(record),
        "outcome": m.status, "tokens_before": _int(m.data.get("tokens_before")),
        "tokens_after": _int(m.data.get("tokens_after")), "why": moves.why(record),
        "text": moves.describe(record, took=True),
        "duration_s": m.data.get("duration_s"), "rebuild": cost.get("rebuild"),
        "saves_per_call": cost.get("saves_per_call"),
        # The model's summary of the swap's cycle (``swap.summaries``), as the policy priced it.
        "summary": _number(cost.get("summary")),
        "payback_calls": payback if isinstance(payback, (int, float)) and payback != float("inf") else None,
        # The model calls since the move before, as liminal counted them (None: not counted).
        "calls_since_move": _int(cost.get("calls_since_move")),
        "idle": bool(cost.get("idle")),
        # The thread's prompt cache as the move's decision priced it (the CLI's records).
        "cache_life": cost.get("cache_life") if isinstance(cost.get("cache_life"), (int, float)) else None,
    }


def model_window(messages: Sequence[MessageRecord]) -> int | None:
    """The model's window, as the thread's last usage point that says one gives it (what the
    CLI's own compaction point follows: ``SessionHarness.ceiling_at``)."""
    for m in reversed(messages):
        size = _int(m.data.get("size")) if m.kind == "usage" else None
        if size:
            return size
    return None


# A heading is one line: a title the agent never gave stands in as the first prompt, whole.
HEADING_CHARS = 90


def heading(title: str) -> str:
    """A thread's title cut to one line for a heading: its first line, at most ``HEADING_CHARS``
    characters, cut at a word with an ellipsis (the whole title is the heading's tooltip)."""
    line = next((part.strip() for part in title.splitlines() if part.strip()), "")
    if len(line) <= HEADING_CHARS and line == title.strip():
        return line
    if len(line) > HEADING_CHARS:
        cut = line[:HEADING_CHARS]
        line = cut.rsplit(None, 1)[0] if " " in cut.strip() else cut
    return line.rstrip(" ,.;:") + "…"


# -- what swaps cost against the calls between them ---------------------------------------------


def cycles(committed: Sequence[dict[str, Any]], calls: Sequence[Point]) -> list[Moved]:
    """The thread's committed moves as ``policy.measure_payback`` reads them: the model calls
    since the move before each as liminal counted them (``calls_since_move``), else, where the
    adapter sent usage points, those drawn between the two (a move after no new point: not known)."""
    out: list[Moved] = []
    before: int | None = None
    for move in committed:
        counted = move["calls_since_move"]
        if counted is None and calls and before is not None and move["at"] > before:
            counted = move["at"] - before
        out.append((move["move"] == "swap", move["payback_calls"], counted))
        before = move["at"]
    return out


def pace_of(calls: Sequence[Point], committed: Sequence[dict[str, Any]]) -> Pace:
    """How the thread's context grew per model call: the median growth from one usage point to
    the next with no move between (the default before it has shown any)."""
    moved = {m["at"] for m in committed}
    grew = [b.used - a.used for n, (a, b) in enumerate(itertools.pairwise(calls), 1)
            if n not in moved and b.used > a.used]
    return Pace(per_call=statistics.median(grew)) if grew else Pace()


def payback_view(committed: Sequence[dict[str, Any]], calls: Sequence[Point],
                 policy: CostPolicy | None) -> dict[str, Any] | None:
    """The thread's swaps against the calls between them (``policy.measure_payback``) and, when
    most did not repay before the next, what the policy says to change (``losing_money``, with
    the settings in force now); None: no swap measured."""
    measured = measure_payback(cycles(committed, calls))
    if measured is None:
        return None
    warning = (policy.losing_money(pace_of(calls, committed), measured)
               if policy is not None and measured.swaps >= PAYBACK_LEAST else [])
    return {"swaps": measured.swaps, "losing": measured.losing, "payback": measured.payback,
            "between": measured.between, "warning": warning}


# -- what it saved ------------------------------------------------------------------------------


def summaries_paid(committed: Sequence[dict[str, Any]], summaries: Sequence[float]) -> float:
    """What the model's summaries made for the thread's swaps cost: each side session that
    stored one (a range, a fold, an anchor rebuilt; ``summaries``: their times) after a swap
    and before the next, priced as that next swap's record priced its cycle's summary. The
    record prices one for every cycle with ``swap.summaries`` on, made or not (a thread whose
    context jumped past the trigger made none); those since the last swap wait for theirs."""
    paid, since = 0.0, float("-inf")
    for move in committed:
        if not move["rewrite"]:
            continue
        paid += sum(1 for t in summaries if since < t <= move["time"]) * (move["summary"] or 0.0)
        since = move["time"]
    return paid


def savings(calls: Sequence[Point], committed: Sequence[dict[str, Any]], ceiling: int,
            cache_life: float, prices: Prices = PRICES, summaries: Sequence[float] = ()) -> dict[str, Any] | None:
    """The thread's model calls priced as made against the same conversation under the CLI's
    own auto-compact, in input-token equivalents (``liminal.kernel.policy.Prices``): a call
    reads from the cache what the previous call sent unless a move came between (a rewrite is
    written anew) or it came more than ``cache_life`` seconds after it; without liminal, the
    context grows by what the conversation added and the CLI compacts past ``ceiling`` at a
    turn's end (``kernel.policy.auto_compact``, as the cost model has it). The person's own moves (``/clear``,
    ``/undo``) happen in both. Output is the same both ways and left out, but for the model's
    summaries (``swap.summaries``, on by default): their side sessions are kept from the store,
    so each one made (``summaries``, their times) is counted on liminal's side as the policy
    priced it (``summaries_paid``). An estimate from the usage points: None for a thread with
    fewer than two. A thread whose last move was priced at a longer-lived cache (the CLI's
    records said so: ``CostPolicy.learned``) is priced at it, its writes at ``LONG_CACHE_WRITE``,
    both ways."""
    if len(calls) < 2:
        return None
    lives = [m["cache_life"] for m in committed if m.get("cache_life")]
    if lives:
        cache_life = lives[-1]
        prices = cache_prices(prices, cache_life)
    by_call: dict[int, list[dict[str, Any]]] = {}
    for move in committed:
        by_call.setdefault(move["at"], []).append(move)
    made = auto = 0.0
    made_sum = auto_sum = 0
    compactions = 0
    overhead = calls[0].used
    context_auto = calls[0].used
    cached_made = cached_auto = 0
    for n, call in enumerate(calls):
        before = by_call.get(n, []) if n else []
        if n:
            grew = call.used - calls[n - 1].used
            idle = call.time - calls[n - 1].time
            cached_made = still_cached(cached_made, idle, cache_life)
            cached_auto = still_cached(cached_auto, idle, cache_life)
            if before:
                cached_made = 0
                last = before[-1]
                if all(m["rewrite"] for m in before) and last["tokens_after"] is not None:
                    grew = call.used - last["tokens_after"]
                else:  # the person's move: the same without liminal
                    context_auto, cached_auto, grew = call.used, 0, 0
            context_auto += grew
        made += prices.input(call.used, cached_made)
        auto += prices.input(context_auto, cached_auto)
        made_sum += call.used
        auto_sum += context_auto
        cached_made, cached_auto = call.used, context_auto
        turn_ends = n + 1 == len(calls) or calls[n + 1].turn != call.turn
        if turn_ends and context_auto > ceiling:
            cost, context_auto = auto_compact(context_auto, overhead, prices)
            auto += cost
            cached_auto = 0
            compactions += 1
    paid = summaries_paid(committed, summaries)
    made += paid
    return {"made": round(made), "summaries": round(paid), "auto_compact": round(auto), "saved": round(auto - made),
            "saved_share": round((auto - made) / auto, 3) if auto else 0.0,
            "mean_context": round(made_sum / len(calls)),
            "mean_context_auto": round(auto_sum / len(calls)), "compactions": compactions,
            "ceiling": ceiling}


# -- the list -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Terms:
    """What a thread's savings and payback are measured against: ``ceiling``, ``cache_life`` and
    ``summaries`` as ``savings`` takes them, ``policy`` as ``payback_view``."""

    ceiling: int
    cache_life: float
    summaries: Sequence[float] = ()
    policy: CostPolicy | None = None


def thread_row(summary: ThreadSummary, messages: Sequence[MessageRecord], terms: Terms) -> dict[str, Any]:
    """One row of the threads list; ``messages``: the thread's usage and swap messages."""
    t = summary.thread
    # (Which turn a usage point is in tells the turns apart; no command's turn has one.)
    numbers = turn_numbers((m for m in messages if m.kind == "usage"), ())
    calls = points(messages, numbers)
    orders = [p.order for p in calls]
    committed = [move_view(m, at_call(orders, m.order), None) for m in messages
                 if m.kind == "swap" and m.status == "committed"]
    return {
        "id": t.id, "title": t.title, "heading": heading(t.title), "cli": cli_name(t.harness),
        "cwd": t.cwd, "state": t.state, "turns": summary.turns, "context_used": summary.context_used,
        "context_size": summary.context_size,
        # liminal's own rewrites (``moves.is_rewrite``), as the thread's page counts them; every
        # move (/clear, /undo too) is ``moves``, as ``liminal threads`` MOVES.
        "swaps": sum(1 for m in committed if m["rewrite"]), "moves": len(committed),
        "last_activity": summary.last_activity, "created": t.created,
        "savings": savings(calls, committed, terms.ceiling, terms.cache_life, summaries=terms.summaries),
        "payback": payback_view(committed, calls, terms.policy),
    }


# -- a thread -----------------------------------------------------------------------------------


def seen_states(shown: Sequence[MessageRecord], liminals: Collection[str], head: int | None,
                summary_before: bool) -> dict[str, str]:
    """What the model sees now of each prompt that reached it (not ``liminals``, the commands
    liminal answered: ``Store.liminal_turns``), by message id: ``context`` (in
    its context now, whole or with tool output cut), ``summarised`` (only in a swap's preamble),
    ``cleared`` (taken out by ``/clear``), ``undone`` (by ``/undo``), or ``unknown`` (the
    session file is not on this machine to count its turns).

    The moves, in order, take prompts out: ``/clear`` all of them, ``/clear MARK`` those after
    the mark, ``/undo`` the last. The session the last move opened begins with what liminal
    wrote into it: ``head`` turns (the file's turns that start in liminal's bytes), which are
    the last ``head`` of the prompts left at that move; the older ones live on only in the
    summary before them (``summary_before``) or not at all. Every prompt since is the CLI's
    own, appended: in the context, whether or not the CLI has written it yet (counting from
    the file's end would shift by the turn under way)."""
    marks: dict[str, str] = {}
    live: list[MessageRecord] = []
    state: dict[str, str] = {}
    moved = 0  # prompts left at the last move: the ones liminal wrote into the session
    for m in shown:
        if m.kind == "user" and m.turn_id not in liminals:
            live.append(m)
        elif m.kind == "mark":
            marks[m.text] = m.order
        elif m.kind == "swap" and m.status == "committed":
            what = moves.what({"outcome": m.status, **m.data})
            if what == "/undo" and live:
                state[live.pop().id] = "undone"
            elif what == "/clear":
                state.update((p.id, "cleared") for p in live)
                live = []
            elif what.startswith("/clear "):
                since = marks.get(what.split(None, 1)[1])
                if since is not None:
                    state.update((p.id, "cleared") for p in live if p.order > since)
                    live = [p for p in live if p.order <= since]
            moved = len(live)
    older, newer = live[:moved], live[moved:]
    state.update((p.id, "context") for p in newer)
    if head is None:
        state.update((p.id, "unknown") for p in older)
        return state
    kept = len(older) - min(head, len(older))
    for n, p in enumerate(older):
        state[p.id] = "context" if n >= kept else ("summarised" if summary_before else "cleared")
    return state


def message_view(m: MessageRecord, cut: dict[str, list[str]], liminals: Collection[str] = ()) -> dict[str, Any] | None:
    """A message as the transcript shows it; None for what a person does not read (usage
    points, a turn that ended normally). A command liminal answered (its turn in ``liminals``)
    is said to be one: ``to_liminal``, the person's words to liminal and liminal's answer."""
    if m.kind == "usage" or (m.kind == "turn_end" and m.status == "end_turn"):
        return None
    view: dict[str, Any] = {"id": m.id, "kind": m.kind, "time": m.time}
    if m.turn_id is not None and m.turn_id in liminals:
        view["to_liminal"] = True
    if m.kind == "tool_call":
        data = m.data
        title = str(data.get("title") or data.get("name") or "tool")
        output = tool_output(data)
        lines = output.splitlines()
        short = "\n".join(lines[:OUTPUT_LINES])[:OUTPUT_CHARS]
        view.update(title=title, status=m.status, output=short, more=len(short) < len(output),
                    keys=cut.get(m.tool_call_id or "", []))
    elif m.kind == "plan":
        view["entries"] = [{"content": str(e.get("content", "")), "status": e.get("status")}
                           for e in m.data.get("entries", []) if isinstance(e, dict)]
    elif m.kind == "swap":
        view["text"] = moves.describe({"outcome": m.status, **m.data}, committed_why=False, took=True)
    elif m.kind == "turn_end":
        error = m.data.get("error")
        said = f": {error.get('message')}" if isinstance(error, dict) and error.get("message") else ""
        view["text"] = f"turn ended: {m.status or '?'}{said}"
    else:
        view["text"] = m.text
    return view


@dataclass(frozen=True, slots=True)
class Window:
    """Which turns of a transcript to send: ``lo`` to ``hi`` (indexes, ``hi`` excluded), or
    ``WINDOW`` of them from a little before the turn holding message ``at`` or numbered
    ``turn``, or else the last ``WINDOW``. A page holds a window, and asks for more."""

    lo: int | None = None
    hi: int | None = None
    at: str | None = None
    turn: int | None = None

    def range(self, turns: Sequence[dict[str, Any]]) -> tuple[int, int]:
        count = len(turns)
        if self.lo is not None or self.hi is not None:
            lo = max(0, min(count, self.lo or 0))
            return lo, max(lo, min(count, self.hi if self.hi is not None else count))
        found = next((n for n, t in enumerate(turns)
                      if (self.turn is not None and t["n"] == self.turn)
                      or (self.at is not None and any(m.id == self.at for m in t["raw"]))), None)
        if found is None:
            return max(0, count - WINDOW), count
        lo = max(0, found - 5)
        return lo, min(count, lo + WINDOW)


WINDOW = 60


def transcript(shown: Sequence[MessageRecord], numbers: dict[str, int], liminals: Collection[str],
               seen: dict[str, str], cut: dict[str, list[str]], window: Window) -> dict[str, Any]:
    """The conversation as turns: each with its number (``numbers``: None before liminal saw
    the thread), time, the context at its end, what the model sees of it now, and, for the
    turns of ``window`` only, its messages (a 1,000-turn thread is a megabyte of them). A
    command liminal answered (``liminals``) is no turn: it is in the turn before it, as a move
    is (``liminal`` marks one that came before any turn)."""
    turns: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for m in shown:
        number = numbers.get(m.turn_id or "") if not m.replayed else None
        command = m.turn_id is not None and m.turn_id in liminals
        if current is None or (number is not None and number != current["n"]) \
                or (m.kind == "user" and current["raw"] and number is None and not command):
            current = {"n": number, "time": m.time, "context": None, "seen": None, "raw": []}
            if command:
                current["liminal"] = True
            turns.append(current)
        if m.kind == "usage" and _int(m.data.get("used")) is not None:
            current["context"] = m.data["used"]
        if m.kind == "user" and m.id in seen and current["seen"] is None:
            current["seen"] = seen[m.id]
        current["raw"].append(m)
    lo, hi = window.range(turns)
    sent = []
    for turn in turns[lo:hi]:
        raw = turn.pop("raw")
        turn["messages"] = [v for v in (message_view(m, cut, liminals) for m in raw) if v is not None]
        sent.append(turn)
    return {"turns": sent, "lo": lo, "hi": hi, "count": len(turns)}


def scratchpad_view(messages: Sequence[MessageRecord]) -> dict[str, Any] | None:
    """The thread's scratchpad (``liminal.lookup.scratchpad``: a message of the thread), or None."""
    pad = next((m for m in reversed(messages) if m.kind == SCRATCHPAD and m.text), None)
    if pad is None:
        return None
    return {"text": pad.text, "chars": len(pad.text), "time": pad.time, "by": pad.data.get("by") or "person"}


def turns_view(messages: Sequence[MessageRecord], liminals: Collection[str], *, head: int | None,
               summary_before: bool, cut: dict[str, list[str]], window: Window | None = None) -> dict[str, Any]:
    """The transcript alone, as ``thread_view`` has it (a page asking for more turns)."""
    shown = conversation(messages)
    return transcript(shown, turn_numbers(shown, liminals), liminals,
                      seen_states(shown, liminals, head, summary_before), cut, window or Window())


def thread_view(thread: Thread, messages: Sequence[MessageRecord], liminals: Collection[str], *,
                head: int | None, summary_before: bool, cut: dict[str, list[str]], terms: Terms,
                window: Window | None = None) -> dict[str, Any]:
    """Everything a thread's page shows but its bands (asked for apart: they read the CLI's
    file, ``Reader.bands``); ``liminals``: the turns liminal answered itself (its commands:
    ``Store.liminal_turns``), which are no turns of the conversation."""
    shown = conversation(messages)
    numbers = turn_numbers(shown, liminals)
    calls = points(shown, numbers)
    orders = [p.order for p in calls]
    # A move or a mark between turns has no turn of its own: it is after the last one begun.
    turn_of: dict[str, int | None] = {}
    last: int | None = None
    for m in shown:
        last = numbers.get(m.turn_id or "", last) if not m.replayed else last
        turn_of[m.id] = last
    every_move = [move_view(m, at_call(orders, m.order), turn_of[m.id])
                  for m in shown if m.kind == "swap"]
    committed = [m for m in every_move if m["outcome"] == "committed"]
    marks = [{"name": m.text, "at": at_call(orders, m.order), "time": m.time, "turn": turn_of[m.id]}
             for m in shown if m.kind == "mark"]
    seen = seen_states(shown, liminals, head, summary_before)
    # As the list and ``liminal threads`` say it: a move since the last model call set it.
    usage = next((m for m in reversed(messages) if m.kind == "usage"), None)
    move = next((m for m in reversed(messages) if m.kind == "swap" and m.status == "committed"), None)
    used, size = context_now(None if usage is None else (usage.order, usage.data),
                             None if move is None else (move.order, move.data))
    # A move since the last model call: the chart draws the context it left after that call.
    moved = move is not None and used is not None and (usage is None or move.order > usage.order)
    return {
        "thread": {
            "id": thread.id, "title": thread.title, "heading": heading(thread.title),
            "cli": cli_name(thread.harness),
            "cwd": thread.cwd, "state": thread.state, "backing_ids": list(thread.backing_ids),
            "created": thread.created, "updated": thread.updated},
        "context_now": {"used": used, "size": size, "moved": moved},
        "points": [{"turn": p.turn, "used": p.used, "size": p.size, "time": p.time} for p in calls],
        "moves": every_move, "marks": marks, "ceiling": terms.ceiling,
        "swaps": sum(1 for m in committed if m["rewrite"]), "move_count": len(committed),
        "savings": savings(calls, committed, terms.ceiling, terms.cache_life, summaries=terms.summaries),
        "payback": payback_view(committed, calls, terms.policy),
        "scratchpad": scratchpad_view(messages),
        "context_file": head is not None, "summary_before": summary_before,
        "turn_count": len(numbers),
        "transcript": transcript(shown, numbers, liminals, seen, cut, window or Window()),
    }
