"""``/scratchpad [TEXT | + TEXT | --clear]``: the thread's scratchpad (``liminal.lookup.scratchpad``),
shown, replaced, added to or emptied. The model reads and writes it with its ``scratchpad`` tool,
and every rewrite puts it at the head of its preamble (``liminal.kernel.memory``).
"""

from __future__ import annotations

import time

from liminal.kernel.commands.shared import CommandContext, CommandError


async def scratchpad(c: CommandContext, thread: str, args: str) -> str:
    from liminal.lookup import scratchpad as pad

    store, limit = await c.store(), c.memory.settings.scratchpad_chars
    adding = args == "+" or args.startswith(("+ ", "+\n", "+\t"))
    try:
        if args == "--clear":
            await pad.replace(store, thread, "", limit=limit, by="person")
            return "Scratchpad emptied: the next swap's preamble holds none."
        if adding and not args[1:].strip():
            raise CommandError("/scratchpad + TEXT adds TEXT on a line of its own")
        if adding:
            now = await pad.append(store, thread, args[1:], limit=limit, by="person")
        elif args:
            now = await pad.replace(store, thread, args, limit=limit, by="person")
        else:
            found = await pad.read(store, thread)
            if found is None:
                return ("The scratchpad is empty. /scratchpad TEXT writes it, /scratchpad + TEXT adds a "
                        "line; the model writes it too (its scratchpad tool).")
            who = "you" if found.by == "person" else "the model"
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(found.time))
            return (f"Scratchpad ({len(found.text)} of at most {limit} characters, last written by {who} "
                    f"at {when}; the head of the model's context after every swap):\n{found.text}")
    except pad.TooLong as exc:
        raise CommandError(str(exc)) from exc
    return (f"Scratchpad {'added to' if adding else 'written'} ({len(now.text)} of at most {limit} "
            "characters): the model's context holds it from the next swap on, and its scratchpad "
            "tool reads it now.")
