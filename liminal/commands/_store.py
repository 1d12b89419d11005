"""What the store's commands (threads, history, search) share: opening the store, naming a thread,
printing."""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from liminal.config import Settings

if TYPE_CHECKING:
    from liminal.store.records import Thread

T = TypeVar("T")


def run_with_store(settings: Settings, body: Callable[[Any], Awaitable[T]],
                   not_yet: T | None = None) -> T | None:
    """Open the configured store (never creating one), run ``body(store)``; None if absent.
    ``not_yet``: the answer when the store is the default SQLite file and no ``liminal acp`` has
    made it yet (a new install has no threads, which is not an error; a path set by hand that
    names no file is still said: it may be a typo)."""
    import anyio

    from liminal.store.base import StoreError, describe, sqlite_path
    from liminal.store.configured import open_store

    if not_yet is not None and not settings.store.url and not sqlite_path(settings).exists():
        return not_yet

    async def main() -> T | None:
        try:
            async with open_store(settings, create=False) as store:
                return await body(store)
        except StoreError as exc:
            reason = (str(exc).splitlines() or [""])[0][:300]
            print(f"liminal: no store to read ({describe(settings)}): {reason}", file=sys.stderr)
            return None

    return anyio.run(main, backend="asyncio")


async def resolve(store: Any, prefix: str) -> str | list[str]:
    """The thread id ``prefix`` names, or the candidates when it names none or several. An empty
    one names none: it is a prefix of every id (``liminal threads delete "$T" --yes`` with T
    unset would take the store's only thread). The id of a session a thread moved onto (a
    swap's rewrite, the session of a ``/clear``: the name of a CLI's session file) names that
    thread; so does a prefix of one, when no thread's own id starts with it."""
    if not prefix.strip():
        return []
    threads: list[Thread] = [s.thread for s in await store.threads(limit=100_000, empty=True)]
    exact = [t.id for t in threads if prefix == t.id] or [t.id for t in threads if prefix in t.backing_ids]
    if exact:
        return exact[0]
    for names in (lambda t: (t.id,), lambda t: t.backing_ids):
        matches = sorted({t.id for t in threads if any(n.startswith(prefix) for n in names(t))})
        if matches:
            return matches[0] if len(matches) == 1 else matches
    return []


def when(t: float | None) -> str:
    if not t:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
