"""``liminal threads [--json]``: every thread the store knows, most recently active first."""

from __future__ import annotations

import argparse
from typing import Any

from liminal.config import Settings

HELP = "list threads: title, harness, cwd, turns, context size, swaps, last activity"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from liminal.commands._store import print_json, run_with_store, short, when
    from liminal.store.records import ThreadSummary

    async def body(store: Any) -> list[ThreadSummary]:
        result: list[ThreadSummary] = await store.threads(limit=args.limit)
        return result

    summaries = run_with_store(settings, body)
    if summaries is None:
        return 1
    if args.json:
        print_json([{
            "id": s.thread.id, "title": s.thread.title, "harness": s.thread.harness,
            "cwd": s.thread.cwd, "state": s.thread.state, "turns": s.turns,
            "context_used": s.context_used, "context_size": s.context_size, "swaps": s.swaps,
            "backing_ids": list(s.thread.backing_ids), "created": s.thread.created,
            "last_activity": s.last_activity} for s in summaries])
        return 0
    if not summaries:
        print("no threads yet")
        return 0
    rows = [("THREAD", "TITLE", "HARNESS", "CWD", "TURNS", "CONTEXT", "SWAPS", "LAST ACTIVITY")]
    for s in summaries:
        context = "-"
        if s.context_used is not None:
            context = f"{s.context_used:,}" + (f"/{s.context_size:,}" if s.context_size else "")
        rows.append((s.thread.id, short(s.thread.title, 40) or "-", s.thread.harness or "-",
                     short(s.thread.cwd, 30) or "-", str(s.turns), context, str(s.swaps),
                     when(s.last_activity)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    return 0
