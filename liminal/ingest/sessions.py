"""Watching the CLI's session files of the threads the indexer sees (a part of the indexer).

The frames say which backing sessions a thread has; the CLI's file for each holds what frames do
not (exact usage, full tool outputs). One watcher per backing session, started when the session
is first seen, tails the file as the CLI appends (``SessionFileIndexer``); a file that has not
appeared yet (both CLIs create it at the first prompt) is looked for less and less often.
Claude Code's files and Codex's rollouts are tailed alike; each line becomes a record by its
CLI's parser (``liminal.harness.known.line_parser``). At close, one last catch-up reads what the CLI wrote last.
"""

from __future__ import annotations

import contextlib
import functools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from liminal import log
from liminal.ingest.tail import SessionFileIndexer
from liminal.store.base import Store

logger = log.get("liminal.ingest.sessions")
WATCH_POLL_MAX_SECONDS = 30.0  # a session file that has not appeared is looked for this often

# What ``SessionWatch.close`` gives each file to catch up with what the CLI wrote last.
CLOSE_SECONDS_PER_FILE = 5.0


@dataclass(frozen=True, slots=True)
class SessionFiles:
    """Where the indexer finds the CLI's session files: ``find(backing_id, cwd)`` locates one
    (``liminal.harness.base.find_session_file``); ``own_bytes(backing_id)`` says how much of it
    liminal wrote itself (a swap's rewrite, a cut), whose lines are marked as its own."""

    find: Callable[[str, str], Path | None]
    own_bytes: Callable[[str], int] | None = None


class SessionWatch:
    def __init__(self, store: Store, find: Callable[[str, str], Path | None],
                 own_bytes: Callable[[str], int] | None = None, *,
                 quarantine: Path) -> None:
        """``find(backing_id, cwd)`` locates a session file; ``own_bytes(backing_id)`` says how
        much of it liminal wrote itself (a swap's rewrite, a cut), whose lines are marked so;
        ``quarantine``: where a line the store refuses even cut is set aside."""
        self.store = store
        self.quarantine = quarantine
        self._find = find
        self._own_bytes = own_bytes
        self._requests: deque[tuple[str, str, str]] = deque()  # thread, backing, cwd
        self._watched: dict[str, tuple[str, str]] = {}  # backing id -> thread, cwd
        self._wakeup = anyio.Event()
        self._stop = anyio.Event()
        self.indexers: dict[str, SessionFileIndexer] = {}

    def watch(self, thread_id: str, backing_id: str, cwd: str) -> None:
        """A backing session of a thread (seen in a committed batch): watch its file once."""
        if backing_id in self._watched:
            return
        self._watched[backing_id] = (thread_id, cwd)
        self._requests.append((thread_id, backing_id, cwd))
        self._wakeup.set()

    async def run(self) -> None:
        """One watcher per backing session file, started when its thread is first seen."""
        async with anyio.create_task_group() as tg:
            while True:
                while self._requests:
                    tg.start_soon(self._watch_one, *self._requests.popleft())
                self._wakeup = anyio.Event()
                await self._wakeup.wait()

    async def _watch_one(self, thread_id: str, backing_id: str, cwd: str) -> None:
        wait = 0.5
        watcher = self.indexers.get(backing_id)
        while not self._stop.is_set():
            try:
                if watcher is None:
                    # The CLI creates the file at the first prompt, not at session/new.
                    path = await anyio.to_thread.run_sync(self._find, backing_id, cwd)
                    if path is not None:
                        watcher = await self._indexer(path, backing_id, thread_id, cwd)
                        self.indexers[backing_id] = watcher
                        logger.info("indexing session file", path=str(path), thread=thread_id)
                        wait = 0.5
                if watcher is not None:
                    await watcher.run(self._stop)
                    return
            except Exception as exc:
                # Looking (a folder it may not read) or watching (the folder removed, the
                # system's inotify instances used up) failed. This task runs beside the frames'
                # indexing: raising here would stop that too, in every later worker alike. The
                # watch is tried again, less and less often; each try catches up first.
                logger.warning("session file watch failed; trying again", backing=backing_id,
                               thread=thread_id, error=str(exc), retry_seconds=wait)
            # No file yet (no prompt, or not a CLI liminal knows), or a failure: look less and
            # less often.
            await anyio.sleep(wait)
            wait = min(wait * 2, WATCH_POLL_MAX_SECONDS)

    async def close(self, seconds_per_file: float = CLOSE_SECONDS_PER_FILE) -> None:
        """What the CLI wrote last, including files that appeared after the last look; then stop.
        Each file gets ``seconds_per_file`` to catch up: a worker that is stopping keeps its
        deadline, and what a file still holds is indexed at the next start."""
        for backing, (thread, cwd) in list(self._watched.items()):
            watcher = self.indexers.get(backing)
            with anyio.move_on_after(seconds_per_file), contextlib.suppress(Exception):
                if watcher is None:
                    path = await anyio.to_thread.run_sync(self._find, backing, cwd)
                    if path is None:
                        continue
                    watcher = await self._indexer(path, backing, thread, cwd)
                await watcher.catch_up()
        self._stop.set()

    async def _indexer(self, path: Path, backing_id: str, thread_id: str, cwd: str) -> SessionFileIndexer:
        own = 0
        if self._own_bytes is not None:
            own = await anyio.to_thread.run_sync(self._own_bytes, backing_id)
        return SessionFileIndexer(self.store, path, backing_id, thread_id, own_bytes=own,
                                  quarantine=self.quarantine,
                                  relocate=functools.partial(self._find, backing_id, cwd))
