"""``/context [rebuild]`` and ``/optimise``: what the model sees now, and a swap of it now.

``/context`` says the context's size, where the next swap comes and what bounds the floor it
lands on, what a swap would keep of each band, the scratchpad and the state anchor that head
the next preamble, the marks, and the last move; ``rebuild`` has the agent's model write the
state anchor again first. ``/optimise`` is a gradient swap now, with the dynamic zone a swap's
rewrite would have.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from pathlib import Path

import anyio
import anyio.to_thread

from liminal import moves
from liminal.errors import in_words
from liminal.kernel import zone
from liminal.kernel.commands.shared import CommandContext, CommandError, logger
from liminal.kernel.mover import Writer
from liminal.kernel.policy import journal_moves, measure_payback
from liminal.kernel.swapping import notice
from liminal.units import plural, tokens

RECALIBRATE_SECONDS = 10.0  # /context waits at most this long for an opened thread's pace

# How a gradient rewrite treats each band (``liminal.gradient.bands.Band``), as ``/context`` says it.
BAND_FATES = (("recent", "whole"), ("middle", "with long tool output cut to recall markers"),
              ("old", "as messages only"), ("ancient", "as one summary"))


def rebuilds(args: str) -> bool:
    """``/context rebuild``: the model writes, for up to minutes, and the anchor changes."""
    return args == "rebuild"


async def context(c: CommandContext, thread: str, args: str) -> str:
    if args:
        return await rebuild(c, thread, args)
    if c.recalibrated is not None:  # the thread just opened: its pace is being read
        with anyio.move_on_after(RECALIBRATE_SECONDS):
            await c.recalibrated(thread)
    state = c.model.threads.get(thread)
    policy = c.policy
    records = await c.moves(thread)  # another sidecar's too, on a shared store
    lines = []
    try:
        path: Path | None = c.state_path(thread)[1]
    except CommandError:
        path = None
    if state is not None:
        used = state.context_tokens if state.context_tokens is not None else state.file_tokens
        if used is None and path is not None:  # no turn since liminal started: the file says
            used = await anyio.to_thread.run_sync(c.harness.context_tokens, path)
        if used is not None:
            now = f"{tokens(used)} tokens"
        elif c.context_is_empty(thread):  # a /clear's session, before its first prompt
            prompt = state.pace.overhead
            now = "empty" + (f" (the CLI's own prompt, about {tokens(prompt)} tokens)" if prompt else "")
        else:
            now = "not known until the next model call"
        lines.append(f"Context: {now}. liminal swaps at {tokens(policy.trigger(state.pace))}, "
                     f"down to about {tokens(policy.target(state.pace))} tokens.")
        # What bounds that floor, and why the trigger is not the one set, if it is not.
        lines.extend(policy.bounds(state.pace))
        # Swaps that cost more than they save, measured or by the settings' arithmetic.
        lines.extend(policy.losing_money(state.pace, measure_payback(journal_moves(map(asdict, records)))))
    if path is None:
        lines.append("No session file yet: nothing to band.")
    else:
        try:
            band = policy.recent(state.pace) if state is not None else None
            bands = await anyio.to_thread.run_sync(c.harness.bands, path, policy.aim, band)
            kept = "; ".join(
                f"{band} {plural(bands[band]['turns'], 'turn')} ({tokens(bands[band]['tokens'])} tokens) {how}"
                for band, how in BAND_FATES if bands.get(band, {}).get("turns"))
            # (No turn: an /undo took out the one a swap kept after its summary.)
            lines.append(f"A swap now would keep: {kept}." if kept else "No turn in the context for a swap to keep.")
        except Exception as exc:  # a file the gradient cannot read: said, the rest still shown
            logger.warning("/context could not band the session", thread=thread, error=str(exc))
            lines.append(f"The session file could not be read for its bands ({in_words(exc)}).")
    scratchpad = await c.memory.scratchpad(thread)
    if scratchpad:  # the head of every rewrite's preamble, before the anchor
        lines.append("Scratchpad (the head of every swap's preamble; /scratchpad changes it):\n" + scratchpad)
    elif c.stores.configured:
        lines.append("Scratchpad: " + ("empty (/scratchpad TEXT writes one)" if scratchpad == ""
                                       else "not known (the store did not answer)"))
    anchor = c.anchor_of(thread)
    if anchor:  # what the next swap's preamble starts with
        lines.append("State anchor (the next swap's preamble starts with it):\n" + anchor)
    marks = await c.marks(thread)
    lines.append("Marks: " + (", ".join(sorted(marks)) or "none"))
    lines.append(f"Last move: {moves.describe(asdict(records[-1]))}." if records else "No move yet.")
    if records:
        lines.extend(zone.described(records[-1].zone))
    return "\n".join(lines)


async def rebuild(c: CommandContext, thread: str, args: str) -> str:
    """``/context rebuild``: the state anchor written again from the context now, by the
    agent's model in a side session (``liminal.kernel.summaries``); the new one, or one
    line saying why not."""
    from liminal.kernel.summaries import AnchorNotWritten

    if not rebuilds(args):
        raise CommandError("/context shows the context; /context rebuild writes the state anchor again")
    if c.rebuild_anchor is None:
        raise CommandError("the state anchor is written by the model's summaries, which are off "
                           "(swap.summaries = true, with swaps on, turns them on)")
    if c.port.prompt_in_flight(thread):
        raise CommandError("a prompt is running: rebuild the state anchor between turns")
    try:
        anchor = await c.rebuild_anchor(thread)
    except AnchorNotWritten as exc:
        raise CommandError(f"state anchor not written again: {exc}") from exc
    return "State anchor written again from the current context (the next swap's preamble starts with it):\n" + anchor


async def optimise(c: CommandContext, thread: str, args: str) -> str:
    state = c.model.threads.get(thread)
    if state is None:
        raise CommandError("liminal has not seen this thread opened")
    aim, band = c.policy.aim, c.policy.recent(state.pace)

    offer = (await c.zone.offer(thread, state.cwd, None)
             if c.zone is not None and c.policy.gradient.zone_tokens else zone.Offer())
    memos = offer.candidates
    scratchpad = await c.memory.scratchpad(thread)

    def plan(current: Path) -> Writer:
        return lambda new_id: c.harness.rewrite(current, aim, new_id, memos=memos, recent_tokens=band,
                                                scratchpad=scratchpad)

    # A client that shows compactions sees this one as the protocol's entity: started here, at
    # the command's turn (its first update fixes its place in the timeline), then its end.
    compaction = f"liminal-optimise-{uuid.uuid4().hex}" if c.model.client_compaction else None
    if compaction is not None:
        c.port.notify_client("session/update", {"sessionId": thread, "update": notice.compaction_started(compaction)})
    try:
        done = (await c.mover.move_thread(thread, "/optimise", plan)).rewritten
    except BaseException as exc:
        if compaction is not None:
            ended = (notice.compaction_failed(compaction, in_words(exc)) if isinstance(exc, Exception)
                     else notice.compaction_failed(compaction, "cancelled", "cancelled"))
            c.port.notify_client("session/update", {"sessionId": thread, "update": ended})
        raise
    assert done is not None  # a rewrite, never an empty session
    if compaction is not None:
        c.port.notify_client("session/update", {"sessionId": thread, "update": notice.compaction_ended(
            compaction, done.tokens_before, done.tokens_after)})
    return f"Context optimised: {tokens(done.tokens_before)} -> {tokens(done.tokens_after)} tokens."
