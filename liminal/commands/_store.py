"""What the store's commands (threads, history, search) share: opening the store, printing."""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson

from liminal.config import Settings

T = TypeVar("T")


def run_with_store(settings: Settings, body: Callable[[Any], Awaitable[T]]) -> T | None:
    """Open the configured store (never creating one), run ``body(store)``; None if absent."""
    import anyio

    from liminal.store.base import StoreError, describe, open_store

    async def main() -> T | None:
        try:
            async with open_store(settings, create=False) as store:
                return await body(store)
        except StoreError as exc:
            reason = (str(exc).splitlines() or [""])[0][:300]
            print(f"liminal: no store to read ({describe(settings)}): {reason}", file=sys.stderr)
            return None

    return anyio.run(main, backend="asyncio")


def when(t: float | None) -> str:
    if not t:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
