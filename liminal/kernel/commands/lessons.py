"""``/lessons``: what the model learned in this project's conversations, and the person's say on
each (docs/memory.md, docs/commands.md).

- ``/lessons``: the lessons of the conversations in this thread's folder, newest first, each with
  its key, a mark if confirmed, and where it came from; ``/lessons --all``: of every folder;
- ``/lessons confirm KEY``: the person vouches for it: it weighs more in every dynamic zone;
- ``/lessons forget KEY``: its words are gone, from every conversation it came from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from liminal.kernel.commands.shared import CommandContext, CommandError
from liminal.lookup import lessons as learned
from liminal.units import plural

if TYPE_CHECKING:
    from liminal.store.base import Store

SHOWN = 30  # lessons a listing shows at most
USAGE = "/lessons [--all], /lessons confirm KEY, /lessons forget KEY"


async def lessons(c: CommandContext, thread: str, args: str) -> str:
    return await answer(await c.store(), args, c.cwd(thread))


async def answer(store: Store, args: str, cwd: str | None) -> str:
    words = args.split()
    if words and words[0] in ("confirm", "forget"):
        if len(words) != 2 or not learned.is_key(words[1]):
            raise CommandError(f"/lessons {words[0]} KEY, a key as /lessons lists it (lesson:0123456789)")
        done = await (learned.confirm if words[0] == "confirm" else learned.forget)(store, words[1])
        if done is None:
            raise CommandError(f"{words[1]}: no such lesson (forgotten, or its conversations were deleted)")
        if words[0] == "confirm":
            return (f"Lesson {done.key} confirmed: it weighs more when liminal places memory from other "
                    f"conversations.\n{done.text}")
        return (f"Lesson {done.key} forgotten: its words are gone from "
                f"{plural(len(done.threads), 'conversation')}; no swap places it again.")
    if words not in ([], ["--all"]):
        raise CommandError(USAGE)
    in_folder = not words and bool(cwd)  # --all: every folder
    found_all = await learned.every(store)
    threads = {}
    for found in found_all:
        for part in found.parts:
            if part.thread not in threads:
                threads[part.thread] = await store.thread(part.thread)
    here = [found for found in found_all
            if not in_folder or any((t := threads.get(p.thread)) is not None and t.cwd == cwd
                                    for p in found.parts)]
    if not here:
        where = "this project's conversations" if in_folder else "any conversation"
        return (f"No lessons in {where} yet: the model writes them with its summaries of older turns "
                "(swap.summaries, memory.lessons).")
    where = "this project's conversations" if in_folder else "every conversation"
    here.sort(key=lambda found: (found.time, found.key), reverse=True)
    out = [f"{plural(len(here), 'lesson')} of {where}, newest first (/lessons confirm KEY, "
           "/lessons forget KEY):"]
    for found in here[:SHOWN]:
        mark = " (confirmed)" if found.confirmed else ""
        named = []
        for thread in found.threads:
            known = threads.get(thread)
            named.append(f'"{(known.title if known else "") or thread[:8]}"')
        out.append(f"- {found.key}{mark} {found.sort}: {found.text}")
        out.append(f"    from {', '.join(named)}, {learned.when(found.time)}")
    if len(here) > SHOWN:
        out.append(f"({len(here) - SHOWN} older not shown)")
    return "\n".join(out)
