"""Recovery: spools that stopped processes left, replayed into the store (a part of the indexer).

A spool whose writer is gone (its folder's lock is free) holds frames that may not be in the
store: the next indexer replays them in order, then derives those connections' messages again
from the frames table (a message can span the frames before and after a crash), and only then
removes what it read, so a crash during recovery just recovers again. What is unreadable in a
dead writer's segment (a block torn mid-write, damage) never completes: it is said and skipped.
Records that the store refuses are made storable, cut or set aside (``liminal.ingest.poison``),
so a spool holding one is replayed once, not into the same failure at every start; writes that
fail because the store is down are retried with back-off until the indexer closes, and the spool
then stays for the next start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from liminal import log
from liminal.acp import jsonrpc
from liminal.ingest import derive
from liminal.ingest.cutcopy import cut_strings
from liminal.ingest.derive import Deriver
from liminal.ingest.poison import write_batch
from liminal.ingest.spool import READ_BYTES, SpoolDir, orphans, read_segment
from liminal.store.base import Store
from liminal.store.records import Batch, FrameRecord, MessageRecord, ThreadUpdate

logger = log.get("liminal.ingest.recovery")
_PARSED_KINDS = {"request", "notification", "response"}


def parse(frame: FrameRecord) -> dict[str, Any] | None:
    """The frame's parsed copy, as the router made it (``jsonrpc.parse``); for a frame past
    ``derive.DERIVE_BYTES``, of a copy with its long strings cut (``liminal.ingest.cutcopy``)."""
    if frame.kind not in _PARSED_KINDS:
        return None
    if len(frame.raw) > derive.DERIVE_BYTES:
        return jsonrpc.parse(cut_strings(frame.raw, derive.CUT_STRING_BYTES))
    return jsonrpc.parse(frame.raw)


async def parse_async(frame: FrameRecord) -> dict[str, Any] | None:
    """``parse``, in a thread for a frame past ``derive.DERIVE_BYTES`` (seconds of scanning a
    gigabyte must not hold the event loop, and with it SIGTERM)."""
    if len(frame.raw) > derive.DERIVE_BYTES and frame.kind in _PARSED_KINDS:
        return await anyio.to_thread.run_sync(parse, frame)
    return parse(frame)


async def rederive(store: Store, connection_id: str, *, quarantine: Path,
                   page: int = 5000) -> None:
    """Derive a connection's messages and thread updates again from the frames table."""
    deriver = Deriver()
    messages: dict[str, MessageRecord] = {}
    threads: list[ThreadUpdate] = []
    after = -1
    while True:
        # A page is bounded in bytes too: a streamed 1.5 GB answer is not read back whole.
        frames = await store.frames(connection_id=connection_id, after_seq=after, limit=page,
                                    max_bytes=READ_BYTES)
        if not frames:
            break
        for frame in frames:
            deriver.feed(frame, await parse_async(frame))
        derived = deriver.take()
        for m in derived.messages:
            messages[m.id] = m
        threads.extend(derived.threads)
        after = frames[-1].seq
    await write_batch(store, Batch((), list(messages.values()), threads), quarantine=quarantine)


class Stopped(Exception):
    """The indexer is closing: a replay waiting on the store leaves its spool for later."""


async def replay_orphans(store: Store, root: Path, own: Path | None, *, batch_frames: int = 2000,
                         retry_seconds: float = 0.5, quarantine: Path,
                         stopping: anyio.Event | None = None) -> int:
    """Replay every spool under ``root`` whose writer is gone (not ``own``); frames replayed.
    Once ``stopping`` is set, a replay still waiting on the store stops: its spool stays, whole,
    for the next start."""
    stopping = stopping or anyio.Event()
    replayed = 0
    for spool in orphans(root, own):
        try:
            if not stopping.is_set():
                replayed += await _replay(store, spool, batch_frames, retry_seconds,
                                          quarantine, stopping)
        except Stopped:
            logger.warning("indexer: stopped while replaying a spool; it waits for the next start",
                           spool=str(spool.path))
        finally:
            spool.release(remove_if_empty=True)
    return replayed


async def _replay(store: Store, spool: SpoolDir, batch_frames: int, retry_seconds: float,
                  quarantine: Path, stopping: anyio.Event) -> int:
    """Frames first, then the connections' messages derived again from the frames table; only
    then is the spool removed."""
    connections: set[str] = set()
    replayed = 0

    async def retrying(batch: Batch | None, rederive_id: str = "") -> None:
        await _retrying(store, retry_seconds, batch, rederive_id, quarantine, stopping)

    for seg in spool.segments:
        pos = 0
        while True:
            frames, pos = read_segment(seg.path, pos, seg.written, batch_frames, READ_BYTES)
            if not frames:
                break
            await retrying(Batch(frames))
            seg.read = pos
            connections.update(f.connection_id for f in frames)
            replayed += len(frames)
        if seg.read < seg.written:
            logger.warning("indexer: damaged spool segment; the rest of it is skipped",
                           file=str(seg.path), offset=seg.read, skipped=seg.written - seg.read)
            seg.read = seg.written
    for connection_id in sorted(connections):
        await retrying(None, connection_id)
    spool.discard()
    if connections:
        logger.info("indexer: replayed a spool left by a stopped process",
                    spool=str(spool.path), frames=replayed)
    return replayed


async def _retrying(store: Store, retry_seconds: float, batch: Batch | None,
                    rederive_id: str, quarantine: Path,
                    stopping: anyio.Event) -> None:
    """Write (or derive again) until the store takes it, waiting out its failures, unless the
    indexer is closing (``Stopped``). A refused record never gets here (``write_batch``)."""
    backoff = retry_seconds
    while True:
        if stopping.is_set():
            raise Stopped
        try:
            if batch is not None:
                await write_batch(store, batch, quarantine=quarantine)
            else:
                await rederive(store, rederive_id, quarantine=quarantine)
            return
        except Exception as exc:
            logger.warning("indexer: recovery write failed; retrying", error=str(exc)[:300],
                           retry_seconds=backoff)
            with anyio.move_on_after(backoff):
                await stopping.wait()
            backoff = min(backoff * 2, 5.0)
