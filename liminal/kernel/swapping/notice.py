"""What the client is told of a committed swap, inside the thread's next turn."""

from __future__ import annotations

from typing import Any

from liminal import units


def swap_notice(notice: str, compaction: bool, new_id: str, before: int, after: int) -> list[dict[str, Any]]:
    """The ``session/update`` updates that tell of a swap from ``before`` to ``after`` tokens
    onto ``new_id``. ``notice``: ``swap.notice`` (``silent``: none; ``thought``: an agent thought;
    else a ``session_info_update`` with the figures under ``_meta``); ``compaction``: the client
    declared ACP's ``session.compaction`` and shows compactions itself, so the swap is one, in the
    protocol's own updates (started, then completed with what it did as its summary)."""
    if notice == "silent":
        return []
    text = (f"Context optimised by liminal: {units.tokens(before)} -> "
            f"{units.tokens(after)} tokens.")
    meta = {"liminal": {"swap": {"tokensBefore": before, "tokensAfter": after}}}
    if compaction:
        compaction_id = f"liminal-{new_id}"
        return [
            {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "in_progress"},
            {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "completed",
             "summary": [{"type": "text", "text": text}], "_meta": meta}]
    if notice == "thought":
        return [{"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text},
                 "_meta": meta}]
    return [{"sessionUpdate": "session_info_update", "_meta": meta}]
