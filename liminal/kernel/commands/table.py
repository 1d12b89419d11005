"""The command table: every slash command liminal answers (``COMMANDS``), and every ACP method
liminal answers for the agent (``METHODS``), each with the handler that answers it.

A prompt whose text is one of the commands is itself one of those methods (``session/prompt``):
it is kept when ``parse`` finds a command in it, and answered with the handler's text in an
``agent_message_chunk`` and ``end_turn``, or with a clear message that changes nothing (an unknown
mark, a bad name, a command while a prompt runs). A command the model asks for through its
``slash`` tool runs the same handler (``run_slash``). A new command is one more row here and a
function of a ``CommandContext`` in the module of its family.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from liminal.acp.router import LocalRequest
from liminal.errors import in_words
from liminal.kernel.commands import (
    clearing,
    contextview,
    deleting,
    forking,
    lessons,
    listing,
    marks,
    memos,
    naming,
    opening,
    scratchpad,
    search,
)
from liminal.kernel.commands.shared import CommandContext, CommandError, logger
from liminal.kernel.mover import SwapError
from liminal.mcp.link import SlashRequest

Handler = Callable[[CommandContext, str, str], Awaitable[str]]  # (context, thread, args) -> the answer


def never(args: str) -> bool:
    return False


def always(args: str) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    run: Handler
    hint: str | None  # what the UI shows for its arguments; None: it takes none, and refuses any
    description: str
    # Only reads with these arguments: a refusal changes nothing, and need not say so.
    reads: Callable[[str], bool] = never
    # Cuts, rewrites or copies the thread's context where this liminal has it: refused when
    # another sidecar on the store has moved the thread since (``not_moved_elsewhere``).
    on_context: bool = False
    for_model: bool = False  # the model may ask for it through its ``slash`` tool
    # Searches what was said: run once the store holds every turn before it (``caught_up``).
    said: bool = False
    # Answered in the background with these arguments: it waits on the model for minutes, and
    # the loads, lists and other commands the center's queue answers do not wait for it.
    slow: Callable[[str], bool] = never


_ROWS = (
    Command("mark", marks.mark, "NAME", "liminal: name this point of the conversation", for_model=True),
    Command("marks", marks.marks, None, "liminal: list the marks", reads=always),
    Command("clear", clearing.clear, "[MARK]",
            "liminal: empty the model's context, or go back to MARK (history is kept)",
            on_context=True, for_model=True),
    Command("fork", forking.fork, "[MARK]",
            "liminal: a new session with this context, or with what followed MARK",
            on_context=True, for_model=True),
    Command("undo", clearing.undo, None, "liminal: take the last turn out of the model's context",
            on_context=True, for_model=True),
    Command("context", contextview.context, "[rebuild]",
            "liminal: what the model sees now, the marks, the last swap (rebuild: write the state anchor again)",
            reads=lambda args: not contextview.rebuilds(args), slow=contextview.rebuilds),
    Command("optimise", contextview.optimise, None, "liminal: compress the context now (a gradient swap)",
            on_context=True),
    Command("search", search.search, "[--all] TEXT", "liminal: search what was said in this thread",
            reads=always, said=True),
    Command("recall", search.recall, "KEY", "liminal: the full text behind a truncation marker", reads=always),
    Command("memo", memos.memo, "TEXT #tag", "liminal: keep a memo that outlives this thread"),
    Command("memos", memos.memos, "[#tag|TEXT]", "liminal: find memos", reads=always),
    Command("scratchpad", scratchpad.scratchpad, "[TEXT | + TEXT | --clear]",
            "liminal: notes you and the model keep, at the head of its context after every swap"),
    Command("lessons", lessons.lessons, "[--all | confirm KEY | forget KEY]",
            "liminal: what the model learned in this project's conversations; confirm or forget one"),
    Command("rename", naming.rename, "TITLE", "liminal: name this thread"),
    Command("archive", naming.archive, None, "liminal: hide this thread from liminal threads (it stays usable)"),
)
COMMANDS: dict[str, Command] = {command.name: command for command in _ROWS}

# As ACP's ``AvailableCommand``: what the UI offers, beside the agent's own.
OFFERED = [{"name": c.name, "description": c.description, **({"input": {"hint": c.hint}} if c.hint else {})}
           for c in _ROWS]


def parse(text: str) -> tuple[str, str] | None:
    """``("mark", "A")`` for ``/mark A``; None when the text is not one of liminal's commands."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    # Any whitespace ends the name: "/mark\tA" is /mark A, never a prompt for the CLI.
    parts = stripped[1:].split(None, 1)
    if not parts or stripped[1].isspace() or parts[0] not in COMMANDS:
        return None
    return parts[0], parts[1].strip() if len(parts) > 1 else ""


def prompt_text(message: dict[str, Any]) -> str:
    params = message.get("params")
    blocks = params.get("prompt") if isinstance(params, dict) else None
    if not isinstance(blocks, list):
        return ""
    return "\n".join(b["text"] for b in blocks
                     if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


def unchanged(name: str, args: str) -> str:
    """What a refused command's answer ends with: that nothing changed, for a command that
    could have changed something."""
    command = COMMANDS.get(name)
    return "" if command is not None and command.reads(args) else " (nothing changed)"


async def run_command(c: CommandContext, thread: str, name: str, args: str) -> str:
    """The command's answer. One that takes no arguments refuses any: the words would be
    dropped unread, and the command done all the same."""
    command = COMMANDS[name]
    if command.hint is None and args:
        raise CommandError(f"/{name} takes no arguments")
    if command.on_context:
        await c.not_moved_elsewhere(thread)
    return await command.run(c, thread, args)


# ------------------------------------------------------------------ prompts and the model's


def keeps_prompt(c: CommandContext, message: dict[str, Any], thread: str | None) -> bool:
    return thread is not None and parse(prompt_text(message)) is not None


async def answer_prompt(c: CommandContext, request: LocalRequest) -> None:
    name, args = parse(prompt_text(request.message)) or ("", "")
    if c.tasks is not None and name in COMMANDS and COMMANDS[name].slow(args):
        c.tasks.start_soon(answer_command, c, request, name, args)
        return
    await answer_command(c, request, name, args)


async def answer_command(c: CommandContext, request: LocalRequest, name: str, args: str) -> None:
    thread = request.thread_id or ""
    try:
        behind = ""
        if name in COMMANDS and COMMANDS[name].said and not await c.caught_up(request.frame_id):
            behind = ("\n(liminal's store is still storing this thread's last turns: what they said "
                      "may be missing here; ask again in a moment)")
        text = await run_command(c, thread, name, args) + behind
    except (CommandError, SwapError) as exc:
        text = f"{exc}{unchanged(name, args)}"
    except Exception as exc:  # a bug or a store down: said, and the prompt answered
        logger.exception("command failed", command=name, thread=thread)
        text = f"/{name} failed: {in_words(exc)}{unchanged(name, args)}"
    c.port.notify_client("session/update", {"sessionId": thread, "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}})
    c.port.answer_local(request.key, {"stopReason": "end_turn"})


async def run_slash(c: CommandContext, request: SlashRequest) -> None:
    """A command the model asked for, as if the user had typed it when the turn ended; the UI
    hears of it in the thread's next turn (as a swap notice), the store in a ``liminal/slash``
    note."""
    thread, command = request.thread, f"/{request.command}{' ' + request.args if request.args else ''}"
    try:
        if request.command not in COMMANDS or not COMMANDS[request.command].for_model:
            raise CommandError(f"{command} is not for the model")
        text = await run_command(c, thread, request.command, request.args)
        ok = True
    except (CommandError, SwapError) as exc:
        text, ok = f"{exc} (nothing changed)", False
    except Exception as exc:
        logger.exception("slash command failed", command=command, thread=thread)
        text, ok = f"failed: {in_words(exc)} (nothing changed)", False
    c.port.note("liminal/slash", {"thread_id": thread, "command": command, "ok": ok, "said": text},
                thread_id=thread)
    c.port.notify_in_next_turn(thread, "session/update", {"sessionId": thread, "update": {
        "sessionUpdate": "agent_thought_chunk",
        "content": {"type": "text", "text": f"liminal ran {command} as the model asked: {text}\n"}}})


# ------------------------------------------------------------------ the local methods


@dataclass(frozen=True, slots=True)
class LocalMethod:
    """ACP methods liminal answers instead of the agent: ``keeps`` says, in the router's flush,
    whether liminal answers this request (the router's request hook); ``answer`` answers it, on
    the center's queue."""

    methods: tuple[str, ...]
    keeps: Callable[[CommandContext, dict[str, Any], str | None], bool]
    answer: Callable[[CommandContext, LocalRequest], Awaitable[None]]
    # What the log and the error's words say when ``answer`` fails inside liminal, past what it
    # answers itself: the request is answered all the same.
    failed: str


# In the order their request hooks are added to the router.
METHODS = (
    LocalMethod(("session/prompt",), keeps_prompt, answer_prompt, "the command failed"),
    LocalMethod(("session/list",), listing.keeps, listing.answer, "session/list failed"),
    LocalMethod(opening.METHODS, opening.keeps, opening.answer, "liminal could not open the thread"),
    LocalMethod((deleting.METHOD,), deleting.keeps, deleting.answer, "session/delete failed"),
    LocalMethod(("session/fork",), forking.keeps, forking.answer, "session/fork failed"),
)
