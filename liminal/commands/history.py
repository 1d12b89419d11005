"""``liminal history THREAD [--json] [--full] [--all]``: a thread as a readable transcript.

Each turn once, under a heading with its number (as ``liminal threads`` counts them, search
cites them and the dashboard shows them: ``records.turn_numbers``), its time and the context the
model had at its end: the prompt, the model's thinking and text, each tool call with its title
and its output once (the adapters send a tool's output twice, as content to show and as raw
output), the plan. Between turns, with no number: liminal's moves and the commands it answered
itself (``/mark A`` and its answer), which never reached the model. The usage points the
adapters send several times a turn are in the heading only, and a turn's end only when it did
not end normally; ``--all`` shows every stored message.
"""

from __future__ import annotations

import argparse
from typing import Any

from liminal.config import Settings
from liminal.lookup.shown import cli_name, tool_output
from liminal.store.records import MessageRecord, Thread, conversation, turn_numbers

HELP = "show a thread as a readable transcript (THREAD may be a unique prefix of its id)"
OUTPUT_LINES = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread", help="thread id, or a unique prefix of it")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--full", action="store_true", help="print tool output in full")
    parser.add_argument("--all", action="store_true",
                        help="every stored message: usage points and turn ends too")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from liminal.commands._store import print_json, refuse, resolve, run_with_store

    async def body(store: Any) -> tuple[Thread | None, list[MessageRecord], set[str]] | list[str]:
        found = await resolve(store, args.thread)
        if isinstance(found, list):
            # A thread the store has messages for but no record of (yet) still has a history.
            messages = await store.messages(args.thread)
            return (None, messages, await store.liminal_turns(args.thread)) if messages else found
        return await store.thread(found), await store.messages(found), await store.liminal_turns(found)

    result = run_with_store(settings, body)
    if result is None:
        return 1
    if isinstance(result, list):
        return refuse("history", args.thread, result)
    thread, messages, liminals = result
    shown = conversation(messages)  # with the history from before liminal, if it was loaded
    if args.json:
        numbers = turn_numbers(shown, liminals)
        print_json({
            "thread": None if thread is None else {
                "id": thread.id, "title": thread.title, "cwd": thread.cwd,
                "harness": thread.harness, "state": thread.state,
                "backing_ids": list(thread.backing_ids), "created": thread.created,
                "updated": thread.updated},
            "messages": [{
                "id": m.id, "turn_id": m.turn_id, "time": m.time, "kind": m.kind,
                "text": m.text, "tool_call_id": m.tool_call_id, "status": m.status,
                "data": m.data, "replayed": m.replayed,
                # The turn as the transcript numbers it (a move's: the turn it follows); None
                # for a command liminal answered and what came before liminal.
                "turn": numbers.get(m.turn_id or ""),
                "to_liminal": m.turn_id in liminals} for m in shown]})
        return 0
    transcript(thread, shown, liminals, full=args.full, everything=args.all)
    return 0


def transcript(thread: Any, shown: list[MessageRecord], liminals: set[str], *, full: bool = False,
               everything: bool = False) -> None:
    from liminal.commands._out import Transcript
    from liminal.commands._store import when
    from liminal.units import plural

    out = Transcript()
    if thread is not None:
        out.line(f"# {thread.title or thread.id}", style="bold")
        out.line(f"thread {thread.id} · {cli_name(thread.harness)} · {thread.cwd or '?'} · "
                 f"{plural(len(thread.backing_ids), 'backing session')}", style="dim")
    numbers = turn_numbers(shown, liminals)
    context = _context_by_turn(shown)
    turn = None
    for m in shown:
        if m.turn_id is not None and m.turn_id != turn and m.turn_id in numbers:
            turn = m.turn_id
            out.line()
            out.rule(" · ".join(p for p in (f"turn {numbers[turn]}", when(m.time),
                                            context.get(turn, "")) if p))
        if not everything and not _shown(m):
            continue
        if m.turn_id in liminals and m.kind in ("user", "agent"):
            command(out, m)
        else:
            render(out, m, full=full)


def command(out: Any, m: MessageRecord) -> None:
    """A command liminal answered itself, between the turns: what the person asked of liminal
    and its answer (``[liminal] ...``), never the model's."""
    if m.kind == "user":
        out.line()
        out.line(f"[you, to liminal] {' '.join(m.text.split())}", style="magenta", hang=4)
    else:
        out.lines(f"[liminal] {m.text}", indent=2, style="magenta")


def _context_by_turn(messages: list[MessageRecord]) -> dict[str, str]:
    """The context the model had at the end of each turn: its last usage point."""
    from liminal.units import tokens

    found: dict[str, str] = {}
    for m in messages:
        used, size = m.data.get("used"), m.data.get("size")
        if m.kind == "usage" and m.turn_id is not None and isinstance(used, int):
            found[m.turn_id] = f"context {tokens(used)}" + (
                f" of {tokens(size)} tokens" if isinstance(size, int) and size > 0 else " tokens")
    return found


def _shown(m: MessageRecord) -> bool:
    """Whether a person reads this message in the transcript (``--all`` shows every one)."""
    if m.kind == "usage":
        return False  # in the turn's heading
    return not (m.kind == "turn_end" and m.status == "end_turn")


def render(out: Any, m: MessageRecord, *, full: bool = False) -> None:
    """One message into the transcript ``out`` (``liminal.commands._out.Transcript``)."""
    if m.kind == "user":
        for line in (m.text or "").splitlines() or [""]:
            out.line("> " + line, style="bold cyan")
    elif m.kind == "agent":
        out.lines(str(m.text))
    elif m.kind == "thought":
        out.lines(m.text, indent=2, style="dim italic")
    elif m.kind == "tool_call":
        data = m.data
        title = str(data.get("title") or data.get("name") or "tool")
        if " " not in title.strip() and data.get("rawInput") is not None:  # a bare name: its input says what
            import orjson

            title += " " + orjson.dumps(data["rawInput"]).decode(errors="replace")
        status = "" if m.status == "completed" else f" ({m.status or '?'})"
        out.line(f"▸ {title}{status}", style="yellow", wrap=full)
        lines = tool_output(data).splitlines()
        if not full and len(lines) > OUTPUT_LINES:
            lines = [*lines[:OUTPUT_LINES], f"… {len(lines) - OUTPUT_LINES} more lines (--full)"]
        for line in lines:
            out.line(line, indent=4, wrap=full)
    elif m.kind == "plan":
        marks = {"completed": "x", "in_progress": "~"}
        for e in m.data.get("entries", []):
            out.line(f"[plan] [{marks.get(e.get('status'), ' ')}] {e.get('content', '')}")
    elif m.kind == "usage":
        from liminal.units import tokens

        used, size = m.data.get("used"), m.data.get("size")
        of = f" of {tokens(size)}" if isinstance(size, int) else ""  # (none read from a session file)
        out.line(f"[usage] {tokens(used)}{of} tokens" if isinstance(used, int) else f"[usage] {m.data}",
                 style="dim")
    elif m.kind == "turn_end":
        error = m.data.get("error")
        said = f": {error.get('message')}" if isinstance(error, dict) and error.get("message") else ""
        out.line(f"[turn ended: {m.status or '?'}{said}]", style="red")
    elif m.kind == "swap":
        out.line(f"[liminal: {swap_text(m)}]", style="magenta")
    else:
        out.lines(f"[{m.kind}] {m.text}", style="dim")


def swap_text(m: MessageRecord) -> str:
    """``swap committed, 130k -> 80k tokens, in 0.40 s``, ``/undo failed: ...`` (``liminal.moves``:
    why only when it did not happen)."""
    from liminal import moves

    return moves.describe({"outcome": m.status, **m.data}, committed_why=False, took=True)
