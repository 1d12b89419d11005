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

What to do, and when, is the swap machine's (``liminal.kernel.swapping``), which does no I/O:
this module is its driver. It tells the machine what the thread model and the router saw (a turn
end, a load, an idle spell) and carries out what the machine answers (queue, hold, look for the
cache's life); the swap task runs each queued look as a ``SwapRun``, carrying out its commands
(locate, settle, read, gather, rewrite, announce) and feeding back what came of each. Steps 3 to
5 are the thread mover's (``liminal.kernel.mover``), which the context commands use too. Any
failure, or the whole swap overrunning
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
import functools
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from liminal import faults, log
from liminal.acp.port import Component, Port
from liminal.config import GradientSettings, SwapSettings
from liminal.harness.base import MoveHarness, Rewritten, SwapHarness, choice_behind
from liminal.kernel.aids import Preamble
from liminal.kernel.attempt import MoveRecords
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.mover import UNDO_CLOSE_SECONDS, MoveAttempt, ThreadMover
from liminal.kernel.policy import CostPolicy, Decision
from liminal.kernel.swapping.machine import CACHE_LOOKS, SwapMachine
from liminal.kernel.swapping.notice import swap_notice
from liminal.kernel.swapping.run import UNHELD_SETTLE_SECONDS, SwapRun
from liminal.kernel.swapping.steps import (
    Announce,
    AwaitFile,
    CacheLifeRead,
    Command,
    Cue,
    Done,
    Event,
    Finish,
    Gather,
    Gathered,
    Hold,
    Journal,
    Locate,
    Located,
    Look,
    LookForCacheLife,
    MoveEnded,
    Queue,
    ReadCacheLife,
    ReadSize,
    Rewrite,
    Settle,
    Settled,
    SizeRead,
)
from liminal.kernel.threads import USAGE, ThreadModel, ThreadState
from liminal.kernel.unfinished import committed_in_store, recover
from liminal.kernel.zone import Offer

if TYPE_CHECKING:
    from liminal.kernel.storejournal import StoreJournal
    from liminal.store.leases import MoveLeases

logger = log.get("liminal.swap")
__all__ = ["CACHE_LOOKS", "UNHELD_SETTLE_SECONDS", "SwapManager"]


class SwapManager(Component):
    def __init__(
        self,
        settings: SwapSettings,
        journal: SwapJournal,
        harness: SwapHarness,
        *,
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
        # What decides: told what happened, it says what to do (``liminal.kernel.swapping``).
        self.machine = SwapMachine(settings, self.policy)
        self.journal = journal
        self.harness = harness
        self.clock: Callable[[], float] = time.time  # the journal's wall clock
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
        self._send, self._receive = anyio.create_memory_object_stream[Look](64)
        self._look_send, self._look_receive = anyio.create_memory_object_stream[str](64)
        self.completed = 0  # swap attempts finished, committed or not (tests wait on it)
        self._progress = anyio.Event()
        # The step every move of a thread shares (liminal.kernel.mover), the commands' too.
        records = MoveRecords(journal, lambda: self.harness.name,
                              priced=functools.partial(_priced, self.policy), shared=shared)
        self.mover = ThreadMover(settings, harness, self.threads, records, clock=lambda: self.clock(),
                                 capabilities=lambda: self.capabilities, moves=self.model.moves,
                                 leases=leases)

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
        await self.mover.stop_moves(UNDO_CLOSE_SECONDS + 1.0, _abandoned_because(cause, self.stop_grace))

    def busy(self) -> bool:
        """A swap or a command's move is under way, or a turn end waits to be looked at: the
        agent must not be stopped yet (``liminal serve`` finishing a detached connection)."""
        return (self.model.moves.taken() or any(s.swap.swapping for s in self.threads.values())
                or self._receive.statistics().current_buffer_used > 0)

    def _agent_said(self, agent_info: Any) -> None:
        """The agent named itself: its harness may be another than the command suggested (a
        harness given as one, as tests do, is that one whatever the agent says)."""
        choice = choice_behind(self.harness)
        if choice is None:
            return
        choice.agent_said(agent_info)
        self.policy.follow(self.harness)
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

    def _busy(self, thread_id: str) -> bool:
        """A prompt of the thread, or a request of the agent's in it, is in flight."""
        port = self._port
        return port is not None and (port.prompt_in_flight(thread_id) or port.agent_request_open(thread_id))

    def _turn_ended(self, thread_id: str, ok: bool) -> None:
        """The thread model saw a turn end (``ThreadModel.on_turn_end``)."""
        if not ok:
            return
        state = self.threads.get(thread_id)
        if state is None or self._port is None or not self._running:
            logger.debug("turn ended; not considered", thread=thread_id)
            return
        self._carry_out_cues(state, self.machine.turn_ended(
            state.swap, thread_id, context_tokens=state.context_tokens, prompt=state.last_prompt,
            new=state.new, busy=self._busy(thread_id)))

    def _opened(self, thread_id: str, method: str, key: Any, by_liminal: bool) -> None:
        """The client opened a thread (``ThreadModel.on_opened``): one loaded over its trigger
        swaps before its first prompt. A client that starts liminal for every prompt never
        reaches a turn end with a live liminal after it (the swap decided there is cut short),
        so its thread would grow past the trigger for good. No agent is sure to say the size at
        the load: the thread is held in this flush (the client's first prompt cannot have been
        read yet), and the session file decides, as at a turn end without usage. A prompt
        already sent with the load is not held up."""
        if method not in ("session/load", "session/resume") or by_liminal:
            return
        state, port = self.threads.get(thread_id), self._port
        if state is None or port is None or not self._running:
            return
        self._carry_out_cues(state, self.machine.opened(
            state.swap, thread_id, stopping=self._stopping,
            busy=self._busy(thread_id) or port.is_held(thread_id)))

    def _carry_out_cues(self, state: ThreadState, cues: list[Cue]) -> None:
        """The machine's answer to a cue, carried out in the flush that delivered it."""
        assert self._port is not None
        for cue in cues:
            if isinstance(cue, Queue):
                try:
                    # The prompt of the turn that just ended, taken now: by the time the task
                    # runs, an unheld client may already have sent the next one.
                    self._send.send_nowait(cue.look)
                except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
                self._carry_out_cues(state, self.machine.queued(state.swap, cue.look))
            elif isinstance(cue, Hold):
                # Inside the flush that delivered the turn's end (or, idle, with no prompt in
                # flight): the client's next prompt cannot have been read yet, so it is certain to wait.
                self._port.hold(cue.thread_id)
            elif isinstance(cue, LookForCacheLife):
                with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    self._look_send.send_nowait(cue.thread_id)

    async def _cache_looks(self) -> None:
        """The cache's life looked for beside the turns (``LookForCacheLife``), never holding one."""
        async for thread_id in self._look_receive:
            state, port = self.threads.get(thread_id), self._port
            if state is None or port is None:
                continue
            if state.swap.swapping:
                # A swap of it is under way, and reads the records itself: learning here, between
                # its band and what it measures, would mix the two lives. Asked again later.
                continue
            try:
                path = self.harness.locate(port.backing_of(thread_id), state.cwd)
            except Exception as exc:  # a look is for the price: never the swaps' undoing
                logger.warning("the thread's cache life could not be looked for", thread=thread_id,
                               error=f"{type(exc).__name__}: {exc}")
                continue
            if path is not None and self.machine.may_read_cache_life(state.swap, decided=False):
                self.machine.cache_life_read(state.swap, thread_id, await _cache_life(self.harness, thread_id, path))

    def _idle_check(self, now: float) -> None:
        """Threads idle past the cache's life (``SwapMachine.idle``)."""
        port = self._port
        if port is None or not self.machine.idle_swaps or self._stopping:
            return
        for state in list(self.threads.values()):
            thread_id = state.thread_id
            busy = self._busy(thread_id) or port.is_held(thread_id) or not port.agent_alive
            self._carry_out_cues(state, self.machine.idle(
                state.swap, thread_id, now=now, idle_since=state.idle_since,
                context_tokens=state.context_tokens, prompt=state.last_prompt, busy=busy))

    async def _idle_watch(self) -> None:
        life = self.settings.cache_life_seconds
        if life <= 0:
            return
        while True:
            await anyio.sleep(faults.idle_look_seconds(min(life / 4, 15.0)))
            self._idle_check(faults.monotonic())

    # ----------------------------------------------------------------- running

    async def prepare(self, port: Port) -> None:
        """Before the client's first byte is read (``Proxy.run``): clean up after a crash and
        bind every swapped thread to its current session, so that no load or prompt can pass
        to a stale one."""
        self._port = port
        self.mover.attach(port)
        in_store = await committed_in_store(self.journal, self.mover.shared)
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
        async for look in self._receive:
            thread_id = look.thread_id
            state = self.threads[thread_id]
            committed: bool | None = None
            try:
                # Held since it was queued (if it was), released on the way out, the session it
                # left closed if the swap committed: the mover's one sequence for every move.
                async with self.mover.holding(state, claim=False) as hold:
                    try:
                        async with self.model.moves.moving(thread_id):
                            # The session this swap would leave, taken under the thread's move
                            # lock: another move of it (the recycle's, which takes every
                            # thread's) may have ended while this one waited.
                            hold.left = port.backing_of(thread_id)
                            committed = await self._swap(port, state, look)
                            hold.committed = bool(committed)
                        self.machine.finished(state.swap, committed)
                        # A quiet moment, the thread's next prompt (if any) still waiting: the
                        # recycle (``liminal.kernel.recycle``) moves sessions to a fresh agent
                        # process there; not while liminal stops.
                        if not self._stopping:
                            await self.model.quiet(thread_id)
                    except Exception:
                        # Fails the run (the supervisor starts it again).
                        self.machine.broke(state.swap)
                        raise
                    finally:
                        self.machine.left(state.swap)
            finally:
                if committed is not None:
                    self.completed += 1
                self._progress.set()
                self._progress = anyio.Event()

    async def _swap(self, port: Port, state: ThreadState, look: Look) -> bool | None:
        """One look as a ``SwapRun``: its commands carried out, until it finishes. True:
        committed; False: tried and failed; None: no swap was needed after all."""
        run = SwapRun(self.machine, state.swap, look, context_tokens=state.context_tokens, new=state.new)
        attempt = self.mover.attempt(state, port.backing_of(state.thread_id), "", tokens=run.tokens)
        marks: dict[type, float] = {}  # when each kind of command was first asked (the timing)
        command: Command = run.start()
        while not isinstance(command, Finish):
            marks.setdefault(type(command), time.monotonic())
            command = run.send(await self._carry_out(command, run, attempt))
        if command.outcome and attempt.rewritten is not None:
            _committed_log(attempt, marks)
        return command.outcome

    async def _carry_out(self, command: Command, run: SwapRun, attempt: MoveAttempt) -> Event:
        """What ``command`` came to, as the event the run waits for."""
        state, thread_id = attempt.state, attempt.state.thread_id
        if isinstance(command, Locate):
            return Located(self.harness.locate(attempt.old_backing, state.cwd))
        if isinstance(command, AwaitFile):
            return Located(await self.mover.appeared(attempt.old_backing, state.cwd, command.timeout))
        if isinstance(command, Settle):
            ok = await self.mover.settle(command.path, command.prompt, command.timeout)
            return Settled(ok, stopping=not ok and self.mover.stopping)
        if isinstance(command, ReadCacheLife):
            life = await _cache_life(self.harness, thread_id, command.path)
            return CacheLifeRead(life, faults.monotonic())  # the idle spell's clock
        if isinstance(command, ReadSize):
            return SizeRead(await _read_size(self.harness, self._port, thread_id, command.path))
        if isinstance(command, Journal):
            attempt.tokens_before = command.tokens
            self.mover.records.ended(attempt, command.outcome, command.reason)
            return Done()
        if isinstance(command, Gather):
            return await self._gather(command, attempt)
        if isinstance(command, Rewrite):
            return await self._rewrite(command, run, attempt)
        if isinstance(command, Announce):
            assert self._port is not None
            for update in swap_notice(self.settings.notice, self.model.client_compaction,
                                      command.new_id, command.before, command.after,
                                      notices=self.model.client_notices):
                # Inside the thread's next turn (its held prompt, or the next one the client
                # sends), never as a stray update after the last answer.
                self._port.notify_in_next_turn(thread_id, "session/update",
                                               {"sessionId": thread_id, "update": update})
            return Done()
        raise AssertionError(f"a command no one carries out: {command!r}")

    async def _gather(self, command: Gather, attempt: MoveAttempt) -> Gathered:
        thread_id, cwd = attempt.state.thread_id, attempt.state.cwd
        asked = self.summary_asked(thread_id, attempt.old_backing)
        offer = (await self.zone.offer(thread_id, cwd, attempt.old_backing)
                 if self.zone is not None and command.zone else Offer())
        # The model's summaries ready now (``liminal.kernel.summaries``), never waited for.
        return Gathered(asked, memos=offer.candidates, kept_out=tuple(v.as_dict() for v in offer.dropped),
                        summarizer=self.summarizer_for(thread_id),
                        scratchpad=await self.memory.scratchpad(thread_id))

    async def _rewrite(self, command: Rewrite, run: SwapRun, attempt: MoveAttempt) -> MoveEnded:
        """The mover writes, opens, journals and commits (or leaves nothing)."""
        summarizer, path = command.summarizer, command.path

        def rewrite(new_id: str) -> Rewritten:
            if summarizer is None:
                return self.harness.rewrite(path, command.aim, new_id, memos=command.memos,
                                            recent_tokens=command.band, scratchpad=command.scratchpad)
            return self.harness.rewrite(path, command.aim, new_id, memos=command.memos, summarizer=summarizer,
                                        recent_tokens=command.band, scratchpad=command.scratchpad)

        attempt.reason, attempt.decision, attempt.tokens_before = command.reason, command.decision, command.tokens
        moved = await self.mover.relocate(attempt, path, rewrite,
                                          check=lambda rewritten: run.rewritten(rewritten.tokens_after),
                                          kept_out=command.kept_out)
        done = moved.rewritten if moved.committed else None
        return MoveEnded(moved.committed, moved.new_backing, done.tokens_before if done else None,
                         done.tokens_after if done else None)

    def _recover(self, in_store: Collection[str] | None = frozenset()) -> list[SwapRecord]:
        """What swaps cut short by a crash left, removed (``liminal.kernel.unfinished.recover``)."""
        return recover(self.journal, self._harness_named, in_store)

    def _harness_named(self, name: str) -> MoveHarness:
        """The harness whose swap a journal record describes: a Codex swap's rewrite is a Codex
        rollout even when this liminal wraps Claude Code."""
        choice = choice_behind(self.harness)
        return (choice.named(name) if choice is not None else None) or self.harness

    async def wait_for_swaps(self, count: int) -> None:
        """For tests: until ``count`` swaps have finished (committed or not)."""
        while self.completed < count:
            await self._progress.wait()



def _abandoned_because(cause: str, grace: float) -> str:
    """A swap liminal's stop cut short, as journaled: why liminal stopped, and that the
    grace ran out."""
    over = (f"the swap did not finish within proxy.stop_grace_seconds ({grace:g} s)"
            if grace > 0 else "proxy.stop_grace_seconds is 0")
    return (f"{cause} during the swap, and {over}: the rewrite was removed, and the thread's "
            "next load decides again")


async def _cache_life(harness: SwapHarness, thread_id: str, path: Path) -> float | None:
    """How long the thread's prompt cache lives, from the CLI's records of its model calls
    (None: they say nothing, or could not be read)."""
    try:
        return await anyio.to_thread.run_sync(harness.cache_life, path)
    except Exception as exc:  # a file gone, refused or unreadable says nothing of the cache
        logger.debug("the session file said nothing of the cache's life", thread=thread_id,
                     error=f"{type(exc).__name__}: {exc}")
        return None



async def _read_size(harness: SwapHarness, port: Port | None, thread_id: str, path: Path) -> int | None:
    """The context the session file says. A CLI that tells none over ACP (its harness's
    ``reports_usage`` False: Gemini CLI) has it noted for the store as the thread's usage point
    (``liminal/usage``: never sent), which the dashboard charts as it charts an agent's."""
    tokens = await anyio.to_thread.run_sync(harness.context_tokens, path)
    # (A harness a test gives may not say: it is taken to send usage_update, as the CLIs' do.)
    if tokens is not None and not getattr(harness, "reports_usage", True) and port is not None:
        port.note(USAGE, {"used": tokens}, thread_id=thread_id)
    return tokens

def _committed_log(attempt: MoveAttempt, marks: dict[type, float]) -> None:
    """Where the hold went (bench/swap.py reads these): waiting for the file, reading the
    context size when the agent sent none, the gradient rewrite, the resume or load."""
    rewritten, t0 = attempt.rewritten, attempt.t0
    assert rewritten is not None
    t_settled = marks.get(ReadCacheLife, marks.get(ReadSize, marks.get(Gather, t0)))
    t_rewrite = marks.get(Rewrite, t_settled)
    logger.info("swap committed", thread=attempt.state.thread_id, old=attempt.old_backing,
                new=rewritten.new_id, tokens_before=rewritten.tokens_before,
                tokens_after=rewritten.tokens_after, seconds=round(time.monotonic() - t0, 3),
                why=attempt.reason, settle_s=round(t_settled - t0, 4),
                decide_s=round(t_rewrite - t_settled, 4),
                rewrite_s=round(attempt.t_rewritten - t_rewrite, 4),
                move_s=round(attempt.t_moved - attempt.t_rewritten, 4), moved_by=attempt.opened_by)


def _priced(policy: CostPolicy, state: ThreadState, decision: Decision, after: int) -> dict[str, Any]:
    """What a swap as made costs and saves (the decision had only the plan's aim), and the
    model calls since the thread's move before it (None: not counted here), which the payback
    of that move is measured against (``policy.measure_payback``)."""
    done = policy.cost(decision.context, after, decision.trigger, state.pace, idle=decision.idle)
    return {"target": after, "rebuild": round(done[0], 1), "saves_per_call": round(done[1], 1),
            "payback_calls": round(done[2], 1), "calls_to_next": round(done[3], 1),
            "calls_since_move": state.calls_since_move}
