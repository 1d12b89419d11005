"""Waiting until what one liminal wrote is in the store it shares, before another opens the thread:
the thread's latest session in the store, every line of that session's file as it is on disk, and
the turn of a prompt. Asked while the writer runs: what Claude Code writes as it exits may come
after the index worker's last read (docs/architecture.md), and the next host needs none of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from liminal.lookup.sessionlines import stored_lines
from tests.support.mongo import recorded


def handed_over(liminal_home: Path, thread: str, prompt: str, file_of: Callable[[str], Path | None], *,
                backing: str | None = None, timeout: float = 120) -> None:
    """Until the store ``liminal_home``'s liminal records into has it all; ``file_of(session)``:
    that session's file on the writer's disk, read again at each look (the CLI may add a record
    after answering); ``backing``: the session the thread must be on, if known."""

    async def check(store: Any) -> str | None:
        from liminal.kernel.whereabouts import store_lineage

        if backing is not None:  # the index's own lineage too, not only a shared store's place
            known = await store.thread(thread)
            if known is None or not known.backing_ids or known.backing_ids[-1] != backing:
                return f"index lineage {known.backing_ids if known else None}"
        lineage = await store_lineage(store, thread)
        tip = lineage[-1] if lineage else None
        if tip is None or (backing is not None and tip != backing):
            return f"lineage {lineage}"
        path = file_of(tip)
        if path is None:
            return f"no file of {tip}"
        try:
            lines = await stored_lines(store, tip)
        except Exception as exc:
            return f"lines: {exc}"
        file = await anyio.Path(path).read_bytes()
        if b"".join(line + b"\n" for line in lines) != file:
            return differ(lines, file.splitlines())
        if not any(prompt in m.text for m in await store.messages(thread, kind="user")):
            return "no prompt"
        return None

    async def wait() -> None:
        with anyio.fail_after(timeout):
            async with recorded(liminal_home) as store:
                while (why := await check(store)) is not None:
                    last[0] = why
                    await anyio.sleep(0.2)

    last = [""]
    try:
        anyio.run(wait)
    except TimeoutError:
        raise AssertionError(f"the store never had what {liminal_home} wrote: {last[0]}") from None


def differ(stored: list[bytes], file: list[bytes]) -> str:
    """Where the store's copy of a file's lines parts from the file."""
    both = min(len(stored), len(file))
    at = next((n for n in range(both) if stored[n] != file[n]), both)
    if at < both:
        return (f"lines differ: {len(stored)} stored, {len(file)} in the file, first at {at}: "
                f"stored {stored[at][:300]!r}, file {file[at][:300]!r}")
    longer = stored if len(stored) > len(file) else file
    return (f"lines differ: {len(stored)} stored, {len(file)} in the file; the longer's next: "
            f"{longer[at][:300]!r}")
