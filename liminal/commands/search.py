"""``liminal search QUERY [--thread T] [--json]``: full-text search across history, best first."""

from __future__ import annotations

import argparse
from typing import Any

from liminal.commands._args import count
from liminal.config import Settings

HELP = "full-text search across every thread's history, best match first"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="+", help="words that must all appear")
    parser.add_argument("--thread", help="only this thread (a unique prefix of its id is enough)")
    parser.add_argument("--limit", type=count(), default=20, help="at most this many (default 20)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from liminal.commands._store import print_json, run_with_store, when
    from liminal.store.records import SearchHit

    query = " ".join(args.query)

    async def body(store: Any) -> list[SearchHit]:
        thread = args.thread
        if thread:  # a unique prefix of its id is enough, as for ``liminal history``
            from liminal.commands.history import resolve

            found = await resolve(store, thread)
            thread = found if isinstance(found, str) else thread
        hits: list[SearchHit] = await store.search(query, thread_id=thread, limit=args.limit)
        return hits

    hits = run_with_store(settings, body)
    if hits is None:
        return 1
    if args.json:
        print_json([{"source": h.source, "id": h.id, "thread_id": h.thread_id, "kind": h.kind,
                     "time": h.time, "score": h.score, "snippet": h.snippet} for h in hits])
        return 0
    if not hits:
        print("no match")
        return 0
    for h in hits:
        where = h.thread_id or "?"
        print(f"{where}  {when(h.time)}  {h.source}:{h.kind}  {h.id}\n    {h.snippet}")
    return 0
