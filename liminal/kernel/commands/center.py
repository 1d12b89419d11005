"""The command center: the component that plugs the command table (``table.py``) into the
router and answers what it keeps, one request at a time, on its own queue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from liminal.acp.port import Component, Port
from liminal.acp.router import LOCAL, Local, LocalRequest, RequestHook, ResultHook, UpdateHook
from liminal.errors import in_words
from liminal.harness.base import SessionHarness
from liminal.kernel import delete
from liminal.kernel.aids import CommandAids
from liminal.kernel.commands import opening
from liminal.kernel.commands.shared import CommandContext, logger
from liminal.kernel.commands.stores import CacheOpener, StoreOpener, Stores
from liminal.kernel.commands.table import COMMANDS, METHODS, OFFERED, LocalMethod, run_slash
from liminal.kernel.journal import SwapJournal
from liminal.kernel.mover import ThreadMover
from liminal.kernel.policy import CostPolicy
from liminal.kernel.threads import ThreadModel
from liminal.mcp.link import SlashRequest

if TYPE_CHECKING:
    from liminal.store.base import Store


class CommandCenter(Component):
    """Its request hooks keep what the table says liminal answers (the prompts that are
    commands, the lists, the loads it decides, the deletes, the forks an agent cannot make);
    ``run`` answers each with its handler. Its update hooks add liminal's commands to the
    agent's ``available_commands_update``, so the UI offers both, and keep the thread's title."""

    answers_local = True

    def __init__(self, model: ThreadModel, mover: ThreadMover, journal: SwapJournal, policy: CostPolicy,
                 harness: SessionHarness, open_store: StoreOpener | None,
                 open_cache: CacheOpener | None = None, aids: CommandAids | None = None) -> None:
        self.stores = Stores(open_store, open_cache)
        # What the center reads from the other components (``liminal.kernel.aids.CommandAids``).
        self.context = CommandContext(model, mover, journal, policy, harness, self.stores,
                                      aids or CommandAids())
        self._methods: dict[str, LocalMethod] = {method: entry for entry in METHODS for method in entry.methods}
        self._send, self._receive = anyio.create_memory_object_stream[LocalRequest | SlashRequest](256)

    @property
    def tasks(self) -> anyio.abc.TaskGroup | None:
        """Where a store read past its wait runs on (``whereabouts.within_wait``), while running."""
        return self.context.tasks

    async def store(self) -> Store:
        """The store the commands use, opened once (the scratchpad of every move reads it)."""
        return await self.context.store()

    # -------------------------------------------------------------- the router's side

    def request_hooks(self) -> list[tuple[tuple[str, ...], RequestHook]]:
        return [(entry.methods, self._keeps(entry)) for entry in METHODS]

    def _keeps(self, entry: LocalMethod) -> RequestHook:
        context = self.context

        def hook(method: str, message: dict[str, Any], thread: str | None) -> Local | None:
            return LOCAL if entry.keeps(context, message, thread) else None

        return hook

    def result_hooks(self) -> list[tuple[tuple[str, ...], ResultHook]]:
        # What liminal answers for the agent, in its capabilities (``liminal.kernel.delete``);
        # the lock of a thread the client's ``session/new`` made (``opening.lock_new``).
        context = self.context
        return [(("initialize",), lambda method, result: delete.advertise(result)),
                (("session/new",), lambda method, result: opening.lock_new(context, method, result))]

    def update_hooks(self) -> list[tuple[tuple[str, ...], UpdateHook]]:
        return [(("available_commands_update",), self._with_ours),
                (("session_info_update",), self._thread_keeps_its_title)]

    def local_requested(self, request: LocalRequest) -> None:
        self._send.send_nowait(request)

    def slash_requested(self, request: SlashRequest) -> None:
        """A command the model asked for (``liminal.kernel.modeltools``), run now its turn ended."""
        try:
            self._send.send_nowait(request)
        except anyio.WouldBlock:
            logger.warning("too many slash commands waiting; dropped", thread=request.thread,
                           command=request.command)

    def _thread_keeps_its_title(self, thread: str, update: dict[str, Any]) -> dict[str, Any] | None:
        """The agent's update without its ``title`` once the thread is on another session than
        its own: the CLI titles each session liminal moves a thread onto after that session's
        first prompt ("gamma after clear"), which is not the thread's name. The client goes on
        showing the title it has (the thread's, also what ``session/list`` answers); the rest
        of the update (``updatedAt``, ``_meta``) passes. The store keeps the update as sent."""
        port = self.context.mover.port
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
        self.context.port = port
        async with anyio.create_task_group() as self.context.tasks:
            async for request in self._receive:
                if isinstance(request, SlashRequest):
                    await run_slash(self.context, request)
                else:
                    await self._answer(port, request)

    async def _answer(self, port: Port, request: LocalRequest) -> None:
        """The request answered by its method's handler; whatever fails inside liminal, answered."""
        from liminal.acp import jsonrpc

        entry = self._methods.get(request.method)
        if entry is None:  # kept by another component's hook, handed here: not liminal's to answer
            port.answer_local(request.key, error=(jsonrpc.METHOD_NOT_FOUND, f"liminal does not answer {request.method}"))
            return
        try:
            await entry.answer(self.context, request)
        except Exception as exc:  # a bug, the agent's answer timed out: answered all the same
            logger.exception(entry.failed, thread=request.thread_id)
            port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, f"{entry.failed}: {in_words(exc)}"))

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            for gone in self.context.deleted:  # what a CLI wrote again since (``delete.sweep``)
                await delete.again(gone)  # a part that fails is logged
            await self.stores.aclose()
