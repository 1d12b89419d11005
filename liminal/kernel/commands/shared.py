"""What every handler of the command table is given (``CommandContext``), and the reads several
of them make: the thread's session file, its marks, its moves, whether its context is empty.

A handler is a function of the context, never a method of the center: it reaches the thread
model, the mover, the journal, the cost policy and the harness through it, the conversation
through its port, the store through ``store()``. The context is the handlers' only shared
state; they import this module and the store access beside it, never each other.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from liminal import log
from liminal.acp.port import Port
from liminal.harness.base import SessionHarness
from liminal.kernel import delete, restore, whereabouts
from liminal.kernel.commands.stores import StoreOff, Stores
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.memory import Memory
from liminal.kernel.mover import ThreadMover
from liminal.kernel.policy import CostPolicy
from liminal.kernel.threads import Mark, ThreadModel

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from liminal.kernel.aids import CommandAids
    from liminal.kernel.zone import ZoneSource
    from liminal.lookup.recaller import Recaller
    from liminal.store.base import Store
    from liminal.store.cache import Cache

logger = log.get("liminal.commands")
# A mark's name: what ``/clear MARK`` and ``/fork MARK`` are typed with.
# How long a search of what was said waits for the index to store the turns before it: a person
# waits for the answer; past it the search answers with what the store has, and says so.
SAID_SECONDS = 10.0
MARK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class CommandError(Exception):
    """Said to the user as the command's answer; nothing changed."""


class CommandContext:
    """The collaborators the center is given, the port and task group it runs with, and what
    it reads from the other components (``aids``: the scratchpad, the zone, the summaries'
    anchor, where side sessions work, the home, the recalibration, the thread locks)."""

    def __init__(self, model: ThreadModel, mover: ThreadMover, journal: SwapJournal, policy: CostPolicy,
                 harness: SessionHarness, stores: Stores, aids: CommandAids) -> None:
        self.model = model
        self.mover = mover
        self.journal = journal
        self.policy = policy
        self.harness = harness
        self.stores = stores
        self._port: Port | None = None  # from ``CommandCenter.run``: every command comes after
        # Where a store read past its wait runs on (``whereabouts.within_wait``), a rebuild of the
        # state anchor, the sweeps of deleted threads' files: None until the center runs.
        self.tasks: anyio.abc.TaskGroup | None = None
        # The scratchpad: /scratchpad, and each move's preamble.
        self.memory: Memory = aids.preamble.memory
        # /optimise's dynamic zone (``liminal.kernel.zone``).
        self.zone: ZoneSource | None = aids.preamble.zone
        # The thread's state anchor, from its newest summary (``liminal.kernel.summaries``).
        self.anchor_of: Callable[[str], str | None] = aids.anchor_of
        # ``/context rebuild`` (``SideSummaries.rebuild``): None while the summaries are off.
        self.rebuild_anchor: Callable[[str], Awaitable[str]] | None = aids.rebuild_anchor
        # Where liminal's side sessions work: a session the agent lists there is no thread.
        self.side_root: Path | None = aids.side_root
        # ``$LIMINAL_HOME``: what a deleted thread left there goes too (``liminal.kernel.owned``).
        self.home: Path | None = aids.home
        self.lock_root: Path | None = aids.lock_root
        # Until what a new liminal learns again of an opened thread's pace is in (``Recalibrator``).
        self.recalibrated: Callable[[str], Awaitable[None]] | None = aids.recalibrated
        # The lock of a thread a client opens or makes (``opening.held_elsewhere``); None: no locks.
        self.take_thread: Callable[[str], Awaitable[bool]] | None = aids.take_thread
        # A stopped liminal's spool still being stored (``whereabouts.caught_up``).
        self.spool_behind: Callable[[], bool] = aids.spool_behind
        # Threads deleted here: hidden from ``session/list`` while a CLI may write a file of
        # theirs again, and swept once more when liminal stops (``liminal.kernel.delete``).
        self.deleted: list[delete.Deleted] = []

    @property
    def port(self) -> Port:
        if self._port is None:
            raise RuntimeError("the command center is not running: no port yet")
        return self._port

    @port.setter
    def port(self, port: Port) -> None:
        self._port = port

    # ------------------------------------------------------------------ the store

    async def store(self) -> Store:
        try:
            return await self.stores.store()
        except StoreOff as exc:  # said as the command's answer
            raise CommandError(str(exc)) from exc

    async def caught_up(self, frame_id: str | None) -> bool:
        """Whether the store holds everything said before the request ``frame_id`` (the index
        runs a little behind), within ``SAID_SECONDS``; no store: nothing to wait for."""
        if not self.stores.configured:
            return True
        return await whereabouts.caught_up(await self.store(), frame_id, self.spool_behind, SAID_SECONDS)

    async def cache(self) -> Cache | None:
        return await self.stores.cache()

    async def recaller(self) -> Recaller:
        return await self.stores.recaller(self.harness)

    # ------------------------------------------------------------------ the thread

    def cwd(self, thread: str) -> str | None:
        state = self.model.threads.get(thread)
        return state.cwd if state else None

    def state_path(self, thread: str) -> tuple[str, Path]:
        """The session the thread is on, and its file."""
        state = self.model.threads.get(thread)
        backing = self.port.backing_of(thread)
        path = self.harness.locate(backing, state.cwd if state else None)
        if path is None:
            raise CommandError("this thread has no session file yet: send a first prompt")
        return backing, path

    async def settled_path(self, thread: str) -> tuple[str, Path]:
        """The thread's session file once the turn just answered is on it. The CLI may write a
        turn a little after answering it, and after a first prompt the file may not exist yet:
        looked for again for up to 2 s."""
        await self.mover.appeared(self.port.backing_of(thread), self.cwd(thread), 2.0)
        backing, path = self.state_path(thread)
        state = self.model.threads.get(thread)
        await self.mover.settle(path, state.last_prompt if state else None)
        return backing, path

    async def session_file(self, backing: str, cwd: str | None) -> Path | None:
        """``backing``'s file, written from the store if it has none here (the CLI's clean-up,
        a mark set by a sidecar on another machine with the same store); None if neither."""
        found = self.harness.locate(backing, cwd)
        if found is not None or not self.stores.configured:
            return found
        try:
            why = await restore.write_session(await self.store(), self.harness, backing, cwd)
        except Exception as exc:  # the store not opened: the mark's file is gone
            why = f"{type(exc).__name__}: {exc}"
        if why is not None:
            logger.warning("session file not written from the store", session=backing, reason=why)
        return self.harness.locate(backing, cwd)

    def context_is_empty(self, thread: str) -> bool:
        """The thread is on a session a move opened empty (/clear, an /undo of its only turn), or
        on the one the client's ``session/new`` made, and nothing was prompted since: the CLI
        writes that session's file only at its first turn."""
        state = self.model.threads.get(thread)
        backing = self.port.backing_of(thread)
        if state is None or state.calls or self.harness.locate(backing, state.cwd) is not None:
            return False  # (a prompt since: its turn may still be on its way to the file)
        return self.journal.opened_empty(thread, backing) or (state.new and backing == thread)

    async def moves(self, thread: str) -> list[SwapRecord]:
        """The thread's moves: the shared store's journal when the store is shared (another
        sidecar's moves among them), else, or when it cannot be read, this home's."""
        shared = self.mover.shared
        if shared is not None:
            try:
                return [r for r in await shared.records(thread) if r.outcome != "begin"]
            except Exception as exc:
                logger.warning("moves of this machine only: the shared store could not be read",
                               thread=thread, error=f"{type(exc).__name__}: {exc}")
        return await anyio.to_thread.run_sync(self.journal.records, thread)

    async def not_moved_elsewhere(self, thread: str) -> None:
        """Raise if another sidecar on the store has moved the thread since this one opened it
        (``whereabouts.moved_elsewhere``); a load binds it where the store has it."""
        if not self.stores.configured or self._port is None:
            return
        why = await whereabouts.moved_elsewhere(self.store, self._port, thread, self.tasks)
        if why is not None:
            raise CommandError(why)

    # ------------------------------------------------------------------ marks

    async def marks(self, thread: str) -> dict[str, Mark]:
        """The thread's marks: the store's, and those set since (the index runs a little behind;
        the store may not exist yet, or be down: the marks of this process still count)."""
        from liminal.store.base import StoreError

        found: dict[str, Mark] = {}
        try:
            for m in await (await self.store()).messages(thread, kind="mark"):
                data = m.data
                if isinstance(data.get("backing_id"), str) \
                        and isinstance(data.get("offset"), int):
                    found[m.text] = Mark(m.text, data["backing_id"], data["offset"], m.time)
        except (CommandError, StoreError) as exc:
            logger.warning("marks from this process only", thread=thread, error=str(exc))
        found.update(self.model.marks_of(thread))
        return found

    async def known_mark(self, thread: str, name: str) -> Mark:
        marks = await self.marks(thread)
        if name not in marks:
            known = ", ".join(sorted(marks)) or "none yet"
            raise CommandError(f"no mark {name!r} in this thread (marks: {known})")
        return marks[name]
