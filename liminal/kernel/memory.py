"""What a move reads of liminal's memory for the thread it moves (docs/memory.md): its
scratchpad, which every rewrite and cut puts at the head of the preamble through the harness
(``SessionHarness.rewrite``'s and ``cut``'s ``scratchpad``).

Read from the store just before the move writes, never in its way: a store off, down or slower
than ``READ_SECONDS`` gives None, and the earlier preamble's scratchpad stays where a rewrite
finds one (a move never drops what it could not read). The command center's store is the one
read (opened once, shared with the commands); a read past its wait runs on in the command
center's task group, so a store half opened is never cancelled (``whereabouts.within_wait``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from liminal import log
from liminal.config import MemorySettings
from liminal.kernel.whereabouts import within_wait
from liminal.lookup import scratchpad

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from liminal.store.base import Store

logger = log.get("liminal.memory")
READ_SECONDS = 3.0  # a swap holds the thread's prompts: the scratchpad gets this long


class Memory:
    def __init__(self, settings: MemorySettings, store: Callable[[], Awaitable[Store]] | None,
                 tasks: Callable[[], TaskGroup | None] = lambda: None) -> None:
        self.settings = settings
        self._store = store
        self._tasks = tasks

    async def scratchpad(self, thread: str) -> str | None:
        """The thread's scratchpad for a move: "" when it has none; None when it could not be
        read (no store, or none in ``READ_SECONDS``: the earlier preamble's stays)."""
        if self._store is None:
            return None
        opened = self._store

        async def read() -> str | None:
            found = await scratchpad.read(await opened(), thread)
            return found.text if found is not None else ""

        return await within_wait(self._tasks(), read, None, f"the scratchpad of {thread}", READ_SECONDS)


def unknown() -> Memory:
    """Memory with no store: every move keeps what the earlier preamble holds."""
    return Memory(MemorySettings(), None)
