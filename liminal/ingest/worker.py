"""Indexing in a process of its own: the proxy only spools, a worker process does the rest.

Why: everything the indexer does per frame (records, derivation, SQLite parameter binding) is
Python, and in the proxy's process it competes with forwarding for the one interpreter lock;
measured on a 2-core machine, in-process indexing cost the proxy about two thirds of its peak
frame rate (docs/benchmarks.md, "index"). Split in two:

* ``SpoolWriter`` (in ``liminal acp``, a tap subscriber): ``offer`` appends the event to a deque;
  every few milliseconds a flush encodes what accumulated as one block and appends it to the
  spool with one ``writev``, then pokes the worker through its stdin. That is the whole cost on
  the forwarding side, about a microsecond a frame. The flush is made by the offer that finds
  the queue's oldest frame ``INLINE_FLUSH_SHARE`` of ``flush_seconds`` old, in the callback
  that forwarded it; a timer makes it only when no such offer comes in time. Paced, a flush of
  its own (a task woken, a timer, another turn of the event loop) cost the proxy more than the
  frames it wrote. A block of streamed updates alone pokes at most every
  ``STREAM_POKE_SECONDS``: the worker then takes a trickling stream in batches of hundreds of
  frames rather than a few, at a fraction of the CPU (it shares the proxy's cores). Any other
  frame (a request, an answer such as a prompt's, which ends the turn; a note) pokes at once,
  so what a turn said is in the store a few milliseconds after the turn ends.
* the worker (``python -m liminal.ingest.worker SPOOL_DIR``): an ``Indexer`` tailing that spool
  folder: it derives messages, writes batches to the store, removes what it has stored, watches
  the session files, and replays spools left by processes that died. When its stdin closes (the
  proxy is done, or was killed) it drains the spool and exits.

Crash guarantee: a frame is on disk within ``flush_seconds`` (5 ms) of being offered. SIGKILL of
``liminal acp`` loses at most those; the worker, if alive, keeps going, and otherwise the next
start replays the spool. A SIGKILL of the worker loses nothing (the spool is only trimmed after
the store has committed); the proxy starts a new one.

Stopping is bounded: SIGTERM (or SIGINT) gives the worker ``STOP_SECONDS`` to store what it can,
then ``EXIT_SECONDS`` more for a store call under way (a write waiting on a locked database, a
slow server: it cannot be cancelled from here), and then the process exits regardless, as a
SIGKILL would, losing nothing. A second signal exits at once. A worker after its proxy's
``close_timeout`` is sent SIGTERM, and SIGKILL if it is still there that bound later: a worker
stuck on a store call would otherwise outlive its proxy.

The worker runs in a session (and process group) of its own: what stops the proxy by its group
(a conductor stops each component's group a second after the editor leaves and kills it two
seconds later; a terminal's Ctrl-C) does not reach it, so what the proxy spooled is stored
then and not at the next start. A worker whose proxy is gone that way sees its stdin end and
drains; from then on it exits within ``DRAIN_SECONDS`` and ``EXIT_SECONDS`` whatever the store
does, so no worker outlives its proxy unbounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, deque
from operator import attrgetter
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import Process

from liminal import log
from liminal.acp.events import FrameEvent, FrameRun, Kind, expand
from liminal.acp.port import Component, Frames
from liminal.config import Settings
from liminal.ingest.spool import SpoolDir, encode_block, encode_columns

logger = log.get("liminal.ingest.worker")
WORKER_NICE = 10
STOP_SECONDS = 5.0  # after SIGTERM: storing what the store takes at once
EXIT_SECONDS = 3.0  # then a store call under way, before the process exits regardless
# Once its stdin has ended (the proxy closed it, or is gone): storing what the spool holds.
DRAIN_SECONDS = 300.0
# Streamed updates alone wake the worker at most this often (it also looks by itself as often:
# ``liminal.ingest.indexer.TAIL_POLL_SECONDS``). Each wake is a round of the worker's (read,
# derive, one transaction), whose fixed cost was most of its CPU at one round every 50 ms.
STREAM_POKE_SECONDS = 0.25
# An offer flushes the queue itself once its oldest frame is this share of ``flush_seconds`` old:
# before the timer set for that frame would, so a steady stream never needs the timer.
INLINE_FLUSH_SHARE = 0.7
_FIELDS = attrgetter("connection_id", "time", "direction", "kind", "thread_id", "backing_id",
                     "method", "rpc_id", "size")
_RAW = attrgetter("raw")
# The column form's fields (spool.py: ``encode_columns``), in its order.
_COLUMN_FIELDS = [attrgetter(name) for name in (
    "time", "direction", "kind", "thread_id", "backing_id", "method", "rpc_id", "size")]
_CONNECTION = attrgetter("connection_id")


class SharedIndexing(Protocol):
    """A worker process that indexes many spools (``liminal.ingest.shared.SharedWorker``)."""

    def attach(self, spool: Path) -> None: ...

    def poke(self) -> None: ...

    async def drained(self, spool: Path, timeout: float) -> bool: ...


class SpoolWriter(Component):
    """The proxy's side: frames to the spool, the worker started and supervised; or, given
    ``shared`` (``liminal serve``: one worker for all its connections), the spool handed to
    that worker, which its owner starts and supervises (``liminal.ingest.shared``)."""

    frames = Frames.ALL  # every frame is kept

    def __init__(self, settings: Settings, *, spool_name: str | None = None,
                 flush_seconds: float = 0.005, stream_poke_seconds: float = STREAM_POKE_SECONDS,
                 queue_frames: int | None = None,
                 close_timeout: float = 20.0, worker_argv: list[str] | None = None,
                 shared: SharedIndexing | None = None) -> None:
        self.settings = settings
        self._shared = shared
        self.spool = SpoolDir(settings.home / "spool" / (spool_name or uuid.uuid4().hex), writer=True)
        self._flush_seconds = flush_seconds
        self._stream_poke_seconds = stream_poke_seconds
        self._urgent = False  # a frame that is not a streamed update waits in the queue
        self._poked = float("-inf")  # when the worker was last poked (``time.monotonic``)
        self._max = queue_frames or settings.store.queue_frames
        self._close_timeout = close_timeout
        self._worker_argv = worker_argv
        self._queue: deque[FrameEvent | FrameRun] = deque()
        self._queued = 0  # frames in the queue (a run is many)
        self._seq: dict[str, int] = {}
        self._n = 0
        self._loop: asyncio.AbstractEventLoop | None = None  # while ``run`` runs: timers
        self._timer: asyncio.TimerHandle | None = None  # flushes the queue by ``flush_seconds``
        self._flushed = float("-inf")  # when the last flush began (the loop's clock)
        self._closing = False
        self._stop = anyio.Event()  # set by ``aclose``
        self._running = False
        self._done = anyio.Event()
        self._worker: Process | None = None
        self._pipe: int | None = None  # the write end of the worker's stdin
        self.spooled = 0
        self.lost = 0
        self.workers_started = 0

    # -- the forwarding path ------------------------------------------------------------------

    def offer(self, event: FrameEvent) -> None:
        """Queue the frame for the next flush. Never blocks, never raises."""
        if event.method != "session/update" or event.kind is not Kind.NOTIFICATION:
            self._urgent = True
        self._take(event, 1)

    def offer_run(self, run: FrameRun) -> None:
        """Queue the run's frames (``liminal.acp.taps.RunSubscriber``): no event per line."""
        self._take(run, len(run.raws))

    def _take(self, item: FrameEvent | FrameRun, frames: int) -> None:
        if self._closing:
            return
        self._queue.append(item)
        self._queued += frames
        loop = self._loop
        if loop is None:  # ``run`` has not started: it flushes what waits when it does
            if self._queued >= self._max:
                self.flush()
            return
        now = loop.time()
        if now - self._flushed >= self._flush_seconds * INLINE_FLUSH_SHARE or self._queued >= self._max:
            self.flush()
        elif self._timer is None:  # the first frame since the last flush: on disk in time
            self._timer = loop.call_at(now + self._flush_seconds, self._timed_flush)

    def _timed_flush(self) -> None:
        self._timer = None
        self.flush()

    def flush(self) -> None:
        """Encode everything queued as one block and append it to the spool."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        queue = self._queue
        if not queue:
            return
        if self._loop is not None:
            self._flushed = self._loop.time()
        if not self.spool.owned:
            # A frame can come before ``run`` has taken the spool (the client speaks first, and
            # a small ``store.queue_frames`` flushes at once): take it here, or keep the frames
            # queued for ``run`` rather than fail to write them (the client's first frames among them).
            try:
                acquired = self.spool.acquire()
            except OSError:
                acquired = False
            if not acquired:
                self._retry_flush()
                return
        items = list(queue)
        queue.clear()
        self._queued = 0
        # The forwarding side's whole per-frame cost: C-level field extraction (columns taken by
        # ``attrgetter``, repeated values folded by ``list.count``), no Python loop per frame;
        # a run's frames share all but their bytes, so their columns are made by repetition.
        if any(item.__class__ is FrameRun for item in items):
            return self._flush_runs(items)
        events: list[FrameEvent] = items  # type: ignore[assignment]
        raws = list(map(_RAW, events))
        connections = list(map(_CONNECTION, events))
        parts = None
        if connections.count(connections[0]) == len(connections):  # one proxy, one connection
            parts = self._columns(connections[0], [list(map(g, events)) for g in _COLUMN_FIELDS], raws)
        self._write(events, raws, connections, parts)

    def _flush_runs(self, items: list[FrameEvent | FrameRun]) -> None:
        connection = items[0].connection_id
        if any(item.connection_id != connection for item in items):  # not from one proxy
            return self._write(expand(items), None, None, None)
        columns: list[list[Any]] = [[] for _ in _COLUMN_FIELDS]
        raws: list[bytes] = []
        for item in items:
            if isinstance(item, FrameRun):
                run = item
                count = len(run.raws)
                raws += run.raws
                for column, value in zip(columns, (run.time, run.direction, Kind.NOTIFICATION, run.thread_id,
                                                   run.backing_id, "session/update", None), strict=False):
                    column += [value] * count
                columns[-1] += map(len, run.raws)
            else:
                raws.append(item.raw)
                for column, get in zip(columns, _COLUMN_FIELDS, strict=True):
                    column.append(get(item))
        parts = self._columns(connection, columns, raws)
        self._write(expand(items) if parts is None else None, raws, None, parts)

    def _columns(self, connection: str, columns: list[list[Any]], raws: list[bytes]) -> list[bytes] | None:
        seq = self._seq.get(connection, 0)
        parts = encode_columns(connection, seq, columns, raws)
        if parts is not None:
            self._seq[connection] = seq + len(raws)
        return parts

    def _write(self, events: list[FrameEvent] | None, raws: list[bytes] | None, connections: list[str] | None,
               parts: list[bytes] | None) -> None:
        """Append one block: ``parts`` when encoded, else ``events`` in the row form."""
        seqs = self._seq
        if parts is None:  # several connections, or an rpc id only JSON text can hold
            assert events is not None
            raws = list(map(_RAW, events)) if raws is None else raws
            connections = list(map(_CONNECTION, events)) if connections is None else connections
            starts: dict[str, int] = {}
            for conn, count in Counter(connections).items():
                starts[conn] = seqs.get(conn, 0)
                seqs[conn] = starts[conn] + count
            parts = encode_block(starts, list(map(_FIELDS, events)), raws)
        assert raws is not None
        n = self._n
        self._n += len(raws)
        try:
            self.spool.append_encoded(n, parts)
            self.spooled += len(raws)
        except OSError as exc:
            self.lost += len(raws)
            logger.error("spool write failed; frames lost", error=str(exc), lost=len(raws))
            return
        self._poke()

    def _poke(self) -> None:
        """Tell the worker there is more (best effort: it also looks every 250 ms); for streamed
        updates alone, at most every ``stream_poke_seconds``."""
        now = time.monotonic()
        if not self._urgent and now - self._poked < self._stream_poke_seconds:
            return
        self._urgent = False
        self._poked = now
        if self._shared is not None:
            self._shared.poke()
            return
        if self._pipe is None:
            return
        try:
            os.write(self._pipe, b".")
        except OSError:  # full (the worker is busy anyway) or gone (the supervisor sees it)
            pass

    # -- running ------------------------------------------------------------------------------

    async def run(self, _proxy: object = None) -> None:
        if self._running:
            return
        self._running = True
        try:
            if not self.spool.owned:
                self.spool.acquire()
        except OSError as exc:  # never in the way: forward without recording
            logger.error("cannot create the spool; this conversation is not recorded",
                         spool=str(self.spool.path), error=str(exc))
            self._closing = True
            self._queue.clear()
            self._done.set()
            return
        if self._shared is not None:
            self._shared.attach(self.spool.path)
        self._loop = asyncio.get_running_loop()
        self._retry_flush()  # frames offered before ``run``
        try:
            async with anyio.create_task_group() as tg:
                if self._shared is None:
                    tg.start_soon(self._supervise)
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            self._loop = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._done.set()

    def _retry_flush(self) -> None:
        """Frames are queued and no flush is due for them: one in ``flush_seconds``."""
        if self._queue and self._loop is not None and self._timer is None and not self._closing:
            self._timer = self._loop.call_later(self._flush_seconds, self._timed_flush)

    async def _supervise(self) -> None:
        """Keep a worker running; a crashed one is replaced (the spool holds what it had)."""
        while not self._closing:
            started = time.monotonic()
            try:
                await self._start_worker()
            except OSError as exc:
                logger.error("cannot start the index worker; frames wait in the spool",
                             error=str(exc))
                await anyio.sleep(5.0)
                continue
            assert self._worker is not None
            code = await self._worker.wait()
            self._close_pipe()
            if self._closing:
                return
            logger.error("index worker exited; starting another", exit_code=code)
            await anyio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))

    async def _start_worker(self) -> None:
        argv = self._worker_argv or [sys.executable, "-m", "liminal.ingest.worker"]
        argv = [*argv, str(self.spool.path), "--home", str(self.settings.home),
                "--log-level", self.settings.log_level]
        # The spool's lock, inherited: it stays held while the worker lives, so a new liminal
        # started after this one was killed alone does not replay the spool as an orphan while
        # the worker still stores it (two readers of one connection, each writing its messages).
        lock = self.spool.lock_fd
        if lock is not None:
            argv += ["--lock-fd", str(lock)]
        # Its stdin is a pipe of ours: a byte is a poke, end of file means "drain and stop".
        # The settings this process resolved (flags, --config file) reach the worker as
        # environment variables, which take precedence over any config file it would read.
        store, cache = self.settings.store, self.settings.cache
        env = dict(os.environ, LIMINAL_STORE_URL=store.url, LIMINAL_CACHE_URL=cache.url,
                   LIMINAL_CACHE_TTL_SECONDS=str(cache.ttl_seconds))
        read_end, write_end = os.pipe()
        try:
            # A session of its own: a signal to the proxy's process group (a conductor's stop)
            # leaves it to drain the spool; ``aclose`` still bounds it while the proxy lives.
            self._worker = await anyio.open_process(argv, stdin=read_end, env=env,
                                                    stdout=subprocess.DEVNULL, stderr=None,
                                                    start_new_session=True,
                                                    pass_fds=() if lock is None else (lock,))
        finally:
            os.close(read_end)
        os.set_blocking(write_end, False)
        self._pipe = write_end
        self.workers_started += 1

    def _close_pipe(self) -> None:
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None

    async def aclose(self) -> None:
        """Flush, seal the spool, let the worker drain it (up to ``close_timeout``)."""
        if self._closing:
            return
        self._closing = True
        self._stop.set()
        self.flush()
        self.spool.seal()
        worker = self._worker
        self._close_pipe()
        if self._shared is not None and self.spool.owned:
            # The shared worker goes on; this spool is drained before its lock is let go (a
            # worker started meanwhile would take a spool with no live writer as an orphan).
            if not await self._shared.drained(self.spool.path, self._close_timeout):
                logger.warning("index worker still busy with this spool at exit; it is "
                               "replayed at the next start", spool=str(self.spool.path))
        elif worker is not None and worker.returncode is None:
            with anyio.move_on_after(self._close_timeout) as scope:
                await worker.wait()
            if scope.cancelled_caught:
                logger.warning("index worker still busy at exit; the spool is replayed at the "
                               "next start", spool=str(self.spool.path))
                await _stop(worker)
        self.spool.refresh()
        self.spool.release(remove_if_empty=not self.spool.segments)
        # A shared worker is its owner's to count (``SharedWorker.workers_started``).
        started = {} if self._shared is not None else {"workers_started": self.workers_started}
        logger.info("spool writer closed", spooled=self.spooled, lost=self.lost, **started,
                    left=len(self.spool.segments))


async def _stop(worker: Process) -> None:
    """SIGTERM, and SIGKILL if the worker has not exited within its own bound on stopping."""
    with contextlib.suppress(ProcessLookupError):
        worker.terminate()
    with anyio.move_on_after(STOP_SECONDS + EXIT_SECONDS + 1.0) as scope:
        await worker.wait()
    if scope.cancelled_caught:
        logger.error("index worker did not stop on SIGTERM; killed", pid=worker.pid)
        with contextlib.suppress(ProcessLookupError):
            worker.kill()
        with anyio.move_on_after(5.0):
            await worker.wait()


# -- the worker process ------------------------------------------------------------------------


def _exit_after(seconds: float, code: int) -> None:
    """Exit the process in ``seconds`` whatever it is doing (a thread: the event loop may be
    waiting on a store call that cannot be cancelled). The spool keeps what was not stored."""

    def say() -> None:
        logger.warning("index worker: a store call did not finish in time; exiting, the spool "
                       "keeps what was not stored", seconds=seconds)
        with contextlib.suppress(Exception):
            sys.stderr.flush()

    def exit_now() -> None:
        # Said from a thread of its own: a stderr no one reads (full) blocks the line, and the
        # exit must not wait behind it.
        saying = threading.Thread(target=say, daemon=True)
        saying.start()
        saying.join(1.0)
        os._exit(code)

    timer = threading.Timer(seconds, exit_now)
    timer.daemon = True
    timer.start()


async def _worker(spool_dir: Path, settings: Settings, lock_fd: int | None = None) -> None:
    from liminal.harness.known import find_session_file
    from liminal.ingest import quarantine
    from liminal.ingest.indexer import Indexer, Tuning
    from liminal.ingest.rewrites import own_bytes
    from liminal.ingest.sessions import SessionFiles
    from liminal.store.base import StoreError, UnavailableStore, describe
    from liminal.store.configured import open_store

    async with anyio.create_task_group() as tg:
        try:
            store_cm = open_store(settings)
            store = await store_cm.__aenter__()
        except StoreError as exc:
            logger.error("store unavailable; the spool waits for the next start",
                         store=describe(settings), error=str(exc))
            store_cm, store = None, UnavailableStore(str(exc))
        # No deadline of the proxy's here: an orphaned worker drains for up to ``DRAIN_SECONDS``.
        rewrites_path = settings.home / "rewrites.jsonl"
        indexer = Indexer(store, spool_dir.parent, tail=spool_dir, tuning=Tuning(close_timeout=DRAIN_SECONDS),
                          quarantine=quarantine.folder(settings.home),
                          session_files=SessionFiles(find_session_file,
                                                     lambda backing: own_bytes(rewrites_path, backing)))

        async def watch_stdin() -> None:
            fd = sys.stdin.fileno()
            os.set_blocking(fd, False)
            while True:
                await anyio.wait_readable(fd)
                try:
                    chunk = os.read(fd, 4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                indexer.wake()
            # The proxy is done (or gone): drain, then stop, within a bound whatever the store does.
            _exit_after(DRAIN_SECONDS + EXIT_SECONDS, 1)
            await indexer.aclose()

        async def watch_signals() -> None:
            # A stop asked of the worker itself (its proxy's bounded stop, or a person): drain
            # what the store takes at once, then stop, within a bound whatever the store does.
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                stopping = False
                async for signum in signals:
                    if stopping:  # a second signal: now
                        os._exit(128 + signum)
                    stopping = True
                    _exit_after(STOP_SECONDS + EXIT_SECONDS, 128 + signum)
                    # The writer has not said it is done: its tail stays (``Indexer.aclose``).
                    tg.start_soon(functools.partial(indexer.aclose, STOP_SECONDS, writer_done=False))

        tg.start_soon(indexer.run)
        tg.start_soon(watch_stdin)
        tg.start_soon(watch_signals)
        await indexer.closed()
        tg.cancel_scope.cancel()
    if store_cm is not None:
        await store_cm.__aexit__(None, None, None)
    if lock_fd is not None:  # the writer's lock, inherited: let go before taking it to tidy
        with contextlib.suppress(OSError):
            os.close(lock_fd)
    _tidy(spool_dir)


def _tidy(spool_dir: Path) -> None:
    """The writer is gone: remove its folder if nothing is left in it."""
    leftover = SpoolDir(spool_dir)
    if spool_dir.is_dir() and leftover.acquire():
        leftover.release(remove_if_empty=True)


def main(argv: list[str] | None = None) -> int:
    from liminal import config, private

    parser = argparse.ArgumentParser(prog="liminal-index-worker")
    parser.add_argument("spool_dir", type=Path)
    parser.add_argument("--home", type=Path)
    parser.add_argument("--log-level")
    parser.add_argument("--lock-fd", type=int)  # the spool's lock, inherited from its writer
    args = parser.parse_args(argv)
    private.tighten_umask()  # its files are as private as the proxy's (liminal.private)
    settings = config.load({"home": args.home, "log_level": args.log_level})
    # Background work: on a busy machine forwarding comes first, indexing catches up after.
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)
    log.configure(settings.log_level)
    anyio.run(_worker, args.spool_dir, settings, args.lock_fd, backend="asyncio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
