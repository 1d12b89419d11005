"""The dynamic zone on a Claude Code session (``liminal.gradient.zone`` chooses; this gathers).

The passages are the tool results of the turns the rewrite takes out of the context whole
(middle, old, ancient), each with its recall key; the query is what the person and the model
said in the recent band. The block is written as a ``user`` record with ``isMeta`` (as Claude
Code writes the text it adds itself: a caveat, a skill's text), just before the recent band:
the model reads it, the transcript and the picker do not show it as a prompt, and liminal's
own readers take it for no turn (docs/formats.md, "What liminal writes").
"""

from __future__ import annotations

import re
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

from liminal.config import GradientSettings
from liminal.gradient.bands import Band, already_cut, recallable
from liminal.gradient.recall import RecallKey
from liminal.gradient.zone import Candidate, Placed, block, is_zone, select, tokens
from liminal.harness.claude.conversation import Conversation
from liminal.harness.claude.gradient.plan import Plan, make_plan
from liminal.harness.claude.records import Record, loads

_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
MAX_PASSAGES = 300  # the tool results nearest the recent band: a bound on what a swap parses
_NS = uuidlib.UUID("5f0c8a52-2d0e-4b8e-9d35-6c1b8a0f7e11")


def is_zone_record(rec: Record) -> bool:
    """An earlier swap's zone: chosen afresh at each swap, so a rewrite drops the old one."""
    return rec.type == "user" and rec.meta and bool(rec.blocks) and is_zone(rec.blocks[0].head)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content
                         if isinstance(b, dict) and b.get("type") == "text")
    return ""


def choose(conversation: Conversation, plan: Plan, memos: Sequence[Candidate],
           room: int) -> list[Placed]:
    """The zone for ``plan``'s bands in ``room`` tokens (``liminal.gradient.zone.select``)."""
    recent_turns = set(plan.bands[Band.RECENT])
    if room <= 0 or len(recent_turns) == len(conversation.turns):
        return []  # nothing compressed: no zone (nor a block before the first prompt)
    session = conversation.session
    # What the person and the model said: not the text Claude Code adds itself (``isMeta``
    # records, ``<system-reminder>`` blocks), whose words are the same in every thread.
    recent = [r for t in conversation.turns if t.number in recent_turns for r in t.records
              if r.type in ("user", "assistant") and not r.meta
              and any(b.kind == "text" for b in r.blocks)]
    older = [r for t in conversation.turns if t.number not in recent_turns for r in t.records
             if r.type == "user" and r.uuid and any(b.kind == "tool_result" for b in r.blocks)]
    older = older[-MAX_PASSAGES:]
    raw = session.raw([*recent, *older])
    said: list[str] = []
    for rec in recent:
        content = (loads(raw[rec.line]).get("message") or {}).get("content")
        said.append(_REMINDER.sub(" ", _text(content)))
    passages: list[Candidate] = []
    for order, rec in enumerate(reversed(older)):  # the nearest first on ties
        content = (loads(raw[rec.line]).get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        for index, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "tool_result":
                continue
            text = _text(part.get("content"))
            key = RecallKey(session.location.session_id, str(rec.uuid), index)
            if text.strip() and not already_cut(text) and recallable(key):
                passages.append(Candidate(str(key), "passage", text, len(memos) + order))
    return select([*memos, *passages], "\n".join(said), room)


def record(text: str, new_id: str, parent: str | None, reference: dict[str, Any]) -> dict[str, Any]:
    """The zone as a record of the new session, chained after ``parent``."""
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": reference.get("userType", "external"),
        "cwd": reference.get("cwd", ""),
        "sessionId": new_id,
        "version": reference.get("version", ""),
        "gitBranch": reference.get("gitBranch", ""),
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        "isMeta": True,
        "uuid": str(uuidlib.uuid5(_NS, f"{new_id}:zone")),
        "timestamp": str(reference.get("timestamp", "")),
    }


def planned(conversation: Conversation, settings: GradientSettings, target_tokens: int | None,
            memos: Sequence[Candidate], head_chars: int = 0) -> tuple[Plan, list[Placed]]:
    """The plan and its zone. At the floor (a target of 0) the zone comes on top, at its whole
    budget; under a target it must fit too (a target is a promise: docs/gradient.md), so a
    zone that would push the plan past it has the plan made again with the zone's room taken
    off, and is chosen again for the bands that gives."""
    plan = make_plan(conversation, settings, target_tokens, head_chars=head_chars)
    if settings.zone_tokens <= 0:
        return plan, []
    zone = choose(conversation, plan, memos, settings.zone_tokens)
    aim = plan.target_tokens
    need = tokens(block(zone))
    if not zone or target_tokens == 0 or plan.tokens_planned + need <= aim:
        return plan, zone
    plan = make_plan(conversation, settings, max(1, aim - need), head_chars=head_chars)
    return plan, choose(conversation, plan, memos, min(settings.zone_tokens, aim - plan.tokens_planned))
