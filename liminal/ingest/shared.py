"""One index worker for many spools: ``liminal serve``'s, shared by all its connections.

``liminal acp`` starts one worker for its one spool (``liminal.ingest.worker``). A worker
per connection would give ``liminal serve`` with 50 clients 50 worker processes (about 30 MB
each, 50 SQLite writers on one file, 50 copies of the store's connection). Here one process indexes the
spools of every connection of a server, each with an ``Indexer`` in tail mode of its own (its
deriver's state is the connection's), all on one store connection.

Parent to worker, on the worker's stdin, one JSON line each (paths may hold any byte):

* an empty line: more frames are spooled somewhere (a poke; the worker also looks every 250 ms);
* ``["add", path]``: a writer took that spool; tail it;
* ``["seal", path]``: its writer is done (sealed, nothing more comes): drain it, then report.

Worker to parent, on its stdout: ``["drained", path]`` once a sealed spool is in the store (or
the worker gave up on it: what is left is replayed at the next start).

The parent (``SharedWorker``) starts the process at the first spool it is given, never before
(``liminal serve`` starts nothing before a connection's ``initialize``), and keeps it running:
a worker that dies is started again and told every spool still attached (and which of them are
sealed), so a connection never notices; its frames wait in its spool meanwhile, and the new
worker takes each spool from the start of what is left (what it stores twice has the same ids).
Nothing on the forwarding path waits on it: a poke is a non-blocking write of one byte, dropped
when the pipe is full; the other lines queue in memory and are written as the pipe takes them.
A connection's end does not end it; end of its stdin (the server stopped, or was killed) does:
it drains what it tails and exits, as ``liminal acp``'s worker does.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import anyio
import orjson
from anyio.abc import Process, TaskGroup

from liminal import log
from liminal.config import Settings

logger = log.get("liminal.ingest.shared")
RESTART_SECONDS = 1.0  # at most one start a second when a worker keeps dying


class SharedWorker:
    """The parent's side: one worker process for every spool given to ``attach``."""

    def __init__(self, settings: Settings, *, worker_argv: list[str] | None = None) -> None:
        self.settings = settings
        self._worker_argv = worker_argv
        self._attached: dict[str, anyio.Event | None] = {}  # path -> set once drained (sealed)
        self._out = bytearray()  # lines for the worker's stdin, not yet taken by the pipe
        self._pipe: int | None = None
        self._pumping: anyio.CancelScope | None = None  # ``_pump_later`` under way
        self._process: Process | None = None
        self._tg: TaskGroup | None = None
        self._started = False
        self._closing = False
        self.workers_started = 0

    async def __aenter__(self) -> SharedWorker:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        with anyio.CancelScope(shield=True):
            await self.aclose(0.0)
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(kind, exc, tb)

    @property
    def pid(self) -> int | None:
        """The worker process running now, if any."""
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    # -- what a spool writer calls (never blocks) ---------------------------------------------

    def attach(self, spool: Path) -> None:
        """Index this spool from now on; the worker is started at the first."""
        key = str(spool)
        if key in self._attached or self._closing:
            return
        self._attached[key] = None
        self._send(["add", key])
        if not self._started and self._tg is not None:
            self._started = True
            self._tg.start_soon(self._supervise)

    def poke(self) -> None:
        """More frames are spooled. Dropped when lines are waiting or the pipe is full: the
        worker looks on its own every 250 ms, and any line wakes it too."""
        if self._pipe is None or self._out:
            return
        with contextlib.suppress(OSError):
            os.write(self._pipe, b"\n")

    async def drained(self, spool: Path, timeout: float) -> bool:
        """The spool's writer is done: wait (up to ``timeout``) for the worker to store what
        it holds. False: not in time (the worker goes on with it; what is left at its exit
        is replayed at the next start)."""
        key = str(spool)
        if self._tg is None or self._closing:
            return False
        if key not in self._attached:
            self.attach(spool)
        done = anyio.Event()
        self._attached[key] = done
        self._send(["seal", key])
        try:
            with anyio.move_on_after(timeout):
                await done.wait()
        finally:
            self._attached.pop(key, None)
        return done.is_set()

    # -- the pipe ----------------------------------------------------------------------------

    def _send(self, message: list[str]) -> None:
        self._out += orjson.dumps(message) + b"\n"
        self._pump()

    def _pump(self) -> None:
        """Write what the pipe takes now; the rest when it can take it (``_pump_later``)."""
        self._write_some()
        if self._out and self._pipe is not None and self._pumping is None and self._tg is not None:
            self._pumping = anyio.CancelScope()
            self._tg.start_soon(self._pump_later, self._pumping, self._pipe)

    def _write_some(self) -> None:
        if self._pipe is None or not self._out:
            return
        try:
            written = os.write(self._pipe, self._out)
        except BlockingIOError:
            written = 0
        except OSError:  # the worker is gone: the next one is told everything again
            self._out.clear()
            return
        del self._out[:written]

    async def _pump_later(self, scope: anyio.CancelScope, pipe: int) -> None:
        with scope:
            try:
                while self._out and self._pipe == pipe:
                    await anyio.wait_writable(pipe)
                    self._write_some()
            except OSError:
                pass
            finally:
                if self._pumping is scope:
                    self._pumping = None

    # -- the process ---------------------------------------------------------------------------

    async def _supervise(self) -> None:
        """Keep a worker running while the server runs. Nothing here may end the server (this
        task is in its task group): a failure of the supervision itself is said, and tried
        again."""
        while not self._closing:
            started = time.monotonic()
            try:
                await self._run_one()
            except Exception:
                logger.exception("index worker supervision failed; trying again")
                self._close_pipe()
            if not self._closing:
                await anyio.sleep(max(0.0, RESTART_SECONDS - (time.monotonic() - started)))

    async def _run_one(self) -> None:
        """One worker process, from its start to its exit."""
        try:
            process = await self._start()
        except OSError as exc:
            logger.error("cannot start the index worker; frames wait in the spools",
                         error=str(exc))
            await anyio.sleep(5.0)
            return
        await self._read_reports(process)
        code = await process.wait()
        self._close_pipe()
        if not self._closing:
            logger.error("index worker exited; starting another", exit_code=code,
                         spools=len(self._attached))

    async def _start(self) -> Process:
        argv = self._worker_argv or [sys.executable, "-m", "liminal.ingest.shared"]
        argv = [*argv, "--home", str(self.settings.home), "--log-level", self.settings.log_level]
        # The settings this process resolved reach the worker as environment variables, which
        # take precedence over any config file it would read (as ``SpoolWriter`` does).
        store, cache = self.settings.store, self.settings.cache
        env = dict(os.environ, LIMINAL_STORE_URL=store.url, LIMINAL_CACHE_URL=cache.url,
                   LIMINAL_CACHE_TTL_SECONDS=str(cache.ttl_seconds))
        read_end, write_end = os.pipe()
        try:
            process = await anyio.open_process(argv, stdin=read_end, env=env,
                                               stdout=subprocess.PIPE, stderr=None)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        os.set_blocking(write_end, False)
        self._process = process
        self._pipe = write_end
        self.workers_started += 1
        # A new worker knows nothing: every spool still attached, and which are sealed.
        self._out.clear()
        for key, sealed in list(self._attached.items()):
            self._out += orjson.dumps(["add", key]) + b"\n"
            if sealed is not None:
                self._out += orjson.dumps(["seal", key]) + b"\n"
        self._pump()
        logger.info("index worker started", pid=process.pid, spools=len(self._attached))
        return process

    async def _read_reports(self, process: Process) -> None:
        assert process.stdout is not None
        held = b""
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError,
                                 anyio.ClosedResourceError):
            while True:
                held += await process.stdout.receive()
                *lines, held = held.split(b"\n")
                for line in lines:
                    self._report(line)

    def _report(self, line: bytes) -> None:
        try:
            what, key = orjson.loads(line)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            logger.warning("index worker: a report not understood", line=line[:200].decode("utf-8", "replace"))
            return
        done = self._attached.get(key) if what == "drained" else None
        if done is not None:
            done.set()

    def _close_pipe(self) -> None:
        if self._pumping is not None:  # it waits on this pipe: its descriptor may be reused
            self._pumping.cancel()
            self._pumping = None
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        self._out.clear()

    async def aclose(self, timeout: float) -> None:
        """No more spools: the worker's stdin is closed, so it drains what it tails and exits;
        waited for up to ``timeout``, and left to finish on its own after that (what it has
        not stored when it stops is replayed at the next start)."""
        if self._closing:
            return
        self._closing = True
        process = self._process
        self._close_pipe()
        logger.info("index worker closing", workers_started=self.workers_started)
        if process is None or process.returncode is not None:
            return
        with anyio.move_on_after(timeout) as scope:
            await process.wait()
        if scope.cancelled_caught:
            logger.warning("index worker still draining at exit; it goes on alone",
                           pid=process.pid)


# -- the worker process ------------------------------------------------------------------------


class _Flag:
    """An event that can be cleared (``anyio.Event`` cannot): set by each new spool, waited
    for by the orphans' replay."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        if self._event.is_set():
            self._event = anyio.Event()

    async def wait(self) -> None:
        await self._event.wait()


async def _serve_spools(settings: Settings) -> None:
    from liminal.harness.known import find_session_file
    from liminal.ingest import quarantine
    from liminal.ingest.indexer import Indexer, Tuning
    from liminal.ingest.recovery import replay_orphans
    from liminal.ingest.rewrites import own_bytes
    from liminal.ingest.sessions import SessionFiles
    from liminal.ingest.worker import EXIT_SECONDS, STOP_SECONDS, _exit_after
    from liminal.store.base import Store, StoreError, UnavailableStore, describe
    from liminal.store.configured import open_store

    spool_root = settings.home / "spool"
    rewrites_path = settings.home / "rewrites.jsonl"
    quarantined = quarantine.folder(settings.home)
    tailing: dict[str, Indexer] = {}
    sealing: dict[str, anyio.Event] = {}  # set once that spool's drain has ended
    stopping = anyio.Event()
    recovery_wanted = _Flag()
    stdout = sys.stdout.fileno()

    async with anyio.create_task_group() as tg:
        store: Store
        try:
            store_cm = open_store(settings)
            store = await store_cm.__aenter__()
        except StoreError as exc:
            logger.error("store unavailable; the spools wait for the next start",
                         store=describe(settings), error=str(exc))
            store_cm, store = None, UnavailableStore(str(exc))

        def tail(key: str) -> Indexer:
            indexer = tailing.get(key)
            if indexer is None:
                # No deadline of a proxy's: a worker whose parent is gone drains for up to
                # five minutes. Orphans are replayed by ``recover``, below, not by each of these.
                indexer = Indexer(store, spool_root, tail=Path(key), tuning=Tuning(close_timeout=300),
                                  recover=False, quarantine=quarantined,
                                  session_files=SessionFiles(
                                      find_session_file, lambda backing: own_bytes(rewrites_path, backing)))
                tailing[key] = indexer
                tg.start_soon(indexer.run)
            return indexer

        async def seal(key: str, timeout: float | None = None, writer_done: bool = True) -> None:
            """Drain the spool, then say so; a second call waits for the first (the stop's
            drain must not end while a seal of a connection's is still storing)."""
            done = sealing.get(key)
            if done is not None:
                await done.wait()
                return
            sealing[key] = done = anyio.Event()
            try:
                await tail(key).aclose(timeout, writer_done=writer_done)
            finally:
                tailing.pop(key, None)
                del sealing[key]
                done.set()
            with contextlib.suppress(OSError):
                os.write(stdout, orjson.dumps(["drained", key]) + b"\n")

        def take(line: bytes) -> None:
            if not line.strip():
                return
            try:
                what, key = orjson.loads(line)
            except (orjson.JSONDecodeError, ValueError, TypeError):
                logger.warning("index worker: a line not understood", line=line[:200].decode("utf-8", "replace"))
                return
            if what == "add":
                tail(str(key))
                recovery_wanted.set()
            elif what == "seal":
                tg.start_soon(seal, str(key))

        async def drain_all(timeout: float | None = None, writer_done: bool = True) -> None:
            stopping.set()
            async with anyio.create_task_group() as closing:
                for key in {*tailing, *sealing}:
                    closing.start_soon(seal, key, timeout, writer_done)

        async def watch_stdin() -> None:
            fd = sys.stdin.fileno()
            os.set_blocking(fd, False)
            held = b""
            while True:
                await anyio.wait_readable(fd)
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                *lines, held = (held + chunk).split(b"\n")
                for line in lines:
                    take(line)
                for indexer in list(tailing.values()):
                    indexer.wake()
            await drain_all()  # the server is done (or gone): drain everything, then stop

        async def watch_signals() -> None:
            # As ``liminal acp``'s worker: what the store takes at once, then stop, bounded.
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                stopping_now = False
                async for signum in signals:
                    if stopping_now:
                        os._exit(128 + signum)
                    stopping_now = True
                    _exit_after(STOP_SECONDS + EXIT_SECONDS, 128 + signum)
                    # The server's connections have not said they are done: their tails stay.
                    tg.start_soon(drain_all, STOP_SECONDS, False)

        async def recover() -> None:
            # Spools of processes that are gone (a server killed, a `liminal acp` killed, a
            # worker before this one); the live writers' are locked, so not taken. At the start
            # and again at each new connection, as when each connection's worker did it.
            while not stopping.is_set():
                await recovery_wanted.wait()
                recovery_wanted.clear()
                await replay_orphans(store, spool_root, None, quarantine=quarantined,
                                     stopping=stopping)

        tg.start_soon(recover)
        tg.start_soon(watch_signals)
        await watch_stdin()
        tg.cancel_scope.cancel()
    if store_cm is not None:
        await store_cm.__aexit__(None, None, None)


def main(argv: list[str] | None = None) -> int:
    from liminal import config, private
    from liminal.ingest.worker import WORKER_NICE

    parser = argparse.ArgumentParser(prog="liminal-shared-index-worker")
    parser.add_argument("--home", type=Path)
    parser.add_argument("--log-level")
    args = parser.parse_args(argv)
    private.tighten_umask()  # its files are as private as the server's (liminal.private)
    settings = config.load({"home": args.home, "log_level": args.log_level})
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)  # forwarding first; indexing catches up
    log.configure(settings.log_level)
    anyio.run(_serve_spools, settings, backend="asyncio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
