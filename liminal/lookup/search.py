"""Search as a person reads it: the conversation, once each, with a time and a place.

What the three searches show (``liminal search``, ``/search``, the model's ``search_history``):
what the person and the model said and what tools returned, each once, with when it was said
and where (the thread's title, the turn of ``liminal history``). The store holds more than that,
and by default the rest stays out:

* messages of other kinds (usage points, turn ends, swap and mark notes, problems, memos);
* liminal's own part of a thread: the commands it answered (``/search``, ``/rename``: their
  prompt frames go client to liminal, their answers liminal to client), the notices it sent
  and the notes it wrote, what the agent answered liminal's own requests; a message started
  by a frame of one of ``LIMINAL_DIRECTIONS``;
* calls of liminal's own tools by the model (``search_history`` answers with copies of earlier
  finds, ``recall`` with a copy of an output the conversation already holds);
* the CLIs' bookkeeping records (Claude Code's ``api-request-blob`` keeps a copy of every
  message it sent; Codex repeats each prompt and answer as an event): only the record types a
  harness names as the conversation are searched (``conversation_record_types``).

A session record of a tool call is placed on the tool call's message (``place_tool_records``),
and a record holding the same words as a message of its thread is that message
(``ranked``), so the CLI's copy (with the full output the client may not have been shown) and
the client's are one find. ``everything`` asks for all of it, each labelled with what it is.
"""

from __future__ import annotations

import bisect
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from liminal.lookup.memos import MEMO_THREAD
from liminal.store.records import (
    OWNED_ELSEWHERE,
    SUMMARY_THREAD,
    SearchHit,
    summarised,
    turn_numbers,
)

if TYPE_CHECKING:
    from liminal.store.base import Store

# What the person and the model said, the tools they ran, the model's plan.
CONVERSATION_KINDS = frozenset({"user", "agent", "thought", "tool_call", "plan"})
# Frames that are liminal's own: a command's prompt and answer, a notice, a note, and the
# agent's answers to liminal's own requests (which the client never saw).
LIMINAL_DIRECTIONS = frozenset({"c2l", "l2c", "note", "l2a", "a2l"})
# A call of liminal's MCP server, by its title: Claude Code names its tools
# ``mcp__liminal__recall``; codex-acp 2.x ``mcp.liminal.recall`` (and names the server in the
# call's input), codex-acp 0.16 ``Tool: liminal/recall``.
_LIMINAL_TOOL = re.compile(r'mcp(?:__|\.)liminal(?:__|\.)|"server": ?"liminal"|^Tool: liminal/')
# A CLI's record of a call that starts with the tool's name (Claude Code's ``Bash {...}``).
_TOOL_NAME = re.compile(r"([\w.-]+) [{\[]")
_WHO = {"user": "you", "agent": "model", "thought": "thinking", "tool_call": "tool", "plan": "plan",
        "summary": "model's summary", "lesson": "model's lesson"}


@dataclass(frozen=True, slots=True)
class Found:
    hit: SearchHit
    title: str  # the thread's title ("" when it has none)
    turn: int | None  # the turn as ``liminal history`` numbers it; None: before liminal saw any
    who: str  # you, model, thinking, tool, plan; tool call, tool output (a CLI's record); ...
    tool: str = ""  # a tool's title (its command, its name)
    # Where a hit of a pseudo-thread is, in place of a turn: a memo is among liminal's memos, the
    # model's summary of a thread's older turns in that thread (``title`` is that thread's).
    aside: str = ""

    @property
    def when(self) -> str:
        t = self.hit.time
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "no time"

    def where(self, *, title: bool = True) -> str:
        """``Flux work · turn 3``; ``turn 3`` without the title (the reader is in the thread)."""
        turn = self.aside or (f"turn {self.turn}" if self.turn is not None else "before liminal")
        if not title or (self.aside and not self.title):
            return turn
        name = self.title or (self.hit.thread_id or "?")[:8]
        return f"{name} · {turn}"

    @property
    def speaker(self) -> str:
        """Who said it, with the tool's title: ``tool (echo hi)``."""
        if not self.tool:
            return self.who
        tool = self.tool if len(self.tool) <= 40 else self.tool[:39] + "…"
        return f"{self.who} ({tool})"


def liminals(hit: SearchHit) -> bool:
    """Whether the hit is liminal's own part of the thread rather than the conversation."""
    if hit.direction in LIMINAL_DIRECTIONS:
        return True
    tool = hit.kind == "tool_call" if hit.source == "message" else bool(hit.tool_ids)
    return tool and _LIMINAL_TOOL.search(hit.head) is not None


async def find(store: Store, query: str, *, thread_id: str | None = None, limit: int = 20,
               everything: bool = False) -> list[Found]:
    """Best first, at most ``limit``, each placed in its thread."""
    from liminal.harness.known import conversation_record_types

    kinds = None if everything else CONVERSATION_KINDS
    types = None if everything else conversation_record_types()
    ask = limit * 2 + 8
    while True:  # more, when liminal's own part filled what was asked
        hits = await store.search(query, thread_id=thread_id, limit=ask, kinds=kinds,
                                  record_types=types)
        kept = hits if everything else [h for h in hits if not liminals(h)]
        if len(kept) >= limit or len(hits) < ask or ask > limit * 50:
            break
        ask *= 4
    return await place(store, kept[:limit])


async def place(store: Store, hits: list[SearchHit]) -> list[Found]:
    """Each hit with its thread's title, its turn and who said it."""
    from liminal.harness.known import record_role

    titles: dict[str, str] = {}
    turns: dict[str, tuple[dict[str, int], list[float]]] = {}
    # Memos and the model's summaries are kept under pseudo-threads no person named (shown as a
    # thread called "liminal-" before): a summary is placed in the thread it summarises.
    summaries: dict[str, str] = {}
    for pseudo in OWNED_ELSEWHERE:  # a summary, a lesson's part: placed in the thread it is of
        if any(h.thread_id == pseudo for h in hits):
            summaries |= {m.id: of for m in await store.messages(pseudo) if (of := summarised(m.data)) is not None}
    placed = [summaries.get(h.id) if h.thread_id in OWNED_ELSEWHERE else h.thread_id for h in hits]
    for thread_id in dict.fromkeys(t for t in placed if t and t != MEMO_THREAD):
        thread = await store.thread(thread_id)
        titles[thread_id] = thread.title if thread else ""
        # The conversation's prompts: a command liminal answered is no turn (``turn_numbers``).
        liminals = await store.liminal_turns(thread_id)
        prompts = [m for m in await store.messages(thread_id, kind="user")
                   if not m.replayed and m.turn_id not in liminals]
        turns[thread_id] = (turn_numbers(prompts, liminals), [m.time for m in prompts])
    found = []
    for hit in hits:
        numbers, starts = turns.get(hit.thread_id or "", ({}, []))
        turn = numbers.get(hit.turn_id) if hit.turn_id else None
        if turn is None and hit.time is not None:
            # A CLI record: the turn it was written in; a command liminal answered: the turn
            # it follows (as ``liminal history`` shows it, between that turn and the next).
            turn = bisect.bisect_right(starts, hit.time) or None
        if hit.source == "message" or hit.message_id is not None:
            kind = "tool_call" if hit.source == "session" else hit.kind
            who = _WHO.get(kind, kind)
            if hit.direction in LIMINAL_DIRECTIONS:
                who = "you, to liminal" if kind == "user" else f"liminal ({kind})"
            tool = hit.head if kind == "tool_call" else ""
        else:
            role = record_role(hit.kind, hit.tool_ids)
            who = role or f"record ({hit.kind or '?'})"
            named = _TOOL_NAME.match(hit.head) if role == "tool call" else None
            tool = named.group(1) if named else ""
        aside, title = "", titles.get(hit.thread_id or "", "")
        if hit.thread_id == MEMO_THREAD:
            aside = "liminal's memos"
        elif hit.thread_id in OWNED_ELSEWHERE:
            of = summaries.get(hit.id) or ""
            aside = "older turns" if hit.thread_id == SUMMARY_THREAD else "a lesson"
            title = titles.get(of) or of[:8]
        found.append(Found(hit, title, turn, who, tool, aside))
    return found
