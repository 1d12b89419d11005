"""``liminal config [--json]``: every setting, its value in effect and where that came from, and
what bounds the floor a swap lands on."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING

from liminal import config
from liminal.config import Settings

if TYPE_CHECKING:
    from liminal.kernel.journal import SwapRecord

HELP = "show every setting, its value in effect and where it came from"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    import orjson

    from liminal.kernel.policy import floor_bounds

    sources: dict[str, str] = getattr(args, "setting_sources", {})
    # What bounds the floor a swap lands on (the CLI's own prompt comes on top: /context says
    # a thread's).
    floor = floor_bounds(settings.swap, settings.gradient)
    rows = [(name, config.value_of(settings, name), sources.get(name, "default"))
            for name in config.setting_names() if name != "home"]
    if args.json:
        out = {name: {"value": value if value is None or isinstance(value, (int, float, bool, str))
                      else str(value),
                      "source": source} for name, value, source in rows}
        said = {"recent_tokens": floor.recent, "long_cache_recent_tokens": floor.long_cache,
                "preamble_tokens": floor.preamble,
                "limited_by": floor.limited_by, "text": floor.describe()}
        sys.stdout.write(orjson.dumps({"home": str(settings.home), "settings": out, "floor": said,
                                       "warnings": losing_money(settings)},
                                      option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    from pathlib import Path

    from liminal.commands._out import WIDTH, Column, table, terminal

    path = Path(args.config) if getattr(args, "config", None) else settings.home / "config.toml"
    heading = [f"home: {settings.home} ({sources.get('home', 'default')})",
               f"config file: {path}" + ("" if path.is_file() else " (none: every setting is its "
                                         "default or comes from the environment or a flag)")]
    env = [name for name, _, source in rows if source.startswith("env ")]
    if env:
        heading.append(f"env: a setting's variable, LIMINAL_ and its name upper-cased, _ for the dot "
                       f"({env[0]}: {sources[env[0]].removeprefix('env ')})")
    _paragraphs(heading, WIDTH, terminal())
    table([Column("SETTING", lead=True), Column("VALUE", fit="wrap", least=16, keep=1, lead=True, label="= {}"),
           Column("FROM", fit="wrap", least=12, label="from {}")],
          [(name, shown(name, value), _from(source, path)) for name, value, source in rows])
    _paragraphs([f"floor: {floor.describe()}", *(f"warning: {said}" for said in losing_money(settings))],
                WIDTH, terminal())
    return 0


def shown(name: str, value: object) -> str:
    """A setting's value as it is written in config.toml (``"info"``, ``true``, ``300``), with
    its unit, and in a larger one where that reads better (``67108864 bytes (64 MiB)``)."""
    from liminal.units import data_size, duration, tokens

    if value is None:  # (no setting's default is written as such in TOML)
        return "unset (the CLI's own limit)" if name == "swap.ceiling_tokens" else "unset (chosen per thread)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, (int, float)):
        import orjson

        return orjson.dumps(str(value)).decode()  # a TOML basic string is written as JSON's
    written = f"{value:g}" if isinstance(value, float) and not value.is_integer() else str(int(value))
    for ending, unit, larger in (("_bytes", "bytes", data_size), ("_seconds", "s", duration),
                                 ("_tokens", "tokens", tokens)):
        if name.endswith(ending):
            readable = larger(value).removesuffix(" s")
            return f"{written} {unit}" + ("" if readable == written else f" ({readable})")
    return written


def _from(source: str, path: object) -> str:
    """Where a setting came from, in a word: ``default``, the config file's name (its path is
    said above the table), ``env``, ``flag``."""
    if source.startswith("file "):
        return source.replace(f"file {path}", getattr(path, "name", "file"), 1)
    return source.split(" ", 1)[0] if source.startswith("env ") else source


def _paragraphs(lines: list[str], width: int, on_terminal: bool) -> None:
    """Each line wrapped to the width (a path after its slashes), the lines it goes on to
    indented."""
    from liminal.commands._out import console, wrap

    shown = console() if on_terminal else None
    for line in lines:
        for piece in wrap(line, max(shown.width, 20) if shown is not None else width, hang="  "):
            if shown is not None:
                shown.print(piece, highlight=False, markup=False, no_wrap=True, crop=False)
            else:
                print(piece)


# Threads whose last swap is older than this are not looked at: the settings may have changed since.
RECENT_DAYS = 7
SAID_THREADS = 3


def losing_money(settings: Settings, now: float | None = None) -> list[str]:
    """Whether these settings lose money, with no thread at hand: the swaps this home's journal
    measured on the threads that swapped in the last ``RECENT_DAYS`` days (each swap's payback
    against the model calls until the next: ``policy.measure_payback``), or, with none measured,
    the policy's own arithmetic at a typical pace. Sentences, the last one what to change; none
    when swaps pay."""
    import time

    from liminal.harness.known import known_harnesses
    from liminal.kernel.journal import SwapJournal
    from liminal.kernel.policy import (
        PAYBACK_LEAST,
        CostPolicy,
        Pace,
        journal_moves,
        measure_payback,
    )

    harnesses = known_harnesses(settings.gradient)

    def policy(cli: str) -> CostPolicy:
        return CostPolicy.of(settings.swap, settings.gradient, harnesses.get(cli, harnesses["claude"])())

    since = (time.time() if now is None else now) - RECENT_DAYS * 86_400
    by_thread: dict[str, list[SwapRecord]] = {}
    try:
        records = SwapJournal(settings.journal_path).records()
    except OSError:
        records = []  # an unreadable journal: the arithmetic alone
    for record in records:
        by_thread.setdefault(record.thread_id, []).append(record)
    measured = {thread: found for thread, moved in by_thread.items() if moved[-1].started_at >= since
                and (found := measure_payback(journal_moves(map(asdict, moved)))) is not None
                and found.swaps >= PAYBACK_LEAST}
    losing = [thread for thread, found in measured.items() if found.loses]
    if losing:
        said = [measured[t].describe(f"thread {t[:8]}") for t in losing[:SAID_THREADS]]
        if len(losing) > SAID_THREADS:
            said.append(f"And on {len(losing) - SAID_THREADS} more of the {len(measured)} threads measured.")
        return [*said, policy(by_thread[losing[0]][-1].harness).advice(Pace())]
    if measured:
        return []  # measured, and paying: the thread's own pace says more than a typical one
    return policy("claude").losing_money(Pace(), None)
