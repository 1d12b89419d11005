"""A thread as a person names it: the one reading of an id typed to a command or in an address.

A thread is named by its id, by the id of a session it moved onto (a swap's rewrite, the session
of a ``/clear``: the name of a CLI's session file), or by a prefix of either that no other thread
shares (``liminal threads`` shows the shortest). Its own ids come first: a prefix of one names
that thread even when some session of another starts the same way. An empty text names nothing:
it is a prefix of every id (``liminal threads delete "$T" --yes`` with T unset would take the
store's only thread). A thread the store deleted is no one's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

SHOWN = 5  # candidates listed when a prefix names several


@dataclass(frozen=True, slots=True)
class Named:
    thread: str  # the thread's id
    session: str  # the session the text named: a session's own id, else the thread's latest


def match(text: str, threads: Iterable[tuple[str, Sequence[str]]]) -> Named | list[str]:
    """The thread ``text`` names among ``threads`` ((id, its sessions' ids, oldest first)), or
    the candidates: none, or several (sorted)."""
    if not text.strip():
        return []
    known = [(t, tuple(sessions) or (t,)) for t, sessions in threads]
    for t, sessions in known:
        if t == text:
            return Named(t, sessions[-1])
    for t, sessions in known:
        if text in sessions:
            return Named(t, text)
    own = sorted({t for t, _ in known if t.startswith(text)})
    if own:
        if len(own) > 1:
            return own
        sessions = next(s for t, s in known if t == own[0])
        return Named(own[0], sessions[-1])
    moved = [(t, [s for s in sessions if s.startswith(text)]) for t, sessions in known]
    moved = [(t, found) for t, found in moved if found]
    if len(moved) > 1:
        return sorted({t for t, _ in moved})
    return Named(moved[0][0], moved[0][1][-1]) if moved else []


async def resolve(store: Any, text: str) -> Named | list[str]:
    """``match`` over the store's threads (a ``liminal.store.base.Store``), archived and empty
    ones too."""
    if not text.strip():
        return []
    summaries = await store.threads(limit=100_000, empty=True)
    return match(text, ((s.thread.id, s.thread.backing_ids) for s in summaries))


def refusal(text: str, candidates: list[str]) -> str:
    """What a person is told when ``text`` names no single thread."""
    if not text.strip():
        return "an empty id names no thread"
    if not candidates:
        return f"no such thread: {text}"
    listed = ", ".join(candidates[:SHOWN]) + (", …" if len(candidates) > SHOWN else "")
    return f"{text!r} names {len(candidates)} threads: {listed} (give more of the id)"
