"""``liminal swaps [THREAD] [--json]``: every move of a thread tried (liminal's swaps, and the
moves of ``/clear``, ``/undo``, ``/optimise``), from the journal: the shared store's when the
store is shared (MongoDB: every sidecar's moves), else this home's."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from liminal.config import Settings

if TYPE_CHECKING:
    from liminal.kernel.journal import SwapJournal, SwapRecord

HELP = ("list every move (liminal's swaps, /clear, /undo, /optimise): when, tokens before and after, "
        "cost and savings, why")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread", nargs="?", help="only this thread (its id, or a unique prefix of it)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from liminal.kernel.journal import SwapJournal

    journal = SwapJournal(settings.journal_path)
    if args.thread is not None:
        named = _thread_named(settings, journal, args.thread)
        if isinstance(named, int):
            return named
        args.thread = named
    records = _from_store(settings, args.thread)
    if records is None:
        records = journal.records(args.thread)
    if args.json:
        for record in records:
            sys.stdout.buffer.write(record.to_json() + b"\n")
        return 0
    if not records:
        print("no moves yet" + (f" for {args.thread}" if args.thread else ""))
        return 0
    # Cost in input-token equivalents (liminal.kernel.policy): "rebuild" is what the first call
    # after the swap paid beyond continuing (negative when the thread was idle past the cache's
    # life: the swap saved on a rebuild that came anyway), "saves" what each later call saves,
    # "payback" the calls that takes; "summary" what the model's summary of the cycle costs
    # besides (swap.summaries: its side session, as the policy estimates it).
    from dataclasses import asdict

    from liminal import moves
    from liminal.commands._out import Column, table
    from liminal.commands.threads import short_ids
    from liminal.units import plural, tokens

    ids = short_ids(list(dict.fromkeys(r.thread_id for r in records)))
    # The summaries' column only where a swap had one priced (swap.summaries on): the rest of
    # the table keeps its width.
    summaries = any((r.cost or {}).get("summary") for r in records)
    rows = []
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started_at))
        size = "-"
        if r.tokens_before is not None:
            size = tokens(r.tokens_before) + (f" -> {tokens(r.tokens_after)}"
                                              if r.tokens_after is not None else "")
        fields = asdict(r)
        cost = r.cost or {}
        payback = cost.get("payback_calls")
        payback_text = "-"
        if cost.get("idle"):
            payback_text = "now"
        elif isinstance(payback, (int, float)) and not isinstance(payback, bool) \
                and payback != float("inf"):
            payback_text = plural(round(payback), "call")
        saves = _k(cost.get("saves_per_call"))
        summary = cost.get("summary")
        move = moves.what(fields)
        row = [when, ids[r.thread_id], move if r.outcome == "committed" else f"{move} {r.outcome}", size,
               _k(cost.get("rebuild")), _k(summary) if summary else "-", saves if saves == "-" else f"{saves}/call",
               payback_text, f"{r.duration_s:.2f} s", moves.why(fields)]
        rows.append(tuple(row if summaries else row[:5] + row[6:]))
    columns = [Column("WHEN", lead=True), Column("THREAD", lead=True),
               Column("MOVE", fit="end", least=8, lead=True),
               Column("TOKENS", right=True, lead=True, label="{} tokens"),
               Column("REBUILD", right=True), Column("SUMMARY", right=True), Column("SAVES", right=True),
               Column("PAYBACK", right=True, label=lambda v: "pays back now" if v == "now" else f"pays back in {v}"),
               Column("TOOK", right=True), Column("WHY", below=True)]
    table(columns if summaries else columns[:5] + columns[6:], rows)
    return 0


def _thread_named(settings: Settings, journal: SwapJournal, text: str) -> str | int:
    """The thread ``text`` names (``liminal.lookup.names``): in the store, else among the
    threads this home's journal knows (a store that is off or cannot be read); else the exit
    code, said on stderr."""
    from typing import Any

    from liminal.commands._store import refuse, run_with_store
    from liminal.lookup.names import Named, match, resolve

    async def body(store: Any) -> Named | list[str]:
        return await resolve(store, text)

    nothing: Named | list[str] = []
    in_store = run_with_store(settings, body, not_yet=nothing, quiet=True)
    if isinstance(in_store, Named):
        return in_store.thread
    if isinstance(in_store, list) and in_store:
        return refuse("swaps", text, in_store)
    lineage: dict[str, list[str]] = {}  # none in the store, or no store: the journal's
    for r in journal.records():
        lineage.setdefault(r.thread_id, [r.thread_id])
        lineage[r.thread_id] += [b for b in (r.old_backing_id, r.new_backing_id) if b]
    in_journal = match(text, lineage.items())
    return in_journal.thread if isinstance(in_journal, Named) else refuse("swaps", text, in_journal)


def _k(value: object) -> str:
    from liminal.units import tokens

    return tokens(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def _from_store(settings: Settings, thread: str | None) -> list[SwapRecord] | None:
    """The shared store's journal (None: the store is not shared, or cannot be read: said on
    stderr, and this home's journal is shown)."""
    if not settings.store.url.startswith(("mongodb://", "mongodb+srv://")):
        return None
    import anyio

    from liminal.errors import in_words
    from liminal.kernel.storejournal import StoreJournal
    from liminal.store.configured import open_store

    async def read() -> list[SwapRecord]:
        shared = StoreJournal(lambda: open_store(settings, create=False), 0.0, settings.home)
        try:
            return [r for r in await shared.records(thread) if r.outcome != "begin"]
        finally:
            await shared.aclose()

    try:
        return anyio.run(read)
    except Exception as exc:
        said = in_words(exc).split(" (configured timeouts", 1)[0]  # pymongo says much more
        print(f"liminal swaps: the shared store could not be read ({said}); "
              "this machine's journal only", file=sys.stderr)
        return None
