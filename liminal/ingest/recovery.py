"""Recovery: spools that stopped processes left, replayed into the store (a part of the indexer).

A spool whose writer is gone (its folder's lock is free) holds frames that may not be in the
store: the next indexer replays them in order, then derives those connections' messages again
from the frames table (a message can span the frames before and after a crash), and only then
removes what it read, so a crash during recovery just recovers again. What is unreadable in a
dead writer's segment (a block torn mid-write, damage) never completes: it is said and skipped.
Writes that the store refuses are made storable (``write_or_salvage``); writes that fail
because the store is down are retried with back-off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from liminal import log
from liminal.acp import jsonrpc
from liminal.ingest.derive import Deriver
from liminal.ingest.salvage import salvage
from liminal.ingest.spool import SpoolDir, orphans, read_segment
from liminal.store.base import Store
from liminal.store.records import Batch, FrameRecord, MessageRecord, ThreadUpdate

logger = log.get("liminal.ingest.recovery")
_PARSED_KINDS = {"request", "notification", "response"}


def parse(frame: FrameRecord) -> dict[str, Any] | None:
    """The frame's parsed copy, as the router made it (``jsonrpc.parse``)."""
    return jsonrpc.parse(frame.raw) if frame.kind in _PARSED_KINDS else None


async def write_or_salvage(store: Store, batch: Batch) -> None:
    """Write the batch; if the store refuses it, write it made storable (``salvage``), with
    each record that had to change flagged. Only a failure of the store itself is raised: one odd
    value must not stop indexing for good (the worker retried the same batch forever)."""
    try:
        await store.write(batch)
    except Exception as exc:
        clean, flagged = salvage(batch)
        if not flagged:
            raise
        await store.write(clean)
        logger.warning("indexer: records the store refused were stored made storable",
                       flagged=flagged, error=str(exc)[:200])


async def rederive(store: Store, connection_id: str, page: int = 5000) -> None:
    """Derive a connection's messages and thread updates again from the frames table."""
    deriver = Deriver()
    messages: dict[str, MessageRecord] = {}
    threads: list[ThreadUpdate] = []
    after = -1
    while True:
        frames = await store.frames(connection_id=connection_id, after_seq=after, limit=page)
        if not frames:
            break
        for frame in frames:
            deriver.feed(frame, parse(frame))
        derived = deriver.take()
        for m in derived.messages:
            messages[m.id] = m
        threads.extend(derived.threads)
        after = frames[-1].seq
    await write_or_salvage(store, Batch((), list(messages.values()), threads))


async def replay_orphans(store: Store, root: Path, own: Path | None, *, batch_frames: int = 2000,
                         retry_seconds: float = 0.5) -> int:
    """Replay every spool under ``root`` whose writer is gone (not ``own``); frames replayed."""
    replayed = 0
    for spool in orphans(root, own):
        try:
            replayed += await _replay(store, spool, batch_frames, retry_seconds)
        finally:
            spool.release(remove_if_empty=True)
    return replayed


async def _replay(store: Store, spool: SpoolDir, batch_frames: int, retry_seconds: float) -> int:
    """Frames first, then the connections' messages derived again from the frames table; only
    then is the spool removed."""
    connections: set[str] = set()
    replayed = 0
    for seg in spool.segments:
        pos = 0
        while True:
            frames, pos = read_segment(seg.path, pos, seg.written, batch_frames)
            if not frames:
                break
            await _retrying(store, retry_seconds, Batch(frames))
            seg.read = pos
            connections.update(f.connection_id for f in frames)
            replayed += len(frames)
        if seg.read < seg.written:
            logger.warning("indexer: damaged spool segment; the rest of it is skipped",
                           file=str(seg.path), offset=seg.read, skipped=seg.written - seg.read)
            seg.read = seg.written
    for connection_id in sorted(connections):
        await _retrying(store, retry_seconds, None, connection_id)
    spool.discard()
    if connections:
        logger.info("indexer: replayed a spool left by a stopped process",
                    spool=str(spool.path), frames=replayed)
    return replayed


async def _retrying(store: Store, retry_seconds: float, batch: Batch | None,
                    rederive_id: str = "") -> None:
    backoff = retry_seconds
    while True:
        try:
            if batch is not None:
                await write_or_salvage(store, batch)
            else:
                await rederive(store, rederive_id)
            return
        except Exception as exc:
            logger.warning("indexer: recovery write failed; retrying", error=str(exc))
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
