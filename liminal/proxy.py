"""The proxy: the router between the two legs, plus the components that hang off it.

This is the only place where the router's output turns into I/O. Each callback feeds the router,
then ``_flush`` writes what it produced (one write per side per chunk), offers the events to the
taps, settles liminal's own requests and logs bad input.

Components (the indexer, the thread model, the swap manager, ...) are ``liminal.acp.port.Component``
subclasses: typed hooks the proxy calls, each doing nothing unless overridden (``offer`` for the
frames its ``frames`` asks, a tap subscriber: ``liminal.acp.taps``; ``prepare``, ``run``,
``stopping``, ``aclose``; the router's hooks; ``local_requested``, ``replay_requested``,
``restart_agent``). They act on the conversation only through the port the proxy hands them
(``ProxyPort``, a ``liminal.acp.port.Port``), which writes out what each act produced: no
component holds the proxy, its router or its legs.
"""

from __future__ import annotations

import asyncio
import gc
import shlex
import signal
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from liminal import log
from liminal.acp.port import AgentProcess, OwnRequestError, Port
from liminal.acp.port import Component as Component  # what a component is, for those that make them
from liminal.acp.router import LocalRequest, Router
from liminal.config import ProxySettings
from liminal.supervise import Supervisor
from liminal.transport.legs import AgentLeg, AgentSide, ClientLeg, ClientSide
from liminal.transport.versioned import VersionedClient

logger = log.get("liminal.proxy")
# An agent whose stdout has ended is given this long to exit before it is taken for dead.
STDOUT_GRACE_SECONDS = 2.0
# An agent that could not start (or died before a word): how long a client that sends nothing
# more and keeps its end open is waited on, its requests answered with the reason.
DEAD_END_SECONDS = 10.0


def tune_gc() -> None:
    """Make the cyclic collector cheap for a process that relays frames all day.

    Every frame allocates a parsed copy (a handful of dicts) and, with taps on, an event that
    lives until its subscriber drains it. With the default thresholds that churn runs a
    young-generation collection every few hundred frames and, now and then, a full one that walks
    every object alive since start-up: together about a sixth of the proxy's CPU time and pauses
    of milliseconds in the middle of a stream. Freezing what start-up left behind takes those
    objects out of every later collection; a larger first threshold makes collections rarer.
    Nothing is kept alive longer than before except garbage cycles, which wait a little longer.
    For the process that runs the proxy (``liminal acp``), called once before it starts.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


def _ignore(_: object) -> None:
    pass


def _command(argv: Sequence[str]) -> str:
    """The agent's command as a person would type it (cut: it is said in one line)."""
    text = shlex.join(argv)
    return text if len(text) <= 200 else text[:199] + "…"


def _nothing() -> None:
    pass


async def ask(router: Router, waiters: dict[str, asyncio.Future[dict[str, Any]]], flush: Callable[[], None],
              method: str, params: Any, timeout: float, thread_id: str | None,
              private: bool = False) -> Any:
    """Send a request of liminal's own through ``router`` and wait for its answer: the one
    request path, to the agent and to a process being prepared (``_PreparedAgent``) alike,
    so every own request has an id of the router's namespace (``liminal-<random>-N``).
    ``flush`` writes what the router produced and settles ``waiters`` from its answers."""
    if not router.agent_alive:
        raise OwnRequestError(method, "the agent is gone")
    rpc_id = router.send_request(method, params, time.time(), thread_id=thread_id, private=private)
    waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    waiters[rpc_id] = waiter
    flush()
    try:
        with anyio.fail_after(timeout):
            message = await waiter
    finally:
        if waiters.pop(rpc_id, None) is not None:
            router.cancel_own(rpc_id)
    if "error" in message:
        raise OwnRequestError(method, message["error"])
    return message.get("result")


def _settle(waiters: dict[str, asyncio.Future[dict[str, Any]]], answers: list[tuple[str, dict[str, Any]]]) -> None:
    for rpc_id, message in answers:
        waiter = waiters.pop(rpc_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(message)


class _PreparedAgent:
    """A process of the agent command liminal prepares before it becomes the agent (the
    recycle, the agent restart: ``Port.start_agent``), or runs a side session in. Its lines go
    through a router of its own, which does not tap: liminal's requests and their answers take
    the same path as to the agent (``ask``), a side session's words are kept and its requests
    refused (rule 11); what it says besides (replays, command lists) is dropped; a request of
    its own to the client fails it."""

    def __init__(self, leg: AgentLeg, max_frame_bytes: int) -> None:
        self.leg = leg
        self.router = Router(max_frame_bytes=max_frame_bytes, tapping=False)
        self.max_line = max_frame_bytes
        self._buffer = bytearray()
        self._waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.failure: str | None = None
        self.dropped = 0

    @property
    def pid(self) -> int | None:
        return self.leg.pid

    def feed(self, data: bytes) -> None:
        self._buffer += data
        end = self._buffer.rfind(b"\n")
        if end >= 0:  # whole lines only: the rest is the agent's once it is switched in
            self.router.receive_from_agent(bytes(self._buffer[:end + 1]), time.time())
            del self._buffer[:end + 1]
            self._flush()
        if len(self._buffer) > self.max_line:
            self._fail(f"a line over {self.max_line} bytes")

    def _flush(self) -> None:
        out = self.router.take()
        if out.to_agent:
            self.leg.write(out.agent_bytes())
        self.dropped += len(out.to_client) + len(out.problems)
        _settle(self._waiters, out.own_responses)
        asked = self.router.open_agent_requests()
        if asked:
            self._fail(f"the new process asked the client {asked[0][1]!r}")

    def eof(self) -> None:
        self._fail("the new process closed its output")

    def _fail(self, why: str) -> None:
        self.failure = self.failure or why
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(OwnRequestError("", why))
        self._waiters.clear()

    def pending(self) -> bytes:
        """What the process wrote after its last whole line, for whoever reads it next."""
        return bytes(self._buffer)

    async def request(self, method: str, params: Any, *, timeout: float,
                      thread_id: str | None = None, private: bool = False) -> Any:
        if self.failure is not None:
            raise OwnRequestError(method, self.failure)
        return await ask(self.router, self._waiters, self._flush, method, params, timeout, thread_id,
                         private)

    def take_side(self, session_id: str) -> list[bytes]:
        return self.router.take_side(session_id)


def with_parts(components: Sequence[Component]) -> list[Component]:
    """The components, each preceded by the parts it is built on (``parts()``: the thread model
    the swap manager, the recycle and the model tools read), each part once, however many
    components share it: fed every frame once, before those that read it."""
    found: list[Component] = []
    for component in components:
        for part in [*component.parts(), component]:
            if not any(part is seen for seen in found):
                found.append(part)
    return found


class RouterPort:
    """The part of a ``Port`` (``liminal.acp.port``) that is the router's: what it knows, the
    threads, the messages, each act written out by ``flush`` (which settles ``waiters`` from the
    router's answers), own requests through ``ask``. The proxy's port adds its agent process
    (``ProxyPort``); tests put their own flush over a bare router (``tests/support/fakeport.py``)."""

    def __init__(self, router: Router, flush: Callable[[], None],
                 waiters: dict[str, asyncio.Future[dict[str, Any]]]) -> None:
        self._router = router
        self._flush = flush
        self._waiters = waiters

    # what is known
    @property
    def agent_alive(self) -> bool:
        return self._router.agent_alive

    def backing_of(self, thread_id: str) -> str:
        return self._router.backing_of(thread_id)

    def thread_of(self, backing_id: str) -> str:
        return self._router.thread_of(backing_id)

    def is_held(self, thread_id: str) -> bool:
        return self._router.is_held(thread_id)

    def prompt_in_flight(self, thread_id: str) -> bool:
        return self._router.prompt_in_flight(thread_id)

    def agent_request_open(self, thread_id: str) -> bool:
        return self._router.agent_request_open(thread_id)

    def agent_idle(self) -> bool:
        return self._router.agent_idle()

    def stop_cause(self) -> str | None:
        return None  # a bare router never stops; the proxy's port says why it does

    # the threads
    def hold(self, thread_id: str) -> None:
        self._router.hold(thread_id)

    def release(self, thread_id: str) -> int:
        released = self._router.release(thread_id)
        self._flush()
        return released

    def bind(self, thread_id: str, backing_id: str) -> None:
        self._router.bind(thread_id, backing_id)

    def adopt(self, backing_id: str, thread_id: str) -> None:
        self._router.adopt(backing_id, thread_id)

    def capture(self, backing_id: str) -> None:
        self._router.capture(backing_id)

    def uncapture(self, backing_id: str) -> None:
        self._router.uncapture(backing_id)

    # messages
    async def request(self, method: str, params: Any, *, timeout: float,
                      thread_id: str | None = None, private: bool = False) -> Any:
        return await ask(self._router, self._waiters, self._flush, method, params, timeout, thread_id,
                         private)

    def take_side(self, session_id: str) -> list[bytes]:
        return self._router.take_side(session_id)

    def end_side(self, session_id: str) -> None:
        self._router.end_side(session_id)

    def answer_local(self, key: Any, result: Any = None, *, error: tuple[int, str] | None = None) -> None:
        self._router.answer_local(key, result, error=error)
        self._flush()

    def notify_client(self, method: str, params: Any) -> None:
        self._router.notify_client(method, params, time.time())
        self._flush()

    def notify_agent(self, method: str, params: Any, *, thread_id: str | None = None) -> None:
        self._router.notify_agent(method, params, time.time(), thread_id=thread_id)
        self._flush()

    def forward_local(self, key: Any, method: str, params: dict[str, Any]) -> bool:
        forwarded = self._router.forward_local(key, method, params, time.time())
        self._flush()
        return forwarded

    def notify_in_next_turn(self, thread_id: str, method: str, params: Any) -> None:
        self._router.notify_in_next_turn(thread_id, method, params)

    def note(self, method: str, data: dict[str, Any], *, thread_id: str, at: float | None = None) -> None:
        self._router.note(method, data, time.time() if at is None else at, thread_id=thread_id)
        self._flush()

    def finish_replay(self, token: int, history: list[dict[str, Any]] | None) -> bool:
        finished = self._router.finish_replay(token, history, time.time())
        self._flush()
        return finished


class ProxyPort(RouterPort):
    """The ``Port`` the proxy gives its components: its router, written out after every act
    that produces frames (``RouterPort``), and its agent process."""

    def __init__(self, proxy: Proxy) -> None:
        super().__init__(proxy.router, proxy.flush, proxy.own_waiters)
        self._proxy = proxy

    def stop_cause(self) -> str | None:
        return self._proxy.stop_cause

    # the agent process
    async def start_agent(self) -> _PreparedAgent:
        return await self._proxy.start_agent()

    def switch_agent(self, process: AgentProcess) -> None:
        assert isinstance(process, _PreparedAgent)
        self._proxy.switch_agent(process)

    def discard_agent(self, process: AgentProcess) -> None:
        assert isinstance(process, _PreparedAgent)
        self._proxy.stop_soon(process.leg)

    def agent_restarted(self) -> None:
        self._router.agent_restarted()

    def kill_agent(self) -> None:
        self._proxy.agent.signal_group(signal.SIGKILL)

    def agent_token(self) -> object:
        return self._proxy.agent

    def agent_running(self, token: object) -> bool:
        return token is self._proxy.agent and not self._proxy.agent.exited.is_set()


class Proxy:
    def __init__(
        self,
        agent_argv: Sequence[str],
        settings: ProxySettings,
        *,
        components: Sequence[Component] = (),
        client: ClientSide | None = None,
        agent: AgentSide | None = None,
        connection_id: str | None = None,
        watch_signals: bool = True,
        restart_agent: bool = False,
    ) -> None:
        self.settings = settings
        self.connection_id = connection_id or uuid.uuid4().hex
        # Off when many proxies share a process (``liminal serve``): it handles the signals.
        self.watch_signals = watch_signals
        # An agent that dies while the client is connected is started again and its threads
        # resumed (``liminal serve``), by a component's ``restart_agent``, a few times at most.
        self.restart_agent = restart_agent
        self._restarts: list[float] = []
        self._restarting: list[bytes] | None = None  # the client's bytes while a restart runs
        self.components = with_parts(components)
        self.supervisor = Supervisor(self.components, release_holds=self._release_holds)
        self._replayers = [c.replay_requested for c in self.components if c.answers_replays]
        self.router = Router(
            max_frame_bytes=settings.max_frame_bytes,
            connection_id=self.connection_id,
            tapping=self.supervisor.tapping,
            replay_from_store=bool(self._replayers),
            message_ids=True,
        )
        # Components that answer some client requests themselves, or amend them on the way
        # (``liminal.kernel.commands``): their hooks see those requests before anything else.
        self._local_handlers: list[Callable[[LocalRequest], None]] = []
        self._local_by_method: dict[str, Callable[[LocalRequest], None]] = {}
        for component in self.components:
            for methods, hook in component.request_hooks():
                self.router.add_request_hook(methods, hook)
            for kinds, update_hook in component.update_hooks():
                self.router.add_update_hook(kinds, update_hook)
            for methods, result_hook in component.result_hooks():
                self.router.add_result_hook(methods, result_hook)
            if component.answers_local:
                self._local_handlers.append(component.local_requested)
                # A kept request goes to the component whose hook keeps its method (the
                # command center's prompts and loads, the rewinder's rewinds).
                for methods, _ in component.request_hooks():
                    for method in methods:
                        self._local_by_method.setdefault(method, component.local_requested)
        # A client that asks for ACP v2 is answered in v2 at this edge (``liminal.acp.v2``).
        self.client = VersionedClient(client or ClientLeg(), settings.max_frame_bytes)
        # The agent's end: a process of ``agent_argv``, or one given (with an environment of its
        # own; a conductor's successor).
        self.agent: AgentSide = agent or AgentLeg(agent_argv)
        self.own_waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._client_eof = asyncio.Event()
        self._agent_eof = asyncio.Event()
        self._agent_replaced = asyncio.Event()
        self._signalled: int | None = None
        self._client_chunks = 0  # what the client has sent, counted (``_answer_while_dead``)
        self.stop_cause: str | None = None  # why liminal stops, once it does (``Port.stop_cause``)
        self.stopping_agents: set[asyncio.Future[None]] = set()  # processes ``stop_soon`` stops
        self.port: Port = ProxyPort(self)

    # ------------------------------------------------------------- callbacks

    def _from_client(self, data: bytes) -> None:
        self._client_chunks += 1
        if self._restarting is not None:  # kept for the new agent process (``_restarted``)
            self._restarting.append(data)
            return
        self.router.receive_from_client(data, time.time())
        self._flush()

    def _from_agent(self, data: bytes) -> None:
        self.router.receive_from_agent(data, time.time())
        self._flush()

    def _on_client_eof(self) -> None:
        self.router.client_eof(time.time())
        self._flush()
        self._client_eof.set()

    def _on_agent_eof(self) -> None:
        self.router.agent_eof(time.time())
        self._flush()
        self._agent_eof.set()

    def flush(self) -> None:
        """Write out what the router produced outside a callback (own requests, releases)."""
        self._flush()

    def _flush(self) -> None:
        out = self.router.take()
        if out.to_agent:
            self.agent.write(out.agent_bytes())
        if out.client:
            self.client.write(out.client_bytes())
        if out.taps:
            self.supervisor.offer(out.taps)
        if out.own_responses:
            _settle(self.own_waiters, out.own_responses)
        for problem in out.problems:
            logger.warning(problem)
        for local in out.local:
            try:
                self._local_by_method.get(local.method, self._local_handlers[0])(local)
            except Exception:  # every request gets an answer, whatever failed
                logger.exception("local request not taken", method=local.method)
                self.router.answer_local(local.key, error=(-32603, "liminal could not handle this request"))
                self._flush()
        for request in out.replays:
            try:
                self._replayers[0](request)
            except Exception:  # the load is answered all the same, with the agent's own replay
                logger.exception("replay component failed; the agent's replay is used")
                self.router.finish_replay(request.token, None, time.time())
                self._flush()

    def _release_holds(self) -> None:
        """Let every held thread's requests through (a component that held one has failed)."""
        released = sum(self.router.release(thread) for thread in self.router.held_threads())
        if released:
            logger.warning("held requests released after a component failed", requests=released)
        self._flush()

    def replace_agent(self, leg: AgentLeg, pending: bytes = b"") -> AgentSide:
        """Make ``leg``, a process of the agent command that a component started and prepared
        (``liminal.kernel.recycle``), the agent from now on; ``pending`` is what it wrote after
        its last whole line. Call it only while ``router.agent_idle()``. Returns the old leg,
        disconnected: what it writes goes nowhere and its exit is not the agent's; the caller
        stops it."""
        old, self.agent = self.agent, leg
        old.connect(_ignore, _nothing, _ignore)
        leg.connect(self._from_agent, self._on_agent_eof, self.client.pause_reading)
        self._agent_replaced.set()
        logger.info("agent process replaced", old_pid=old.pid, pid=leg.pid)
        if pending:
            self._from_agent(pending)
        return old

    # ------------------------------------------------------ other agent processes

    async def start_agent(self) -> _PreparedAgent:
        """A new process of the agent command, read through a router of its own until
        ``switch_agent`` makes it the agent (``Port.start_agent``)."""
        old = self.agent
        if not isinstance(old, AgentLeg):
            raise OwnRequestError("", "liminal is a proxy component: the conductor runs the agent, "
                                      "and liminal cannot start another process of it")
        leg = AgentLeg(old.argv, env=old.env, cwd=old.cwd)
        process = _PreparedAgent(leg, self.settings.max_frame_bytes)
        try:
            await leg.open(process.feed, process.eof, _ignore)
        except BaseException:
            self.stop_soon(leg)
            raise
        return process

    def switch_agent(self, process: _PreparedAgent) -> None:
        """``process`` becomes the agent; the old process is stopped in the background."""
        old = self.replace_agent(process.leg, process.pending())
        self.stop_soon(old)

    def stop_soon(self, leg: AgentSide) -> None:
        """Stop a process group that is not the agent (any more), in a task of its own."""
        if leg.pid is None:
            return  # never started
        leg.connect(_ignore, _nothing, _ignore)
        task = asyncio.ensure_future(self._stop_leg(leg, self.settings.kill_grace_seconds))
        self.stopping_agents.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self.stopping_agents.discard)

    @staticmethod
    async def _stop_leg(leg: AgentSide, grace: float) -> None:
        leg.close_stdin()
        code = await leg.stop(grace)
        logger.debug("agent process stopped", pid=leg.pid, exit_code=code)

    # ---------------------------------------------------------------- running

    async def run(self) -> int:
        """Relay until the client leaves or the agent dies; returns liminal's exit code."""
        try:
            await self.agent.open(self._from_agent, self._on_agent_eof, self.client.pause_reading)
        except OSError as exc:
            return await self._never_started(exc)
        # What must be in the router before any client request passes (the threads the swap
        # journal binds: a load read earlier would resume a swapped thread on its stale session).
        await self.supervisor.prepare(self.port)
        # Through ``self.agent`` at each call: the agent process can be replaced (``replace_agent``).
        await self.client.open(self._from_client, self._on_client_eof,
                               lambda pause: self.agent.pause_reading(pause))
        if self.agent.argv:
            logger.info("agent started", pid=self.agent.pid, argv=self.agent.argv, connection=self.connection_id)
        else:  # a proxy component: its successor is the conductor's to start, reached through it
            logger.info("proxy component started; its successor is reached through the conductor",
                        connection=self.connection_id)
        code = 0
        async with anyio.create_task_group() as tg:
            for member in self.supervisor.members:
                if member.run is not None:
                    tg.start_soon(self.supervisor.run, member, self.port)
            if self.watch_signals:
                tg.start_soon(self._watch_signals, tg.cancel_scope)
            while True:
                client_gone = asyncio.ensure_future(self._client_eof.wait())
                agent_gone = asyncio.ensure_future(self._agent_exit())
                try:
                    await asyncio.wait({client_gone, agent_gone}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    client_gone.cancel()
                if agent_gone.done() and not self._client_eof.is_set():
                    agent_code = agent_gone.result()
                    code = self._agent_died(agent_code)
                    if await self._restarted(agent_code):
                        code = 0
                        continue
                break
            if agent_gone.done() and not self._client_eof.is_set():
                # The agent died and stays dead: what it owed is answered (_agent_died). One that
                # never said a word (npx that found no package) leaves a client that may not
                # have sent initialize yet: answered too.
                if not self.router.agent_heard:
                    await self._answer_while_dead()
            else:
                agent_gone.cancel()
                self.stop_cause = (f"liminal was sent {signal.Signals(self._signalled).name}"
                                   if self._signalled is not None else "the client closed its connection")
                await self._components_stopping()
                self.agent.close_stdin()
                agent_code = await self.agent.stop(self.settings.kill_grace_seconds,
                                                   wait_first=min(2.0, self.settings.kill_grace_seconds))
                logger.info("client closed; agent stopped", exit_code=agent_code)
                # What the client asked and nothing answered (a prompt a swap held, which never
                # reached the agent; what the agent left unanswered at its exit) is answered now:
                # a headless client closes its input first and reads the answers after.
                self.router.agent_gone(time.time(), "the client closed its input; liminal stopped it")
                self._flush()
            await self._close_components()
            self._answer_what_liminal_owes("liminal is stopping: the agent exited")
            tg.cancel_scope.cancel()
        self.client.close()
        if self._signalled is not None:
            return 128 + self._signalled
        return code

    async def _never_started(self, exc: OSError) -> int:
        """The agent command cannot be run: said once on stderr, and every request the client
        sends is answered with it (``_answer_while_dead``). The shell's convention for the exit:
        127 for a command that is not there, 126 for one that cannot be run. The components are
        closed as at any exit (the spool is flushed)."""
        reason = exc.strerror or str(exc)
        if exc.filename is not None and str(exc.filename) != self.agent.argv[0]:
            reason += f": {exc.filename}"  # the working folder, not the command
        what = f"could not start the agent `{_command(self.agent.argv)}`: {reason[:1].lower()}{reason[1:]}"
        print(f"liminal: {what}", file=sys.stderr, flush=True)
        self.router.agent_gone(time.time(), reason, why=f"liminal {what}")
        async with anyio.create_task_group() as tg:
            if self.watch_signals:
                tg.start_soon(self._watch_signals, tg.cancel_scope)
            await self.client.open(self._from_client, self._on_client_eof, _ignore)
            await self._answer_while_dead()
            tg.cancel_scope.cancel()
        self.client.close()
        await self._close_components()
        if self._signalled is not None:
            return 128 + self._signalled
        return 127 if isinstance(exc, FileNotFoundError) else 126

    async def _answer_while_dead(self) -> None:
        """The agent cannot answer: every request the client sends gets the router's error
        (rule 7) until the client closes its input or goes, a signal comes, or it has sent
        nothing for ``DEAD_END_SECONDS`` (a client that holds its end open without a word is
        not waited on for ever). A person at a terminal was told on stderr: not waited on."""
        if self.client.interactive():
            return
        while not self._client_eof.is_set() and not self.client.closed:
            heard = self._client_chunks
            with anyio.move_on_after(DEAD_END_SECONDS):
                await self._client_eof.wait()
            if self._client_chunks == heard:
                break

    async def _agent_exit(self) -> int:
        """The exit code of the agent in use, once it has gone. An agent that closed its stdout
        and is still running after ``STDOUT_GRACE_SECONDS`` can answer nothing any more: it is
        stopped, and counts as gone."""
        while True:  # the exit of the agent process in use: a replaced one's does not count
            leg = self.agent
            waits = {asyncio.ensure_future(leg.exited.wait()),
                     asyncio.ensure_future(self._agent_replaced.wait()),
                     asyncio.ensure_future(self._agent_eof.wait())}
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
            if leg is not self.agent:
                self._agent_replaced = asyncio.Event()
                continue
            if leg.exited.is_set():
                break
            # Its stdout ended: it is exiting, or it has closed stdout and goes on running.
            with anyio.move_on_after(STDOUT_GRACE_SECONDS):
                await leg.exited.wait()
            if leg is self.agent and not leg.exited.is_set():
                logger.error("the agent closed its output but keeps running; stopping it",
                             pid=leg.pid)
                return await leg.stop(self.settings.kill_grace_seconds)
            if leg is self.agent:
                break
        code = await leg.wait()
        # The exit can be reported before the last bytes of stdout and stderr; let them through
        # first (its last words name why it ended).
        with anyio.move_on_after(2.0):
            await self._agent_eof.wait()
            await leg.stderr_ended.wait()
        return code

    def _agent_died(self, agent_code: int) -> int:
        said = self.agent.stderr.last_words()
        self.router.agent_gone(time.time(), f"exit code {agent_code}", said=said)
        self._flush()
        for waiter in self.own_waiters.values():
            if not waiter.done():
                waiter.set_exception(OwnRequestError("", "the agent is gone"))
        message = f"liminal: the agent ({self.agent.argv[0]}) exited with code {agent_code}" + (
            f"; its stderr last said: {said}" if said else "")
        logger.error("agent exited while the client was connected", exit_code=agent_code)
        print(message, file=sys.stderr, flush=True)
        self.agent.signal_group(signal.SIGTERM)
        self.agent.close()
        if agent_code < 0:
            return 128 - agent_code
        return agent_code or 1

    async def _restarted(self, agent_code: int) -> bool:
        """Start the agent again after it died, if allowed and a component can (at most 3
        times in 2 minutes: a crash loop is left to end)."""
        if not self.restart_agent:
            return False
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < 120] + [now]
        if len(self._restarts) > 3:
            logger.error("the agent keeps dying; not restarting it again", exit_code=agent_code)
            return False
        self._restarting = []
        restarted = False
        try:
            if await self.supervisor.each(lambda c: c.restart_agent(self.port, agent_code), None,
                                          "restarting the agent failed") is not None:
                self._agent_eof = asyncio.Event()
                self._agent_replaced = asyncio.Event()
                restarted = True
        finally:
            # What the client sent meanwhile: to the new process, or answered as for a dead one.
            waiting, self._restarting = self._restarting, None
            for data in waiting:
                self._from_client(data)
        return restarted

    def _answer_what_liminal_owes(self, why: str) -> None:
        """Requests liminal kept to answer itself (a command waiting for a file, a session list
        waiting for the agent) that no component answered by now get an error: the components
        stop next, and every request a client sent gets an answer."""
        from liminal.acp import jsonrpc

        owed = self.router.local_pending()
        for key in owed:
            self.router.answer_local(key, error=(jsonrpc.INTERNAL_ERROR, why))
        if owed:
            logger.warning("answered requests liminal still owed", count=len(owed), why=why)
            self.flush()

    async def _components_stopping(self) -> None:
        """The client has gone (or a signal came): before the agent is stopped, components end
        what they do with it (a swap under way is given ``proxy.stop_grace_seconds`` to finish,
        else abandoned and its rewrite removed). Stopping the agent takes seconds (one that
        ignores the end of its input gets 2, then the kill grace), and whatever ends liminal next
        (an editor that quits kills it a moment later) would otherwise cut that short. Each
        component's stop is bounded: the grace and 10 s more."""
        await self.supervisor.each(lambda c: c.stopping(), self.settings.stop_grace_seconds + 10,
                                   "component failed to stop")

    async def _close_components(self) -> None:
        if self.stopping_agents:  # processes a recycle or a restart left, stopping
            with anyio.move_on_after(self.settings.kill_grace_seconds + 5):
                await asyncio.wait(set(self.stopping_agents))
        await self.supervisor.each(lambda c: c.aclose(), 30, "component failed to close")

    async def _watch_signals(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                logger.warning("signal received; stopping the agent", signal=signum)
                self._signalled = int(signum)
                self.client.pause_reading(True)
                self._client_eof.set()
                return
