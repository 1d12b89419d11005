"""``liminal swaps [THREAD] [--json]``: every swap attempt, from the journal."""

from __future__ import annotations

import argparse
import sys
import time

from liminal.config import Settings

HELP = "list swaps: when, tokens before and after, duration, outcome"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread", nargs="?", help="only this thread")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def run(args: argparse.Namespace, settings: Settings) -> int:

    from liminal.kernel.journal import SwapJournal

    records = SwapJournal(settings.journal_path).records(args.thread)
    if args.json:
        for record in records:
            sys.stdout.buffer.write(record.to_json() + b"\n")
        return 0
    if not records:
        print("no swaps yet" + (f" for {args.thread}" if args.thread else ""))
        return 0
    print(f"{'when':19}  {'thread':36}  {'outcome':9}  {'before':>7}  {'after':>7}  {'secs':>6}  detail")
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started_at))
        before = f"{r.tokens_before // 1000}k" if r.tokens_before is not None else "-"
        after = f"{r.tokens_after // 1000}k" if r.tokens_after is not None else "-"
        detail = r.reason if r.outcome != "committed" else f"-> {r.new_backing_id}"
        print(f"{when}  {r.thread_id:36}  {r.outcome:9}  {before:>7}  {after:>7}  {r.duration_s:6.2f}  {detail}")
    return 0
