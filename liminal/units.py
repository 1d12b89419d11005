"""Numbers as a person reads them, the same in every command and every answer in the editor:
tokens in thousands (``12.1k``, ``130k``), counts with their noun in the right number."""

from __future__ import annotations


def tokens(n: float | None) -> str:
    """``850``, ``12.1k``, ``130k``, ``131.2k``, ``1,000k``: to a tenth of a thousand, so a
    context and the trigger it is compared with still read apart; ``?`` when unknown."""
    if n is None:
        return "?"
    if abs(n) < 1000:
        return f"{n:,.0f}"
    return f"{n / 1000:,.1f}".removesuffix(".0") + "k"


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 turn``, ``3 turns``, ``0 turns``; ``nouns`` when the plural is not ``noun + s``."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"


def data_size(n: float) -> str:
    """``64 MiB``, ``4 KiB``, ``1.5 GiB``, ``256 B``: bytes in the largest binary unit under them."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.1f}".removesuffix(".0") + f" {unit}"
        n /= 1024
    raise AssertionError  # (the loop returns at GiB)


def duration(seconds: float) -> str:
    """``5 s``, ``5 min``, ``1.5 h``, ``7 days``: in the largest unit it makes at least one of."""
    for size, unit in ((86_400, "day"), (3_600, "h"), (60, "min")):
        if abs(seconds) >= size:
            n = f"{seconds / size:,.1f}".removesuffix(".0")
            return f"{n} {unit}s" if unit == "day" and n != "1" else f"{n} {unit}"
    return f"{seconds:,.1f}".removesuffix(".0") + " s"
