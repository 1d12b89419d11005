"""Recovery: spools that stopped processes left, replayed into the store (a part of the indexer).

A spool whose writer is gone (its folder's lock is free) holds frames that may not be in the
store: the next indexer replays them in order (less the pieces of a history the store has
already, which a later load replayed: ``liminal.ingest.derive``), then derives those
connections' messages again from the frames table (a message can span the frames before and
after a crash), and only then removes what it read, so a crash during recovery just recovers
again. After it, a store an older liminal wrote is compacted (``Store.compact``). What is unreadable in a
dead writer's segment (a block torn mid-write, damage) never completes: it is said and skipped.
Records that the store refuses are made storable, cut or set aside (``liminal.ingest.poison``),
so a spool holding one is replayed once, not into the same failure at every start; writes that
fail because the store is down are retried with back-off until the indexer closes, and the spool
then stays for the next start.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import anyio

from liminal import log
from liminal.acp import jsonrpc
from liminal.ingest import derive
from liminal.ingest.cutcopy import cut_strings
from liminal.ingest.derive import Deriver
from liminal.ingest.poison import write_batch
from liminal.ingest.spool import READ_BYTES, SpoolDir, orphans, read_segment
from liminal.store.base import Store
from liminal.store.records import LOAD, Batch, FrameRecord, MessageRecord, ThreadUpdate

logger = log.get("liminal.ingest.recovery")
_PARSED_KINDS = {"request", "notification", "response"}
T = TypeVar("T")


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


async def ask_loads(deriver: Deriver, store: Store,
                    items: Iterable[tuple[FrameRecord, dict[str, Any] | None]]) -> None:
    """Tell the deriver, for each ``session/load`` among ``items`` it cannot place itself,
    whether the store holds the thread's history from before it (``Store.said_before``): only
    a thread's first load records its replay. One indexed read a load, before it is fed."""
    for frame, message in items:
        thread = deriver.to_ask(frame, message)
        if thread is not None:
            deriver.told(frame.id, await store.said_before(thread, frame.id))


async def derive_earlier(deriver: Deriver, store: Store, connection_id: str,
                         before_seq: int) -> None:
    """Feed the deriver the connection's frames the store holds before ``before_seq`` (what an
    earlier worker took of it), so that what comes next is derived as it would have been;
    ``take`` then has what they derived."""
    after = -1
    while after < before_seq - 1:
        stored = await store.frames(connection_id=connection_id, after_seq=after,
                                    limit=5000, max_bytes=READ_BYTES)
        earlier = [(f, await parse_async(f)) for f in stored if f.seq < before_seq]
        await ask_loads(deriver, store, earlier)
        for frame, message in earlier:
            deriver.feed(frame, message)
        if len(earlier) < len(stored) or not stored:
            break
        after = stored[-1].seq


async def derive_where_spools_start(deriver: Deriver, store: Store,
                                    frames: list[FrameRecord]) -> list[derive.Derived] | None:
    """What an earlier worker took of each connection whose spool starts past its first frame
    among ``frames`` and that ``deriver`` knows nothing of, derived again from the frames table
    (one ``Derived`` a connection); None if the store cannot say now.

    A worker that replaces one that died finds only the segments the dead one had not
    finished. Its deriver knows nothing of the turn under way: unprimed, the rest of an answer would
    become a second message, a tool call's result one without its title, the messages after
    it would belong to no turn, and the turn's end would never be recorded; nor would it learn
    the thread's session file, which would then go unindexed."""
    primed: list[derive.Derived] = []
    looked: set[str] = set()
    for frame in frames:  # each connection's first frame here says where its spool starts
        connection = frame.connection_id
        if connection in looked:
            continue
        looked.add(connection)
        if frame.seq == 0 or deriver.knows(connection):
            continue
        try:
            await derive_earlier(deriver, store, connection, frame.seq)
        except Exception as exc:
            logger.warning("indexer: cannot read what an earlier worker stored; retrying",
                           connection=connection, error=str(exc))
            return None
        primed.append(deriver.take(include_open=False))
        logger.info("indexer: derived again what an earlier worker took",
                    connection=connection, before_seq=frame.seq)
    return primed


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
        items = [(frame, await parse_async(frame)) for frame in frames]
        await ask_loads(deriver, store, items)
        for frame, message in items:
            deriver.feed(frame, message)
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
    if not stopping.is_set():  # once a store: the spools first, which a stop may not wait for
        try:
            await store.compact()
        except Exception as exc:  # compacted at a later start: nothing waits on it
            logger.warning("indexer: the store was not compacted", error=str(exc)[:300])
    return replayed


async def _replay(store: Store, spool: SpoolDir, batch_frames: int, retry_seconds: float,
                  quarantine: Path, stopping: anyio.Event) -> int:
    """Frames first, then the connections' messages derived again from the frames table; only
    then is the spool removed."""
    connections: set[str] = set()
    replayed = 0
    deriver = Deriver()  # says which frames a later load replayed, and that load's note

    async def retrying(work: Callable[[], Awaitable[T]]) -> T:
        return await _retrying(retry_seconds, work, stopping)

    async def stored(frames: list[FrameRecord], made: list[Batch]) -> None:
        """The frames written (less a later load's replay, with its note), placed first (once:
        a write tried again writes what was made)."""
        if not made:
            for frame in frames:  # a connection's first frame here says where its spool starts
                if frame.seq and not deriver.knows(frame.connection_id):
                    await derive_earlier(deriver, store, frame.connection_id, frame.seq)
            items = [(f, None if deriver.seen(f) else await parse_async(f)) for f in frames]
            await ask_loads(deriver, store, items)
            kept = [f for f, message in items if deriver.feed(f, message)]
            made.append(Batch(kept, [m for m in deriver.take().messages if m.kind == LOAD]))
        logger.debug("indexer: writing replayed frames", frames=len(made[0].frames))
        await write_batch(store, made[0], quarantine=quarantine)

    for seg in spool.segments:
        pos = 0
        while True:
            try:
                frames, pos = read_segment(seg.path, pos, seg.written, batch_frames, READ_BYTES)
            except FileNotFoundError:
                # Removed by a reader that stored every frame in it: the spool's own worker,
                # draining after its writer was killed (which freed the lock taken here).
                seg.read = seg.written
                break
            if not frames:
                break
            await retrying(functools.partial(stored, frames, []))
            seg.read = pos
            connections.update(f.connection_id for f in frames)
            replayed += len(frames)
        if seg.read < seg.written:
            logger.warning("indexer: damaged spool segment; the rest of it is skipped",
                           file=str(seg.path), offset=seg.read, skipped=seg.written - seg.read)
            seg.read = seg.written
    for connection_id in sorted(connections):
        await retrying(functools.partial(rederive, store, connection_id, quarantine=quarantine))
    spool.discard()
    if connections:
        logger.info("indexer: replayed a spool left by a stopped process",
                    spool=str(spool.path), frames=replayed)
    return replayed


async def _retrying(retry_seconds: float, work: Callable[[], Awaitable[T]],
                    stopping: anyio.Event) -> T:
    """``work`` (a write, a derivation again, the reads that place frames) until the store
    takes it, waiting out its failures, unless the indexer is closing (``Stopped``). A refused
    record never gets here (``write_batch``)."""
    backoff = retry_seconds
    while True:
        if stopping.is_set():
            raise Stopped
        try:
            return await work()
        except Exception as exc:
            logger.warning("indexer: recovery write failed; retrying", error=str(exc)[:300],
                           retry_seconds=backoff)
            with anyio.move_on_after(backoff):
                await stopping.wait()
            backoff = min(backoff * 2, 5.0)
