"""The scratchpad: per thread, a text the person (``/scratchpad``) and the model (``liminal
mcp``'s ``scratchpad`` tool) both write, which every rewrite places at the head of its preamble
(``liminal.gradient.summarize.with_scratchpad``): it rides every swap, cut and load.

It is one message of the thread itself in the store (kind ``scratchpad``, id
``scratchpad:<thread>``), written again whole at each change: every sidecar on the store reads
it, the store's ``delete_thread`` takes it with the thread's other messages, and a deleted
thread's tombstone takes no more of it (``Batch.without``). Its order sorts after every frame id
(``~``), so the thread's conversation still begins with its first message
(``liminal.store.records.conversation``); it has no turn. A change reads the record and writes it
again: two appends at the same moment (the person's and the model's) may keep only one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from liminal.store.records import Batch, MessageRecord

if TYPE_CHECKING:
    from liminal.store.base import Store

KIND = "scratchpad"
ORDER = "~scratchpad"  # after every frame id (``<connection>:<seq>``): never a thread's first message


def record_id(thread: str) -> str:
    return f"{KIND}:{thread}"


class TooLong(ValueError):
    """The scratchpad would pass ``memory.scratchpad_chars``: nothing was changed."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"the scratchpad would be {length} characters, over its limit of {limit} "
                         "(memory.scratchpad_chars)")
        self.length = length
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Scratchpad:
    text: str
    time: float  # when it was last written
    by: str  # who wrote it last: "person" or "model"


async def read(store: Store, thread: str) -> Scratchpad | None:
    """The thread's scratchpad, or None: nothing written (or written empty)."""
    found = [m for m in await store.messages(thread, kind=KIND) if m.id == record_id(thread)]
    if not found or not found[-1].text:
        return None
    return Scratchpad(found[-1].text, found[-1].time, str(found[-1].data.get("by") or "person"))


async def replace(store: Store, thread: str, text: str, *, limit: int, by: str) -> Scratchpad:
    """The scratchpad is ``text`` now (empty: there is none). Raises ``TooLong``."""
    text = text.strip()
    if len(text) > limit:
        raise TooLong(len(text), limit)
    now = time.time()
    await store.write(Batch(messages=[MessageRecord(
        id=record_id(thread), thread_id=thread, turn_id=None, time=now, order=ORDER, kind=KIND,
        text=text, data={"by": by, "chars": len(text)})]))
    return Scratchpad(text, now, by)


async def append(store: Store, thread: str, text: str, *, limit: int, by: str) -> Scratchpad:
    """``text`` added to the scratchpad on a line of its own. Raises ``TooLong``."""
    text = text.strip()
    if not text:
        raise ValueError("nothing to add")
    now = await read(store, thread)
    joined = f"{now.text}\n{text}" if now is not None else text
    if len(joined) > limit:
        raise TooLong(len(joined), limit)
    return await replace(store, thread, joined, limit=limit, by=by)
