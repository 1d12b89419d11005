"""Moving a thread onto another session of the agent, between turns: the step a swap and every
context command share.

``ThreadMover.relocate`` is the step: **hold** (the caller has the thread held), **write** the
next session file (``write(new_id)`` in a worker thread: a gradient rewrite for a swap, a cut for
``/clear MARK`` and ``/undo``), **open** it for the thread (``session/resume``, else
``session/load``, the thread's mode and config options re-applied, the agent's replay captured),
**commit** (journal first, then bind the thread to it), and on anything but a commit leave no
file and no open session behind. ``move_thread`` wraps it for the commands (claim the thread,
wait for its last turn on disk, release); ``fresh_session`` moves a thread onto a new, empty
session (``/clear``). The swap manager (``liminal.kernel.swap``) decides when to swap and calls
``relocate``; the command center (``liminal.kernel.commands``) calls the others; the recycle
(``liminal.kernel.recycle``) holds every live thread through ``holding_all`` and opens them on a
fresh process with ``open_on``. One move of a thread at a time, whoever asks: the thread model's
per-thread move lock (``ThreadModel.moves``); two threads move at once.

The journal (``liminal.kernel.journal``) is the authority: a ``begin`` before the file exists,
an end record (committed, failed, abandoned, skipped) after; each also a ``liminal/swap`` note in
the store, with the conversation. With a store several sidecars share (MongoDB) the store is:
the move claims the thread there, and commits there before the journal hears of it
(``liminal.kernel.storejournal``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from liminal import faults, log
from liminal.config import SwapSettings
from liminal.errors import in_words
from liminal.harness.base import MoveHarness, Rewritten
from liminal.kernel.attempt import (
    ABANDONED,
    COMMITTED,
    FAILED,
    SKIPPED,
    UNDO_CLOSE_SECONDS,
    MoveAttempt,
    MoveRecords,
    SwapError,
    failure,
)
from liminal.kernel.journal import SwapRecord
from liminal.kernel.opening import SETTLE_POLL_MAX, ThreadOpener, open_for_thread
from liminal.kernel.storejournal import Refused
from liminal.kernel.threads import MoveLocks, ThreadState

if TYPE_CHECKING:
    from liminal.acp.port import AgentProcess, Port
    from liminal.store.leases import MoveLeases

logger = log.get("liminal.swap")
__all__ = ["SETTLE_POLL_MAX", "UNDO_CLOSE_SECONDS", "MoveAttempt", "SwapError", "ThreadMover", "Writer",
           "failure", "open_for_thread"]


@dataclass(slots=True)
class _Hold:
    """A held thread of a move in progress (``ThreadMover.holding``)."""

    state: ThreadState
    left: str  # the session the thread is on; closed once the move has committed
    committed: bool = False


# What a command's move writes (``ThreadMover.move_thread``): the next session's file as
# ``new_id``; and the step that chooses it from the thread's current file (None: an empty one).
Writer = Callable[[str], Rewritten]
Plan = Callable[[Path], Writer | None]


def _emptied(state: ThreadState) -> None:
    """The thread is on a new, empty session: nothing of its context is known until its next
    turn, and no turn of it is still to reach the disk."""
    state.swap.restart(None)
    state.last_prompt = None
    state.context_tokens = None
    state.calls_since_move = 0


def _interrupted(exc: BaseException, stopped: str | None) -> str:
    """Why a move that ``exc`` cut short did not happen, in words: liminal stopping
    (``stopped``: why, as ``stop_moves`` was told), its task cancelled otherwise, or an error after the last step
    (an end record that could not be written)."""
    if stopped is not None:
        return stopped
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "liminal cancelled the move before it ended (it was exiting, or its swap task stopped)"
    return f"liminal could not record the move's end: {in_words(exc)}"


class ThreadMover:
    def __init__(
        self,
        settings: SwapSettings,
        harness: MoveHarness,
        threads: dict[str, ThreadState],
        records: MoveRecords,
        *,
        clock: Callable[[], float] = time.time,
        capabilities: Callable[[], dict[str, Any]] = dict,
        moves: MoveLocks | None = None,
        leases: MoveLeases | None = None,
    ) -> None:
        self.settings = settings
        # Every move's records, journaled and noted (and kept in a shared store).
        self.records = records
        self.journal = records.journal
        self.harness = harness
        self.threads = threads  # the swap manager's, as it observes them
        self.clock = clock
        self.capabilities = capabilities  # the agent's, from its ``initialize``
        self.port: Port | None = None
        # One move of a thread at a time (a swap, a command's): the thread model's, which the
        # recycle takes for every thread.
        self.moves = moves if moves is not None else MoveLocks()
        # Beyond this process: sidecars on one store take a thread's lease in Redis to move it.
        self.leases = leases
        # A store several sidecars share (MongoDB): the move claims the thread there, and
        # commits there before the journal hears of it.
        self.shared = records.shared
        self._stopping = False
        # Why the moves ``stop_moves`` cut short did not happen, as journaled (words, never the
        # cancellation's class name: ``liminal.errors``).
        self._stop_reason = "liminal was stopping"
        self._moving: set[anyio.CancelScope] = set()  # moves not yet committed
        # Sessions opened and closed on the agent, files waited for on disk.
        self.opener = ThreadOpener(settings, harness, threads, attached=self.attached,
                                   capabilities=capabilities, stopping=lambda: self._stopping,
                                   shared=records.shared)

    def attach(self, port: Port) -> None:
        self.port = self.records.port = port

    def attached(self) -> Port:
        """The port every move acts through (``attach``, at the swap manager's ``prepare``)."""
        assert self.port is not None
        return self.port

    @property
    def stopping(self) -> bool:
        """``stop_moves`` was called: no move starts any more."""
        return self._stopping

    async def stop_moves(self, timeout: float, why: str | None = None) -> None:
        """liminal is stopping (the client closed its input, a signal) and the moves' grace is
        over (``SwapManager.stopping``): every move not yet committed is abandoned now, and its
        rewrite removed, while the agent still runs; no new one starts. Stopping the agent first
        (2 s for one that ignores the end of its input, then its kill grace) let an editor that
        quits kill liminal before the move ended: its rewrite stayed in the CLI's folder until
        liminal's next start. ``why``: the reason each is journaled with. Waits for the moves to
        end, at most ``timeout``."""
        self._stopping = True
        if why:
            self._stop_reason = why
        for scope in list(self._moving):
            scope.cancel()
        with anyio.move_on_after(timeout):
            await self.moves.none_taken()

    def known(self, thread_id: str) -> ThreadState:
        state = self.threads.get(thread_id)
        if self.port is None or state is None:
            raise SwapError("liminal has not seen this thread opened in this session")
        return state

    @contextlib.asynccontextmanager
    async def holding(self, state: ThreadState, *, claim: bool = True) -> AsyncIterator[_Hold]:
        """The one hold -> release -> close sequence of every move. ``claim``: hold the thread
        now (``claim``; else the caller held it, as the swap does inside the flush that saw the
        turn end). On the way out, whatever happened: the thread is no longer moving, its held
        frames go (to the new session if the move committed, else to the one it stayed on),
        and a committed move's old session is closed, after the release (the held prompts
        need only the new one)."""
        if claim:
            self.claim(state)
        async with self.holding_all([state]) as [hold]:
            yield hold

    @contextlib.asynccontextmanager
    async def holding_all(self, states: list[ThreadState]) -> AsyncIterator[list[_Hold]]:
        """``holding`` for threads the caller held (the swap, one; the recycle, every live
        thread, held in the flush that saw its quiet moment): released on the way out, each to
        the session it is on then, and the session a committed one left closed."""
        port = self.attached()
        holds = [_Hold(state, port.backing_of(state.thread_id)) for state in states]
        try:
            yield holds
        finally:
            for hold in holds:
                hold.state.swap.swapping = False
                if port.is_held(hold.state.thread_id):
                    port.release(hold.state.thread_id)
            await self.flush_shared()
            for hold in holds:
                if hold.committed:
                    await self.close(hold.left)

    async def flush_shared(self) -> None:
        """The end records of moves that did not commit, into the shared store (``MoveRecords.flush``)."""
        await self.records.flush()

    def _lease_held(self, thread_id: str) -> bool:
        """This process holds the thread's lease in a Redis that answered."""
        return self.leases is not None and thread_id in self.leases.held

    def claim(self, state: ThreadState) -> None:
        """Hold a thread for a command's move, if nothing is under way on it."""
        port, thread_id = self.attached(), state.thread_id
        if state.swapping or port.is_held(thread_id):
            raise SwapError("a context swap is under way; try again in a moment")
        if port.prompt_in_flight(thread_id) or port.agent_request_open(thread_id):
            raise SwapError("a prompt is running")
        state.swap.swapping = True
        port.hold(thread_id)

    async def move_thread(self, thread_id: str, reason: str, plan: Plan) -> MoveAttempt:
        """Move a thread, between turns, onto the session ``plan`` chooses: the commands' step
        (``liminal.kernel.commands``). Holds the thread and waits for its last turn to be on
        disk; then ``plan(current file)``, in a worker thread, before anything is journaled,
        returns the writer of the next session (``write(new_id)``, moved onto by ``relocate``),
        or None for a new, empty session of the agent (``/clear``'s), or raises to refuse (the
        thread stays, nothing is journaled: the error is the answer). Returns the rewrite (None
        for an empty session). Raises ``SwapError`` saying why the thread stayed."""
        state = self.known(thread_id)
        async with self.moves.moving(thread_id), self.holding(state) as hold:
            old_backing = hold.left
            path = await self.appeared(old_backing, state.cwd, 2.0)
            if path is None:
                raise SwapError("no session file for this thread yet")
            if not await self.settle(path, state.last_prompt, 2.0):
                raise SwapError("the last turn is not on disk yet")
            write = await anyio.to_thread.run_sync(plan, path)
            attempt = self.attempt(state, old_backing, reason, kind=reason)
            if write is None:
                moved = await self._open_empty(attempt)
                hold.committed = True
                _emptied(state)
                return moved
            moved = await self.relocate(attempt, path, write)
            if not moved.committed:
                raise SwapError(moved.said)
            hold.committed = True
            return moved

    def attempt(self, state: ThreadState, old_backing: str, reason: str, *, kind: str = "swap",
                tokens: int | None = None) -> MoveAttempt:
        """A move of ``state``'s thread off ``old_backing``, starting now."""
        return MoveAttempt(state, old_backing, reason, kind, started=self.clock(), t0=time.monotonic(),
                           tokens_before=tokens)

    async def fresh_session(self, thread_id: str, reason: str) -> str:
        """Move a thread onto a new, empty session of the agent (``/clear``): its history stays
        with liminal, the model starts from nothing. Returns the new backing id."""
        state = self.known(thread_id)
        moved, _ = await self._move_to_empty(state, reason, kind=reason)
        assert moved.new_backing is not None
        return moved.new_backing

    async def reopen_empty(self, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
        """Open a thread whose session has no file on a new, empty session of the agent, for
        the client's load or resume (``params``). ``/clear`` leaves a thread on a session the CLI
        writes only at its first turn: a liminal started again before that turn would pass the
        load to a session the agent cannot find, and the thread could never be opened again.
        Journaled like any move. Returns the agent's answer to ``session/new`` (modes, models,
        config options: what an answer to a load carries too)."""
        assert self.port is not None
        state = self.threads.setdefault(thread_id, ThreadState(thread_id))
        if isinstance(params.get("cwd"), str):
            state.cwd = params["cwd"]
        if isinstance(params.get("mcpServers"), list):
            state.mcp_servers = list(params["mcpServers"])
        _, result = await self._move_to_empty(
            state, "reopened on an empty session: its session had no turn on disk", kind="reopen")
        return result

    async def _move_to_empty(self, state: ThreadState, reason: str,
                             *, kind: str) -> tuple[MoveAttempt, dict[str, Any]]:
        """Hold the thread (a prompt sent meanwhile waits for the new session), open it an
        empty session (``_open_empty``), release it, close the session it left (open only if
        this process made it)."""
        async with self.moves.moving(state.thread_id), self.holding(state) as hold:
            opened: dict[str, Any] = {}
            moved = await self._open_empty(self.attempt(state, hold.left, reason, kind=kind), opened)
            hold.committed = True
            _emptied(state)
        return moved, opened

    @contextlib.asynccontextmanager
    async def _leased(self, thread_id: str) -> AsyncIterator[str | None]:
        """The thread's lease for a move (``liminal.store.leases``): None when held (or none is
        configured), else why the thread must not move now."""
        if self.leases is None:
            yield None
            return
        async with self.leases.holding(thread_id) as ours:
            try:
                yield None if ours else "another liminal on the same store is moving this thread"
            finally:
                # A move that did not commit ends in the shared store before its lease does:
                # else another sidecar's load that found the lease gone and the claim still
                # there would take this live sidecar's failed move for a dead one's ("abandoned").
                await self.flush_shared()

    async def _open_empty(self, attempt: MoveAttempt, answer: dict[str, Any] | None = None) -> MoveAttempt:
        """``session/new`` for a held thread, its settings given (``ThreadOpener.open_empty``),
        the move journaled and the thread bound to it; on any failure the new session is closed
        again. ``answer``: filled with the agent's answer to ``session/new``."""
        port, state = self.attached(), attempt.state
        thread_id = state.thread_id
        async with self._leased(thread_id) as refused:
            if refused is not None:
                raise SwapError(refused)
            attempt.started, attempt.t0 = self.clock(), time.monotonic()
            attempt.opened_by = "session/new"
            result = await self.opener.open_empty(state)
            new_id = attempt.new_backing = str(result["sessionId"])
            try:
                record = self.records.made(attempt, COMMITTED, attempt.reason, before=None, after=None)
                if self.shared is not None:  # claimed and committed in the shared store first
                    try:
                        await self.shared.claim(dataclasses.replace(record, outcome="begin"),
                                                lease_held=self._lease_held(thread_id))
                        await self.shared.commit(record)
                    except Refused as exc:
                        self.records.ended(attempt, FAILED, str(exc))
                        raise SwapError(str(exc)) from exc
                self.records.written(record)
                port.bind(thread_id, new_id)
            except BaseException:
                await self.opener.close_unused(new_id)
                raise
        if answer is not None:
            answer.update(result)
        return attempt.ended(record)

    async def relocate(self, attempt: MoveAttempt, path: Path, write: Writer, *,
                       check: Callable[[Rewritten], str | None] | None = None,
                       kept_out: Sequence[dict[str, Any]] = ()) -> MoveAttempt:
        """Write the thread's next session with ``write(new_id)`` (in a worker thread) from its
        file at ``path`` and move the held thread onto it: the step a swap and every command
        that rewrites a thread's context share. Journaled from before the file exists to the
        end; anything but a commit leaves no file and no open session behind (``ThreadOpener.discard``).
        Returns the attempt as it came out: only a committed one has moved the thread.
        ``check(rewritten)``: why the rewrite is not worth opening (None: it is); ``kept_out``:
        what the model's review kept out of its dynamic zone, journaled after what the zone
        placed (``kernel.zone.Verdict``)."""
        if self._stopping:
            attempt.outcome, attempt.said = ABANDONED, self._stop_reason
            return attempt
        await faults.hit("swap.lease")  # the thread held, its lease not asked for yet
        async with self._leased(attempt.state.thread_id) as refused:
            if refused is not None:  # nothing begun: nothing journaled, the thread stays
                logger.warning("move not started", thread=attempt.state.thread_id, reason=refused)
                attempt.outcome, attempt.said = SKIPPED, refused
                return attempt
            # ``stop_moves`` cancels it up to the commit (which has no await in it); what
            # follows the commit is outside.
            with anyio.CancelScope() as scope:
                self._moving.add(scope)
                try:
                    await self._move(attempt, path, write, check, kept_out)
                finally:
                    self._moving.discard(scope)
        if attempt.committed:
            assert attempt.rewritten is not None
            await self.opener.landed(attempt.state, attempt.rewritten)
        return attempt

    async def _move(self, attempt: MoveAttempt, path: Path, write: Writer,
                    check: Callable[[Rewritten], str | None] | None,
                    kept_out: Sequence[dict[str, Any]]) -> None:
        """``relocate``'s move, to its commit (or none): ``attempt`` says which."""
        port, records = self.attached(), self.records
        state, decision = attempt.state, attempt.decision
        thread_id = state.thread_id
        new_id = attempt.new_backing = str(uuid.uuid4())
        new_path = self.harness.target_path(path, new_id)
        # Journaled before the file exists: a liminal killed from here to the end record leaves
        # a ``begin`` alone, and the next start removes what it names (``_recover``).
        begun = records.begun(attempt, str(new_path))
        self.journal.begin(begun)
        rewritten: Rewritten | None = None
        opened = False  # the agent has (or may have) the new session open
        ended = False  # an end record (committed, failed, abandoned, skipped) is journaled
        committed = False
        in_store = False  # the shared store has committed it: the move is made, whatever follows
        record: SwapRecord | None = None
        step = "the shared store did not take the move"  # what is under way, for a failure's reason
        try:
            try:
                with anyio.fail_after(self.settings.hold_timeout_seconds):
                    if self.shared is not None:  # the store's claim: refused, the move fails
                        await self.shared.claim(begun, lease_held=self._lease_held(thread_id))
                    step = "the rewrite could not be made"
                    await faults.hit("swap.rewrite")  # begun, nothing written yet
                    rewritten = attempt.rewritten = await anyio.to_thread.run_sync(write, new_id)
                    attempt.t_rewritten = time.monotonic()
                    unpaid = check(rewritten) if check is not None else None
                    if unpaid is not None:
                        ended = True
                        records.ended(attempt, SKIPPED, unpaid, before=rewritten.tokens_before,
                                      after=rewritten.tokens_after, decision=decision)
                        return
                    step = "the rewrite could not be noted in liminal's home"
                    await anyio.to_thread.run_sync(self.journal.note_rewrite, new_id, rewritten.size)
                    opened = True
                    step = "the agent did not open the new session"
                    attempt.opened_by = await self.opener.open_keeping(state, attempt.old_backing, new_id, rewritten)
                    attempt.t_moved = time.monotonic()
            except TimeoutError:
                ended = True
                records.ended(
                    attempt, ABANDONED,
                    f"it took longer than swap.hold_timeout_seconds ({self.settings.hold_timeout_seconds:g} s) "
                    "to finish; the thread stayed on its session",
                    after=rewritten.tokens_after if rewritten else None)
                return
            except Exception as exc:
                logger.warning("move failed; the thread stays on its session", thread=thread_id,
                               error=f"{type(exc).__name__}: {exc}", reason=attempt.reason)
                ended = True
                records.ended(attempt, FAILED, failure(exc, step),
                              after=rewritten.tokens_after if rewritten else None)
                return
            if not port.is_held(thread_id):
                # The hold overflowed (the client sent more than the router keeps) and let the
                # thread's frames through to the old session: the new one lacks what they did.
                ended = True
                records.ended(attempt, ABANDONED, "the hold overflowed; the thread went on on its old session",
                              after=rewritten.tokens_after)
                return
            # The journal first: a thread is on its new session only once that is on disk (a
            # journal that cannot be written fails the swap, and the thread stays). With a shared
            # store, the store's commit before it: refused or not taken, the move failed.
            record = records.made(attempt, COMMITTED, attempt.reason, before=rewritten.tokens_before,
                                  after=rewritten.tokens_after, decision=decision,
                                  zone=[*(p.as_dict() for p in rewritten.zone), *kept_out] or None,
                                  size=rewritten.size)
            if self.shared is not None:
                await faults.hit("swap.commit")  # the store's commit next
                try:
                    await self.shared.commit(record)
                except Refused as exc:
                    ended = True
                    records.ended(attempt, FAILED, str(exc), after=rewritten.tokens_after)
                    return
                in_store = True
                await faults.hit("swap.committed")  # committed in the store, nothing told yet
            records.written(record)
            ended = True
            port.bind(thread_id, new_id)
            committed = True
            attempt.ended(record)
        except BaseException as exc:
            if in_store and not committed and record is not None:
                # Cancelled after the shared store's commit: the thread is on the new session
                # for every sidecar, so here too (its file stays; the store has its lines).
                with contextlib.suppress(Exception):
                    records.written(record)
                    port.bind(thread_id, new_id)
                    committed = True
                    attempt.ended(record)
            # Cancelled (the client left, liminal is stopping) or an end record that could not
            # be written: the swap did not happen.
            elif not ended:
                with contextlib.suppress(Exception):
                    records.ended(attempt, ABANDONED, _interrupted(exc, self._stop_reason if self._stopping else None))
            raise
        finally:
            if not committed:  # whatever went wrong: no new file, no new session left open
                await self.opener.discard(new_path, new_id, opened=opened)
            # Ended (or nothing of it is left): another liminal's start may judge it now.
            self.journal.finish(new_id)

    # ------------------------------------------------------------ the opener's, for every mover

    async def appeared(self, backing: str, cwd: str | None, timeout: float) -> Path | None:
        return await self.opener.appeared(backing, cwd, timeout)

    async def settle(self, path: Path, prompt: str | None, timeout: float = 2.0) -> bool:
        return await self.opener.settle(path, prompt, timeout)

    async def open_on(self, target: AgentProcess, threads: list[str], capabilities: dict[str, Any]) -> None:
        await self.opener.open_on(target, threads, capabilities)

    async def prepare_loads(self, threads: list[str]) -> None:
        await self.opener.prepare_loads(threads)

    async def close(self, old_backing: str) -> None:
        await self.opener.close(old_backing)
