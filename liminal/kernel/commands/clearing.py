"""``/clear [MARK]`` and ``/undo``: the model's context emptied, cut back to a mark, or without
its last turn. Each is the swap's step with other file contents (``ThreadMover.move_thread``,
``fresh_session``): the thread moves onto a new session and keeps its id; what was taken out
stays in liminal's history.
"""

from __future__ import annotations

from pathlib import Path

from liminal import moves
from liminal.kernel.commands.shared import CommandContext, CommandError
from liminal.kernel.mover import Writer


async def clear(c: CommandContext, thread: str, args: str) -> str:
    if not args:
        await c.mover.fresh_session(thread, "/clear")
        return "Context cleared. The conversation stays in liminal's history (liminal history, /search)."
    mark = await c.known_mark(thread, args)
    source = await c.session_file(mark.backing_id, c.cwd(thread))
    if source is None:
        raise CommandError(f"the session file of mark {mark.name} is gone")
    scratchpad = await c.memory.scratchpad(thread)

    def plan(current: Path) -> Writer:
        return lambda new_id: c.harness.cut([(source, 0, mark.offset)], current, new_id, keeps_thread=True,
                                            scratchpad=scratchpad)

    await c.mover.move_thread(thread, f"/clear {mark.name}", plan)
    return f"Context cleared back to mark {mark.name}. What came after stays in liminal's history."


async def undo(c: CommandContext, thread: str, args: str) -> str:
    if c.context_is_empty(thread):
        raise CommandError("the model's context is empty: there is no turn to take out")
    scratchpad = await c.memory.scratchpad(thread)

    def plan(current: Path) -> Writer | None:
        """Back to where the last turn began, what came before kept (earlier turns, or the
        summary of older ones a swap left: the preamble). A session's only turn with nothing
        before it leaves an empty context, what /clear makes: cut there, the session would
        hold none of the conversation, and the CLI's own records of its first turn (its
        environment, its tools) would go too."""
        turns = c.harness.turns(current)
        if not turns.starts:
            raise CommandError(
                "no turn is left in the model's context, only the summary of earlier ones "
                "(/clear empties it, /clear MARK goes back to a mark)" if turns.earlier
                else "the model's context holds no turn to take out")
        if len(turns.starts) == 1 and not turns.earlier:
            return None
        end = turns.starts[-1]
        return lambda new_id: c.harness.cut([(current, 0, end)], current, new_id, keeps_thread=True,
                                            scratchpad=scratchpad)

    done = (await c.mover.move_thread(thread, "/undo", plan)).rewritten
    if done is None:
        return ("Took out the only turn: the model's context is empty now, as after /clear "
                "(the turn stays in liminal's history).")
    sizes = {"tokens_before": done.tokens_before, "tokens_after": done.tokens_after}
    why = moves.unchanged(sizes)
    return (f"Took the last turn out of the model's context ({moves.size(sizes)}"
            f"{': ' + why if why else ''}). It stays in liminal's history.")
