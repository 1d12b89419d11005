"""liminal's own slash commands, answered in the thread and never sent to the CLI or the model.

A component. Its request hook (``Router.add_request_hook``) keeps every ``session/prompt`` whose
text starts with one of the commands below; the router leaves it for liminal to answer. Each is
answered with ``agent_message_chunk`` updates and a prompt response (``end_turn``), or with a
clear message that changes nothing (an unknown mark, a bad name, a command while a prompt runs).
The agent's ``available_commands_update`` reaches the client with liminal's commands added (a
router update hook), so the UI offers both; no frame is added to the stream.

Moving the model's context (``/clear``, ``/undo``) is the swap's step with other file contents
(``ThreadMover.move_thread``); ``/fork`` writes a session the agent lists and leaves the thread
where it is. Marks are notes in the store (``liminal/mark``, one ``mark`` message per name: the
latest wins), so they survive swaps and restarts; those set in this process are kept in the
thread model until the store has them (``ThreadModel.marks``).

The center is given what it uses: the thread model (the threads, the agent's capabilities, the
marks in flight), the mover (every move, one per thread at a time), the journal (the moves
made) and the cost policy (``/context``, ``/optimise``).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from liminal import log, moves
from liminal.acp.port import Component, Port
from liminal.acp.router import LOCAL, Local, LocalRequest
from liminal.errors import in_words
from liminal.harness.base import SessionHarness
from liminal.kernel import delete, reopen, restore, whereabouts, zone
from liminal.kernel.journal import SwapJournal, SwapRecord, committed
from liminal.kernel.memory import Memory, unknown
from liminal.kernel.mover import SwapError, ThreadMover, Writer
from liminal.kernel.policy import CostPolicy, journal_moves, measure_payback
from liminal.kernel.threads import Mark, ThreadModel
from liminal.lookup.memos import describe, find_memos, save_memo, split_tags
from liminal.mcp.link import SlashRequest
from liminal.store.records import Batch, ThreadUpdate
from liminal.units import plural, tokens

if TYPE_CHECKING:
    from liminal.lookup.recaller import Recaller
    from liminal.store.base import Store
    from liminal.store.cache import Cache

logger = log.get("liminal.commands")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

# name -> (input hint or None, description): what the UI offers.
COMMANDS: dict[str, tuple[str | None, str]] = {
    "mark": ("NAME", "liminal: name this point of the conversation"),
    "marks": (None, "liminal: list the marks"),
    "clear": ("[MARK]", "liminal: empty the model's context, or go back to MARK (history is kept)"),
    "fork": ("[MARK]", "liminal: a new session with this context, or with what followed MARK"),
    "undo": (None, "liminal: take the last turn out of the model's context"),
    "context": ("[rebuild]", "liminal: what the model sees now, the marks, the last swap (rebuild: write the state anchor again)"),
    "optimise": (None, "liminal: compress the context now (a gradient swap)"),
    "search": ("[--all] TEXT", "liminal: search what was said in this thread"),
    "recall": ("KEY", "liminal: the full text behind a truncation marker"),
    "memo": ("TEXT #tag", "liminal: keep a memo that outlives this thread"),
    "memos": ("[#tag|TEXT]", "liminal: find memos"),
    "scratchpad": ("[TEXT | + TEXT | --clear]",
                   "liminal: notes you and the model keep, at the head of its context after every swap"),
    "lessons": ("[--all | confirm KEY | forget KEY]",
                "liminal: what the model learned in this project's conversations; confirm or forget one"),
    "rename": ("TITLE", "liminal: name this thread"),
    "archive": (None, "liminal: hide this thread from liminal threads (it stays usable)"),
}


# The commands that cut, rewrite or copy the thread's context where this liminal has it:
# refused when another sidecar on the store has moved the thread since (``_not_moved_elsewhere``).
ON_CONTEXT = ("clear", "undo", "fork", "optimise")
# A load waits this long for another liminal's lock of the thread: past a Redis lock's life
# (``liminal.serve.locks.REDIS_TTL_MS``), so a lock a dead sidecar left does not refuse it.
LOCK_WAIT_SECONDS = 35.0
LOCK_RETRY_SECONDS = 0.5
HELD_ELSEWHERE = ("this thread is open in another liminal on the same store (another editor or "
                  "machine): close it there, then load it here; each would go on from its own "
                  "copy of the conversation and lose the other's turns")
RECALIBRATE_SECONDS = 10.0  # /context waits at most this long for an opened thread's pace

# What the model may ask for through its ``slash`` tool (``liminal.mcp.tools.SLASH``).
SLASH_FOR_MODEL = ("mark", "clear", "fork", "undo")

# As ACP's ``AvailableCommand``: what the UI offers.
OFFERED = [{"name": name, "description": text, **({"input": {"hint": hint}} if hint else {})}
           for name, (hint, text) in COMMANDS.items()]


# How a gradient rewrite treats each band (``liminal.gradient.bands.Band``), as ``/context`` says it.
BAND_FATES = (("recent", "whole"), ("middle", "with long tool output cut to recall markers"),
              ("old", "as messages only"), ("ancient", "as one summary"))


# The commands that only read: a refusal of one changes nothing, and need not say so.
READING = ("marks", "context", "search", "recall", "memos")


def unchanged(name: str, args: str) -> str:
    """What a refused command's answer ends with: that nothing changed, for a command that
    could have changed something (``/context rebuild`` writes the state anchor)."""
    return "" if name in READING and not (name == "context" and args == "rebuild") else " (nothing changed)"


class CommandError(Exception):
    """Said to the user as the command's answer; nothing changed."""


def parse(text: str) -> tuple[str, str] | None:
    """``("mark", "A")`` for ``/mark A``; None when the text is not one of liminal's commands."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    # Any whitespace ends the name: "/mark\tA" is /mark A, never a prompt for the CLI.
    parts = stripped[1:].split(None, 1)
    if not parts or stripped[1].isspace() or parts[0] not in COMMANDS:
        return None
    return parts[0], parts[1].strip() if len(parts) > 1 else ""


def prompt_text(message: dict[str, Any]) -> str:
    params = message.get("params")
    blocks = params.get("prompt") if isinstance(params, dict) else None
    if not isinstance(blocks, list):
        return ""
    return "\n".join(b["text"] for b in blocks
                     if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


StoreOpener = Callable[[], AbstractAsyncContextManager["Store"]]
CacheOpener = Callable[[], AbstractAsyncContextManager["Cache"]]


class CommandCenter(Component):
    answers_local = True  # the prompts its request hook keeps, and the loads and lists

    def __init__(self, model: ThreadModel, mover: ThreadMover, journal: SwapJournal, policy: CostPolicy,
                 harness: SessionHarness, open_store: StoreOpener | None,
                 open_cache: CacheOpener | None = None) -> None:
        self.model = model
        self.mover = mover
        self.journal = journal
        self.policy = policy
        self.harness = harness
        self._open_store = open_store
        self.zone: zone.ZoneSource | None = None  # /optimise's dynamic zone (liminal.kernel.zone)
        self.memory: Memory = unknown()  # the scratchpad: /scratchpad, and each move's preamble
        self._open_cache = open_cache
        self._store: Store | None = None
        self._store_cm: AbstractAsyncContextManager[Store] | None = None
        self._store_lock = anyio.Lock()
        self._cache_cm: AbstractAsyncContextManager[Cache] | None = None
        self._cache: Cache | None = None
        self._recaller: Recaller | None = None
        self._send, self._receive = anyio.create_memory_object_stream[LocalRequest | SlashRequest](256)
        self._port: Port | None = None
        # The thread's state anchor, from its newest summary (``liminal.kernel.summaries``).
        self.anchor_of: Callable[[str], str | None] = lambda _thread: None
        # ``/context rebuild`` (``SideSummaries.rebuild``): None while the summaries are off.
        self.rebuild_anchor: Callable[[str], Awaitable[str]] | None = None
        # Where liminal's side sessions work: a session the agent lists there is no thread.
        self.side_root: Path | None = None
        # ``$LIMINAL_HOME``: what a deleted thread left there goes too (``liminal.kernel.owned``).
        self.home: Path | None = None
        # Until what a new liminal learns again of an opened thread's pace is in (``Recalibrator``).
        self.recalibrated: Callable[[str], Awaitable[None]] | None = None
        self._background: anyio.abc.TaskGroup | None = None  # the sweeps of deleted threads' files
        # Take a thread's lock for as long as this liminal runs (``wiring.thread_locks``, for
        # ``liminal acp``); False: another live liminal has it open. None: no locks here.
        self.take_thread: Callable[[str], Awaitable[bool]] | None = None
        self._deleted: list[delete.Deleted] = []

    @property
    def tasks(self) -> anyio.abc.TaskGroup | None:
        """Where a store read past its wait runs on (``whereabouts.within_wait``), while running."""
        return self._background

    # -------------------------------------------------------------- the router's side

    def request_hooks(self) -> list[tuple[tuple[str, ...], Callable[..., Local | dict[str, Any] | None]]]:
        hooks: list[tuple[tuple[str, ...], Callable[..., Local | dict[str, Any] | None]]] = [
            (("session/prompt",), self._prompt_hook)]
        # The threads come from the store (liminal.lookup.threadlist) and the swap journal; with
        # the store off, from the journal alone: the router knows only the lineage it read at
        # start and its own swaps, not another liminal's since.
        hooks.append((("session/list",), lambda method, message, thread: LOCAL))
        hooks.append((reopen.OPENS, self._open_hook))
        hooks.append(((delete.METHOD,), lambda method, message, thread: LOCAL))  # for every CLI
        hooks.append((("session/fork",), self._fork_hook))
        return hooks

    def result_hooks(self) -> list[tuple[tuple[str, ...], Callable[[str, dict[str, Any]], dict[str, Any] | None]]]:
        # What liminal answers for the agent, in its capabilities (``liminal.kernel.delete``).
        return [(("initialize",), lambda method, result: delete.advertise(result)),
                (("session/new",), self._new_thread)]

    def _new_thread(self, method: str, result: dict[str, Any]) -> None:
        """A thread the client's ``session/new`` made is locked as one it loads is (``_held_elsewhere``)."""
        thread = result.get("sessionId")
        if self.take_thread is not None and isinstance(thread, str) and self._background is not None:
            self._background.start_soon(self._held_elsewhere, thread)

    def _open_hook(self, method: str, message: dict[str, Any], thread: str | None) -> Local | None:
        """A load or resume: kept whenever a store is configured, to be decided once the store
        has said where the thread is (another sidecar on it may have moved the thread since this
        one last saw it, and an old file of it here would open it silently on an older context:
        ``_open``). Without a store, only one whose session has no file: an empty session
        liminal opened (``liminal.kernel.reopen``)."""
        port = self.mover.port
        if thread is None:
            return None
        state = self.model.threads.get(thread)
        if state is not None and state.swapping:
            return None  # this liminal is moving it: its own view is the newer one
        if self._open_store is not None:
            return LOCAL
        return LOCAL if reopen.without_file(port, self.harness, self.journal, thread, message) else None

    def _fork_hook(self, method: str, message: dict[str, Any], thread: str | None) -> Local | None:
        """``session/fork`` for an agent that has none (codex-zed): ``/fork``'s cut, opened."""
        has = "fork" in ((self.model.capabilities or {}).get("sessionCapabilities") or {})
        return None if has or thread is None else LOCAL

    def _prompt_hook(self, method: str, message: dict[str, Any], thread: str | None) -> Local | None:
        return LOCAL if thread is not None and parse(prompt_text(message)) is not None else None

    def local_requested(self, request: LocalRequest) -> None:
        self._send.send_nowait(request)

    def slash_requested(self, request: SlashRequest) -> None:
        """A command the model asked for (``liminal.kernel.modeltools``), run now its turn ended."""
        try:
            self._send.send_nowait(request)
        except anyio.WouldBlock:
            logger.warning("too many slash commands waiting; dropped", thread=request.thread,
                           command=request.command)

    def update_hooks(self) -> list[tuple[tuple[str, ...], Callable[[str, dict[str, Any]], dict[str, Any] | None]]]:
        return [(("available_commands_update",), self._with_ours),
                (("session_info_update",), self._thread_keeps_its_title)]

    def _thread_keeps_its_title(self, thread: str, update: dict[str, Any]) -> dict[str, Any] | None:
        """The agent's update without its ``title`` once the thread is on another session than
        its own: the CLI titles each session liminal moves a thread onto after that session's
        first prompt ("gamma after clear"), which is not the thread's name. The client goes on
        showing the title it has (the thread's, also what ``session/list`` answers); the rest
        of the update (``updatedAt``, ``_meta``) passes. The store keeps the update as sent."""
        port = self.mover.port
        if "title" not in update or port is None or port.backing_of(thread) == thread:
            return None
        return {k: v for k, v in update.items() if k != "title"}

    def _with_ours(self, thread: str, update: dict[str, Any]) -> dict[str, Any] | None:
        """The agent's command list with liminal's added (theirs of the same name left out:
        liminal answers those)."""
        theirs = update.get("availableCommands")
        if not isinstance(theirs, list):
            return None
        kept = [c for c in theirs if not (isinstance(c, dict) and c.get("name") in COMMANDS)]
        return {**update, "availableCommands": kept + OFFERED}

    # ------------------------------------------------------------------ running

    async def run(self, port: Port) -> None:
        self._port = port
        async with anyio.create_task_group() as self._background:
            async for request in self._receive:
                if isinstance(request, SlashRequest):
                    await self._run_slash(port, request)
                else:
                    await self._answer(port, request)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            for gone in self._deleted:  # what a CLI wrote again since (``delete.sweep``)
                await delete.again(gone)  # a part that fails is logged
            for cm in (self._cache_cm, self._store_cm):
                if cm is not None:
                    await cm.__aexit__(None, None, None)

    async def _answer(self, port: Port, request: LocalRequest) -> None:
        if request.method in reopen.OPENS:
            try:
                await self._open(port, request)
            except Exception as exc:  # a bug: the client's load is answered all the same
                from liminal.acp import jsonrpc

                logger.exception("thread not opened", thread=request.thread_id)
                port.answer_local(request.key, error=(
                    jsonrpc.INTERNAL_ERROR, f"liminal could not open the thread: {in_words(exc)}"))
            return
        if request.method == delete.METHOD:
            await self._delete(port, request)
            return
        if request.method == "session/fork":
            await self._fork(port, request)
            return
        if request.method == "session/list":
            try:
                await self._list(port, request)
            except Exception as exc:  # the agent's list timed out, a bug: answered all the same
                from liminal.acp import jsonrpc

                logger.exception("session/list failed", thread=request.thread_id)
                port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, f"session/list failed: {in_words(exc)}"))
            return
        parsed = parse(prompt_text(request.message)) or ("", "")
        if parsed == ("context", "rebuild") and self._background is not None:
            # The model writes it, for up to minutes: the loads, lists and other commands
            # this queue answers do not wait for it.
            self._background.start_soon(self._answer_command, port, request, parsed)
            return
        await self._answer_command(port, request, parsed)

    async def _answer_command(self, port: Port, request: LocalRequest, parsed: tuple[str, str]) -> None:
        thread = request.thread_id or ""
        try:
            text = await self._run(thread, *parsed)
        except (CommandError, SwapError) as exc:
            text = f"{exc}{unchanged(*parsed)}"
        except Exception as exc:  # a bug or a store down: said, and the prompt answered
            logger.exception("command failed", command=parsed[0], thread=thread)
            text = f"/{parsed[0]} failed: {in_words(exc)}{unchanged(*parsed)}"
        port.notify_client("session/update", {"sessionId": thread, "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}})
        port.answer_local(request.key, {"stopReason": "end_turn"})

    async def _opened_empty_elsewhere(self, thread: str, message: dict[str, Any]) -> bool:
        """The thread is on a session another sidecar on the shared store opened empty (its
        ``/clear``), of which nothing is on disk here: what ``reopen.without_file`` says of this
        home's own, from the store's journal, read for as long as a load asks the store
        (``whereabouts.within_wait``)."""
        port, shared = self.mover.port, self.mover.shared
        if shared is None or port is None or not thread or port.backing_of(thread) == thread:
            return False
        backing = port.backing_of(thread)
        cwd = reopen.params_of(message).get("cwd")
        if self.harness.locate(backing, cwd if isinstance(cwd, str) else None) is not None:
            return False

        async def read() -> bool:
            return any(r.new_backing_id == backing and r.opened == "empty"
                       for r in committed(await shared.records(thread)))

        return await whereabouts.within_wait(self._background, read, False, "the shared store's journal")

    def _abandon_dead(self, thread: str) -> None:
        """A move of ``thread`` a dead sidecar began and never ended, recorded abandoned in the
        shared store (``StoreJournal.abandon_dead``), in the background: the load does not wait
        for it (a release clears only the claim, never the place or the lineage the load reads),
        and the thread's next move finds it free."""
        shared, leases = self.mover.shared, self.mover.leases
        if shared is None or not thread or self._background is None:
            return

        async def abandon() -> None:
            try:
                gone = leases is not None and await leases.gone(thread)
                await shared.abandon_dead(thread, lease_gone=gone)
            except Exception as exc:  # Redis down: the claim's age decides next time
                logger.warning("a dead move not looked at", thread=thread, error=f"{type(exc).__name__}: {exc}")

        self._background.start_soon(abandon)

    async def _open(self, port: Port, request: LocalRequest) -> None:
        """A client's load or resume, decided after asking the store (for a bounded time) where
        the thread is: the store further along (another sidecar moved it), bound there and
        opened from the store (``liminal.kernel.restore``), the session's file written if this
        machine has none; the session without a file, the same, or reopened empty if liminal
        opened it empty and the store has none of it (``liminal.kernel.reopen``); else the load
        goes on to the agent as the client sent it (the router's rule 8 included)."""
        thread = request.thread_id or ""
        store: Store | None = None
        later = None
        if await self._held_elsewhere(thread):
            from liminal.acp import jsonrpc

            port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, HELD_ELSEWHERE))
            return
        self._abandon_dead(thread)
        if self._open_store is not None:
            asked = await whereabouts.ask_store(self.store, thread, self._background)
            store = asked.store
            if self._moving_here(port, thread):
                # This liminal began moving the thread while the store was asked: the place the
                # store has may be this move's own commit, which the mover binds when it
                # releases the thread; the load is held until then, and goes on to where it is.
                port.forward_local(request.key, request.method, reopen.params_of(request.message))
                return
            if asked.lineage is not None:
                later = whereabouts.bind_further(port, thread, asked.lineage)
        # A session /clear opened empty (here, or another sidecar on the shared store) has a
        # file once it has a turn: gone since, the store's lines are the thread's context, and
        # only without them is it reopened empty.
        empty = reopen.without_file(port, self.harness, self.journal, thread, request.message) \
            or await self._opened_empty_elsewhere(thread, request.message)
        if later is None and not empty and store is not None:
            # The thread where this liminal had it, its file here: another sidecar may have
            # gone on on the same session since (``restore.catch_up``).
            behind = await restore.catch_up(store, self.harness, port.backing_of(thread),
                                            restore.cwd_of(request.message))
            if behind is not None:
                logger.warning("session file here not brought up to the store's", thread=thread,
                               session=port.backing_of(thread), reason=behind)
        if empty and not await restore.stored_whole(store, port.backing_of(thread)):
            await reopen.reopen(port, self.mover, store, request)
        elif later is not None or restore.file_missing(port, self.harness, thread, request.message):
            await restore.restore(port, self.mover, self.harness, store, request)
        else:
            port.forward_local(request.key, request.method, reopen.params_of(request.message))

    async def _held_elsewhere(self, thread: str) -> bool:
        """Whether another live liminal has ``thread`` open (its lock, ``take_thread``), after
        waiting up to ``LOCK_WAIT_SECONDS`` for it to let go; else the lock is this one's until
        it stops. Two live sidecars on one thread would each go on from their own copy of its
        session, and the turns of one would be missing from the other's (docs/operations.md,
        "Two sidecars, one thread"). A lock that cannot be taken for another reason (its folder
        not writable) is said and stops nothing."""
        if self.take_thread is None or not thread:
            return False
        try:
            with anyio.move_on_after(LOCK_WAIT_SECONDS):
                while not await self.take_thread(thread):  # noqa: ASYNC110 (held in Redis: no event to wait on)
                    await anyio.sleep(LOCK_RETRY_SECONDS)
                return False
        except Exception as exc:
            logger.warning("thread lock not taken", thread=thread, error=f"{type(exc).__name__}: {exc}")
            return False
        logger.warning("a thread another liminal has open refused", thread=thread)
        return True

    def _moving_here(self, port: Port, thread: str) -> bool:
        state = self.model.threads.get(thread)
        return (state is not None and state.swapping) or port.is_held(thread)

    async def _list(self, port: Port, request: LocalRequest) -> None:
        """``session/list``: the store's threads and what the agent lists besides."""
        from liminal.acp import jsonrpc
        from liminal.acp.port import OwnRequestError
        from liminal.lookup.threadlist import listing

        params = request.message.get("params")
        params = params if isinstance(params, dict) else {}
        cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else None
        agent: dict[str, Any] = {}
        # With the store off the agent's listing is all there is: asked as the client asked it,
        # whatever the agent advertises, its error the answer.
        if "list" in ((self.model.capabilities or {}).get("sessionCapabilities") or {}) or self._open_store is None:
            try:
                found = await port.request("session/list", params, timeout=30)
                agent = found if isinstance(found, dict) else {}
            except OwnRequestError as exc:
                if params.get("cursor") is not None or self._open_store is None:  # only the agent can page its own cursor
                    said = exc.error if isinstance(exc.error, dict) else {}
                    code, text = said.get("code"), said.get("message")
                    port.answer_local(request.key, error=(
                        code if isinstance(code, int) else jsonrpc.INTERNAL_ERROR,
                        text if isinstance(text, str) else str(exc)))
                    return
                logger.warning("the agent's session list failed; the store's threads only", error=str(exc))
        threads = []
        if self._open_store is not None:
            try:
                threads = await (await self.store()).threads(limit=10_000, empty=True)
            except Exception as exc:  # the store down: the agent's listing, mapped
                logger.warning("thread list from the store failed; the agent's listing", error=str(exc))
        # The journal too: another liminal on this home (a second window, a serve connection)
        # may have moved a thread since this one read it at start, or be moving one now; its
        # rewrites are sessions to the agent, never threads of their own.
        journal = self.journal
        lineage, moving = await anyio.to_thread.run_sync(
            lambda: (journal.lineage(), journal.unfinished()))
        carried = {backing: thread for thread, backing in lineage}
        sessions_of_threads = {t for t, _ in lineage} | {r.old_backing_id for r in moving}

        def thread_of(backing: str) -> str:
            mapped = port.thread_of(backing)
            return mapped if mapped != backing else carried.get(backing, backing)

        hide = {r.new_backing_id for r in moving if r.new_backing_id and r.new_backing_id not in sessions_of_threads}
        if self.side_root is not None:  # a summary's side session under way: liminal's alone
            side = str(self.side_root) + "/"
            hide |= {s["sessionId"] for s in agent.get("sessions") or [] if isinstance(s, dict)
                     and isinstance(s.get("sessionId"), str) and str(s.get("cwd") or "").startswith(side)}
        # A thread deleted here, and its sessions: a CLI may list a file it wrote again as its
        # process ended, until the sweep removes it (``liminal.kernel.delete``).
        hide |= {s for gone in self._deleted for s in (gone.thread, *gone.sessions)}
        sessions = listing(threads, agent.get("sessions") or [], thread_of, cwd,
                           first_page=params.get("cursor") is None, hide=hide, live=self.model.threads)
        result: dict[str, Any] = {"sessions": sessions}
        if agent.get("nextCursor") is not None:
            result["nextCursor"] = agent["nextCursor"]
        port.answer_local(request.key, result)

    async def _delete(self, port: Port, request: LocalRequest) -> None:
        """``session/delete`` (``liminal.kernel.delete``): answered ``{}`` once the thread is gone."""
        from liminal.acp import jsonrpc

        params = request.message.get("params")
        thread = params.get("sessionId") if isinstance(params, dict) else None
        if not isinstance(thread, str) or not thread:
            port.answer_local(request.key, error=(jsonrpc.INVALID_PARAMS, "session/delete needs a sessionId"))
            return
        try:
            store = await self.store() if self._open_store is not None else None
            gone = await delete.delete(port, self.model, self.mover, self.journal, self.harness, store,
                                       thread, self.model.capabilities or {}, cache=await self.cache(),
                                       home=self.home)
        except delete.DeleteRefused as exc:
            port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, f"not deleted: {exc}"))
            return
        except Exception as exc:  # a bug or the store down: answered all the same
            logger.exception("session/delete failed", thread=thread)
            port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, f"session/delete failed: {exc}"))
            return
        port.answer_local(request.key, {})
        self._deleted.append(gone)
        if self._background is not None:
            self._background.start_soon(delete.sweep, gone)

    async def _fork(self, port: Port, request: LocalRequest) -> None:
        """``session/fork`` answered for an agent without one: the thread's context as it is
        (``/fork``'s cut) written as a new session, a thread of its own in the store, opened on
        the agent (resumed, else loaded) with the client's cwd and MCP servers; the answer is
        the agent's, under the new id (the unstable schema's ``ForkSessionResponse``)."""
        from liminal.acp import jsonrpc
        from liminal.acp.port import OwnRequestError
        from liminal.kernel.threads import RESTORED

        params = request.message.get("params")
        params = params if isinstance(params, dict) else {}
        thread, cwd = request.thread_id or "", params.get("cwd")
        if not isinstance(cwd, str) or not cwd:
            port.answer_local(request.key, error=(jsonrpc.INVALID_PARAMS, "session/fork needs a cwd"))
            return
        try:
            if port.prompt_in_flight(thread):
                raise CommandError("a prompt is running: fork between turns")
            await self._not_moved_elsewhere(thread)
            _, path = await self._settled_path(thread)
            end = await anyio.to_thread.run_sync(self.harness.position, path)
            new_id = str(uuid.uuid4())
            parts: list[tuple[Path, int, int | None]] = [(path, 0, end)]
            await anyio.to_thread.run_sync(self.harness.cut, parts, path, new_id)
        except (CommandError, SwapError) as exc:
            port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, f"not forked: {exc}"))
            return
        await self._record_fork(thread, new_id, "")
        sessions = (self.model.capabilities or {}).get("sessionCapabilities") or {}
        method = "session/resume" if "resume" in sessions else "session/load"
        opened = {**{k: v for k, v in params.items() if k in ("mcpServers", "additionalDirectories")},
                  "sessionId": new_id, "cwd": cwd}
        opened.setdefault("mcpServers", [])
        try:
            result = await port.request(method, opened, timeout=120, thread_id=new_id)
        except OwnRequestError as exc:
            said = exc.error if isinstance(exc.error, dict) else {}
            port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR,
                                                  f"the fork {new_id} is written but did not open: {said.get('message') or exc}"))
            return
        # For the store and the thread model, as a client's open of it: liminal's own request
        # names the session to no one (``liminal.kernel.restore`` does the same).
        port.note(RESTORED, {"backing_id": new_id, "cwd": cwd, "harness": self.harness.name, "written": True},
                  thread_id=new_id)
        answer = dict(result) if isinstance(result, dict) else {}
        answer["sessionId"] = new_id
        port.answer_local(request.key, answer)

    async def _run_slash(self, port: Port, request: SlashRequest) -> None:
        """As if the user had typed the command when the turn ended; the UI hears of it in the
        thread's next turn (as a swap notice), the store in a ``liminal/slash`` note."""
        thread, command = request.thread, f"/{request.command}{' ' + request.args if request.args else ''}"
        try:
            if request.command not in SLASH_FOR_MODEL:
                raise CommandError(f"{command} is not for the model")
            text = await self._run(thread, request.command, request.args)
            ok = True
        except (CommandError, SwapError) as exc:
            text, ok = f"{exc} (nothing changed)", False
        except Exception as exc:
            logger.exception("slash command failed", command=command, thread=thread)
            text, ok = f"failed: {in_words(exc)} (nothing changed)", False
        port.note("liminal/slash", {"thread_id": thread, "command": command, "ok": ok, "said": text},
                  thread_id=thread)
        port.notify_in_next_turn(thread, "session/update", {"sessionId": thread, "update": {
            "sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": f"liminal ran {command} as the model asked: {text}\n"}}})

    async def _run(self, thread: str, name: str, args: str) -> str:
        """The command's answer. One that takes no arguments refuses any (``/archive now``
        archived the thread, ``/optimise hard`` swapped: the words were dropped unread)."""
        if COMMANDS[name][0] is None and args:
            raise CommandError(f"/{name} takes no arguments")
        if name in ON_CONTEXT:
            await self._not_moved_elsewhere(thread)
        handler: Callable[[str, str], Awaitable[str]] = getattr(self, f"_cmd_{name}")
        return await handler(thread, args)

    # ------------------------------------------------------------------ helpers

    async def _not_moved_elsewhere(self, thread: str) -> None:
        """Raise if another sidecar on the store has moved the thread since this one opened it
        (``whereabouts.moved_elsewhere``); a load binds it where the store has it."""
        if self._open_store is None or self._port is None:
            return
        why = await whereabouts.moved_elsewhere(self.store, self._port, thread, self._background)
        if why is not None:
            raise CommandError(why)

    async def store(self) -> Store:
        if self._open_store is None:
            raise CommandError("the store is off (store.index = false)")
        # One open at a time: a load's question to the store runs on in the background past
        # its wait (``whereabouts.ask_store``) while the next command asks for the store too.
        async with self._store_lock:
            if self._store is None:
                self._store_cm = self._open_store()
                self._store = await self._store_cm.__aenter__()
            return self._store

    async def recaller(self) -> Recaller:
        """Recall keys resolved through the cache, then the store, then the CLI's file."""
        if self._recaller is None:
            from liminal.lookup.recaller import Recaller
            from liminal.store.base import StoreError

            try:
                store: Store | None = await self.store()
            except (CommandError, StoreError):  # no history kept: the CLI's files answer
                store = None
            self._recaller = Recaller(store, await self.cache(), harness=self.harness)
        return self._recaller

    async def cache(self) -> Cache | None:
        """The recall cache, opened at its first use (None: none configured here)."""
        if self._cache is None and self._open_cache is not None:
            self._cache_cm = self._open_cache()
            self._cache = await self._cache_cm.__aenter__()
        return self._cache

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

    def _state_path(self, thread: str) -> tuple[str, Path]:
        assert self._port is not None
        state = self.model.threads.get(thread)
        backing = self._port.backing_of(thread)
        path = self.harness.locate(backing, state.cwd if state else None)
        if path is None:
            raise CommandError("this thread has no session file yet: send a first prompt")
        return backing, path

    async def _settled_path(self, thread: str) -> tuple[str, Path]:
        """The thread's session file once the turn just answered is on it. The CLI may write a
        turn a little after answering it (Claude Code 2.1.44, about 0.1 s), and after a first
        prompt the file may not exist yet: looked for again for up to 2 s."""
        assert self._port is not None
        await self.mover.appeared(self._port.backing_of(thread), self._cwd(thread), 2.0)
        backing, path = self._state_path(thread)
        state = self.model.threads.get(thread)
        await self.mover.settle(path, state.last_prompt if state else None)
        return backing, path

    def _cwd(self, thread: str) -> str | None:
        state = self.model.threads.get(thread)
        return state.cwd if state else None

    async def _mark(self, thread: str, name: str) -> Mark:
        if not NAME.match(name):
            raise CommandError(f"{name!r} is not a mark name: letters, digits, '.', '_' or '-', "
                               "no spaces, at most 64")
        assert self._port is not None
        if self._port.prompt_in_flight(thread):
            raise CommandError("a prompt is running: mark between turns")
        backing, path = await self._settled_path(thread)
        offset = await anyio.to_thread.run_sync(self.harness.position, path)
        if self._port.prompt_in_flight(thread):  # came while the file settled: the
            raise CommandError("a prompt started: mark between turns")  # offset may be inside it
        mark = Mark(name, backing, offset, time.time())
        self.model.mark(thread, mark)
        self._port.note("liminal/mark", {"thread_id": thread, "name": name, "backing_id": backing,
                                         "offset": offset}, thread_id=thread, at=mark.at)
        return mark

    async def _known_mark(self, thread: str, name: str) -> Mark:
        marks = await self.marks(thread)
        if name not in marks:
            known = ", ".join(sorted(marks)) or "none yet"
            raise CommandError(f"no mark {name!r} in this thread (marks: {known})")
        return marks[name]

    # ------------------------------------------------------------------ commands

    async def _cmd_mark(self, thread: str, args: str) -> str:
        mark = await self._mark(thread, args)
        return f"Mark {mark.name} set here."

    async def _cmd_marks(self, thread: str, args: str) -> str:
        marks = await self.marks(thread)
        if not marks:
            return "No marks in this thread. /mark NAME sets one."
        rows = sorted(marks.values(), key=lambda m: m.at)
        return "Marks: " + ", ".join(f"{m.name} ({time.strftime('%H:%M', time.localtime(m.at))})" for m in rows)

    async def _cmd_clear(self, thread: str, args: str) -> str:
        if not args:
            return await self._clear_all(thread)
        mark = await self._known_mark(thread, args)
        source = await self._session_file(mark.backing_id, self._cwd(thread))
        if source is None:
            raise CommandError(f"the session file of mark {mark.name} is gone")
        scratchpad = await self.memory.scratchpad(thread)

        def plan(current: Path) -> Writer:
            return lambda new_id: self.harness.cut([(source, 0, mark.offset)], current, new_id, keeps_thread=True,
                                                   scratchpad=scratchpad)

        await self.mover.move_thread(thread, f"/clear {mark.name}", plan)
        return f"Context cleared back to mark {mark.name}. What came after stays in liminal's history."

    async def _session_file(self, backing: str, cwd: str | None) -> Path | None:
        """``backing``'s file, written from the store if it has none here (the CLI's clean-up,
        a mark set by a sidecar on another machine with the same store); None if neither."""
        found = self.harness.locate(backing, cwd)
        if found is not None or self._open_store is None:
            return found
        try:
            why = await restore.write_session(await self.store(), self.harness, backing, cwd)
        except Exception as exc:  # the store not opened: the mark's file is gone, as before
            why = f"{type(exc).__name__}: {exc}"
        if why is not None:
            logger.warning("session file not written from the store", session=backing, reason=why)
        return self.harness.locate(backing, cwd)

    async def _clear_all(self, thread: str) -> str:
        await self.mover.fresh_session(thread, "/clear")
        return "Context cleared. The conversation stays in liminal's history (liminal history, /search)."

    async def _cmd_undo(self, thread: str, args: str) -> str:
        if self._context_is_empty(thread):
            raise CommandError("the model's context is empty: there is no turn to take out")
        scratchpad = await self.memory.scratchpad(thread)

        def plan(current: Path) -> Writer | None:
            """Back to where the last turn began, what came before kept (earlier turns, or the
            summary of older ones a swap left: the preamble). A session's only turn with nothing
            before it leaves an empty context, what /clear makes: cut there, the session would
            hold none of the conversation, and the CLI's own records of its first turn (its
            environment, its tools) would go too."""
            turns = self.harness.turns(current)
            if not turns.starts:
                raise CommandError(
                    "no turn is left in the model's context, only the summary of earlier ones "
                    "(/clear empties it, /clear MARK goes back to a mark)" if turns.earlier
                    else "the model's context holds no turn to take out")
            if len(turns.starts) == 1 and not turns.earlier:
                return None
            end = turns.starts[-1]
            return lambda new_id: self.harness.cut([(current, 0, end)], current, new_id, keeps_thread=True,
                                                   scratchpad=scratchpad)

        done = (await self.mover.move_thread(thread, "/undo", plan)).rewritten
        if done is None:
            return ("Took out the only turn: the model's context is empty now, as after /clear "
                    "(the turn stays in liminal's history).")
        sizes = {"tokens_before": done.tokens_before, "tokens_after": done.tokens_after}
        why = moves.unchanged(sizes)
        return (f"Took the last turn out of the model's context ({moves.size(sizes)}"
                f"{': ' + why if why else ''}). It stays in liminal's history.")

    def _context_is_empty(self, thread: str) -> bool:
        """The thread is on a session a move opened empty (/clear, an /undo of its only turn), or
        on the one the client's ``session/new`` made, and nothing was prompted since: the CLI
        writes that session's file only at its first turn."""
        assert self._port is not None
        state = self.model.threads.get(thread)
        backing = self._port.backing_of(thread)
        if state is None or state.calls or self.harness.locate(backing, state.cwd) is not None:
            return False  # (a prompt since: its turn may still be on its way to the file)
        return self.journal.opened_empty(thread, backing) or (state.new and backing == thread)

    async def _cmd_fork(self, thread: str, args: str) -> str:
        assert self._port is not None
        if self._port.prompt_in_flight(thread):
            raise CommandError("a prompt is running: fork between turns")
        _, path = await self._settled_path(thread)
        end = await anyio.to_thread.run_sync(self.harness.position, path)
        new_id = str(uuid.uuid4())
        if args:
            mark = await self._known_mark(thread, args)
            cut = self._taken_out_since(await self._moves(thread), mark)
            if cut is not None:
                raise CommandError(
                    f"turns were taken out of the context after mark {mark.name} ({cut}): a fork of "
                    "what followed the mark would bring them back. /fork with no mark forks the "
                    "context as it is")
            parts = await self._after(thread, mark)
            what = f"what followed mark {mark.name}"
        else:
            parts = [(path, 0, None)]
            what = "this thread's context"
        if self._port.prompt_in_flight(thread):  # came while the file settled
            raise CommandError("a prompt started: fork between turns")
        # The thread's own file up to where it stood once settled: a prompt that starts now
        # appends past that, and its half-written turn stays out of the fork.
        parts = [(p, start, end if p == path and stop is None else stop) for p, start, stop in parts]
        await anyio.to_thread.run_sync(self.harness.cut, parts, path, new_id)
        await self._record_fork(thread, new_id, args)
        return f"Forked {what} as session {new_id}: open it from the session list."

    async def _record_fork(self, thread: str, new_id: str, mark: str) -> None:
        """The fork is a thread of its own in the store, so ``session/list`` shows it whatever
        the agent's own listing knows yet (Codex 0.166 lists a rollout written by another
        process only after it has rescanned)."""
        try:
            store = await self.store()
            parent = await store.thread(thread)
            title = f"Fork of {parent.title if parent and parent.title else thread}" + (f" after {mark}" if mark else "")
            await store.write(Batch(threads=[ThreadUpdate(
                new_id, time.time(), title=title, cwd=self._cwd(thread) or "",
                harness=parent.harness if parent else "", backing_ids=(new_id,))]))
        except Exception as exc:  # the fork exists on disk all the same
            logger.warning("the fork could not be recorded in the store", fork=new_id, error=str(exc))

    async def _moves(self, thread: str) -> list[SwapRecord]:
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

    def _taken_out_since(self, records: list[SwapRecord], mark: Mark) -> str | None:
        """The commands that took turns out of the thread's context after ``mark`` was set
        (``/undo``, ``/clear``, ``/clear MARK``), said by the latest, if one did. ``_after`` reads what the CLI wrote
        after the mark, file by file, and cannot leave such turns out; a gradient swap only
        compresses, so the fork has those turns whole."""
        taken = [move for record in records if record.outcome == "committed" and record.started_at >= mark.at
                 and (move := moves.what(asdict(record))).split(" ", 1)[0] in ("/undo", "/clear")]
        if not taken:
            return None
        # The latest names it (``/clear A`` after an ``/undo``: the /clear is what the person
        # has in mind), and how many did.
        return taken[-1] if len(taken) == 1 else f"the latest of {len(taken)}: {taken[-1]}"

    async def _after(self, thread: str, mark: Mark) -> list[tuple[Path, int, int | None]]:
        """The byte ranges that hold the turns after ``mark``: the rest of its file, then what the
        CLI appended to each session the thread moved to since."""
        cwd = self._cwd(thread)
        source = await self._session_file(mark.backing_id, cwd)
        if source is None:
            raise CommandError(f"the session file of mark {mark.name} is gone")
        parts: list[tuple[Path, int, int | None]] = [(source, mark.offset, None)]
        # Every session the thread moved to, by any sidecar on a shared store; a file another
        # machine wrote is written here from the store.
        moved = committed(await self._moves(thread))
        lineage = [r.new_backing_id or "" for r in moved]
        sizes = {r.new_backing_id: r.size for r in moved}
        if mark.backing_id in lineage:
            later = lineage[lineage.index(mark.backing_id) + 1:]
        else:
            later = lineage if mark.backing_id == thread else []
        for backing in later:
            path = await self._session_file(backing, cwd)
            if path is not None:  # liminal's own bytes (the rewrite) hold nothing new
                own = self.journal.own_bytes(backing) or sizes.get(backing) or 0
                parts.append((path, own, None))
        return parts

    async def _cmd_context(self, thread: str, args: str) -> str:
        """What the model sees now: its size, where the next swap comes, what bounds the floor it
        lands on, what it would keep of each band, the marks, the last swap. ``rebuild``: the
        state anchor written again first."""
        if args:
            return await self._rebuild(thread, args)
        if self.recalibrated is not None:  # the thread just opened: its pace is being read
            with anyio.move_on_after(RECALIBRATE_SECONDS):
                await self.recalibrated(thread)
        state = self.model.threads.get(thread)
        policy = self.policy
        records = await self._moves(thread)  # another sidecar's too, on a shared store
        lines = []
        try:
            path: Path | None = self._state_path(thread)[1]
        except CommandError:
            path = None
        if state is not None:
            used = state.context_tokens if state.context_tokens is not None else state.file_tokens
            if used is None and path is not None:  # no turn since liminal started: the file says
                used = await anyio.to_thread.run_sync(self.harness.context_tokens, path)
            if used is not None:
                now = f"{tokens(used)} tokens"
            elif self._context_is_empty(thread):  # a /clear's session, before its first prompt
                prompt = state.pace.overhead
                now = "empty" + (f" (the CLI's own prompt, about {tokens(prompt)} tokens)" if prompt else "")
            else:
                now = "not known until the next model call"
            lines.append(f"Context: {now}. liminal swaps at {tokens(policy.trigger(state.pace))}, "
                         f"down to about {tokens(policy.target(state.pace))} tokens.")
            # What bounds that floor, and why the trigger is not the one set, if it is not.
            lines.extend(policy.bounds(state.pace))
            # Swaps that cost more than they save, measured or by the settings' arithmetic.
            lines.extend(policy.losing_money(state.pace, measure_payback(journal_moves(map(asdict, records)))))
        if path is None:
            lines.append("No session file yet: nothing to band.")
        else:
            try:
                band = policy.recent(state.pace) if state is not None else None
                bands = await anyio.to_thread.run_sync(self.harness.bands, path, policy.aim, band)
                kept = "; ".join(
                    f"{band} {plural(bands[band]['turns'], 'turn')} ({tokens(bands[band]['tokens'])} tokens) {how}"
                    for band, how in BAND_FATES if bands.get(band, {}).get("turns"))
                # (No turn: an /undo took out the one a swap kept after its summary.)
                lines.append(f"A swap now would keep: {kept}." if kept else "No turn in the context for a swap to keep.")
            except Exception as exc:  # a file the gradient cannot read: said, the rest still shown
                logger.warning("/context could not band the session", thread=thread, error=str(exc))
                lines.append(f"The session file could not be read for its bands ({in_words(exc)}).")
        scratchpad = await self.memory.scratchpad(thread)
        if scratchpad:  # the head of every rewrite's preamble, before the anchor
            lines.append("Scratchpad (the head of every swap's preamble; /scratchpad changes it):\n" + scratchpad)
        elif self._open_store is not None:
            lines.append("Scratchpad: " + ("empty (/scratchpad TEXT writes one)" if scratchpad == ""
                                           else "not known (the store did not answer)"))
        anchor = self.anchor_of(thread)
        if anchor:  # what the next swap's preamble starts with
            lines.append("State anchor (the next swap's preamble starts with it):\n" + anchor)
        marks = await self.marks(thread)
        lines.append("Marks: " + (", ".join(sorted(marks)) or "none"))
        lines.append(f"Last move: {moves.describe(asdict(records[-1]))}." if records else "No move yet.")
        if records:
            lines.extend(zone.described(records[-1].zone))
        return "\n".join(lines)

    async def _rebuild(self, thread: str, args: str) -> str:
        """``/context rebuild``: the state anchor written again from the context now, by the
        agent's model in a side session (``liminal.kernel.summaries``); the new one, or one
        line saying why not."""
        from liminal.kernel.summaries import AnchorNotWritten

        if args != "rebuild":
            raise CommandError("/context shows the context; /context rebuild writes the state anchor again")
        if self.rebuild_anchor is None:
            raise CommandError("the state anchor is written by the model's summaries, which are off "
                               "(swap.summaries = true, with swaps on, turns them on)")
        assert self._port is not None
        if self._port.prompt_in_flight(thread):
            raise CommandError("a prompt is running: rebuild the state anchor between turns")
        try:
            anchor = await self.rebuild_anchor(thread)
        except AnchorNotWritten as exc:
            raise CommandError(f"state anchor not written again: {exc}") from exc
        return "State anchor written again from the current context (the next swap's preamble starts with it):\n" + anchor

    async def _cmd_optimise(self, thread: str, args: str) -> str:
        state = self.model.threads.get(thread)
        if state is None:
            raise CommandError("liminal has not seen this thread opened")
        aim, band = self.policy.aim, self.policy.recent(state.pace)

        offer = (await self.zone.offer(thread, state.cwd, None)
                 if self.zone is not None and self.policy.gradient.zone_tokens else zone.Offer())
        memos = offer.candidates
        scratchpad = await self.memory.scratchpad(thread)

        def plan(current: Path) -> Writer:
            return lambda new_id: self.harness.rewrite(current, aim, new_id, memos=memos, recent_tokens=band,
                                                       scratchpad=scratchpad)

        done = (await self.mover.move_thread(thread, "/optimise", plan)).rewritten
        assert done is not None  # a rewrite, never an empty session
        return f"Context optimised: {tokens(done.tokens_before)} -> {tokens(done.tokens_after)} tokens."

    async def _cmd_search(self, thread: str, args: str) -> str:
        """What was said in this thread (``liminal.lookup.search``); ``--all`` adds liminal's own
        commands and notes and the CLI's bookkeeping records."""
        from liminal.lookup.search import find

        words = args.split(None, 1)
        everything = bool(words) and words[0] == "--all"
        query = (words[1] if len(words) > 1 else "") if everything else args
        if not query.strip():
            raise CommandError("/search TEXT (or /search --all TEXT)")
        found = await find(await self.store(), query, thread_id=thread, limit=8, everything=everything)
        if not found:
            return f"Nothing found for {query!r} in this thread." + ("" if everything else (
                " (/search --all TEXT also looks in liminal's own commands and the CLI's records.)"))
        return "\n".join(f"- {f.where(title=False)} · {f.when} · {f.speaker}: {f.hit.snippet}"
                         for f in found)

    async def _cmd_recall(self, thread: str, args: str) -> str:
        if not args:
            raise CommandError("/recall KEY (from a truncation marker)")
        from liminal.gradient.recall import RecallError

        try:
            data = await (await self.recaller()).recall(args)
        except RecallError as exc:  # it names the key
            raise CommandError(str(exc)) from exc
        return data.decode("utf-8", "replace")

    async def _cmd_memo(self, thread: str, args: str) -> str:
        content, tags = split_tags(args)
        if not content:
            raise CommandError("/memo TEXT #tag")
        await save_memo(await self.store(), content, tags, thread)
        return f"Memo kept{' with ' + ' '.join('#' + t for t in tags) if tags else ''}."

    async def _cmd_scratchpad(self, thread: str, args: str) -> str:
        """The thread's scratchpad (``liminal.lookup.scratchpad``): shown, replaced (``TEXT``),
        added to (``+ TEXT``) or emptied (``--clear``); the model reads and writes it with its
        ``scratchpad`` tool, and every rewrite puts it at the head of its preamble."""
        from liminal.lookup import scratchpad

        store, limit = await self.store(), self.memory.settings.scratchpad_chars
        adding = args == "+" or args.startswith(("+ ", "+\n", "+\t"))
        try:
            if args == "--clear":
                await scratchpad.replace(store, thread, "", limit=limit, by="person")
                return "Scratchpad emptied: the next swap's preamble holds none."
            if adding and not args[1:].strip():
                raise CommandError("/scratchpad + TEXT adds TEXT on a line of its own")
            if adding:
                now = await scratchpad.append(store, thread, args[1:], limit=limit, by="person")
            elif args:
                now = await scratchpad.replace(store, thread, args, limit=limit, by="person")
            else:
                found = await scratchpad.read(store, thread)
                if found is None:
                    return ("The scratchpad is empty. /scratchpad TEXT writes it, /scratchpad + TEXT adds a "
                            "line; the model writes it too (its scratchpad tool).")
                who = "you" if found.by == "person" else "the model"
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(found.time))
                return (f"Scratchpad ({len(found.text)} of at most {limit} characters, last written by {who} "
                        f"at {when}; the head of the model's context after every swap):\n{found.text}")
        except scratchpad.TooLong as exc:
            raise CommandError(str(exc)) from exc
        return (f"Scratchpad {'added to' if adding else 'written'} ({len(now.text)} of at most {limit} "
                "characters): the model's context holds it from the next swap on, and its scratchpad "
                "tool reads it now.")

    async def _cmd_lessons(self, thread: str, args: str) -> str:
        """The lessons of this project's conversations; one confirmed or forgotten."""
        from liminal.kernel import lessonlist

        try:
            return await lessonlist.answer(await self.store(), args, self._cwd(thread))
        except lessonlist.Refused as exc:
            raise CommandError(str(exc)) from exc

    async def _cmd_rename(self, thread: str, args: str) -> str:
        title = " ".join(args.split())
        if not title:
            raise CommandError("/rename TITLE")
        await (await self.store()).write(Batch(threads=[ThreadUpdate(thread, time.time(), title=title, named=True)]))
        return f"Thread renamed: {title}"

    async def _cmd_archive(self, thread: str, args: str) -> str:
        await (await self.store()).write(Batch(threads=[ThreadUpdate(thread, time.time(), state="archived",
                                                                     by_user=True)]))
        return "Thread archived: liminal threads lists it with --all; it goes on working here."

    async def _cmd_memos(self, thread: str, args: str) -> str:
        text, tags = split_tags(args)
        found = await find_memos(await self.store(), tags, text)
        if not found:
            return "No memos found."
        return "\n".join(f"- {describe(m)}" for m in found)
