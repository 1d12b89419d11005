"""``liminal swaps [THREAD] [--json]``: every swap attempt, from the journal."""

from __future__ import annotations

import argparse
import sys
import time

from liminal.config import Settings

HELP = "list swaps: when, tokens before and after, what each cost and saves, outcome"


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
    # Cost in input-token equivalents (liminal.kernel.policy): "rebuild" is what the first call
    # after the swap paid beyond continuing (negative when the thread was idle past the cache's
    # life: the swap saved on a rebuild that came anyway), "saves" what each later call saves,
    # "payback" the calls that takes.
    print(f"{'when':19}  {'thread':36}  {'outcome':9}  {'before':>7}  {'after':>7}  {'rebuild':>8}  "
          f"{'saves':>6}  {'payback':>7}  {'secs':>6}  why")
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started_at))
        before = f"{r.tokens_before // 1000}k" if r.tokens_before is not None else "-"
        after = f"{r.tokens_after // 1000}k" if r.tokens_after is not None else "-"
        cost = r.cost or {}
        rebuild = _k(cost.get("rebuild"))
        saves = _k(cost.get("saves_per_call"))
        payback = cost.get("payback_calls")
        payback_text = f"{payback:.0f}" if isinstance(payback, (int, float)) and payback != float("inf") else "-"
        if cost.get("idle"):
            payback_text = "now"
        print(f"{when}  {r.thread_id:36}  {r.outcome:9}  {before:>7}  {after:>7}  {rebuild:>8}  {saves:>6}  "
              f"{payback_text:>7}  {r.duration_s:6.2f}  {r.reason}")
    return 0


def _k(value: object) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    return f"{value / 1000:.1f}k"
