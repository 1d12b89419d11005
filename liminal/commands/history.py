"""``liminal history THREAD [--json]``: a thread as a readable transcript."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from liminal.config import Settings
from liminal.store.records import MessageRecord, Thread, conversation

HELP = "show a thread as a readable transcript (THREAD may be a unique prefix of its id)"
OUTPUT_LINES = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread", help="thread id, or a unique prefix of it")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--full", action="store_true", help="print tool output in full")


async def resolve(store: Any, prefix: str) -> str | list[str]:
    """The thread id ``prefix`` names, or the candidates when it names none or several. An empty
    one names none: it is a prefix of every id (``liminal threads delete "$T" --yes`` with T
    unset would take the store's only thread). The id of a session a thread moved onto (a
    swap's rewrite, the session of a ``/clear``: the name of a CLI's session file) names that
    thread; so does a prefix of one, when no thread's own id starts with it."""
    if not prefix.strip():
        return []
    threads: list[Thread] = [s.thread for s in await store.threads(limit=100_000, empty=True)]
    exact = [t.id for t in threads if prefix == t.id] or [t.id for t in threads if prefix in t.backing_ids]
    if exact:
        return exact[0]
    for names in (lambda t: (t.id,), lambda t: t.backing_ids):
        matches = sorted({t.id for t in threads if any(n.startswith(prefix) for n in names(t))})
        if matches:
            return matches[0] if len(matches) == 1 else matches
    return []


def run(args: argparse.Namespace, settings: Settings) -> int:
    from liminal.commands._store import print_json, run_with_store, when

    async def body(store: Any) -> tuple[Thread | None, list[MessageRecord]] | list[str]:
        found = await resolve(store, args.thread)
        if isinstance(found, list):
            # A thread the store has messages for but no record of (yet) still has a history.
            messages = await store.messages(args.thread)
            return (None, messages) if messages else found
        return await store.thread(found), await store.messages(found)

    result = run_with_store(settings, body)
    if result is None:
        return 1
    if isinstance(result, list):
        hint = f": matches {', '.join(result[:5])}" if result else ""
        print(f"liminal history: no single thread {args.thread!r}{hint}", file=sys.stderr)
        return 1
    thread, messages = result
    shown = conversation(messages)  # with the history from before liminal, if it was loaded
    if args.json:
        print_json({
            "thread": None if thread is None else {
                "id": thread.id, "title": thread.title, "cwd": thread.cwd,
                "harness": thread.harness, "state": thread.state,
                "backing_ids": list(thread.backing_ids), "created": thread.created,
                "updated": thread.updated},
            "messages": [{
                "id": m.id, "turn_id": m.turn_id, "time": m.time, "kind": m.kind,
                "text": m.text, "tool_call_id": m.tool_call_id, "status": m.status,
                "data": m.data, "replayed": m.replayed} for m in shown]})
        return 0
    if thread is not None:
        print(f"# {thread.title or thread.id}")
        print(f"thread {thread.id} · {thread.harness or '?'} · {thread.cwd or '?'} · "
              f"{len(thread.backing_ids)} backing session(s)")
    turn = None
    turns = 0
    for m in shown:
        if m.turn_id != turn and m.turn_id is not None:
            turn = m.turn_id
            turns += 1
            print(f"\n── turn {turns} · {when(m.time)}")
        print(render(m, full=args.full))
    return 0


def render(m: MessageRecord, *, full: bool = False) -> str:
    if m.kind == "user":
        return "\n".join("> " + line for line in (m.text or "").splitlines() or [""])
    if m.kind == "agent":
        return str(m.text)
    if m.kind == "thought":
        return "\n".join("  ~ " + line for line in m.text.splitlines())
    if m.kind == "tool_call":
        data = m.data
        head = f"[tool {data.get('kind') or ''} · {m.status or '?'}] {data.get('title') or ''}"
        lines = m.text.splitlines()[1:]
        if not full and len(lines) > OUTPUT_LINES:
            lines = [*lines[:OUTPUT_LINES], f"… {len(lines) - OUTPUT_LINES} more lines"]
        return "\n".join([head, *("    " + line for line in lines)])
    if m.kind == "plan":
        marks = {"completed": "x", "in_progress": "~"}
        return "\n".join(f"[plan] [{marks.get(e.get('status'), ' ')}] {e.get('content', '')}"
                         for e in m.data.get("entries", []))
    if m.kind == "usage":
        used, size = m.data.get("used"), m.data.get("size")
        return f"[usage] {used:,} / {size:,} tokens" if isinstance(used, int) and isinstance(
            size, int) else f"[usage] {m.data}"
    if m.kind == "turn_end":
        return f"[end: {m.status or '?'}]"
    if m.kind == "swap":
        seconds = m.data.get("duration_s")
        took = f" in {seconds:.2f} s" if isinstance(seconds, (int, float)) else ""
        return f"[liminal: {m.text}{took}]"
    return f"[{m.kind}] {m.text}"
