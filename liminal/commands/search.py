"""``liminal search QUERY [--thread T] [--all] [--json]``: the conversation across history, best
first: what the person and the model said and what tools returned, once each, with when and
where (thread title, turn), then the memos holding every word (not with ``--thread``, nor in
``--json``, which lists only the conversation's hits). ``--all`` adds what stays out otherwise: liminal's own commands and
notes, and the CLIs' bookkeeping records (``liminal.lookup.search``)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from liminal.commands._args import count
from liminal.config import Settings

HELP = "search what was said in every thread (or one), best match first"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="+", help="words that must all appear")
    parser.add_argument("--thread", help="only this thread (its id, or a unique prefix of it)")
    parser.add_argument("--limit", type=count(), default=20, help="at most this many (default 20)")
    parser.add_argument("--all", action="store_true",
                        help="also liminal's own commands and notes and the CLIs' bookkeeping records")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from liminal.commands._out import Transcript
    from liminal.commands._store import print_json, refuse, resolve, run_with_store
    from liminal.lookup.memos import MEMO_THREAD, describe, memos_matching
    from liminal.lookup.search import Found, find
    from liminal.store.base import fts_terms
    from liminal.store.records import MessageRecord

    query = " ".join(args.query)

    # The hits, the memos, and what names no single thread (None: all threads, or the one named).
    Answer = tuple[list[Found], list[MessageRecord], list[str] | None]

    async def body(store: Any) -> Answer:
        thread = args.thread
        if thread is not None:  # a prefix names the thread, as for liminal history
            named = await resolve(store, thread)
            if isinstance(named, list):
                return [], [], named
            thread = named
        hits = await find(store, query, thread_id=thread, limit=args.limit, everything=args.all)
        return hits, [] if thread is not None or args.json else await memos_matching(store, query), None

    none: Answer = ([], [], None if args.thread is None else [])
    answered = run_with_store(settings, body, not_yet=none)
    if answered is None:
        return 1
    found, memos, unnamed = answered
    if unnamed is not None:
        return refuse("search", args.thread, unnamed)
    if args.json:
        print_json([{
            "thread_id": f.hit.thread_id, "thread_title": f.title, "turn": f.turn, "who": f.who,
            "tool": f.tool or None, "time": f.hit.time, "snippet": f.hit.snippet,
            "score": f.hit.score, "source": f.hit.source, "kind": f.hit.kind, "id": f.hit.id,
            "message_id": f.hit.message_id} for f in found])
        return 0
    out = Transcript()
    terms = fts_terms(query)  # shown marked in what was found, on a terminal
    for memo in memos:  # what the person asked liminal to keep: first
        out.line(f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(memo.time))} · memo", style="bold")
        out.line(describe(memo), indent=4, marks=terms)
    listed = {m.id for m in memos}  # (--all finds them again among liminal's own messages)
    found = [f for f in found if not (f.hit.thread_id == MEMO_THREAD and f.hit.id in listed)]
    if not found and not memos:
        out.line("no match" + ("" if args.all else "; --all also searches liminal's own commands "
                                                    "and the CLIs' records"))
        return 0
    for f in found:
        out.line(f"{f.when} · {f.where()} · {f.speaker}", style="bold")
        out.line(f.hit.snippet, indent=4, marks=terms)
    return 0
