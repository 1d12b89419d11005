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
    from liminal.commands._out import WIDTH, Column, console, table, terminal

    table([Column("SETTING"), Column("VALUE", fit="wrap", least=16, keep=1), Column("FROM", fit="wrap", least=12)],
          [("home", str(settings.home), sources.get("home", "default")), *(
              (name, repr(value) if isinstance(value, str) else "(chosen)" if value is None else str(value),
               source) for name, value, source in rows)])
    floor_line = f"floor: {floor.describe()}"
    if terminal():
        console().print(floor_line)
    else:
        import textwrap

        print(textwrap.fill(floor_line, WIDTH, subsequent_indent="  "))
    return 0
