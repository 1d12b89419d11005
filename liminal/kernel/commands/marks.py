"""``/mark NAME`` and ``/marks``: named points of the conversation.

A mark is a note in the store (``liminal/mark``, one ``mark`` message per name: the latest wins),
so it survives swaps and restarts; one set in this process is kept in the thread model until the
store has it (``ThreadModel.marks``). It names the session the thread was on and the byte offset
its file had reached once the last turn was on it: ``/clear MARK`` and ``/fork MARK`` cut there.
"""

from __future__ import annotations

import time

import anyio.to_thread

from liminal.kernel.commands.shared import MARK_NAME, CommandContext, CommandError
from liminal.kernel.threads import Mark


async def mark(c: CommandContext, thread: str, args: str) -> str:
    if not MARK_NAME.match(args):
        raise CommandError(f"{args!r} is not a mark name: letters, digits, '.', '_' or '-', "
                           "no spaces, at most 64")
    port = c.port
    if port.prompt_in_flight(thread):
        raise CommandError("a prompt is running: mark between turns")
    backing, path = await c.settled_path(thread)
    offset = await anyio.to_thread.run_sync(c.harness.position, path)
    if port.prompt_in_flight(thread):  # came while the file settled: the
        raise CommandError("a prompt started: mark between turns")  # offset may be inside it
    new = Mark(args, backing, offset, time.time())
    c.model.mark(thread, new)
    port.note("liminal/mark", {"thread_id": thread, "name": args, "backing_id": backing,
                               "offset": offset}, thread_id=thread, at=new.at)
    return f"Mark {new.name} set here."


async def marks(c: CommandContext, thread: str, args: str) -> str:
    found = await c.marks(thread)
    if not found:
        return "No marks in this thread. /mark NAME sets one."
    rows = sorted(found.values(), key=lambda m: m.at)
    return "Marks: " + ", ".join(f"{m.name} ({time.strftime('%H:%M', time.localtime(m.at))})" for m in rows)
