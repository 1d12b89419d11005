"""The arguments both ways of starting the server take (``liminal mcp``, ``python -m liminal.mcp``)."""

from __future__ import annotations

import argparse

from liminal.mcp import link


def add_binding(p: argparse.ArgumentParser) -> None:
    bound = p.add_mutually_exclusive_group()
    bound.add_argument("--thread", help="the thread the tools work on")
    bound.add_argument("--bind", metavar="NONCE", help="learn the thread from liminal, by this nonce")


def checked(thread: str | None, nonce: str | None) -> str | None:
    """Why the binding is refused, or None."""
    for value, what in ((thread, "--thread"), (nonce, "--bind")):
        if value is not None and not link.safe(value):
            return f"liminal mcp: {what} {value!r} is not accepted: letters, digits, '.', '_', '-'"
    return None
