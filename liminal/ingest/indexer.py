"""The indexer: every frame the router taps, into the store, without ever slowing forwarding.

The path of a frame:

1. ``offer(event)`` (on the forwarding path, synchronous) gives it the next sequence number of
   its connection, so its id is ``<connection id>:<seq>`` whatever happens next, and appends it to
   a bounded in-memory queue. If the queue is full, or the indexer is already spilling, it
   appends the frame to the spool instead (one ``writev``). Either way it returns at once.
2. ``run()`` takes frames in order (the queue first, then the spool's segments), derives messages
   and thread updates (``liminal.ingest.derive``), and writes one ``Batch`` per round.
3. When a write fails, the frames it held and everything still queued go to the spool, and the
   indexer keeps spilling until the spool has been replayed. When a write stalls past
   ``stall_seconds``, the same happens without waiting for it to fail; if it then succeeds, the
   replay finds those frames already stored (deterministic ids) and skips them.
4. On start, spools left by processes that died are replayed, and their connections' messages
   are derived again from the frames table (``liminal.ingest.recovery``).
5. The CLI's session file of every backing session seen is tailed too
   (``liminal.ingest.sessions``).
6. A record the store refuses (past its size limit, a value it cannot encode) never fails its
   batch for good: the batch is written without it, and it is stored cut or set aside in
   ``$LIMINAL_HOME/quarantine`` (``liminal.ingest.poison``). Only a store that fails (down,
   locked, slow) makes the indexer wait and try again.

The crash guarantee (see docs/operations.md): what reached the spool survives SIGKILL and is in
the store after the next start; what was still only in memory (at most ``queue_frames`` frames,
in practice the last few milliseconds of traffic when the store keeps up) may be lost.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import orjson

from liminal import faults, log
from liminal.acp.events import FrameEvent
from liminal.acp.port import Component, Frames
from liminal.ingest import derive
from liminal.ingest.burst import (
    YIELD_BYTES_PER_SECOND,
    YIELD_MAX_SECONDS,
    YIELD_WINDOW_SECONDS,
    BurstGate,
)
from liminal.ingest.derive import Deriver
from liminal.ingest.poison import write_batch
from liminal.ingest.quarantine import folder as quarantine_folder
from liminal.ingest.recovery import (
    ask_loads,
    derive_where_spools_start,
    parse_async,
    replay_orphans,
)
from liminal.ingest.sessions import SessionFiles, SessionWatch
from liminal.ingest.spool import SpoolDir
from liminal.store.base import Store
from liminal.store.records import Batch, FrameRecord, MessageRecord, ThreadUpdate, frame_id

logger = log.get("liminal.ingest.indexer")
_PARSED_KINDS = {"request", "notification", "response"}
# A message still growing (a long answer streaming in) is written at most this often, and only
# once its text has grown by ``OPEN_MESSAGE_GROWTH`` of what was written last: each write replaces
# the whole text and its search index, so writing it at a fixed pace cost the square of a long
# answer's length, and this way costs in all about three times its length. It is complete in the
# store once it ends (or pauses, below). The frames, always written at once, hold it meanwhile.
OPEN_MESSAGE_SECONDS = 1.0
OPEN_MESSAGE_GROWTH = 0.5
# ... and once no frame has come for this long (a pause in the stream, a turn that ends without
# closing it): an empty spool between two pokes of a trickling stream is not a pause, and writing
# the whole growing text at each one cost the worker most of its CPU.
QUIET_SECONDS = 0.2
# A worker looks at its spool this often when not woken: for a poke that was dropped (a full
# pipe), and for streamed updates, whose writer pokes at most every ``STREAM_POKE_SECONDS``
# (``liminal.ingest.worker``), not more often than it.
TAIL_POLL_SECONDS = 0.25


class Wakeup:
    """The consumer's wake-up. A wake that comes while it is not waiting (it is storing a
    round) is not lost: its next wait returns at once, for what woke it may be past what it read."""

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._pending = False
        self.waiting = False

    def set(self) -> None:
        self._pending = True
        self._event.set()

    async def wait(self, seconds: float) -> None:
        """Until ``set`` (or one since the last wait), or ``seconds``."""
        if self._pending:
            self._pending = False
            return
        self.waiting = True
        self._event = anyio.Event()
        with anyio.move_on_after(seconds):
            await self._event.wait()
        self.waiting = self._pending = False


@dataclass(slots=True)
class IndexerStats:
    offered: int = 0
    spooled: int = 0  # frames written to the spool (by offer or by a failed/stalled write)
    written: int = 0  # frames committed to the store (replays of already stored ones included)
    repeated: int = 0  # frames of a history the store had (a later load's replay), not stored
    lost: int = 0  # frames that could be neither queued nor spooled (disk full)
    store_failures: int = 0
    recovered: int = 0  # frames replayed from dead processes' spools
    invalid: int = 0  # lines taken as notifications by their first bytes that were not JSON


@dataclass(frozen=True, slots=True)
class Tuning:
    """How the indexer paces itself: up to ``queue_frames`` wait in memory (more go to the
    spool), ``batch_frames`` make a write, a write stalled past ``stall_seconds`` has its frames
    spooled, a failed one is tried again after ``retry_seconds`` (doubling, up to 5 s), and
    ``aclose`` waits ``close_timeout`` for the store. In tail mode, it pauses while the writer
    appends faster than ``yield_bytes_per_second`` (None: never), for up to
    ``yield_max_seconds`` at a stretch (``liminal.ingest.burst``)."""

    queue_frames: int = 100_000
    batch_frames: int = 2000
    stall_seconds: float = 2.0
    retry_seconds: float = 0.5
    close_timeout: float = 20.0
    yield_bytes_per_second: float | None = YIELD_BYTES_PER_SECOND
    yield_max_seconds: float = YIELD_MAX_SECONDS


DEFAULT_TUNING = Tuning()


async def sync_spool(spool: SpoolDir) -> None:
    """The spool's tail to disk, in a worker thread (a failure is left for the next time)."""
    fd = spool.dup_tail()
    if fd is None:
        return

    def sync() -> None:
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    with contextlib.suppress(OSError):
        await anyio.to_thread.run_sync(sync)


def to_record(seq: int, event: FrameEvent) -> FrameRecord:
    rpc = None
    if event.rpc_id is not None:
        try:
            rpc = orjson.dumps(event.rpc_id).decode()
        except TypeError:
            rpc = orjson.dumps(str(event.rpc_id)).decode()
    return FrameRecord(
        frame_id(event.connection_id, seq), event.connection_id, seq, event.time,
        event.direction.value, event.kind.value, event.thread_id, event.backing_id, event.method,
        rpc, event.size, event.raw)


class Indexer(Component):
    frames = Frames.ALL  # every frame is kept

    def __init__(self, store: Store, spool_root: Path, *, spool_name: str | None = None,
                 tuning: Tuning = DEFAULT_TUNING, recover: bool = True,
                 session_files: SessionFiles | None = None, tail: Path | None = None,
                 quarantine: Path | None = None) -> None:
        """``session_files``: the CLI session file of every backing session seen, indexed as it
        grows (``SessionFiles``); None: frames only. ``tail``: consume the spool another process
        writes there (the worker, see ``liminal.ingest.worker``) instead of taking offers.
        ``recover``: replay the spools of stopped processes first. ``quarantine``: where records
        the store refuses even cut are set aside (``liminal.ingest.quarantine.folder`` of the
        home; by default of the spool root's parent)."""
        self.store = store
        self.spool_root = spool_root
        self.quarantine = quarantine or quarantine_folder(spool_root.parent)
        self.spool = SpoolDir(tail or spool_root / (spool_name or uuid.uuid4().hex), writer=tail is None)
        self._tailing = tail is not None
        self.stats = IndexerStats()
        self._max = max(1, tuning.queue_frames)
        self._batch = max(1, tuning.batch_frames)
        self._stall = tuning.stall_seconds
        self._retry = tuning.retry_seconds
        self._close_timeout = tuning.close_timeout
        self._recover = recover
        self._queue: deque[tuple[int, int, FrameEvent]] = deque()  # (n, seq, event)
        self._seq: dict[str, int] = {}
        self._n = 0  # frames offered so far, all connections: orders the spool's segments
        self._spilling = False
        self._deriver = Deriver()
        self._pending_messages: dict[str, MessageRecord] = {}
        self._pending_threads: list[ThreadUpdate] = []
        self._inflight: list[FrameRecord] | None = None  # frames of a write under way
        self._inflight_n = 0  # their first frame's n
        self._inflight_from_memory = False
        self._inflight_started = 0.0
        self._wakeup = Wakeup()
        self._closing = False
        # In tail mode, whether the spool's writer has said it is done (its input closed, a
        # seal): only then may the tail it appended to be removed once read. A worker stopped by
        # a signal is closing while its writer may still append (Ctrl-C reaches the whole process
        # group; the proxy forwards its last frames while it stops): removing that tail sent
        # every later frame into a file no one could read.
        self._writer_finished = False
        self._stopping = anyio.Event()  # set with ``_closing``: what waits on the store stops
        self._running = False
        self._done = anyio.Event()
        self._closed = anyio.Event()  # ``aclose`` has finished: session files caught up too
        self._store_down = False
        self._open_written = 0.0
        self._frames_taken = 0.0  # when ``_commit`` last had frames (``time.monotonic``)
        self.recovered_all = anyio.Event()  # set once spools of stopped processes are replayed
        self._burst = (BurstGate(tuning.yield_bytes_per_second, tuning.yield_max_seconds)
                       if self._tailing and tuning.yield_bytes_per_second is not None else None)
        self.sessions = (SessionWatch(store, session_files.find, session_files.own_bytes,
                                      quarantine=self.quarantine)
                         if session_files is not None else None)

    # -- the forwarding path ------------------------------------------------------------------

    def offer(self, event: FrameEvent) -> None:
        """Take the frame: queue it, or spool it when the queue is full. Never blocks, never
        raises."""
        try:
            seq = self._seq.get(event.connection_id, -1) + 1
            self._seq[event.connection_id] = seq
            n = self._n
            self._n = n + 1
            self.stats.offered += 1
            if self._spilling or self._closing or len(self._queue) >= self._max:
                self._spill(n, to_record(seq, event))
                return
            self._queue.append((n, seq, event))
            if self._wakeup.waiting:
                self._wakeup.set()
        except Exception:  # pragma: no cover - a bug here must not reach the router
            self.stats.lost += 1
            logger.exception("indexer: frame dropped")

    def _spill(self, n: int, frame: FrameRecord) -> None:
        try:
            if not self.spool.owned:
                self.spool.acquire()
            self._spilling = True
            self.spool.append(n, frame)
            self.stats.spooled += 1
        except OSError as exc:
            self.stats.lost += 1
            if self.stats.lost == 1 or self.stats.lost % 10_000 == 0:
                logger.error("indexer: spool write failed; frame lost", error=str(exc),
                             lost=self.stats.lost)

    def _spill_memory(self, taken: list[FrameRecord] | None = None, taken_n: int = 0) -> None:
        """Move frames already taken from the queue (``taken``, the first being the
        ``taken_n``-th offered: a write under way or one that failed) and everything still
        queued into the spool, ahead of what is spooled."""
        frames = list(taken or [])
        first_n = taken_n if frames else (self._queue[0][0] if self._queue else 0)
        frames.extend(to_record(seq, event) for _, seq, event in self._queue)
        self._queue.clear()
        self._spilling = True
        if not frames:
            return
        try:
            if not self.spool.owned:
                self.spool.acquire()
            self.spool.prepend(first_n, frames)
            self.stats.spooled += len(frames)
        except OSError as exc:
            self.stats.lost += len(frames)
            logger.error("indexer: spool write failed; frames lost", error=str(exc),
                         lost=len(frames))

    # -- the consumer -------------------------------------------------------------------------

    async def run(self, _proxy: object = None) -> None:
        """Consume until ``aclose``. Safe to call from the proxy's component runner as well as
        from ``open_indexer``: a second call returns at once."""
        if self._running:
            return
        self._running = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watchdog)
                if self.sessions is not None:
                    tg.start_soon(self.sessions.run)
                async with anyio.create_task_group() as work:  # recovery is finished, not cut
                    if self._recover:
                        work.start_soon(self._recover_orphans)
                    else:
                        self.recovered_all.set()
                    await self._consume()
                tg.cancel_scope.cancel()
        finally:
            self._done.set()

    async def _consume(self) -> None:
        backoff = self._retry
        while True:
            await faults.hit("index.round")
            # The last round's frames go before the next are read: held across the read, a
            # batch of large frames would be in memory twice.
            items: list[tuple[FrameRecord, dict[str, Any] | None]] = []
            frames: list[FrameRecord] = []
            source_pos: int | None = None
            if self._tailing:
                self.spool.refresh()
                if (self._burst is not None and not self._closing
                        and self._burst.should_yield(self.spool.appended)):
                    await anyio.sleep(YIELD_WINDOW_SECONDS)
                    self._burst.yielded_seconds += YIELD_WINDOW_SECONDS
                    continue
            if self._queue:
                self._inflight_n = self._queue[0][0]
                for _ in range(min(self._batch, len(self._queue))):
                    _, seq, event = self._queue.popleft()
                    record = to_record(seq, event)
                    # A frame past what is derived whole is derived from its cut copy, as
                    # from the spool or the store: the same messages whichever way it came.
                    # liminal's own frames come unparsed (the router made them): parsed here,
                    # as the spool's are.
                    message = event.message if len(record.raw) <= derive.DERIVE_BYTES else None
                    items.append((record, message if message is not None
                                  else await parse_async(record)))
                from_memory = True
            elif self._spool_readable():
                frames, source_pos = self.spool.read(self._batch)
                if not frames:
                    # Nothing whole past the read offset: drop the exhausted (or torn) segment,
                    # unless it is the tail another process may still be appending to.
                    before = len(self.spool.segments)
                    self.spool.consumed(source_pos, writer_done=self._writer_done)
                    if len(self.spool.segments) == before:
                        await self._wakeup.wait(TAIL_POLL_SECONDS)
                    continue
                if not await self._prime(frames):
                    if self._closing:
                        return  # the frames stay in the spool for the next start
                    await anyio.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                items = [(f, None if self._deriver.seen(f) else await parse_async(f))
                         for f in frames]
                from_memory = False
            else:
                self._spilling = False
                # Quiet for a while (or closing): write the text still held back.
                if self._deriver.holding and (
                        self._closing or time.monotonic() - self._frames_taken >= QUIET_SECONDS):
                    if not await self._commit([], False, include_open=True):
                        if self._closing:
                            return  # the frames are in the spool; derived again next start
                        await anyio.sleep(backoff)
                        backoff = min(backoff * 2, 5.0)
                    continue
                if self._closing:
                    return
                await self._wakeup.wait(TAIL_POLL_SECONDS if self._tailing else 1.0)
                continue
            if await self._commit(items, from_memory):
                backoff = self._retry
                if source_pos is not None:
                    self.spool.consumed(source_pos, writer_done=self._writer_done)
                    if self._tailing and not self._closing and not self._spool_readable():
                        # Caught up: what came meanwhile waits for its poke (looking again at
                        # once made a round, a transaction, every few milliseconds of a stream).
                        await self._wakeup.wait(TAIL_POLL_SECONDS)
                continue
            if from_memory:
                self._spill_memory([frame for frame, _ in items], self._inflight_n)
            if self._closing:
                # Closing with a store that refuses writes: no waiting on it. Everything is in
                # the spool (frames from memory were just put there) for the next start.
                logger.warning("indexer: store unusable at close; the spool keeps the frames",
                               spool=str(self.spool.path))
                return
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def _prime(self, frames: list[FrameRecord]) -> bool:
        """Derive again what an earlier worker took of each connection whose spool now starts
        past its first frame (``recovery.derive_where_spools_start``); False if the store cannot
        say now."""
        primed = await derive_where_spools_start(self._deriver, self.store, frames)
        if primed is None:
            return False
        for derived in primed:
            for m in derived.messages:  # complete versions of what the dead worker wrote
                self._pending_messages[m.id] = m
            # Those frames' thread updates are in the store already (committed with them);
            # only the session files they name are new to this worker.
            self._watch(derived.threads)
        return True

    def _watch(self, updates: list[ThreadUpdate]) -> None:
        """The session files of the backing sessions ``updates`` name, watched from now on."""
        if self.sessions is not None:
            for update in updates:
                for backing in update.backing_ids:
                    self.sessions.watch(update.id, backing, update.cwd)

    @property
    def yielded_seconds(self) -> float:
        """How long this worker has paused for the writer (``liminal.ingest.burst``)."""
        return self._burst.yielded_seconds if self._burst is not None else 0.0

    def _spool_readable(self) -> bool:
        segments = self.spool.segments
        if not segments:
            return False
        if not self._tailing or len(segments) > 1 or self._writer_done:
            return True
        return segments[0].read < segments[0].written

    def wake(self) -> None:
        """More frames are in the spool (the worker's parent says so): never lost (``Wakeup``)."""
        self._wakeup.set()

    @property
    def _writer_done(self) -> bool:
        return not self._tailing or (self._closing and self._writer_finished)

    async def _commit(self, items: list[tuple[FrameRecord, dict[str, Any] | None]],
                      from_memory: bool, *, include_open: bool = False) -> bool:
        if items and not await self._loads_placed(items):
            return False
        frames = []
        for frame, message in items:
            if message is None and frame.kind in _PARSED_KINDS and not self._deriver.seen(frame):
                # The router forwards a line that starts like a canonical session/update from
                # its bytes, unparsed; if the rest is not JSON, the log says what it was.
                frame = replace(frame, kind="invalid")
                self.stats.invalid += 1
            if self._deriver.feed(frame, message):
                frames.append(frame)
            else:
                self.stats.repeated += 1
        now = time.monotonic()
        if items:
            self._frames_taken = now
        growth = 0.0 if include_open else OPEN_MESSAGE_GROWTH
        include_open = include_open or now - self._open_written >= OPEN_MESSAGE_SECONDS
        if include_open:
            self._open_written = now
        derived = self._deriver.take(include_open=include_open, growth=growth)
        for m in derived.messages:
            self._pending_messages[m.id] = m
        self._pending_threads.extend(derived.threads)
        batch = Batch(frames, list(self._pending_messages.values()), list(self._pending_threads))
        self._inflight, self._inflight_from_memory = frames, from_memory
        self._inflight_started = time.monotonic()
        try:
            await write_batch(self.store, batch, quarantine=self.quarantine)
        except Exception as exc:
            return self._store_failed("indexer: store write failed; spooling", exc)
        finally:
            self._inflight = None
            self._inflight_from_memory = False
        if self._store_down:
            logger.info("indexer: store is back; replaying the spool")
            self._store_down = False
        self._watch(self._pending_threads)
        self._pending_messages.clear()
        self._pending_threads.clear()
        self.stats.written += len(frames)
        return True

    async def _loads_placed(self, items: list[tuple[FrameRecord, dict[str, Any] | None]]) -> bool:
        """Whether each load among ``items`` is placed: a thread's first, whose replay is
        recorded, or a later one (``recovery.ask_loads``). The store is asked once the spools
        of stopped processes are in it (their turns may be this thread's history); False when
        it cannot say now (nothing is fed: the items are taken again, as after a failed write)."""
        if not any(self._deriver.to_ask(frame, message) for frame, message in items):
            return True
        if not self._closing:
            await self.recovered_all.wait()
        try:
            await ask_loads(self._deriver, self.store, items)
        except Exception as exc:
            return self._store_failed("indexer: store not readable; spooling", exc)
        return True

    def _store_failed(self, what: str, exc: Exception) -> bool:
        """A store that failed: said once until it is back; False, for the caller to return."""
        self.stats.store_failures += 1
        if not self._store_down:
            logger.warning(what, error=str(exc))
        self._store_down = True
        return False

    async def _watchdog(self) -> None:
        """Spill memory to the spool when a write stalls, and sync the spool now and then."""
        tick = max(0.05, min(0.5, self._stall / 4))
        last_sync = time.monotonic()
        while True:
            await anyio.sleep(tick)
            now = time.monotonic()
            if (self._inflight is not None and self._inflight_from_memory
                    and now - self._inflight_started > self._stall):
                logger.warning("indexer: store write stalled; spooling",
                               seconds=round(now - self._inflight_started, 1))
                self._spill_memory(self._inflight, self._inflight_n)
                self._inflight_from_memory = False
            if self._spilling and now - last_sync >= 1.0:
                last_sync = now
                await sync_spool(self.spool)

    # -- recovery ------------------------------------------------------------------------------

    async def _recover_orphans(self) -> None:
        """Replay the spools of processes that stopped (``liminal.ingest.recovery``)."""
        self.stats.recovered += await replay_orphans(
            self.store, self.spool_root, self.spool.path, batch_frames=self._batch,
            retry_seconds=self._retry, quarantine=self.quarantine, stopping=self._stopping)
        self.recovered_all.set()

    # -- closing ------------------------------------------------------------------------------

    async def stopped(self) -> None:
        """Until ``run`` has returned."""
        await self._done.wait()

    async def closed(self) -> None:
        """Until ``aclose`` has finished, the last look at the session files included. (``run``
        returns before that look: a worker that stopped at ``stopped`` would cancel it, and the
        turn the CLI had just written would never be indexed.)"""
        await self._closed.wait()

    async def aclose(self, timeout: float | None = None, *, writer_done: bool = True) -> None:
        """Flush: wait (up to ``timeout``, by default ``close_timeout``) for everything to reach
        the store; whatever cannot goes to the spool for the next start. In tail mode,
        ``writer_done=False`` (a stop the writer did not ask for, a signal) stores what the spool
        holds and leaves its tail to the writer, replayed at the next start."""
        self._writer_finished = self._writer_finished or writer_done
        if self._closing and self._done.is_set():
            return
        self._closing = True
        self._stopping.set()
        self.wake()
        with anyio.move_on_after(self._close_timeout if timeout is None else timeout):
            if self._running:
                await self._done.wait()
            else:  # never started (or not yet): drain here
                await self.run()
        if self._queue or (self._inflight is not None and self._inflight_from_memory):
            self._spill_memory(self._inflight if self._inflight_from_memory else None,
                               self._inflight_n)
        if self.sessions is not None:
            await self.sessions.close()
        keep = not self.spool.empty
        self.spool.release(remove_if_empty=not keep)
        if keep:
            logger.warning("indexer: closed with frames still spooled; replayed at next start",
                           spool=str(self.spool.path))
        self._closed.set()
