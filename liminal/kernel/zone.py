"""The dynamic zone's two ends in the kernel: the memos a swap offers it (read from the store
before the rewrite, which chooses among them and the passages it cuts: ``liminal.gradient.zone``),
and what ``/context`` says a swap placed (the journal record's ``zone``).

Reading memos is beside the swap, never in its way: a store that is down or slow leaves the
zone to the passages alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import anyio

from liminal import log
from liminal.gradient.zone import Candidate
from liminal.lookup.memos import describe, find_memos

if TYPE_CHECKING:
    from liminal.store.base import Store

logger = log.get("liminal.zone")

MemoSource = Callable[[], Awaitable[Sequence[Candidate]]]
READ_SECONDS = 3.0  # a swap holds the thread's prompts: the memos get this long


def memo_source(open_store: Callable[[], AbstractAsyncContextManager[Store]]) -> MemoSource:
    """Every memo as a zone candidate, the newest first on ties."""
    async def read() -> Sequence[Candidate]:
        async with open_store() as store:
            memos = await find_memos(store, [], "")
        return [Candidate(m.id, "memo", describe(m), n) for n, m in enumerate(reversed(memos))]
    return read


async def offered(source: MemoSource | None, thread_id: str) -> Sequence[Candidate]:
    """The memos for a swap's zone; none when there is no store or it does not answer."""
    if source is None:
        return ()
    try:
        with anyio.fail_after(READ_SECONDS):
            return await source()
    except Exception as exc:
        logger.warning("memos not read for the dynamic zone", thread=thread_id, error=str(exc))
        return ()


def described(zone: list[dict[str, Any]] | None) -> list[str]:
    """``/context``'s lines for what the last move placed in its zone."""
    entries = [e for e in zone or [] if isinstance(e, dict)]  # a hand-edited journal: shown as it can be
    if not entries:
        return ["Dynamic zone: nothing placed by the last move."]
    out = [f"Dynamic zone ({len(entries)} placed by the last move, best first):"]
    for entry in entries:
        text = " ".join(str(entry.get("text", "")).split())
        text = text if len(text) <= 80 else text[:79] + "…"
        out.append(f"  {entry.get('kind', '?')} {entry.get('key', '?')}: {text}")
    return out
