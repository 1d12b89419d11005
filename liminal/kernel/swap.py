"""The swap manager: compress a thread's backing session and move the thread onto it, between turns.

A proxy component. It watches the taps for what it must know about each thread (cwd, MCP
servers, mode, config options, context size, model calls, turn ends), and when the cost policy
(``liminal.kernel.policy``) says a swap pays, at a turn end past the thread's trigger or once the
thread has been idle past the prompt cache's life, it runs one swap:

1. **Hold** the thread's next prompts in the router (synchronously, inside ``offer``, so no
   prompt can slip through between the decision and the hold).
2. **Settle**: wait until the CLI has finished writing the turn to its session file.
3. **Rewrite** the file with the gradient under a new id (in a worker thread; the original file
   is never modified).
4. **Move**: ``session/resume`` the new id when the agent advertises it, else ``session/load``;
   either way the new session's notifications are captured, so the UI sees no replay. Then
   re-apply the thread's mode and config options.
5. **Commit**: bind the thread to the new backing id, journal it, release the held prompts, and
   tell the UI briefly (``swap.notice``); then, outside the hold, close the old session if the
   agent supports ``session/close`` (if not, ``liminal.kernel.recycle`` bounds what is left).

Steps 3 to 5 are the thread mover's (``liminal.kernel.mover``), which the context commands use
too; this module observes the threads and decides. Any failure, or the whole swap overrunning
``swap.hold_timeout_seconds``, releases the held prompts to the old session, which keeps working;
the journal records why, in words.

A thread the client opens (``session/load``, ``session/resume``) is looked at the same way before
its first prompt: held, its size read from its session file, swapped if it is past its trigger.
A client that starts liminal for every prompt (acpx) closes it right after each answer, when a
swap decided at that turn end has only begun: liminal's stop gives such a swap
``proxy.stop_grace_seconds`` to finish (``stopping``); one cut short (the grace over, or liminal
killed) is never resumed from its rewrite, which is removed: the next load decides afresh, on the
file as it is then.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
import anyio.to_thread

from liminal import log, units
from liminal.acp.port import Component, Port
from liminal.config import GradientSettings, SwapSettings
from liminal.harness.base import MoveHarness, Rewritten, SwapHarness, choice_behind
from liminal.kernel.aids import Preamble
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.mover import UNDO_CLOSE_SECONDS, ThreadMover
from liminal.kernel.policy import CostPolicy, Decision
from liminal.kernel.threads import ThreadModel, ThreadState
from liminal.kernel.zone import Offer
from liminal.sessionfiles import is_session_id

if TYPE_CHECKING:
    from liminal.kernel.storejournal import StoreJournal
    from liminal.store.leases import MoveLeases

logger = log.get("liminal.swap")

# Turn ends at which a thread's session file is read for its cache's life while the CLI's records
# have not said it (a CLI whose records never do keeps swap.cache_life_seconds).
CACHE_LOOKS = 3
# How long a turn end far below the trigger (the thread not held) waits for the turn to reach the
# session file before its size is read: Claude Code 2.1.44 writes it 75-90 ms after answering.
UNHELD_SETTLE_SECONDS = 0.5


def _back_off(state: ThreadState) -> None:
    """After a failed swap, skip twice as many turn ends as the last time (at most 32)."""
    state.failures += 1
    state.skip_turns = min(2 ** state.failures, 32)


class _TurnEnd(NamedTuple):
    """What the swap task is asked to look at when a thread's turn has ended."""

    thread_id: str
    decision: Decision | None  # the agent's usage says swap; None: the session file decides
    held: bool  # the thread's next frames wait (set in ``offer``, before the client's next bytes)
    prompt: str | None  # the prompt of the turn that ended, to find that turn on disk
    idle_since: float | None = None  # an idle swap: when the thread's idle spell began (monotonic)
    loaded: bool = False  # not a turn end: the client opened the thread (no turn is still to settle)


class SwapManager(Component):
    def __init__(
        self,
        settings: SwapSettings,
        journal: SwapJournal,
        harness: SwapHarness,
        *,
        clock: Callable[[], float] = time.time,
        settle_timeout: float = 10.0,
        policy: CostPolicy | None = None,
        leases: MoveLeases | None = None,
        shared: StoreJournal | None = None,
        stop_grace: float = 10.0,
        preamble: Preamble | None = None,
    ) -> None:
        self.settings = settings
        # How long a swap under way when liminal stops may go on (``proxy.stop_grace_seconds``).
        self.stop_grace = stop_grace
        # The policy for the harness and the default gradient unless given (the wiring's, with
        # the configured gradient and what rides a summary's request).
        self.policy = policy if policy is not None else CostPolicy.of(settings, GradientSettings(), harness)
        self.journal = journal
        self.harness = harness
        self.clock = clock
        self.settle_timeout = settle_timeout
        # What liminal knows of each thread; its turn ends are this manager's cue.
        self.model = ThreadModel()
        self.model.on_turn_end.append(self._turn_ended)
        self.model.on_opened.append(self._opened)
        self.model.on_agent_info.append(self._agent_said)
        self._port: Port | None = None
        # What the preamble is written with (``liminal.kernel.aids.Preamble``): the model's
        # summaries when ``liminal.kernel.summaries`` runs, the dynamic zone, the scratchpad.
        preamble = preamble or Preamble()
        self.summarizer_for = preamble.summarizer_for
        self.summary_asked = preamble.summary_asked
        self.zone = preamble.zone
        self.memory = preamble.memory
        self._prepared = False  # the journal's bindings are in the router (``prepare``)
        self._running = False  # ``run`` is looking at turn ends
        self._stopping = False  # liminal stops: no new swap is decided but at a turn end
        self._send, self._receive = anyio.create_memory_object_stream[_TurnEnd](64)
        self._look_send, self._look_receive = anyio.create_memory_object_stream[str](64)
        self.completed = 0  # swap attempts finished, committed or not (tests wait on it)
        self._progress = anyio.Event()
        # The step every move of a thread shares (liminal.kernel.mover), the commands' too.
        self.mover = ThreadMover(settings, journal, harness, self.threads, clock=clock,
                                 capabilities=lambda: self.capabilities, priced=self._priced,
                                 moves=self.model.moves, leases=leases, shared=shared)

    async def aclose(self) -> None:
        if self.mover.shared is not None:
            await self.mover.shared.aclose()

    async def stopping(self) -> None:
        """liminal stops (``Proxy.run``, before it stops the agent). A move under way, a swap's
        or a command's, or a swap decided at a turn end and still waiting to start, is given
        ``stop_grace`` to finish: a client that starts liminal for every prompt closes it right
        after the answer, the very moment a swap begins, and without the grace no swap of such
        a client ever committed. What has not committed by then is abandoned, its rewrite
        removed and its new session closed while the agent can still answer
        (``ThreadMover.stop_moves``), journaled with why in words; the thread's next load
        decides again (``_opened``): the rewrite is never taken up later, as the session may
        have moved on by then (another client, the CLI itself)."""
        self._stopping = True
        cause = (self._port.stop_cause() if self._port is not None else None) or "liminal was stopping"
        if self.busy():
            t0 = time.monotonic()
            with anyio.move_on_after(self.stop_grace):
                while self.busy():  # noqa: ASYNC110 - several things end a move; a look every 20 ms
                    await anyio.sleep(0.02)
            if self.busy():
                logger.warning("liminal is stopping: the swap under way is abandoned", cause=cause,
                               grace=self.stop_grace)
            else:
                logger.info("liminal is stopping: the swap under way was let finish", cause=cause,
                            seconds=round(time.monotonic() - t0, 3))
        await self.mover.stop_moves(UNDO_CLOSE_SECONDS + 1.0, self._abandoned_because(cause))

    def _abandoned_because(self, cause: str) -> str:
        """A swap liminal's stop cut short, as journaled: why liminal stopped, and that the
        grace ran out."""
        grace = (f"the swap did not finish within proxy.stop_grace_seconds ({self.stop_grace:g} s)"
                 if self.stop_grace > 0 else "proxy.stop_grace_seconds is 0")
        return (f"{cause} during the swap, and {grace}: the rewrite was removed, and the thread's "
                "next load decides again")

    def busy(self) -> bool:
        """A swap or a command's move is under way, or a turn end waits to be looked at: the
        agent must not be stopped yet (``liminal serve`` finishing a detached connection)."""
        return (self.model.moves.taken() or any(s.swapping for s in self.threads.values())
                or self._receive.statistics().current_buffer_used > 0)

    def _agent_said(self, agent_info: Any) -> None:
        """The agent named itself: its harness may be another than the command suggested (a
        harness given as one, as tests do, is that one whatever the agent says)."""
        choice = choice_behind(self.harness)
        if choice is None:
            return
        choice.agent_said(agent_info)
        self.policy.side_session_tokens = self.harness.side_session_tokens
        if not self.settings.ceiling_tokens:
            self.policy.ceiling = self.harness.ceiling_tokens

    # ------------------------------------------------------------ observation

    @property
    def threads(self) -> dict[str, ThreadState]:
        return self.model.threads

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.model.capabilities or {}

    def parts(self) -> list[ThreadModel]:
        """The thread model this manager reads, run as a component ahead of it."""
        return [self.model]

    def _observe(self, state: ThreadState, context: int) -> None:
        """A turn end's context is known: what the turns since the last one added, per call."""
        if state.pace.overhead is None and state.new:
            state.pace.overhead = context
        if state.last_context is not None:
            state.pace.observe(context - state.last_context, state.calls)
        state.last_context = context
        state.calls = 0

    def _turn_ended(self, thread_id: str, ok: bool) -> None:
        """The thread model saw a turn end (``ThreadModel.on_turn_end``)."""
        if not ok:
            return
        state = self.threads.get(thread_id)
        if (state is None or self._port is None or state.swapping or not self.settings.enabled
                or not self._running):
            logger.debug("turn ended; not considered", thread=thread_id,
                         swapping=state.swapping if state else None)
            return
        state.turns_since_swap += 1
        if state.context_tokens is not None:
            self._observe(state, state.context_tokens)
        if state.skip_turns:
            state.skip_turns -= 1
            return
        port = self._port
        if port.prompt_in_flight(thread_id) or port.agent_request_open(thread_id):
            logger.debug("turn ended with work in flight; no swap now", thread=thread_id,
                         prompt=port.prompt_in_flight(thread_id),
                         agent_request=port.agent_request_open(thread_id))
            return
        decision: Decision | None = None
        every_due = bool(self.settings.every_turns) and state.turns_since_swap >= self.settings.every_turns
        if state.context_tokens is not None or every_due:
            # Without usage, a swap that swap.every_turns asks for is decided all the same.
            known = state.context_tokens if state.context_tokens is not None else state.file_tokens or 0
            decision = self.policy.decide(known, state.pace, turns_since_swap=state.turns_since_swap)
            logger.debug("turn ended", thread=thread_id, tokens=known, decided=decision.swap,
                         why=decision.why)
            if not decision.swap:
                self._look_for_cache_life(state)
                return
        # Without usage from the agent the session file decides, once the turn is on disk (about
        # 0.1 s after the answer with Claude Code 2.1.44). Near the trigger the thread is held
        # for that check, or a client that answers quickly would never let a swap start; far
        # below it an unheld read only updates the size, and a turn that jumps the whole way
        # is caught one turn late.
        trigger = self.policy.trigger(state.pace)
        near = trigger - max(2 * state.pace.biggest_turn, (trigger - self.policy.target(state.pace)) // 2)
        held = decision is not None or state.file_tokens is None or state.file_tokens >= near
        self._enqueue(state, _TurnEnd(thread_id, decision, held, state.last_prompt))

    def _opened(self, thread_id: str, method: str, key: Any, by_liminal: bool) -> None:
        """The client opened a thread (``ThreadModel.on_opened``): one loaded over its trigger
        swaps before its first prompt. A client that starts liminal for every prompt never
        reaches a turn end with a live liminal after it (the swap decided there is cut short),
        so its thread would grow past the trigger for good. No agent says the size at the load
        (claude-agent and codex-zed send no ``usage_update`` with the replay, codex-agent sends
        one just after the answer, claude-zed none ever): the thread is held in this flush (the
        client's first prompt cannot have been read yet), and the session file decides, as at
        a turn end without usage. A prompt already sent with the load is not held up."""
        if method not in ("session/load", "session/resume") or by_liminal:
            return
        state, port = self.threads.get(thread_id), self._port
        if (state is None or port is None or state.swapping or not self.settings.enabled
                or not self._running or self._stopping):
            return
        if port.prompt_in_flight(thread_id) or port.agent_request_open(thread_id) or port.is_held(thread_id):
            return
        self._enqueue(state, _TurnEnd(thread_id, None, True, None, loaded=True))

    def _look_for_cache_life(self, state: ThreadState) -> None:
        """The agent's usage gave the size; how long the thread's cache lives is in the CLI's own
        records, read beside the turns (``_cache_looks``), never holding one, a few times at most
        while they do not say it."""
        if state.pace.cache_life is not None or state.cache_looks >= CACHE_LOOKS:
            return
        with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._look_send.send_nowait(state.thread_id)

    async def _cache_looks(self) -> None:
        async for thread_id in self._look_receive:
            state, port = self.threads.get(thread_id), self._port
            if state is None or port is None:
                continue
            if state.swapping:
                # A swap of it is under way, and reads the records itself: learning here, between
                # its band and what it measures, would mix the two lives. Asked again later.
                continue
            try:
                path = self.harness.locate(port.backing_of(thread_id), state.cwd)
            except Exception as exc:  # a look is for the price: never the swaps' undoing
                logger.warning("the thread's cache life could not be looked for", thread=thread_id,
                               error=f"{type(exc).__name__}: {exc}")
                continue
            if path is not None:
                await self._read_cache_life(state, path)

    def _enqueue(self, state: ThreadState, turn_end: _TurnEnd) -> None:
        assert self._port is not None
        try:
            # The prompt of the turn that just ended, taken now: by the time the task runs, an
            # unheld client may already have sent the next one.
            self._send.send_nowait(turn_end)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        state.swapping = True
        if turn_end.held:
            # Inside the flush that delivered the turn's end (or, idle, with no prompt in
            # flight): the client's next prompt cannot have been read yet, so it is certain to wait.
            self._port.hold(state.thread_id)

    def _idle_check(self, now: float) -> None:
        """Threads idle past the cache's life: their next call rewrites the whole prompt anyway,
        so a swap now costs nothing more (``CostPolicy``), and the person is not waiting."""
        port = self._port
        if port is None or not self.policy.idle_swaps or not self.settings.enabled or self._stopping:
            return
        for state in list(self.threads.values()):
            # The thread's own cache: an hour's is still there after 5 minutes.
            life = self.policy.cache_life(state.pace)
            if state.idle_since is None or state.swapping or now - state.idle_since < life:
                continue
            idle_since, state.idle_since = state.idle_since, None  # one look per idle spell
            context = state.context_tokens if state.context_tokens is not None else state.file_tokens
            thread_id = state.thread_id
            if (context is None or port.prompt_in_flight(thread_id) or port.agent_request_open(thread_id)
                    or port.is_held(thread_id) or not port.agent_alive):
                continue
            decision = self.policy.decide(context, state.pace, idle=True)
            logger.debug("thread idle past the cache's life", thread=thread_id, tokens=context,
                         decided=decision.swap, why=decision.why)
            if decision.swap:
                self._enqueue(state, _TurnEnd(thread_id, decision, True, state.last_prompt, idle_since))

    async def _idle_watch(self) -> None:
        life = self.settings.cache_life_seconds
        if life <= 0:
            return
        while True:
            await anyio.sleep(min(life / 4, 15.0))
            self._idle_check(time.monotonic())

    # ----------------------------------------------------------------- running

    async def prepare(self, port: Port) -> None:
        """Before the client's first byte is read (``Proxy.run``): clean up after a crash and
        bind every swapped thread to its current session, so that no load or prompt can pass
        to a stale one."""
        self._port = port
        self.mover.attach(port)
        in_store = await self._committed_in_store()
        abandoned = await anyio.to_thread.run_sync(self._recover, in_store, abandon_on_cancel=True)
        if self.mover.shared is not None:
            for record in abandoned:  # the claims this home's dead attempts left in the store
                await self.mover.shared.ended(record)
        # Every session a thread has been on names the thread towards the client (a listing
        # shows the thread once); new frames go to the last one.
        lineage = await anyio.to_thread.run_sync(self.journal.lineage, abandon_on_cancel=True)
        for thread_id, backing_id in lineage:
            port.adopt(backing_id, thread_id)
        for thread_id, backing_id in dict(lineage).items():  # the last committed of each thread
            port.bind(thread_id, backing_id)
        self._prepared = True

    def request_hooks(self) -> list[tuple[tuple[str, ...], Callable[..., None]]]:
        # Ahead of the command center's (the components' order): its hook reads where the
        # thread is (``liminal.kernel.reopen``).
        return [(("session/load", "session/resume", "session/fork"), self._opening)]

    def _opening(self, method: str, message: dict[str, Any], thread_id: str | None) -> None:
        """The client opens a thread (load, resume, fork): another liminal on this home (an
        editor's second window, a connection of ``liminal serve``) may have moved it since this
        one read the journal. Opened on a session it has left, the thread would go on without
        every turn since. The journal is read on from where it was (``SwapJournal.current``),
        and the thread bound before the router routes the request."""
        if thread_id is None:
            return
        state = self.threads.get(thread_id)
        if self._port is None or (state is not None and state.swapping):
            return  # this liminal is moving it: its own view is the newer one
        current, carried = self.journal.current(thread_id)
        port = self._port
        if current is None or current == port.backing_of(thread_id):
            return
        for backing in carried:
            port.adopt(backing, thread_id)
        port.bind(thread_id, current)
        logger.info("thread moved by another liminal; opened on its current session",
                    thread=thread_id, backing=current)

    async def run(self, port: Port) -> None:
        if not self._prepared:  # it failed, or a restart after a failure: read the journal again
            await self.prepare(port)
        self._prepared = False
        # Turn ends are taken (and their threads held) only while a task looks at them: not in
        # the pause before the supervisor starts a failed run again, when a held thread's
        # prompts would wait for nothing.
        self._running = True
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._idle_watch)
                tasks.start_soon(self._cache_looks)
                await self._swaps(port)
                tasks.cancel_scope.cancel()
        finally:
            self._running = False

    async def _swaps(self, port: Port) -> None:
        # Not closed on the way out: a failure is followed by ``run`` again (the supervisor),
        # which must find the stream open, or it fails at once and swaps stay off.
        async for turn_end in self._receive:
            thread_id = turn_end.thread_id
            state = self.threads[thread_id]
            committed: bool | None = None
            try:
                # Held since ``_enqueue`` (if it was), released on the way out, the session it
                # left closed if the swap committed: the mover's one sequence for every move.
                async with self.mover.holding(state, claim=False) as hold:
                    try:
                        async with self.model.moves.moving(thread_id):
                            # The session this swap would leave, taken under the thread's move
                            # lock: another move of it (the recycle's, which takes every
                            # thread's) may have ended while this one waited.
                            hold.left = port.backing_of(thread_id)
                            committed = await self._maybe_swap(port, state, turn_end)
                            hold.committed = bool(committed)
                        if committed is False and not state.trigger_backed_off:
                            _back_off(state)
                        elif committed:
                            state.failures = 0
                        # A quiet moment, the thread's next prompt (if any) still waiting: the
                        # recycle (``liminal.kernel.recycle``) moves sessions to a fresh agent
                        # process there; not while liminal stops.
                        if not self._stopping:
                            await self.model.quiet(thread_id)
                    except Exception:
                        # Fails the run (the supervisor starts it again): the thread backs off as
                        # after any failed swap, rather than fail the next turn end the same way.
                        _back_off(state)
                        raise
                    finally:
                        state.trigger_backed_off = False
            finally:
                if committed is not None:
                    self.completed += 1
                self._progress.set()
                self._progress = anyio.Event()

    async def _committed_in_store(self) -> set[str] | None:
        """Of this home's attempts that never ended, those the shared store committed (liminal
        stopped between the store's commit and its own journal's); None when the store could
        not be read (nothing is removed then: whether it committed is not known)."""
        shared = self.mover.shared
        if shared is None:
            return set()
        unfinished = await anyio.to_thread.run_sync(self.journal.unfinished, abandon_on_cancel=True)
        found: set[str] = set()
        try:
            for begun in unfinished:
                place = await shared.place(begun.thread_id)
                if place is not None and begun.new_backing_id in place.lineage:
                    found.add(begun.new_backing_id or "")
        except Exception as exc:
            logger.warning("unfinished swaps left for the next start: the shared store could not "
                           "be read", error=f"{type(exc).__name__}: {exc}", swaps=len(unfinished))
            return None
        return found

    def _recover(self, in_store: Collection[str] | None = frozenset()) -> list[SwapRecord]:
        """Remove what swaps cut short by a crash left: each ``begin`` without an end names the
        file its rewrite wrote (or was about to). Nothing else is touched: not the session the
        thread was on, not a file that a committed swap made the thread's session, not a file
        whose name (by the CLI's own naming, the record's harness's) is not the rewrite's id.
        With a shared store (``in_store``: the attempts it committed; None: not known), one the
        store committed is journaled committed here too, and its file kept. Returns the
        records of the attempts taken as abandoned."""
        if in_store is None:
            return []
        abandoned: list[SwapRecord] = []
        records = self.journal.records(begins=True)
        # Ids that are, or were, a thread's session: never a rewrite to remove, whatever a
        # damaged or hand-edited ``begin`` says.
        kept: set[str | None] = {r.new_backing_id for r in records if r.outcome == "committed"}
        kept |= {r.old_backing_id for r in records} | {r.thread_id for r in records}
        for begun in self.journal.unfinished():
            new_id = begun.new_backing_id
            if not new_id or not begun.new_path:
                continue
            path = Path(begun.new_path)
            harness = self._harness_named(begun.harness)
            if (not is_session_id(new_id) or new_id in kept
                    or new_id in (begun.old_backing_id, begun.thread_id)
                    or harness.names(path) != new_id):
                logger.warning("swap journal names an unexpected file; left alone", path=str(path),
                               new=new_id)
                continue
            # Another liminal on this home (an editor's second window, a connection of
            # ``liminal serve``) may be in the middle of this swap: only a dead one's is removed.
            with self.journal.abandon(new_id) as leftover:
                if not leftover:
                    logger.debug("swap under way in another liminal; left alone", new=new_id)
                    continue
                if new_id in in_store:
                    self.journal.append(dataclasses.replace(
                        begun, outcome="committed", new_path=None,
                        reason=f"{begun.reason} (committed in the shared store; liminal stopped "
                               "before its journal heard)"))
                    logger.info("unfinished swap committed in the shared store", thread=begun.thread_id,
                                new=new_id)
                    continue
                harness.discard(Rewritten(new_id, path, 0, 0))
                record = SwapRecord(
                    thread_id=begun.thread_id, old_backing_id=begun.old_backing_id,
                    new_backing_id=new_id, outcome="abandoned",
                    reason="liminal ended during the swap (it was killed, or its stop was cut short): its "
                           "rewrite was removed at the next start, and the thread's next load decides again",
                    started_at=begun.started_at, duration_s=0.0, tokens_before=begun.tokens_before,
                    tokens_after=None, harness=begun.harness, cwd=begun.cwd, move=begun.move)
                self.journal.append(record)
                abandoned.append(record)
            logger.info("unfinished swap cleaned up", thread=begun.thread_id, removed=str(path))
        return abandoned

    def _harness_named(self, name: str) -> MoveHarness:
        """The harness whose swap a journal record describes: a Codex swap's rewrite is a Codex
        rollout even when this liminal wraps Claude Code."""
        choice = choice_behind(self.harness)
        return (choice.named(name) if choice is not None else None) or self.harness

    async def wait_for_swaps(self, count: int) -> None:
        """For tests: until ``count`` swaps have finished (committed or not)."""
        while self.completed < count:
            await self._progress.wait()

    async def _read_cache_life(self, state: ThreadState, path: Path, *, decided: bool = False) -> bool:
        """How long the thread's prompt cache lives, from the CLI's records of its model calls
        (``CostPolicy.learned``): True when that changes how the thread is priced. Records that
        have not said it in ``CACHE_LOOKS`` reads (Claude Code 2.1.44, Codex) are not asked again
        at a turn end (each read scans the file's tail), only for a swap ``decided``, once a cycle."""
        if state.pace.cache_life is None and not decided:
            if state.cache_looks >= CACHE_LOOKS:
                return False
            state.cache_looks += 1
        try:
            life = await anyio.to_thread.run_sync(self.harness.cache_life, path)
        except Exception as exc:  # a file gone, refused or unreadable says nothing of the cache
            logger.debug("the session file said nothing of the cache's life", thread=state.thread_id,
                         error=f"{type(exc).__name__}: {exc}")
            return False
        if not self.policy.learned(state.pace, life):
            return False
        logger.info("the thread's prompt cache life, from the CLI's records", thread=state.thread_id,
                    seconds=life, recent_tokens=self.policy.recent(state.pace),
                    trigger=self.policy.trigger(state.pace))
        return True

    async def _maybe_swap(self, port: Port, state: ThreadState, turn_end: _TurnEnd) -> bool | None:
        """True: committed; False: tried and failed; None: no swap was needed after all."""
        decision, held = turn_end.decision, turn_end.held
        decided = decision is not None
        thread_id = state.thread_id
        old_backing = port.backing_of(thread_id)
        started = self.clock()
        t0 = time.monotonic()
        path = self.harness.locate(old_backing, state.cwd)
        tokens = decision.context if decision is not None else state.context_tokens
        if path is None and turn_end.loaded:
            return None  # nothing on disk to read the size from: the first turn end will tell
        if path is None and held:
            # Claude Code 2.1.44 creates a new session's file when it writes the first turn,
            # after answering it: taken for a session no harness can rewrite, the thread would
            # back off two turn ends and its size (what swaps and summaries go by) stay unknown.
            path = await self.mover.appeared(old_backing, state.cwd, self.settle_timeout if decided else 2.0)
        if path is None:
            # Not a session this harness can rewrite (another CLI, or a file not written yet):
            # not a swap attempt worth journaling, but back off like a failure.
            logger.info("no session file to rewrite", thread=thread_id, backing=old_backing,
                        harness=self.harness.name)
            return False
        if not held:
            # Far below the trigger: only refresh the size that decides whether the next turn end
            # is held (when the agent's usage does not say it), when the model's summary is due
            # and how long the thread's cache lives. No swap. The turn is waited for a moment
            # (read at once, the file lacked it: each size was a turn late, and a summary asked
            # at a turn end after one that jumped came a turn later than it should); an unheld
            # client may keep the CLI writing newer turns, so past the moment it is read as is.
            await self.mover.settle(path, turn_end.prompt, UNHELD_SETTLE_SECONDS)
            await self._read_cache_life(state, path)
            state.file_tokens = await anyio.to_thread.run_sync(self.harness.context_tokens, path)
            if state.file_tokens is not None:
                self._observe(state, state.file_tokens)
            logger.debug("context read from the session file", thread=thread_id, tokens=state.file_tokens,
                         held=False)
            return None
        # The CLI may write the turn after answering the prompt: wait for it to be on disk before
        # reading its size, and never rewrite a file that lacks it (the turn would be lost). A
        # thread just opened has no turn on its way to the disk.
        if not turn_end.loaded and not await self.mover.settle(
                path, turn_end.prompt, self.settle_timeout if decided else 2.0):
            if self.mover.stopping:
                return None  # liminal stops, and the grace is over: nothing was begun
            if decided:
                self.mover.record(state, old_backing, None, "abandoned", "the turn did not reach the session file",
                              started, t0, tokens, None)
                return False
            logger.debug("turn not on disk in time; no check", thread=thread_id)
            return None
        t_settled = time.monotonic()
        await self._read_cache_life(state, path, decided=decision is not None)
        if decision is not None and not decision.idle and decision.cache_life != self.policy.cache_life(state.pace):
            # Priced at the life the thread had; its records now say another: decided at that.
            decision = self.policy.decide(decision.context, state.pace, turns_since_swap=state.turns_since_swap)
            if not decision.swap:
                logger.debug("swap not taken at the thread's cache life", thread=thread_id, why=decision.why)
                return None
        if decision is not None and decision.idle and turn_end.idle_since is not None \
                and time.monotonic() - turn_end.idle_since < self.policy.cache_life(state.pace):
            # Decided idle past a shorter life than the CLI's records now say: the cache is
            # still there, and a swap would throw it away. The spell goes on, looked at again.
            logger.debug("idle swap dropped: the thread's cache lives longer", thread=thread_id,
                         cache_life=state.pace.cache_life)
            if state.idle_since is None and not port.prompt_in_flight(thread_id):
                state.idle_since = turn_end.idle_since
            return None
        if decision is None:
            tokens = await anyio.to_thread.run_sync(self.harness.context_tokens, path)
            state.file_tokens = tokens
            if tokens is None:
                logger.debug("no context size in the session file", thread=thread_id)
                return None
            self._observe(state, tokens)
            decision = self.policy.decide(tokens, state.pace, turns_since_swap=state.turns_since_swap)
            logger.debug("context read from the session file", thread=thread_id, tokens=tokens,
                         decided=decision.swap, why=decision.why, loaded=turn_end.loaded)
            if decision.swap and turn_end.loaded:
                decision = dataclasses.replace(
                    decision, why=f"{decision.why} (when the thread was loaded, before its first prompt)")
            if not decision.swap:
                return None
        reason = decision.why
        if decision.summary and not self.summary_asked(thread_id, old_backing):
            # The policy prices a summary in every cycle; this one had none (a thread whose
            # context jumped past the trigger before one was due): its record says so.
            decision = dataclasses.replace(decision, summary=0.0)
        offer = (await self.zone.offer(thread_id, state.cwd, old_backing)
                 if self.zone is not None and self.policy.gradient.zone_tokens else Offer())
        memos = offer.candidates
        t_rewrite = time.monotonic()

        # The model's summaries ready now (``liminal.kernel.summaries``), never waited for.
        summarizer = self.summarizer_for(thread_id)
        scratchpad = await self.memory.scratchpad(thread_id)

        band = self.policy.recent(state.pace)  # by the thread's cache life

        def rewrite(new_id: str) -> Rewritten:
            if summarizer is None:
                return self.harness.rewrite(path, self.policy.aim, new_id, memos=memos, recent_tokens=band,
                                            scratchpad=scratchpad)
            return self.harness.rewrite(path, self.policy.aim, new_id, memos=memos, summarizer=summarizer,
                                        recent_tokens=band, scratchpad=scratchpad)

        def check(rewritten: Rewritten) -> str | None:
            unpaid = self.policy.worth_it(decision, rewritten.tokens_after, state.pace)
            if unpaid is not None:
                self.policy.rewritten(state.pace, rewritten.tokens_after, committed=False)
                # The trigger moved past what this rewrite could reach: that is the back-off;
                # skipping turn ends as well would let the context run on past it.
                state.trigger_backed_off = state.pace.backed_off_to is not None
                logger.info("swap skipped", thread=thread_id, why=unpaid,
                            trigger=self.policy.trigger(state.pace))
            self._above_target(state, rewritten.tokens_after)
            return unpaid

        moved = await self.mover.relocate(state, old_backing=old_backing, path=path, reason=reason,
                                          started=started, t0=t0, tokens=tokens, write=rewrite,
                                          check=check, decision=decision,
                                          kept_out=[v.as_dict() for v in offer.dropped])
        if not moved.committed:
            return False
        rewritten, moved_by, t_rewritten, t_moved = moved.rewritten, moved.opened_by, moved.t_rewritten, moved.t_moved
        assert rewritten is not None
        # Where the hold went (bench/swap.py reads these): waiting for the file, reading the
        # context size when the agent sent none, the gradient rewrite, the resume or load.
        timing = {"settle_s": round(t_settled - t0, 4), "decide_s": round(t_rewrite - t_settled, 4),
                  "rewrite_s": round(t_rewritten - t_rewrite, 4),
                  "move_s": round(t_moved - t_rewritten, 4), "moved_by": moved_by}
        self.policy.rewritten(state.pace, rewritten.tokens_after, committed=True)
        self._notice(port, thread_id, rewritten)
        logger.info("swap committed", thread=thread_id, old=old_backing, new=rewritten.new_id,
                    tokens_before=rewritten.tokens_before, tokens_after=rewritten.tokens_after,
                    seconds=round(time.monotonic() - t0, 3), why=reason, **timing)
        return True

    def _above_target(self, state: ThreadState, tokens_after: int) -> None:
        """Said once a thread: swap.target_tokens is below what this thread's floor takes (the
        CLI's own prompt, the least preamble, the last turn whole), which no rewrite can go under."""
        target = self.settings.target_tokens
        if target is None or tokens_after <= target or state.said_above_target:
            return
        state.said_above_target = True
        logger.warning("swap.target_tokens is below this thread's floor: the rewrite left more (the "
                       "CLI's own prompt, the preamble and the last turn, kept whole); raise "
                       "swap.target_tokens (and swap.high_tokens) above it to swap where you meant",
                       thread=state.thread_id, target=target, left=tokens_after,
                       prompt=state.pace.overhead)

    def _notice(self, port: Port, thread_id: str, rewritten: Rewritten) -> None:
        if self.settings.notice == "silent":
            return
        text = (f"Context optimised by liminal: {units.tokens(rewritten.tokens_before)} -> "
                f"{units.tokens(rewritten.tokens_after)} tokens.")
        meta = {"liminal": {"swap": {"tokensBefore": rewritten.tokens_before,
                                     "tokensAfter": rewritten.tokens_after}}}
        if self.model.client_compaction:
            # A client that shows compactions gets the swap as one, in the protocol's own
            # updates (as the newer Claude adapter reports the CLI's compactions): started, then
            # completed with what it did as its summary.
            compaction = f"liminal-{rewritten.new_id}"
            steps: list[dict[str, Any]] = [
                {"sessionUpdate": "compaction_update", "compactionId": compaction,
                 "status": "in_progress"},
                {"sessionUpdate": "compaction_update", "compactionId": compaction,
                 "status": "completed", "summary": [{"type": "text", "text": text}], "_meta": meta}]
            for step in steps:
                port.notify_in_next_turn(thread_id, "session/update",
                                                 {"sessionId": thread_id, "update": step})
            return
        if self.settings.notice == "thought":
            update: dict[str, Any] = {"sessionUpdate": "agent_thought_chunk",
                                      "content": {"type": "text", "text": text}, "_meta": meta}
        else:
            update = {"sessionUpdate": "session_info_update", "_meta": meta}
        # Inside the thread's next turn (its held prompt, or the next one the client sends),
        # never as a stray update after the last answer (``Router.notify_in_next_turn``).
        port.notify_in_next_turn(thread_id, "session/update",
                                         {"sessionId": thread_id, "update": update})

    def _priced(self, state: ThreadState, decision: Decision, after: int) -> dict[str, Any]:
        """What a swap as made costs and saves (the decision had only the plan's aim), and the
        model calls since the thread's move before it (None: not counted here), which the payback
        of that move is measured against (``policy.measure_payback``)."""
        done = self.policy.cost(decision.context, after, decision.trigger, state.pace, idle=decision.idle)
        return {"target": after, "rebuild": round(done[0], 1), "saves_per_call": round(done[1], 1),
                "payback_calls": round(done[2], 1), "calls_to_next": round(done[3], 1),
                "calls_since_move": state.calls_since_move}
