"""``liminal config [--json]``: every setting, its value in effect and where that came from, and
what bounds the floor a swap lands on."""

from __future__ import annotations

import argparse
import sys

from liminal import config
from liminal.config import Settings

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
        sys.stdout.write(orjson.dumps({"home": str(settings.home), "settings": out, "floor": said},
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
    _paragraphs([f"floor: {floor.describe()}"], WIDTH, terminal())
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
