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
