"""Summaries of a thread's oldest turns by the agent's own model, made ahead of the swap.

The extractive preamble keeps what the person asked and what was touched; what the model found,
decided, tried and rejected is lost from its context at a swap. So liminal asks the agent it
already runs (no key of liminal's, the model the person pays for): when a turn ends, the context
has passed ``swap.summary_at`` of the trigger and the swap is a turn or two away at the thread's
pace (``CostPolicy.summary_due``), once per swap cycle, the turns a swap would consolidate now
(``SessionFiles.ancient``) that no summary covers yet are sent, as text, in
the one prompt of a **side session**: a ``session/new`` of liminal's own, in a folder of its own
under ``$LIMINAL_HOME/side`` (never the person's project), with no MCP server. The router keeps
every frame of it from the client and the store and refuses every request the agent makes in it
(its rule 11: no tool runs; the prompt says to use none too). Its answer (a ``## STATE`` and a
``## SUMMARY`` section) is kept; the session is closed and its files removed through the harness.
An agent that cannot close a session (the older Claude adapter: each session a CLI process of a
few hundred MB, alive until the adapter exits) would keep every side session beside the ones the
swaps leave, past the recycle's bound: there the side session runs in a process of the agent
command of its own (``AgentLife.start_agent``, told the client's ``initialize``), stopped with its
CLI process once the answer is in (measured in ``bench/side_processes.py``).

Each summary is stored once (a ``summary`` message of the ``liminal-summaries`` pseudo-thread,
with the range's turn keys and a hash of what was sent) and kept in memory for the thread; the
swap's rewrite is given a ``WithSummaries`` summarizer built from them, synchronously: a swap
never waits for a summary, and one not ready leaves the extractive preamble. A range is
summarised once: the next one starts after the turns the thread's summaries cover.

The same request asks for the range's **lessons** (``memory.lessons``: decisions, facts the
person asked to keep, conventions, open work, each citing its turn), stored consolidated across
threads (``liminal.lookup.lessons``), and for the model's **review** of what the coming swap's
dynamic zone would place from memory (``memory.review``): the candidates the first stage
(``liminal.gradient.zone.select`` over ``ZoneSource.pool``, with the turns the swap would keep
as the query) chooses now, a turn or two before the swap; each kept or dropped with a reason,
handed to the zone's source for that swap (``ZoneSource.reviewed``). One side session, one
prompt: no request of its own.

Off the prompt path: one summary at a time, in this component's task; the swap manager's holds
and moves never wait for it (it takes no move lock: it only reads the session file).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread

from liminal import log
from liminal.acp.port import Component, OwnRequestError
from liminal.config import SwapSettings
from liminal.errors import in_words
from liminal.gradient.summarize import (
    PREAMBLE_INTRO,
    ModelSummary,
    WithSummaries,
    anchor_request,
    fold_chars,
    fold_request,
    live,
    parse_answer,
    parse_lessons,
    parse_review,
    plan_fold,
    rendered,
    section,
    summary_request,
    text_hash,
    turn_key,
)
from liminal.gradient.zone import MAX_ENTRIES, Candidate, select
from liminal.harness.base import SessionFiles, SideSessions
from liminal.kernel import sidesession
from liminal.kernel.policy import CostPolicy
from liminal.kernel.sidesession import SideAsker, SidePort
from liminal.kernel.threads import ThreadModel
from liminal.kernel.zone import Verdict, ZoneSource
from liminal.store.records import SUMMARY_THREAD, Batch, MessageRecord

if TYPE_CHECKING:
    from liminal.gradient.summarize import TurnDigest
    from liminal.store.base import Store

logger = log.get("liminal.summaries")
SIDE_FOLDER = "side"  # under $LIMINAL_HOME: the side sessions' working folders
REBUILD_SECONDS = 180.0  # /context rebuild waits this long at most, a summary under way included
SETTLE_SECONDS = 2.0  # the turn that asked for a summary, waited for on disk at most this long
StoreOpener = Callable[[], AbstractAsyncContextManager["Store"]]
Settle = Callable[[Path, "str | None", float], Awaitable[bool]]


class SideHarness(SessionFiles, SideSessions, Protocol):
    """What the summaries read of a session file (the turns to summarise), and what a side
    session needs of the CLI."""


class AnchorNotWritten(Exception):
    """Why ``/context rebuild`` wrote no state anchor: one line, the anchor as it was."""


def side_root(home: Path) -> Path:
    """Where side sessions work: a session listed with a cwd under it is liminal's, no thread."""
    return home / SIDE_FOLDER


class SideSummaries(Component):
    def __init__(self, settings: SwapSettings, harness: SideHarness, model: ThreadModel,
                 policy: CostPolicy, home: Path, open_store: StoreOpener | None, *,
                 settle: Settle | None = None, zone: ZoneSource | None = None) -> None:
        self.settings = settings
        self.harness = harness
        self.model = model
        self.policy = policy
        self.home = home
        self._open_store = open_store
        self._store_cm: AbstractAsyncContextManager[Store] | None = None
        self._store: Store | None = None
        self._port: SidePort | None = None
        self._summaries: dict[str, list[ModelSummary]] = {}  # thread -> its summaries, oldest first
        self._loaded: set[str] = set()  # threads whose stored summaries have been read
        self._queued: set[str] = set()
        # thread -> the prompt of the turn whose end queued its summary, to find it on disk.
        self._prompts: dict[str, str | None] = {}
        # Until the CLI has written the finished turn (``ThreadMover.settle``): Claude Code
        # writes it after answering, so read at once the file lacks the newest turn, and
        # the turns a swap would consolidate, one fewer, may be none.
        self.settle = settle
        # thread -> the backing session its last summary was asked on: one side session per
        # swap cycle (each costs the CLI's own prompt again: bench/cost.py, docs/gradient.md).
        self._asked_on: dict[str, str] = {}
        self._send, self._receive = anyio.create_memory_object_stream[str](64)
        self.made = 0  # summaries made (tests wait on it)
        self.folds = 0  # folds made
        self._folds_tried: set[tuple[str, ...]] = set()  # parts a fold was asked for (once each)
        self._one_at_a_time = anyio.Lock()  # a summary, a fold, /context rebuild: one side session
        self.attempts = 0  # side sessions run, whatever came of them
        self._progress = anyio.Event()
        self._current: anyio.CancelScope | None = None  # the summary under way
        self._stopping = False
        self.side = SideAsker(settings, harness, model, side_root(home))  # one prompt in a side session
        # Lessons and the review of the zone's candidates ride each summary's request: the
        # policy prices what rides it, so the settings are the policy's.
        self.memory = policy.memory
        self.zone = zone  # what the zone is offered (None: nothing to review)
        self.lessons_kept = 0  # lessons stored (tests wait on it)
        self.reviews = 0  # reviews made
        model.on_turn_end.append(self._turn_ended)
        model.on_quiet.append(self._quiet)

    # ------------------------------------------------------------ what the swap reads

    def summarizer(self, thread_id: str) -> WithSummaries | None:
        """The preamble's summarizer for the thread's swap now: None (the extractive one) when
        it has no summary. Never waits: what is not ready is not used."""
        found = tuple(self._summaries.get(thread_id, ()))
        if not found:
            return None
        anchor = next((s.anchor for s in reversed(found) if s.anchor), None)
        return WithSummaries(found, anchor)

    def asked_on(self, thread_id: str, backing: str) -> bool:
        """A side session was opened for the thread's cycle on ``backing``: its summary is paid
        for, whether or not it is ready for the swap that ends the cycle."""
        return self._asked_on.get(thread_id) == backing

    def anchor(self, thread_id: str) -> str | None:
        """The thread's state anchor, as of its newest summary (``/context`` shows it)."""
        return next((s.anchor for s in reversed(self._summaries.get(thread_id, ())) if s.anchor), None)

    def summaries(self, thread_id: str) -> list[ModelSummary]:
        return list(self._summaries.get(thread_id, ()))

    async def wait_for(self, attempts: int) -> None:
        """Until ``attempts`` side sessions have run (tests)."""
        while self.attempts < attempts:
            await self._progress.wait()

    # ------------------------------------------------------------ when

    def parts(self) -> list[ThreadModel]:
        return [self.model]

    async def prepare(self, port: SidePort) -> None:
        self._port = port

    def _turn_ended(self, thread_id: str, ok: bool) -> None:
        """A swap is coming (the context past ``summary_at`` of the trigger) and none is under
        way for the thread: queue it. Never blocks the flush that told of the turn end."""
        self._consider(thread_id, ok, swap_task_done=False)

    async def _quiet(self, thread_id: str) -> None:
        """The swap task is done with a turn end it took: an agent that sends no usage (the
        older Claude adapter) has its context read from the file only there, and every turn end
        near the trigger is taken, so this is the moment for it."""
        self._consider(thread_id, True, swap_task_done=True)

    def _consider(self, thread_id: str, ok: bool, *, swap_task_done: bool) -> None:
        state = self.model.threads.get(thread_id)
        if (not ok or state is None or self._port is None or not self.settings.summaries
                or not self.settings.enabled or not self.policy.side_sessions or thread_id in self._queued):
            return
        context = state.context_tokens if state.context_tokens is not None else state.file_tokens
        if context is None or (state.swapping and not swap_task_done):
            return  # nothing known yet; or the swap task looks at it now (``_quiet`` follows)
        backing = self._port.backing_of(thread_id)
        if self._asked_on.get(thread_id) == backing or not self.policy.summary_due(context, state.pace):
            return  # one summary per cycle, when the swap is near
        try:
            self._send.send_nowait(thread_id)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        self._queued.add(thread_id)
        self._prompts[thread_id] = state.last_prompt

    async def run(self, port: SidePort) -> None:
        self._port = port
        async for thread_id in self._receive:
            if self._stopping:
                break
            try:
                with anyio.CancelScope() as self._current:
                    async with self._one_at_a_time:
                        await self._summarise(port, thread_id)
            except Exception as exc:  # a summary is an extra: the extractive preamble stands
                logger.warning("no summary made", thread=thread_id, error=f"{type(exc).__name__}: {exc}")
            finally:
                self._current = None
                self._queued.discard(thread_id)
                self.attempts += 1
                self._progress.set()
                self._progress = anyio.Event()

    async def stopping(self) -> None:
        """liminal stops (before the agent does): a summary under way is given up now, its
        side session closed and its files removed while the agent can still answer; left to the
        end, the CLI's file of it would stay in its folder, a session in its picker."""
        self._stopping = True
        if self._current is not None:
            self._current.cancel()
            with anyio.move_on_after(sidesession.CLOSE_SECONDS + 1):
                while self._current is not None:
                    await self._progress.wait()

    async def aclose(self) -> None:
        await self.side.forget_opened()
        if self._store_cm is not None:
            await self._store_cm.__aexit__(None, None, None)
            self._store_cm = self._store = None

    # ------------------------------------------------------------ how

    async def _summarise(self, port: SidePort, thread_id: str) -> None:
        await self._load(thread_id)
        state = self.model.threads.get(thread_id)
        if state is None:
            return
        path = self.harness.locate(port.backing_of(thread_id), state.cwd)
        if path is None:
            return
        prompt = self._prompts.pop(thread_id, None)
        if self.settle is not None and state.context_tokens is None:
            # Only an agent that sends no usage writes the turn after answering; past the wait
            # the file is read as it is.
            await self.settle(path, prompt, SETTLE_SECONDS)
        band = self.policy.recent(state.pace)  # what the swap will keep whole, by the cache's life
        turns = await anyio.to_thread.run_sync(self.harness.ancient, path, self.policy.aim, band)
        covered = {k for s in self._summaries.get(thread_id, ()) for k in s.keys}
        todo = [t for t in turns if turn_key(t) not in covered]
        if not todo:
            logger.debug("nothing new to summarise", thread=thread_id, ancient=len(turns))
            # (Summaries read from the store may be past the fold mark: an earlier liminal's.)
            fold = await self._fold(port, thread_id, self._summaries.get(thread_id, []))
            self._summaries.setdefault(thread_id, []).extend([fold] if fold else [])
            return
        backing = port.backing_of(thread_id)
        review = await self._to_review(thread_id, state.cwd, path, turns)
        request = summary_request(todo, lessons=self.memory.lessons,
                                  review=[(c.key, c.shown or c.text) for c in review])
        self._asked_on[thread_id] = backing  # this cycle's side session
        started = time.monotonic()
        answer = await self.side.ask(port, request)
        await self._learned(thread_id, todo, answer)
        self._reviewed(thread_id, backing, review, answer)
        text, anchor = parse_answer(answer)
        if not text:
            logger.info("the side session gave no summary", thread=thread_id)
            return
        summary = ModelSummary(tuple(turn_key(t) for t in todo), text, anchor)
        self.made += 1
        logger.info("summary made", thread=thread_id, turns=len(todo), chars=len(text),
                    seconds=round(time.monotonic() - started, 2))
        await self._keep(thread_id, summary, request)
        # A summary that takes the thread's past the fold mark is given to the swaps with the
        # fold it calls for: before it, a swap might leave the oldest out to make room.
        mine = self._summaries.setdefault(thread_id, [])
        try:
            fold = await self._fold(port, thread_id, [*mine, summary])
        except Exception as exc:  # the summary stands; the oldest give way until a fold is made
            logger.warning("no fold made", thread=thread_id, error=f"{type(exc).__name__}: {exc}")
            fold = None
        mine.extend([summary, fold] if fold else [summary])

    async def _to_review(self, thread_id: str, cwd: str | None, path: Path,
                         ancient: list[TurnDigest]) -> list[Candidate]:
        """What the first stage would place from memory at the coming swap, as it stands now:
        the zone's candidates (``ZoneSource.pool``) matched against the turns a swap would keep
        whole now (the session's turns less ``ancient``; the last that says anything, at least).
        None when the
        review is off, the zone is, or the store does not answer: the first stage's choice then
        stands."""
        zone, budget = self.zone, self.policy.gradient.zone_tokens
        if zone is None or not self.memory.review or budget <= 0:
            return []
        try:
            offer = await zone.offer(thread_id, cwd, None)
            if not offer.candidates:
                return []
            gone = {turn_key(t) for t in ancient}
            # What was said: a turn the CLI has only begun writing (the next prompt, sent while
            # this side session reads the file) has no words yet.
            said = [t for t in await anyio.to_thread.run_sync(self.harness.digests, path)
                    if t.prompt.strip() or t.replies]
            kept = [t for t in said if turn_key(t) not in gone] or said[-1:]  # the last, at least
            recent = "\n".join(" ".join((t.prompt, *t.replies)) for t in kept)
            chosen = {p.key for p in select(offer.candidates, recent, budget, MAX_ENTRIES)}
        except Exception as exc:  # no review: the first stage's choice stands
            logger.warning("the zone's candidates not read for the review", thread=thread_id,
                           error=f"{type(exc).__name__}: {exc}")
            return []
        return [c for c in offer.candidates if c.key in chosen]

    def _reviewed(self, thread_id: str, backing: str, review: list[Candidate], answer: str) -> None:
        """The model's keep or drop of each candidate, for the swap that ends this cycle."""
        if self.zone is None or not review:
            return
        said = parse_review(answer, [c.key for c in review])
        verdicts = [Verdict(c.key, c.kind, c.shown or c.text, *said[c.key]) for c in review if c.key in said]
        if not verdicts:
            logger.info("the side session reviewed nothing: the first stage's choice stands",
                        thread=thread_id, candidates=len(review))
            return
        self.zone.reviewed(thread_id, backing, verdicts)
        self.reviews += 1
        for verdict in verdicts:
            logger.info("the model reviewed a candidate of the dynamic zone", thread=thread_id,
                        key=verdict.key, keep=verdict.keep, reason=verdict.reason)

    async def _learned(self, thread_id: str, turns: list[TurnDigest], answer: str) -> None:
        """The range's lessons (its ``## LESSONS``) stored, each with the turn it cites and the
        person's message there, consolidated with the lessons of every thread."""
        drawn = parse_lessons(answer, turns) if self.memory.lessons else []
        if not drawn:
            return
        from liminal.lookup.lessons import Learned, keep

        try:
            store = await self.store()
            if store is None:
                return
            by_number = {t.number: t for t in turns}
            prompts = [m for m in await store.messages(thread_id, kind="user") if not m.replayed]
            learned = []
            for lesson in drawn:
                turn = by_number.get(lesson.turn) if lesson.turn is not None else None
                said = " ".join(turn.prompt.split()) if turn is not None else ""
                message = next((m.id for m in prompts if said and " ".join(m.text.split())[:200] == said[:200]), None)
                learned.append(Learned(lesson.text, lesson.sort, turn_key(turn) if turn else None, message, said))
            keys = await keep(store, thread_id, learned)
        except Exception as exc:  # the summary stands without them
            logger.warning("lessons not stored", thread=thread_id, error=f"{type(exc).__name__}: {exc}")
            return
        self.lessons_kept += len(keys)
        logger.info("lessons kept", thread=thread_id, keys=keys)

    def _budget_chars(self) -> int:
        """The preamble's budget at the floor, in characters (as the rewrites count it)."""
        return max(400, self.policy.gradient.summary_tokens * 4 - len(PREAMBLE_INTRO))

    async def _fold(self, port: SidePort, thread_id: str, summaries: list[ModelSummary]) -> ModelSummary | None:
        """Past ``FOLD_AT`` of their room in the preamble, the oldest of ``summaries`` (the
        thread's) are folded into one coarser summary (``plan_fold``), stored, and returned
        for later preambles to hold in their place: the preamble reaches back over the whole
        thread within its budget. None when no fold is needed, or the model's is no shorter
        than its parts (then the oldest give way, as they did before folds)."""
        budget = self._budget_chars()
        parts = plan_fold(summaries, budget)
        hashes = tuple(text_hash(p.text) for p in parts)
        if not parts or hashes in self._folds_tried:
            return None
        self._folds_tried.add(hashes)
        request = fold_request(parts, fold_chars(budget))
        answer = await self.side.ask(port, request)
        text = section(answer, "SUMMARY") or answer.strip()
        if not text or len(rendered(text)) >= sum(len(rendered(p.text)) for p in parts):
            logger.info("the side session's fold is no shorter than its parts; not used",
                        thread=thread_id, parts=len(parts), chars=len(text))
            return None
        fold = ModelSummary(tuple(k for p in parts for k in p.keys), text, None, hashes)
        self.folds += 1
        logger.info("summaries folded", thread=thread_id, parts=len(parts), chars=len(text))
        await self._keep(thread_id, fold, request)
        return fold

    async def rebuild(self, thread_id: str) -> str:
        """``/context rebuild``: the state anchor written again now, from the thread's context
        as it is (its turns, the model's summaries of older ones, the last anchor), in a side
        session; the new anchor, which ``/context`` shows and the next swap's preamble starts
        with. Bounded by ``REBUILD_SECONDS`` (a summary under way is waited for within it).
        Raises ``AnchorNotWritten`` with why not."""
        port, state = self._port, self.model.threads.get(thread_id)
        if port is None or state is None:
            raise AnchorNotWritten("liminal has not seen this thread opened")
        queued = True  # behind a summary or a fold under way (one side session at a time)
        try:
            with anyio.fail_after(REBUILD_SECONDS):
                async with self._one_at_a_time:
                    queued = False
                    if port.prompt_in_flight(thread_id):  # came while a summary was written
                        raise AnchorNotWritten("a prompt is running: rebuild the state anchor between turns")
                    await self._load(thread_id)
                    path = self.harness.locate(port.backing_of(thread_id), state.cwd)
                    turns = [] if path is None else await anyio.to_thread.run_sync(self.harness.digests, path)
                    summaries = live(self._summaries.get(thread_id, ()))
                    if not turns and not summaries:
                        raise AnchorNotWritten("the model's context holds no turn yet")
                    request = anchor_request(turns, summaries, self.anchor(thread_id))
                    answer = await self.side.ask(port, request)
        except TimeoutError:
            raise AnchorNotWritten(
                f"a summary of older turns was still being written after {REBUILD_SECONDS:.0f} s; try again later"
                if queued else f"the side session gave no answer within {REBUILD_SECONDS:.0f} s") from None
        except AnchorNotWritten:
            raise
        except OwnRequestError as exc:
            said = exc.error.get("message") if isinstance(exc.error, dict) else exc.error
            raise AnchorNotWritten(f"the agent answered the side session's {exc.method} with an error: "
                                   f"{said}") from exc
        except Exception as exc:
            logger.warning("state anchor not rebuilt", thread=thread_id, error=f"{type(exc).__name__}: {exc}")
            raise AnchorNotWritten(f"the side session failed: {in_words(exc)}") from exc
        anchor = section(answer, "STATE") or answer.strip()
        if not anchor:
            raise AnchorNotWritten("the side session answered no text")
        record = ModelSummary((), "", anchor)
        self._summaries.setdefault(thread_id, []).append(record)
        await self._keep(thread_id, record, request)
        return anchor

    # ------------------------------------------------------------ the store

    async def store(self) -> Store | None:
        if self._open_store is None:
            return None
        if self._store is None:
            self._store_cm = self._open_store()
            self._store = await self._store_cm.__aenter__()
        return self._store

    async def _load(self, thread_id: str) -> None:
        """The thread's stored summaries, once (a summary made by an earlier liminal is reused)."""
        if thread_id in self._loaded:
            return
        self._loaded.add(thread_id)
        try:
            store = await self.store()
            if store is None:
                return
            found = [m for m in await store.messages(SUMMARY_THREAD, "summary")
                     if isinstance(m.data, dict) and m.data.get("thread") == thread_id]
        except Exception as exc:
            logger.warning("stored summaries not read", thread=thread_id, error=str(exc))
            return
        known = set(self._summaries.get(thread_id, ()))
        stored = [ModelSummary(tuple(m.data.get("keys") or ()), m.text, m.data.get("anchor"),
                               tuple(m.data.get("parts") or ()))
                  for m in sorted(found, key=lambda m: m.order)]
        mine = self._summaries.setdefault(thread_id, [])
        mine[:0] = [s for s in stored if s not in known]

    async def _keep(self, thread_id: str, summary: ModelSummary, request: str) -> None:
        try:
            store = await self.store()
            if store is None:
                return
            now = time.time()
            data: dict[str, Any] = {
                "thread": thread_id, "keys": list(summary.keys), "anchor": summary.anchor,
                "content_hash": hashlib.sha256(request.encode()).hexdigest()}
            if summary.parts:  # a fold: the summaries it replaces (``text_hash``)
                data["parts"] = list(summary.parts)
            await store.write(Batch(messages=[MessageRecord(
                id=f"summary-{uuid.uuid4()}", thread_id=SUMMARY_THREAD, turn_id=None, time=now,
                order=f"{now:017.6f}", kind="summary", text=summary.text, data=data)]))
        except Exception as exc:  # kept in memory: this liminal still uses it
            logger.warning("summary not stored", thread=thread_id, error=str(exc))
