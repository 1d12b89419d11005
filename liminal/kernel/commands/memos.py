"""``/memo TEXT #tag`` and ``/memos [#tag|TEXT]``: memos that outlive the thread, kept in the
store (``liminal.lookup.memos``); a swap's dynamic zone may place them in any thread's context.
"""

from __future__ import annotations

from liminal.kernel.commands.shared import CommandContext, CommandError
from liminal.lookup.memos import describe, find_memos, save_memo, split_tags


async def memo(c: CommandContext, thread: str, args: str) -> str:
    content, tags = split_tags(args)
    if not content:
        raise CommandError("/memo TEXT #tag")
    await save_memo(await c.store(), content, tags, thread)
    return f"Memo kept{' with ' + ' '.join('#' + t for t in tags) if tags else ''}."


async def memos(c: CommandContext, thread: str, args: str) -> str:
    text, tags = split_tags(args)
    found = await find_memos(await c.store(), tags, text)
    if not found:
        return "No memos found."
    return "\n".join(f"- {describe(m)}" for m in found)
