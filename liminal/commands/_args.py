"""What the commands' own flags (those that are not settings) share."""

from __future__ import annotations

import argparse
from collections.abc import Callable

# Beyond any store's listing, and small enough for every backend's LIMIT (SQLite's is 64 bits).
MOST = 1_000_000


def count(least: int = 1, most: int = MOST) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``least`` to ``most``, else a one-line refusal."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not least <= value <= most:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not accepted: a whole number from {least} to {most:,}")
        return value

    parse.__name__ = "count"
    return parse
