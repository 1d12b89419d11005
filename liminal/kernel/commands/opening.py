"""``session/load`` and ``session/resume`` of a thread, decided once the store has said where the
thread is (another sidecar on it may have moved the thread since this one last saw it, and an old
file of it here would open it silently on an older context):

- the store further along: the thread bound there and opened from the store
  (``liminal.kernel.restore``), the session's file written if this machine has none;
- the session without a file: the same, or reopened empty if liminal opened it empty and the
  store has none of it (``liminal.kernel.reopen``);
- the session's file here older than the store's (another sidecar went on on it, nothing
  moved): the file caught up from the store first (``restore.catch_up``);
- the file here made ready for the CLI to load (``restore.prepare``), before it is looked for:
  a CLI's own start may be removing it meanwhile (Gemini CLI's), and then it is written from the
  store as if it were gone;
- else the load goes on to the agent as the client sent it (the router's rule 8 included).

Before any of it, the thread's lock (``liminal acp``'s, ``held_elsewhere``): a thread another
live liminal has open is refused, and one the client's ``session/new`` made is locked too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from liminal import faults
from liminal.acp import jsonrpc
from liminal.acp.router import LocalRequest
from liminal.kernel import reopen, restore, whereabouts
from liminal.kernel.commands.shared import CommandContext, logger
from liminal.kernel.journal import committed

if TYPE_CHECKING:
    from liminal.store.base import Store

METHODS = reopen.OPENS
# A load waits this long for another liminal's lock of the thread: past a Redis lock's life
# (``liminal.serve.locks.REDIS_TTL_MS``), so a lock a dead sidecar left does not refuse it.
LOCK_WAIT_SECONDS = 35.0
LOCK_RETRY_SECONDS = 0.5
HELD_ELSEWHERE = ("this thread is open in another liminal on the same store (another editor or "
                  "machine): close it there, then load it here; each would go on from its own "
                  "copy of the conversation and lose the other's turns")


def keeps(c: CommandContext, message: dict[str, Any], thread: str | None) -> bool:
    """Kept whenever a store is configured, to be decided in ``answer``; without a store, only
    one whose session has no file: an empty session liminal opened (``liminal.kernel.reopen``)."""
    if thread is None:
        return False
    state = c.model.threads.get(thread)
    if state is not None and state.swapping:
        return False  # this liminal is moving it: its own view is the newer one
    if c.stores.configured:
        return True
    return reopen.without_file(c.mover.port, c.harness, c.journal, thread, message)


async def answer(c: CommandContext, request: LocalRequest) -> None:
    port = c.port
    thread = request.thread_id or ""
    store: Store | None = None
    later = None
    if await held_elsewhere(c, thread):
        port.answer_local(request.key, error=(jsonrpc.INTERNAL_ERROR, HELD_ELSEWHERE))
        return
    abandon_dead(c, thread)
    if c.stores.configured:
        asked = await whereabouts.ask_store(c.store, thread, c.tasks)
        store = asked.store
        if moving_here(c, thread):
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
    empty = reopen.without_file(port, c.harness, c.journal, thread, request.message) \
        or await opened_empty_elsewhere(c, thread, request.message)
    if later is None and not empty and store is not None:
        # The thread where this liminal had it, its file here: another sidecar may have
        # gone on on the same session since (``restore.catch_up``).
        behind = await restore.catch_up(store, c.harness, port.backing_of(thread),
                                        restore.cwd_of(request.message))
        if behind is not None:
            logger.warning("session file here not brought up to the store's", thread=thread,
                           session=port.backing_of(thread), reason=behind)
    await restore.prepare(c.harness, port.backing_of(thread), restore.cwd_of(request.message))
    if empty and not await restore.stored_whole(store, port.backing_of(thread)):
        await reopen.reopen(port, c.mover, store, request)
    elif later is not None or restore.file_missing(port, c.harness, thread, request.message):
        await restore.restore(port, c.mover, c.harness, store, request)
    else:
        port.forward_local(request.key, request.method, reopen.params_of(request.message))


async def held_elsewhere(c: CommandContext, thread: str) -> bool:
    """Whether another live liminal has ``thread`` open (its lock, ``take_thread``), after
    waiting up to ``LOCK_WAIT_SECONDS`` for it to let go; else the lock is this one's until
    it stops. Two live sidecars on one thread would each go on from their own copy of its
    session, and the turns of one would be missing from the other's (docs/operations.md,
    "Two sidecars, one thread"). A lock that cannot be taken for another reason (its folder
    not writable) is said and stops nothing."""
    if c.take_thread is None or not thread:
        return False
    try:
        await faults.hit("thread.lock")
        with anyio.move_on_after(LOCK_WAIT_SECONDS):
            while not await c.take_thread(thread):  # noqa: ASYNC110 (held in Redis: no event to wait on)
                await anyio.sleep(LOCK_RETRY_SECONDS)
            return False
    except Exception as exc:
        logger.warning("thread lock not taken", thread=thread, error=f"{type(exc).__name__}: {exc}")
        return False
    logger.warning("a thread another liminal has open refused", thread=thread)
    return True


def lock_new(c: CommandContext, method: str, result: dict[str, Any]) -> None:
    """A thread the client's ``session/new`` made is locked as one it loads is
    (``held_elsewhere``): the result hook of ``session/new``."""
    thread = result.get("sessionId")
    if c.take_thread is not None and isinstance(thread, str) and c.tasks is not None:
        c.tasks.start_soon(held_elsewhere, c, thread)


def moving_here(c: CommandContext, thread: str) -> bool:
    state = c.model.threads.get(thread)
    return (state is not None and state.swapping) or c.port.is_held(thread)


async def opened_empty_elsewhere(c: CommandContext, thread: str, message: dict[str, Any]) -> bool:
    """The thread is on a session another sidecar on the shared store opened empty (its
    ``/clear``), of which nothing is on disk here: what ``reopen.without_file`` says of this
    home's own, from the store's journal, read for as long as a load asks the store
    (``whereabouts.within_wait``)."""
    port, shared = c.mover.port, c.mover.shared
    if shared is None or port is None or not thread or port.backing_of(thread) == thread:
        return False
    backing = port.backing_of(thread)
    cwd = reopen.params_of(message).get("cwd")
    if c.harness.locate(backing, cwd if isinstance(cwd, str) else None) is not None:
        return False

    async def read() -> bool:
        return any(r.new_backing_id == backing and r.opened == "empty"
                   for r in committed(await shared.records(thread)))

    return await whereabouts.within_wait(c.tasks, read, False, "the shared store's journal")


def abandon_dead(c: CommandContext, thread: str) -> None:
    """A move of ``thread`` a dead sidecar began and never ended, recorded abandoned in the
    shared store (``StoreJournal.abandon_dead``), in the background: the load does not wait
    for it (a release clears only the claim, never the place or the lineage the load reads),
    and the thread's next move finds it free."""
    shared, leases = c.mover.shared, c.mover.leases
    if shared is None or not thread or c.tasks is None:
        return

    async def abandon() -> None:
        try:
            gone = leases is not None and await leases.gone(thread)
            await shared.abandon_dead(thread, lease_gone=gone)
        except Exception as exc:  # Redis down: the claim's age decides next time
            logger.warning("a dead move not looked at", thread=thread, error=f"{type(exc).__name__}: {exc}")

    c.tasks.start_soon(abandon)
