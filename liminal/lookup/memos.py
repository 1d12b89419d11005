"""Memos: short notes with tags that outlive the thread they were written in.

Kept as messages of one pseudo-thread (``MEMO_THREAD``) in the store, so every store backend
holds them, search finds them, and a memo saved by the model in one thread is found from another.
Used by the ``/memo`` commands and by ``liminal mcp``'s ``memo_save`` and ``memo_find``.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from liminal.store.records import Batch, MessageRecord

if TYPE_CHECKING:
    from liminal.store.base import Store

MEMO_THREAD = "liminal-memos"


def split_tags(text: str) -> tuple[str, list[str]]:
    """``("fix the build", ["ci"])`` for ``"fix the build #ci"``."""
    words = text.split()
    tags = [w[1:] for w in words if w.startswith("#") and len(w) > 1]
    return " ".join(w for w in words if not (w.startswith("#") and len(w) > 1)), tags


def clean_tags(tags: list[str]) -> list[str]:
    return [t.lstrip("#").strip() for t in tags if t.lstrip("#").strip()]


async def save_memo(store: Store, content: str, tags: list[str], thread: str | None) -> MessageRecord:
    now = time.time()
    record = MessageRecord(id=f"memo-{uuid.uuid4()}", thread_id=MEMO_THREAD, turn_id=None, time=now,
                           order=f"{now:017.6f}", kind="memo", text=content,
                           data={"tags": clean_tags(tags), "thread": thread})
    await store.write(Batch(messages=[record]))
    return record


async def find_memos(store: Store, tags: list[str], text: str) -> list[MessageRecord]:
    """Memos carrying every tag given and containing ``text`` (case-insensitive), oldest first."""
    memos = [m for m in await store.messages(MEMO_THREAD) if m.kind == "memo"]
    wanted = set(clean_tags(tags))
    if wanted:
        memos = [m for m in memos if wanted <= set(m.data.get("tags") or [])]
    if text:
        memos = [m for m in memos if text.lower() in m.text.lower()]
    return memos


async def memos_matching(store: Store, query: str) -> list[MessageRecord]:
    """Memos holding every word of a search query (``liminal search``, the dashboard's search):
    liminal's own records, which the conversation's search does not reach."""
    from liminal.store.base import fts_terms

    terms = [t.lower() for t in fts_terms(query)]
    return [m for m in await find_memos(store, [], "") if terms and all(t in m.text.lower() for t in terms)]


def describe(memo: MessageRecord) -> str:
    tags = memo.data.get("tags") or []
    return memo.text + (f"  {' '.join('#' + t for t in tags)}" if tags else "")
