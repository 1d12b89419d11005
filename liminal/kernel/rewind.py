"""``session/rewind`` and ``session/edit_prompt`` answered by liminal, for an agent that lacks them
(the session-rewind RFD's first draft; ``docs/facts.md`` says which shapes and why).

A component. ``initialize``'s answer advertises ``rewindSession`` under
``agentCapabilities._meta`` (a result hook; the draft's name, in the protocol's extension slot:
no schema has it) when the agent advertises none of its own (there or where the draft put it), and then the two requests are kept for liminal (a request hook);
an agent that has its own gets them as sent.

Rewind is ``/clear MARK`` to any message: the thread moves (``ThreadMover.move_thread``) onto a
cut of the session file the message was said in, ending where that message's turn ends; the
client's thread id stays, the store keeps every turn. The message is found in the store by the
id the client was given (``acp_message_id``); its turn in the file is counted from the file's
end, since the turns the store saw said on a session are that file's last ones (a swap's
rewrite or a cut starts with older turns liminal copied there); so the store is read once it
holds every frame before the request's and no spool of a liminal that stopped is left to
store (``caught_up``: after a restart, the last turns may be its). An
agent message keeps the whole turn it is in: a cut inside a turn would part the model's tool
calls from their results.
A user message ends the context just before it: its answer cannot stay without it, and a
prompt with no answer is no context a CLI's file holds.

Edit is a rewind to just before the user message, then the new prompt sent on to the agent
under the client's id (``ClientVoice.forward_local``): the agent's answer is the answer, and the turn
streams to the client as any prompt's does.

A turn under way is cancelled first (``session/cancel`` to the agent, then its answer awaited).
An unknown id, an edit of a message that is not the person's, a request without the ids:
``-32602``; the move refused (the file gone, a swap under way): ``-32603`` with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread

from liminal import log, moves
from liminal.acp import jsonrpc
from liminal.acp.port import AgentLink, ClientVoice, Component, ThreadView
from liminal.acp.router import LOCAL, Local, LocalRequest
from liminal.errors import in_words
from liminal.harness.base import MoveHarness
from liminal.kernel.memory import Memory, unknown
from liminal.kernel.mover import SwapError, ThreadMover, Writer
from liminal.kernel.threads import ThreadModel
from liminal.kernel.whereabouts import caught_up, moved_elsewhere
from liminal.store.records import LOAD, MessageRecord, acp_message_id, conversation

if TYPE_CHECKING:
    from liminal.store.base import Store

logger = log.get("liminal.rewind")
METHODS = ("session/rewind", "session/edit_prompt")
CAPABILITY = "rewindSession"
ADVERTISED = {"supported": True, "supportsEditPrompt": True}
CANCEL_SECONDS = 30.0  # for the agent to answer the turn a rewind cancels
INDEX_SECONDS = 30.0  # for the index to store what the connection had before the request
_SAID = ("user", "agent", "thought")

StoreOpener = Callable[[], AbstractAsyncContextManager["Store"]]


def advertised(capabilities: Any) -> bool:
    """The agent's ``agentCapabilities`` say it rewinds: under ``_meta``, or where the draft put it."""
    if not isinstance(capabilities, dict):
        return False
    meta = capabilities.get("_meta")
    return CAPABILITY in capabilities or (isinstance(meta, dict) and CAPABILITY in meta)


class RewindError(Exception):
    """Said to the client as the request's error; nothing changed."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Cut:
    """Where the thread's context is to end: in ``backing``'s file, before its turn ``turn``
    (0-based among the ``turns`` the store saw said on it), or after it (``after``)."""

    backing: str
    turn: int
    turns: int
    after: bool
    last: MessageRecord | None  # the last message kept
    kept: int  # how many messages the client keeps


def find_cut(messages: Sequence[MessageRecord], target: str, *, edit: bool,
             is_command: Callable[[str], bool], liminals: Collection[str] = ()) -> Cut:
    """Where rewinding to (or editing) the message the client knows as ``target`` ends the
    context. ``is_command``: a prompt liminal answered itself, which the CLI never saw;
    ``liminals``: the turns the store has as liminal's (``Store.liminal_turns``: a command, a
    prompt refused while the agent was gone, whatever its words), which no file holds either."""
    shown = [m for m in conversation(messages) if m.kind in _SAID]
    found = next((m for m in shown if acp_message_id(m) == target), None)
    if found is None:
        found = _replayed_as(messages, shown, target, is_command)
    if found is None:
        raise RewindError(jsonrpc.INVALID_PARAMS, f"unknown message id {target!r} in this session")
    if edit and found.kind != "user":
        raise RewindError(jsonrpc.INVALID_PARAMS,
                          f"message {target!r} is the agent's: only a user message can be edited")
    backing = found.backing_id or found.thread_id
    turn_of: dict[str, int] = {}
    turns: list[MessageRecord] = []
    for m in shown:
        if (m.backing_id or m.thread_id) != backing:
            continue
        if m.kind == "user":
            if is_command(m.text) or m.turn_id in liminals:
                continue
            turns.append(m)
        if turns:
            turn_of[m.id] = len(turns) - 1
    if found.id not in turn_of:
        raise RewindError(jsonrpc.INVALID_PARAMS,
                          f"message {target!r} belongs to no turn liminal saw: it cannot be rewound to")
    turn = turn_of[found.id]
    after = found.kind != "user"
    # What the client keeps: everything before the cut.
    if after:
        in_turn = [m for m in shown if turn_of.get(m.id) == turn and (m.backing_id or m.thread_id) == backing]
        last: MessageRecord | None = in_turn[-1]
    else:
        index = shown.index(found)
        last = shown[index - 1] if index > 0 else None
    kept = shown.index(last) + 1 if last is not None else 0
    return Cut(backing, turn, len(turns), after, last, kept)


def timeline(messages: Sequence[MessageRecord]) -> list[MessageRecord]:
    """The thread's conversation as the client shows it after its rewinds and edits: what each
    one cut off (after the rewound-to message's turn, or from the edited message on, up to the
    move) left out, as the RFD has a load replay it. ``liminal history`` keeps everything."""
    said = {acp_message_id(m): m for m in messages if m.kind in _SAID}
    out = list(messages)
    for move in [m for m in messages if m.kind == "swap" and m.status == "committed"]:
        verb, _, target = moves.what(move.data).partition(" ")
        found = said.get(target) if verb in ("rewind", "edit") else None
        if found is None:
            continue
        if verb == "rewind" and found.kind != "user":
            last = max([found.order, *(m.order for m in messages if found.turn_id is not None
                                       and m.turn_id == found.turn_id and m.kind != "swap")])
            out = [m for m in out if not last < m.order < move.order]
        else:
            out = [m for m in out if not found.order <= m.order < move.order]
    return out


def _replayed_as(messages: Sequence[MessageRecord], shown: Sequence[MessageRecord], target: str,
                 is_command: Callable[[str], bool]) -> MessageRecord | None:
    """The live message a load's replay named ``target``: a thread that never moved is replayed by
    the agent, with its ids (or, from an agent that sends none, ids liminal gave the replay),
    not the live turn's. The replay's turns are the thread's, in order: its k-th prompt is the
    k-th the store recorded; its agent message stands for the last message of that turn. The
    replay is the thread's first load's, kept as messages, or its latest load's, whose note
    (``records.LOAD``) lists what it replayed (no later load's replay is stored)."""
    found = _in_replay(messages, target, is_command)
    if found is None:
        return None
    kind, turn = found
    users = [m for m in shown if m.kind == "user" and not is_command(m.text)]
    if not 0 <= turn < len(users):
        return None
    if kind == "user":
        return users[turn]
    start = shown.index(users[turn])
    stop = shown.index(users[turn + 1]) if turn + 1 < len(users) else len(shown)
    return shown[stop - 1] if stop - 1 > start else None


def _in_replay(messages: Sequence[MessageRecord], target: str,
               is_command: Callable[[str], bool]) -> tuple[str, int] | None:
    """The kind of the message a load's replay named ``target``, and the turn of the replay it
    is in (its prompts counted from 0)."""
    hit = next((m for m in messages if m.replayed and m.kind in _SAID and acp_message_id(m) == target), None)
    if hit is not None:
        load = hit.id.rpartition(":")[0]  # the connection of the load that replayed it
        prompts = [m for m in messages if m.replayed and m.kind == "user" and m.id.rpartition(":")[0] == load
                   and m.order <= hit.order and not is_command(m.text)]
        return hit.kind, len(prompts) - 1
    for note in (m for m in messages if m.kind == LOAD):
        said = [tuple(s) for s in note.data.get("said") or () if isinstance(s, list) and len(s) == 2]
        at = next((n for n, (_, mid) in enumerate(said) if mid == target), None)
        if at is not None:
            return str(said[at][0]), sum(1 for kind, _ in said[:at + 1] if kind == "user") - 1
    return None


def end_offset(cut: Cut, starts: Sequence[int], earlier: bool, size: int) -> int | None:
    """The byte offset in the file where the cut ends, or None for an empty context (the first
    turn of a file with nothing before it). Raises when the file holds fewer turns than the
    store saw said on it."""
    first = len(starts) - cut.turns
    if first < 0:
        raise RewindError(jsonrpc.INTERNAL_ERROR,
                          "the session file holds fewer turns than liminal recorded: not rewound")
    index = first + cut.turn + (1 if cut.after else 0)
    if index >= len(starts):
        return size
    if index == 0 and not earlier:
        return None
    return starts[index]


class Rewinding(ThreadView, ClientVoice, AgentLink, Protocol):
    """What a rewind reads of the thread, says to the client (the answer, the prompt sent on)
    and to the agent (the turn cancelled)."""


class Rewinder(Component):
    answers_local = True

    def __init__(self, model: ThreadModel, mover: ThreadMover, harness: MoveHarness,
                 open_store: StoreOpener, *, is_command: Callable[[str], bool] = lambda text: False,
                 memory: Memory | None = None, spool_behind: Callable[[], bool] = lambda: False) -> None:
        """``spool_behind``: a spool of a liminal that is gone holds frames (``caught_up``)."""
        self.model = model
        self.mover = mover
        self.harness = harness
        self._open_store = open_store
        self._is_command = is_command
        self._spool_behind = spool_behind
        self._store: Store | None = None
        self._store_cm: AbstractAsyncContextManager[Store] | None = None
        self._send, self._receive = anyio.create_memory_object_stream[LocalRequest](64)
        # The thread's scratchpad, for the cut's preamble.
        self.memory: Memory = memory if memory is not None else unknown()

    # -------------------------------------------------------------- the router's side

    def _agent_has_its_own(self) -> bool:
        return advertised(self.model.capabilities)

    def result_hooks(self) -> list[tuple[tuple[str, ...], Callable[[str, dict[str, Any]], dict[str, Any] | None]]]:
        return [(("initialize",), self._advertise)]

    def _advertise(self, method: str, result: dict[str, Any]) -> dict[str, Any] | None:
        caps = result.get("agentCapabilities")
        caps = caps if isinstance(caps, dict) else {}
        if advertised(caps):
            return None
        meta = caps.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        return {**result, "agentCapabilities": {**caps, "_meta": {**meta, CAPABILITY: ADVERTISED}}}

    def request_hooks(self) -> list[tuple[tuple[str, ...], Callable[..., Local | dict[str, Any] | None]]]:
        return [(METHODS, self._hook)]

    def _hook(self, method: str, message: dict[str, Any], thread: str | None) -> Local | None:
        return None if self._agent_has_its_own() else LOCAL

    def local_requested(self, request: LocalRequest) -> None:
        self._send.send_nowait(request)

    # ------------------------------------------------------------------ running

    async def run(self, port: Rewinding) -> None:
        async for request in self._receive:
            try:
                await self._answer(port, request)
            except RewindError as exc:
                port.answer_local(request.key, error=(exc.code, str(exc)))
            except SwapError as exc:
                port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, f"not rewound: {exc}"))
            except Exception as exc:  # a bug or the store down: answered all the same
                logger.exception("rewind failed", method=request.method, thread=request.thread_id)
                port.answer_local(request.key, error=(
                    jsonrpc.INTERNAL_ERROR, f"not rewound: {in_words(exc)}"))

    async def aclose(self) -> None:
        self._send.close()
        with anyio.CancelScope(shield=True):
            if self._store_cm is not None:
                await self._store_cm.__aexit__(None, None, None)

    async def _store_open(self) -> Store:
        if self._store is None:
            self._store_cm = self._open_store()
            self._store = await self._store_cm.__aenter__()
        return self._store

    async def _answer(self, port: Rewinding, request: LocalRequest) -> None:
        params = request.message.get("params")
        params = params if isinstance(params, dict) else {}
        thread = request.thread_id
        edit = request.method == "session/edit_prompt"
        target = params.get("messageId" if edit else "toMessageId")
        if thread is None or not isinstance(target, str) or not target:
            raise RewindError(jsonrpc.INVALID_PARAMS, f"{request.method} needs sessionId and "
                              f"{'messageId' if edit else 'toMessageId'}")
        content = params.get("newContent", params.get("content")) if edit else None
        if edit and not (isinstance(content, list) and content):
            raise RewindError(jsonrpc.INVALID_PARAMS, "session/edit_prompt needs newContent (content blocks)")
        store = await self._store_open()

        async def opened() -> Store:
            return store

        # Another sidecar on the store moved the thread since this one opened it: a cut of the
        # session here would take it back to its older context (``liminal.kernel.whereabouts``).
        why = await moved_elsewhere(opened, port, thread, None)
        if why is not None:
            raise SwapError(why)
        await self._cancel_turn(port, thread)
        # The cut counts turns from the file's end, as many as the store has on the session: a
        # turn the index has not stored yet would move the cut that many turns later: this
        # connection's, or a stopped liminal's still spooled.
        if not await caught_up(store, request.frame_id, self._spool_behind, INDEX_SECONDS):
            raise RewindError(jsonrpc.INTERNAL_ERROR, "liminal's store has not caught up with this "
                              f"thread's last turns in {INDEX_SECONDS:.0f} s: not rewound (try again)")
        # Every message the client was sent is in the store now: an id not found is unknown.
        cut = find_cut(await store.messages(thread), target, edit=edit, is_command=self._is_command,
                       liminals=await store.liminal_turns(thread))
        cwd = self.model.threads[thread].cwd if thread in self.model.threads else None
        harness, on = self.harness, port.backing_of(thread)
        scratchpad = await self.memory.scratchpad(thread)

        def plan(current: Path) -> Writer | None:
            source = current if on == cut.backing else harness.locate(cut.backing, cwd)
            if source is None:
                raise SwapError(f"the session file of {cut.backing} is gone")
            turns = harness.turns(source)
            end = end_offset(cut, turns.starts, turns.earlier, harness.position(source))
            if end is None:
                return None
            return lambda new_id: harness.cut([(source, 0, end)], current, new_id, keeps_thread=True,
                                              scratchpad=scratchpad)

        reason = f"{'edit' if edit else 'rewind'} {target}"
        await self.mover.move_thread(thread, reason, plan)
        logger.info("thread rewound", thread=thread, to=target, edit=edit, backing=port.backing_of(thread))
        if edit:
            assert isinstance(content, list)
            port.forward_local(request.key, "session/prompt", {"sessionId": thread, "prompt": content})
            return
        port.answer_local(request.key, {
            "remainingMessageCount": cut.kept,
            "lastMessageId": acp_message_id(cut.last) if cut.last is not None else None})

    async def _cancel_turn(self, port: Rewinding, thread: str) -> None:
        """The RFD: a turn under way is cancelled first, and its answer awaited."""
        if not port.prompt_in_flight(thread):
            return
        port.notify_agent("session/cancel", {"sessionId": port.backing_of(thread)}, thread_id=thread)
        deadline = time.monotonic() + CANCEL_SECONDS
        while port.prompt_in_flight(thread):
            if time.monotonic() > deadline:
                raise RewindError(jsonrpc.INTERNAL_ERROR, "the turn under way did not end when cancelled")
            await anyio.sleep(0.02)
