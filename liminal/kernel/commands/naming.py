"""``/rename TITLE`` and ``/archive``: how ``liminal threads`` and ``session/list`` show the thread,
written to its record in the store."""

from __future__ import annotations

import time

from liminal.kernel.commands.shared import CommandContext, CommandError
from liminal.store.records import Batch, ThreadUpdate


async def rename(c: CommandContext, thread: str, args: str) -> str:
    title = " ".join(args.split())
    if not title:
        raise CommandError("/rename TITLE")
    await (await c.store()).write(Batch(threads=[ThreadUpdate(thread, time.time(), title=title, named=True)]))
    return f"Thread renamed: {title}"


async def archive(c: CommandContext, thread: str, args: str) -> str:
    await (await c.store()).write(Batch(threads=[ThreadUpdate(thread, time.time(), state="archived",
                                                              by_user=True)]))
    return "Thread archived: liminal threads lists it with --all; it goes on working here."
