"""``session/list`` answered with liminal's threads (a part of the command center).

The agent lists session files: every rewrite a swap left is one, under a backing id the client
never saw, titled by whatever its first prompt was. The store knows the threads: their ids,
cwds, titles (the thread's own, which moves do not change; the user's name for it,
``liminal threads rename``, wins), activity, and which are archived. So the answer is the
store's threads (those in the asked ``cwd``, archived ones left out), newest first, then what
the agent lists that the store does not know (sessions made outside liminal), each under its
thread id and once; never a backing id.

An empty thread (no title, nothing said in it: a client opened it and never prompted it,
acpx's ``sessions new``) is listed only while it is open in this connection (``live``): there is
nothing in it to go back to, and listed for good it would be a blank row in every client's
history. A fork liminal wrote (``/fork``) has a title and is listed.

Paging: the first page carries every thread of the store and the agent's first page; the
agent's ``nextCursor`` is passed on, and later pages are the agent's, less what page one had.
If the store cannot be read, the agent's listing is answered, mapped as the router maps it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from liminal.store.records import ThreadSummary


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def listing(threads: Sequence[ThreadSummary], agent_sessions: Iterable[Any],
            thread_of: Callable[[str], str], cwd: str | None, *, first_page: bool,
            hide: Iterable[str] = (), live: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The ``sessions`` of a ``session/list`` answer (see the module's docstring); ``hide``:
    sessions that are no thread's (a rewrite a swap under way has written); ``live``: threads
    open in this connection (listed even when empty)."""
    # Backing ids of known threads (the store may hold a record under one, from frames seen
    # before the thread was bound to it), archived threads, and empty ones not open here.
    hidden = {b for s in threads for b in s.thread.backing_ids if b != s.thread.id} | set(hide)
    hidden |= {s.thread.id for s in threads if s.thread.state == "archived"}
    hidden |= {s.thread.id for s in threads if s.empty} - set(live)
    ours: dict[str, dict[str, Any]] = {}
    for summary in sorted(threads, key=lambda s: s.last_activity, reverse=True):
        thread = summary.thread
        if thread.id in hidden:
            continue
        if cwd and thread.cwd and thread.cwd != cwd:
            continue
        entry: dict[str, Any] = {"sessionId": thread.id, "cwd": thread.cwd or cwd or ".",
                                 "updatedAt": iso(summary.last_activity)}
        if thread.title:
            entry["title"] = thread.title
        ours[thread.id] = entry
    out: list[dict[str, Any]] = list(ours.values()) if first_page else []
    seen = set(ours)
    for session in agent_sessions:
        if not isinstance(session, Mapping) or not isinstance(session.get("sessionId"), str):
            continue
        thread_id = thread_of(session["sessionId"])
        if thread_id in seen or thread_id in hidden or session["sessionId"] in hidden:
            continue
        seen.add(thread_id)
        out.append({**session, "sessionId": thread_id})
    return out
