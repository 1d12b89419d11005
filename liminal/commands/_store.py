"""What the store's commands (threads, history, search) share: opening the store, naming a thread,
printing."""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson

from liminal.config import Settings

T = TypeVar("T")


def run_with_store(settings: Settings, body: Callable[[Any], Awaitable[T]],
                   not_yet: T | None = None, *, quiet: bool = False) -> T | None:
    """Open the configured store (never creating one), run ``body(store)``; None if absent.
    ``not_yet``: the answer when the store is the default SQLite file and no ``liminal acp`` has
    made it yet (a new install has no threads, which is not an error; a path set by hand that
    names no file is still said: it may be a typo). ``quiet``: a store that cannot be read is
    not said (a command that goes on without it)."""
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
            if not quiet:
                print(f"liminal: no store to read ({describe(settings)}): {reason}", file=sys.stderr)
            return None

    return anyio.run(main, backend="asyncio")


async def resolve(store: Any, text: str) -> str | list[str]:
    """The id of the thread ``text`` names, or the candidates (``liminal.lookup.names``)."""
    from liminal.lookup.names import Named
    from liminal.lookup.names import resolve as named

    found = await named(store, text)
    return found.thread if isinstance(found, Named) else found


def refuse(command: str, text: str, candidates: list[str]) -> int:
    """Say that ``text`` names no single thread ("no such thread: X", or the candidates); the
    exit code every command gives for it."""
    from liminal.lookup.names import refusal

    print(f"liminal {command}: {refusal(text, candidates)}", file=sys.stderr)
    return 1


def session_named(settings: Settings, command: str, text: str) -> tuple[str | None, int]:
    """The session a command that reads a CLI's file (``inspect``, ``compress``) is given:
    ``text`` itself when it is a path; else the session of the thread it names in the store
    (a thread's latest, or the session whose id it is), or ``text`` when the store names none
    (a session liminal never saw); (None, exit code) when it names several, said on stderr."""
    from liminal.lookup.names import Named
    from liminal.lookup.names import resolve as named

    if _a_path(text) or not text.strip():
        return text, 0

    async def body(store: Any) -> Named | list[str]:
        return await named(store, text)

    nothing: Named | list[str] = []
    found = run_with_store(settings, body, not_yet=nothing, quiet=True)
    if isinstance(found, Named):
        return found.session, 0
    if isinstance(found, list) and found:
        return None, refuse(command, text, found)
    return text, 0


def unknown_session(text: str, exc: Exception) -> str:
    """A session the CLI's folders do not have: a path is said as the harness said it; an id,
    as for every command that takes one."""
    return str(exc) if _a_path(text) else f"no such thread or session: {text}"


def _a_path(text: str) -> bool:
    """Whether a person gave a file, not an id (as ``liminal.harness.claude.paths.locate`` reads it)."""
    import os
    from pathlib import Path

    return os.sep in text or text.endswith(".jsonl") or Path(text).expanduser().exists()


def when(t: float | None) -> str:
    if not t:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
