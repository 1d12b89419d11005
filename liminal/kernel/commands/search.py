"""``/search [--all] TEXT`` and ``/recall KEY``: what was said in this thread, found by its words
(``liminal.lookup.search``) or by the key a truncation marker names (``liminal.lookup.recaller``).
"""

from __future__ import annotations

from liminal.kernel.commands.shared import CommandContext, CommandError


async def search(c: CommandContext, thread: str, args: str) -> str:
    """``--all`` adds liminal's own commands and notes and the CLI's bookkeeping records."""
    from liminal.lookup.search import find

    words = args.split(None, 1)
    everything = bool(words) and words[0] == "--all"
    query = (words[1] if len(words) > 1 else "") if everything else args
    if not query.strip():
        raise CommandError("/search TEXT (or /search --all TEXT)")
    found = await find(await c.store(), query, thread_id=thread, limit=8, everything=everything)
    if not found:
        return f"Nothing found for {query!r} in this thread." + ("" if everything else (
            " (/search --all TEXT also looks in liminal's own commands and the CLI's records.)"))
    return "\n".join(f"- {f.where(title=False)} · {f.when} · {f.speaker}: {f.hit.snippet}"
                     for f in found)


async def recall(c: CommandContext, thread: str, args: str) -> str:
    if not args:
        raise CommandError("/recall KEY (from a truncation marker)")
    from liminal.gradient.recall import RecallError

    try:
        data = await (await c.recaller()).recall(args)
    except RecallError as exc:  # it names the key
        raise CommandError(str(exc)) from exc
    return data.decode("utf-8", "replace")
