"""A WebSocket connection as the proxy's client leg (``liminal.transport.legs.ClientSide``):
each frame is one JSON-RPC message, handed to the router as one line; each line the router
writes to the client goes out as one text frame, in order.

What stdio never needed:

- **Strict reading.** A frame reaches the agent only when it is one JSON-RPC message that every
  parser reads alike (``liminal.serve.frames``); anything else is answered here.
- **Thread locks.** A request that names a thread (``params.sessionId``: a load, a prompt, a
  mode ...) goes on only once this connection holds the thread's lock
  (``liminal.serve.locks``); while another connection holds it the request waits (at most
  ``serve.busy_wait_seconds``, then it is answered with an error), and what came after it waits
  behind it: the client's order is kept. A notification (a cancel) naming a thread goes on only
  if this connection holds it already.
- **Bytes, not counts.** One task receives frames as they come (the socket's keepalive goes on
  while a message waits for a lock), another hands them on in order. What waits is counted in
  bytes: at most ``serve.max_message_bytes`` per connection (and 1 MiB more of messages of
  64 KiB or less: a cancel behind a large prompt still goes), and, with what is queued for
  clients, ``serve.buffer_bytes`` in the whole server (``ByteBudget``; small messages always
  pass); a message past either is refused with an error, never kept. Past ``serve.queue_bytes`` queued for a client that reads
  slowly, its agent is paused until the client has taken three quarters of it.
- **A connection dropped mid-turn.** The proxy is not told the client left while anything is
  under way (a prompt, a swap, a command's move): the agent is let go on writing (it was paused
  for a slow client, perhaps), its output reaches the store and no socket, its requests are
  answered as a client that has left would (permission: cancelled). When the turn ends the proxy
  ends, and a client that connects again and loads the thread gets it whole, from the store. An
  agent that says nothing for ``serve.detached_quiet_seconds`` (a request it never answers), or
  a turn past an hour, ends it sooner: what the gone client is still owed is dropped.
- **Idleness.** A connection with no traffic either way and nothing under way for
  ``serve.idle_seconds`` is closed (1000).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.typing import Data

from liminal import log
from liminal.acp import jsonrpc
from liminal.acp.framing import HEAD_BYTES, TAIL_BYTES
from liminal.config import ServeSettings
from liminal.serve import frames
from liminal.serve.waiting import ByteBudget, Inbox, Outbox

if TYPE_CHECKING:
    from liminal.proxy import Proxy
    from liminal.serve.locks import ThreadLocks

logger = log.get("liminal.serve")
IDLE_LOOKS = 4  # a detached proxy ends after this many looks in a row find nothing under way
LOOK_SECONDS = 0.25
BUSY_CODE = -32002
FULL_CODE = -32003
CLAIM_SECONDS = 30.0
DETACHED_MAX_SECONDS = 3600.0
LOCK_POLL_SECONDS = 0.1
LOGGED_REFUSALS = 10  # refused frames logged per connection; a flood is said once


def answer_from_gone_client(rpc_id: bytes, method: str) -> bytes:
    """The answer a client that has left gives the agent's request: a permission cancelled,
    anything else an error."""
    if method == "session/request_permission":
        return b'{"jsonrpc":"2.0","id":' + rpc_id + b',"result":{"outcome":{"outcome":"cancelled"}}}'
    return jsonrpc.error_frame(rpc_id, jsonrpc.INTERNAL_ERROR, "the client has disconnected")


def created_thread(line: bytes, new_sessions: set[Any]) -> str | None:
    """The thread a line of the agent's answers into being: its answer to one of the client's
    ``session/new`` requests still unanswered (``new_sessions``, their id keys: it is taken off)."""
    message = jsonrpc.parse(line)
    if message is None or "id" not in message or "method" in message:
        return None
    key = jsonrpc.id_key(message["id"])
    if key not in new_sessions:
        return None
    new_sessions.discard(key)
    result = message.get("result")
    thread = result.get("sessionId") if isinstance(result, dict) else None
    return thread if isinstance(thread, str) else None


async def owed_nothing(proxy: Proxy | None, timeout: float) -> None:
    """Until the proxy owes its client nothing (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    while (proxy is not None and proxy.router.pending_client_ids()  # noqa: ASYNC110 - no event for it
           and time.monotonic() < deadline):
        await asyncio.sleep(0.02)


# The detached connection, if any, whose proxy the thread's load on this leg takes over.
FindDetached = Callable[[str, "WebSocketClientLeg"], "WebSocketClientLeg | None"]


class WebSocketClientLeg:
    def __init__(self, connection: ServerConnection, *, locks: ThreadLocks | None = None,
                 settings: ServeSettings | None = None, budget: ByteBudget | None = None,
                 first: Data | None = None, detached_max: float = DETACHED_MAX_SECONDS,
                 find_detached: FindDetached | None = None) -> None:
        self.connection = connection
        self.locks = locks
        self.settings = settings or ServeSettings()
        self.budget = budget or ByteBudget(self.settings.buffer_bytes)
        self.detached_max = detached_max
        self.proxy: Proxy | None = None  # set once the proxy exists: its router says what runs
        self.closed = False  # the reading is over: the proxy has been told the client left
        self.detached = False
        # From the client: received, waiting to be handed on (counted until handed on).
        self.inbox = Inbox(self.budget, self.settings.max_message_bytes)
        self._wake = asyncio.Event()  # a message came, the client left, or reading may go on
        self._paused_in = False  # the proxy asked: the agent's stdin is full
        self._left = False  # the client's socket is gone
        self._activity = time.monotonic()
        self._refusals = 0
        self.outbox = Outbox(self.budget, self.settings.queue_bytes)  # to the client
        self._sender: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._on_data: Callable[[bytes], None] = lambda data: None
        self._closing: asyncio.Task[None] | None = None
        self._given_up = False
        self._pending_takes: set[asyncio.Task[bool]] = set()
        self._new_sessions: set[Any] = set()  # ids of session/new requests: their answers name threads
        # Taking over a detached connection's proxy (``adopt``).
        self.find_detached = find_detached
        self.handover: tuple[WebSocketClientLeg, dict[str, Any]] | None = None
        self._adopted = asyncio.Event()
        self.claimed: float | None = None  # when a new connection chose to take this proxy over
        self.finished = asyncio.Event()  # the reading is over: the proxy is told the client left
        if first is not None:  # the ``initialize`` the server read before the proxy existed
            self._take_in(first.encode() if isinstance(first, str) else bytes(first))

    async def open(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None],
                   on_flow: Callable[[bool], None]) -> None:
        self.outbox.on_flow = on_flow
        self._on_data = on_data
        loop = asyncio.get_running_loop()
        self._sender = loop.create_task(self._send(self.connection))
        self._tasks = [loop.create_task(self._forward(on_data, on_eof)), self._sender,
                       loop.create_task(self._receive(self.connection))]

    # -- from the client: receiving ----------------------------------------------------------------

    async def _receive(self, connection: ServerConnection) -> None:
        """Take every frame as it comes (or refuse it), until the socket closes."""
        try:
            while True:
                try:
                    async with asyncio.timeout(self._idle_left()):
                        message = await connection.recv(decode=False)
                except TimeoutError:
                    await self._close_if_idle(connection)
                    continue
                self._activity = time.monotonic()
                self._take_in(message)
        except ConnectionClosed:
            pass
        except Exception:
            logger.exception("reading the WebSocket failed")
        finally:
            if connection is self.connection:
                self._lost()

    def _take_in(self, message: bytes) -> None:
        if self.closed or self._left:
            return  # nobody reads any more (the sender found the socket gone)
        why = self.inbox.take(message)
        if why is not None:
            self._refuse_in(message, why)
            return
        self._wake.set()

    def _refuse_in(self, message: bytes, why: str) -> None:
        found = jsonrpc.recover_top_level(message[:HEAD_BYTES], message[-TAIL_BYTES:])
        self._log_refusal("message refused: too much waiting", why=why, size=len(message))
        if "id" in found and "method" in found:
            self._answer(jsonrpc.error_frame(found["id"], FULL_CODE,
                                             f"liminal serve is holding too much already ({why}); "
                                             "send it again later"))

    def _log_refusal(self, event: str, **fields: Any) -> None:
        self._refusals += 1
        if self._refusals <= LOGGED_REFUSALS:
            logger.warning(event, connection=self._connection_id(), **fields)
        if self._refusals == LOGGED_REFUSALS:
            logger.warning("further refused frames of this connection are not logged",
                           connection=self._connection_id())

    def _idle_left(self) -> float | None:
        idle = self.settings.idle_seconds
        return None if not idle else max(0.0, self._activity + idle - time.monotonic())

    async def _close_if_idle(self, connection: ServerConnection) -> None:
        idle = self.settings.idle_seconds
        now = time.monotonic()
        if now - self._activity < idle:
            return  # something was sent to the client meanwhile
        if self.under_way() or self.inbox.messages or self.outbox.lines or self.detached or self.handover is not None:
            self._activity = now  # a turn under way is not idleness
            return
        logger.info("connection closed: idle", connection=self._connection_id(), seconds=idle)
        await connection.close(1000, f"idle for {idle:g} s (serve.idle_seconds)")

    # -- from the client: handing on ---------------------------------------------------------------

    async def _forward(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        while True:
            while (data := await self._next()) is not None:
                try:
                    await self._hand_on(data, on_data)
                except Exception:  # one message's failure is not the connection's end
                    logger.exception("handing a client's message on failed")
                finally:
                    self.inbox.done_with(data)
                if self.handover is not None:
                    break
            if self.handover is not None:
                break  # this connection goes on with another's proxy (``adopt``)
            await self._finish_turns()
            if not self._adopted.is_set():
                break
            self._adopted.clear()  # a new connection took this proxy over: go on with it
        self.closed = True
        self.detached = False
        self.finished.set()
        on_eof()

    async def _next(self) -> bytes | None:
        """The next message to hand on; None once the client has left and none is left. While
        the agent's stdin is full, none (unless the client has left: its last words, a cancel
        perhaps, still go, and what waits is bounded)."""
        while True:
            if self.inbox.messages and (not self._paused_in or self._left):
                return self.inbox.messages.popleft()  # still counted until ``done_with``
            if self._left:
                return None
            self._wake.clear()
            await self._wake.wait()

    async def _hand_on(self, data: bytes, on_data: Callable[[bytes], None]) -> None:
        # One frame is one line: a newline (only whitespace, in JSON that reads) would split it.
        data = data.replace(b"\n", b" ").replace(b"\r", b" ")
        verdict = frames.read(data)
        if isinstance(verdict, frames.Refusal):
            self._log_refusal("frame refused", why=verdict.why, size=len(data))
            if verdict.answer is not None:
                self._answer(verdict.answer)
            return
        if await self._admit(verdict, data) and self.handover is None:
            on_data(data + b"\n")

    async def _admit(self, verdict: frames.Message, data: bytes) -> bool:
        """Whether the message may go to the agent now; it waits while another connection
        holds its thread, and is answered here if that lasts past ``busy_wait_seconds``."""
        method, rpc_id = verdict.method, verdict.rpc_id
        if method == "session/new" and rpc_id is not None:
            self._new_sessions.add(rpc_id)
            return True
        if self.locks is None or verdict.thread is None:
            return True
        # A session a thread was moved onto is the thread's: its lock is the thread's.
        thread = self.proxy.router.thread_of(verdict.thread) if self.proxy is not None else verdict.thread
        holder = self.find_detached(thread, self) if self.find_detached is not None else None
        if holder is not None and method in ("session/load", "session/resume") and rpc_id is not None:
            # The thread's turn still runs in the proxy of a connection that dropped: this
            # connection takes that proxy over and gets the rest live (``adopt``). Claimed now,
            # in this step, so that proxy does not end while this one winds down; what this
            # connection asked its own proxy before is answered first.
            holder.claimed = time.monotonic()
            await owed_nothing(self.proxy, CLAIM_SECONDS / 2)
            message = jsonrpc.parse(data)
            assert message is not None  # it was read strictly: the router reads it too
            self.handover = (holder, message)
            return False
        if rpc_id is None:
            # A notification (a cancel) opens nothing and is answered by nobody: it is for a
            # thread this connection holds, or for no agent of this connection.
            if self.locks.holds(thread):
                return True
            self._log_refusal("notification for a thread this connection has not opened: dropped",
                              method=method, thread=thread)
            return False
        deadline = time.monotonic() + self.settings.busy_wait_seconds
        while not await self.locks.try_take(thread):
            if time.monotonic() >= deadline or self._left:
                logger.warning("thread in use by another connection", thread=thread, method=method)
                self._answer(jsonrpc.error_frame(
                    jsonrpc.encode_id(rpc_id), BUSY_CODE,
                    "this thread is open in another connection of liminal; try again when it is closed"))
                return False
            await asyncio.sleep(LOCK_POLL_SECONDS)
        return True

    # -- the client left -------------------------------------------------------------------------

    def _lost(self) -> None:
        """The socket is gone (seen by the reader or the sender): nothing more is queued for it,
        and an agent paused for it goes on (else a turn under way waits for nobody)."""
        if self._left:
            return
        self._left = True
        self.outbox.drop()
        self.outbox.unpause()
        self._wake.set()

    async def _finish_turns(self) -> None:
        """The client left: let what is under way finish before the proxy hears of it."""
        if self._given_up or not self.under_way():
            return
        self.detached = True  # (``_lost`` dropped the queue and unpaused the agent already)
        proxy = self.proxy
        logger.info("connection dropped with a turn under way; it goes on", connection=self._connection_id(),
                    owed=proxy.router.owed_to_client() if proxy is not None else [])
        if proxy is not None:  # what the agent asked the client that left
            for rpc_id, method in proxy.router.open_agent_requests():
                self._on_data(answer_from_gone_client(jsonrpc.encode_id(rpc_id), method) + b"\n")
        since = time.time()
        deadline = time.monotonic() + self.detached_max
        quiet_limit = self.settings.detached_quiet_seconds
        idle_looks = 0
        why = "the turn ended"
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOOK_SECONDS):
                    await self._adopted.wait()
            if self._adopted.is_set():
                return  # live again, with another connection
            if self._given_up:
                why = "liminal is stopping"
                break
            if time.monotonic() >= deadline:
                why = f"{self.detached_max:g} s since the client left"
                break
            if self._claim_holds():
                continue
            if not self.under_way():
                idle_looks += 1
                if idle_looks >= IDLE_LOOKS:
                    break
                continue
            idle_looks = 0
            heard = max(proxy.router.agent_heard if proxy is not None else 0.0, since)
            if time.time() - heard > quiet_limit:
                why = f"the agent said nothing for {quiet_limit:g} s (serve.detached_quiet_seconds)"
                logger.warning("a dropped connection's agent has gone quiet; what it owed is dropped",
                               connection=self._connection_id(),
                               owed=proxy.router.owed_to_client() if proxy is not None else [])
                break
        logger.info("detached connection finished", connection=self._connection_id(), why=why)

    def _claim_holds(self) -> bool:
        """A new connection is taking this proxy over (``adopt`` comes within 30 s)."""
        return self.claimed is not None and time.monotonic() - self.claimed < CLAIM_SECONDS

    def give_up(self) -> None:
        """Do not wait for a turn under way when the client leaves, or stop waiting for one
        (liminal is shutting down): the proxy ends now, which stops the agent."""
        self._given_up = True

    def under_way(self) -> bool:
        proxy = self.proxy
        if proxy is None or not proxy.router.agent_alive:
            return False
        if not proxy.router.agent_idle():
            return True
        return any(getattr(c, "busy", lambda: False)() for c in proxy.components)

    def _connection_id(self) -> str:
        return self.proxy.connection_id if self.proxy is not None else ""

    # -- to the client ---------------------------------------------------------------------------

    async def _send(self, connection: ServerConnection) -> None:
        try:
            await self.outbox.send(connection, lambda: self.connection)
        except ConnectionClosed:
            if connection is self.connection:
                self._lost()

    def _queue(self, line: bytes) -> None:
        self.outbox.put(line)
        self._activity = time.monotonic()

    def _answer(self, line: bytes) -> None:
        """A line of the leg's own for the client (an error for a message that never reached the
        proxy: no id of it was renamed)."""
        if not (self.detached or self.closed or self._left):
            self._queue(line)

    def write(self, data: bytes) -> None:
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            if self._new_sessions and self.locks is not None and b'"sessionId"' in line:
                self._lock_new_session(line)
            if self.detached:
                self._answer_for_the_client(line)
            elif not (self.closed or self._left):
                self._queue(line)

    def _lock_new_session(self, line: bytes) -> None:
        thread = created_thread(line, self._new_sessions)
        if thread is not None and self.locks is not None:
            # A new thread: free everywhere, unless an id repeats; taken before the client
            # can name it (its next message is handed on after this task has run).
            task = asyncio.get_running_loop().create_task(self.locks.try_take(thread))
            self._pending_takes.add(task)
            task.add_done_callback(self._pending_takes.discard)

    def _answer_for_the_client(self, line: bytes) -> None:
        """While detached, the agent's requests are answered as by a client that has left."""
        if b'"method"' not in line or b'"id"' not in line:
            return
        message = jsonrpc.parse(line)
        if message is None or "id" not in message or "method" not in message:
            return
        answer = answer_from_gone_client(jsonrpc.encode_id(message["id"]), str(message["method"]))
        # Not from inside the proxy's flush that is writing this line.
        asyncio.get_running_loop().call_soon(self._on_data, answer + b"\n")

    # -- a new connection takes over ---------------------------------------------------------------

    async def adopt(self, connection: ServerConnection, load: dict[str, Any],
                    history: list[dict[str, Any]]) -> None:
        """A new connection takes over this detached proxy: its ``load`` (or ``resume``) of the
        thread is answered here with the thread's history (from the store) and the rest of the
        running turn goes to it live; it can cancel it. What the gone client is still owed is
        dropped, not taken for this client's own (the router's rule 9, ``client_replaced``)."""
        thread = str((load.get("params") or {}).get("sessionId"))
        if self.proxy is not None:
            self.proxy.router.client_replaced()
        if self._sender is not None:
            self._sender.cancel()
        self.connection = connection
        self.closed = False
        self.detached = False
        self._left = False
        self._activity = time.monotonic()
        self.outbox.drop()
        for update in history:
            self._queue(orjson.dumps({"jsonrpc": "2.0", "method": "session/update",
                                      "params": {"sessionId": thread, "update": update}}))
        self._queue(b'{"jsonrpc":"2.0","id":' + jsonrpc.encode_id(load["id"]) + b',"result":{}}')
        loop = asyncio.get_running_loop()
        self._sender = loop.create_task(self._send(connection))
        self._tasks += [self._sender, loop.create_task(self._receive(connection))]
        self.claimed = None
        self._adopted.set()
        logger.info("a new connection took over a detached turn", thread=thread, connection=self._connection_id())

    def pause_reading(self, pause: bool) -> None:
        self._paused_in = pause
        if not pause:
            self._wake.set()

    def close(self) -> None:
        """Send what is queued (for up to two seconds), then close the connection (unless it
        goes on with another connection's proxy: then ``handed_over`` once it is sent)."""
        if self.handover is not None:
            with contextlib.suppress(RuntimeError):
                self._closing = asyncio.get_running_loop().create_task(self._drain_for_handover())
            return
        with contextlib.suppress(RuntimeError):
            self._closing = asyncio.get_running_loop().create_task(self._drain_and_close())

    async def _drain_for_handover(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await self.outbox.sent_all.wait()
        await self._stop_tasks()  # before another leg reads this socket

    async def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def handed_over(self) -> None:
        """What this connection's own proxy answered went out, its tasks are stopped, and what
        the client sent after its load is the proxy's it goes on with."""
        if self._closing is not None:
            with contextlib.suppress(Exception):
                await self._closing
        if self.handover is not None and self.inbox.messages:
            self.inbox.hand_to(self.handover[0].inbox)

    async def _drain_and_close(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await self.outbox.sent_all.wait()
        await self._stop_tasks()
        await self.connection.close()
