"""What the client is told of a move that compacts its context: a committed swap (inside the
thread's next turn) or ``/optimise`` (inside its own turn).

The shape follows what the client declared in ``initialize`` (``ThreadModel``): ACP's
``session.compaction`` gets the protocol's ``compaction_update`` entity, ``session.notices`` a
``notice`` (live information, not history), any other client the ``swap.notice`` setting's form.
The protocol lets an agent send those updates only to a client that declared them.
"""

from __future__ import annotations

from typing import Any

from liminal import units


def swap_text(before: int, after: int) -> str:
    return f"Context optimised by liminal: {units.tokens(before)} -> {units.tokens(after)} tokens."


def _meta(before: int, after: int) -> dict[str, Any]:
    return {"liminal": {"swap": {"tokensBefore": before, "tokensAfter": after}}}


def compaction_started(compaction_id: str) -> dict[str, Any]:
    """The first ``compaction_update`` of a compaction: where it is sent fixes its place in
    the client's timeline."""
    return {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "in_progress"}


def compaction_ended(compaction_id: str, before: int, after: int) -> dict[str, Any]:
    return {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "completed",
            "summary": [{"type": "text", "text": swap_text(before, after)}], "_meta": _meta(before, after)}


def compaction_failed(compaction_id: str, error: str, status: str = "failed") -> dict[str, Any]:
    """A compaction that did not finish: ``failed``, or ``cancelled``."""
    return {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": status,
            "error": error}


def compaction_id(new_id: str) -> str:
    return f"liminal-{new_id}"


def swap_notice(notice: str, compaction: bool, new_id: str, before: int, after: int, *,
                notices: bool = False) -> list[dict[str, Any]]:
    """The ``session/update`` updates that tell of a swap from ``before`` to ``after`` tokens
    onto ``new_id``. ``notice``: ``swap.notice`` (``silent``: none; ``thought``: an agent thought;
    else a ``session_info_update`` with the figures under ``_meta``); ``compaction``: the client
    declared ``session.compaction``, so the swap is a compaction (started, then completed with
    what it did as its summary); ``notices``: it declared ``session.notices``, so the swap is a
    ``notice`` of severity ``info``, never a thought."""
    if notice == "silent":
        return []
    if compaction:
        ident = compaction_id(new_id)
        return [compaction_started(ident), compaction_ended(ident, before, after)]
    if notices:
        return [{"sessionUpdate": "notice", "severity": "info", "title": swap_text(before, after),
                 "_meta": _meta(before, after)}]
    if notice == "thought":
        return [{"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": swap_text(before, after)},
                 "_meta": _meta(before, after)}]
    return [{"sessionUpdate": "session_info_update", "_meta": _meta(before, after)}]
