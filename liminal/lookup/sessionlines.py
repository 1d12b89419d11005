"""A session file as the store holds it: every line, in order, or nothing.

The index worker keeps each line of a CLI's session file whole (``SessionRecord.raw``, at its
byte ``offset``), liminal's own lines among them, so the file can be written again from the
store (``liminal.kernel.restore``). Only a file the store holds *all* of may be written: a line
set aside (``liminal.ingest.poison``), cut to its head (past ``liminal.ingest.tail.MAX_LINE``) or
never indexed would leave a session the CLI reads as another conversation. The offsets tell:
each line starts where the one before it ended. (A cut or missing *last* line has no line after
it to show it; the CLIs cannot resume a session with multi-megabyte lines anyway.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from liminal.store.base import Store

if TYPE_CHECKING:
    from liminal.harness.base import Beside, StoredSessions


class Incomplete(Exception):
    """The store does not hold the session whole; the message says where it breaks."""


async def stored_lines(store: Store, backing_id: str) -> list[bytes]:
    """The session file's lines (without their newlines), from the first byte to the last line
    indexed. Raises ``Incomplete`` when the store has none of it or a line is missing."""
    records = await store.session_records(backing_id)
    if not records:
        raise Incomplete(f"the store has no line of session {backing_id}")
    expected = 0
    lines: list[bytes] = []
    for record in records:
        if record.offset != expected:
            raise Incomplete(f"session {backing_id}: the store lacks bytes {expected} to "
                             f"{record.offset} (a line the indexer cut or set aside, or never indexed)")
        lines.append(record.raw)
        expected = record.offset + len(record.raw) + 1
    return lines


async def stored_beside_one(store: Store, ref: Beside) -> bytes | None:
    """The bytes of a file beside a session, as the index worker kept them
    (``liminal.ingest.tail``: one record per thread that refers to it, all the same file), or
    None when the store has none."""
    records = await store.session_records(ref.store_key, limit=1)
    return records[0].raw if records else None


def named_beside(harness: StoredSessions, lines: Sequence[bytes]) -> list[Beside]:
    """The files beside sessions that ``lines`` refer to (``StoredSessions.beside_in``), each
    once, in order."""
    return list(dict.fromkeys(ref for line in lines for ref in harness.beside_in(line)))
