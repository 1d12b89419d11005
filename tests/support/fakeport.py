"""A ``Port`` (``liminal.acp.port``) over a bare ``Router``, for driving kernel components with
literal frames: no process, no proxy, no legs.

The test feeds the client's and the agent's lines (``from_client``, ``from_agent``); what the
router produces is collected (``to_client``, ``to_agent``), its events offered to the
components, their local requests and replays handed over, as the proxy does. An own request
is answered by ``answer`` (given the request as parsed: return its ``result``, raise
``OwnRequestError`` for an error answer) through the router, or left for the test to answer
with ``from_agent``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from liminal.acp.port import AgentProcess, Component, Frames, OwnRequestError
from liminal.acp.router import Router

Answer = Callable[[str, dict[str, Any]], Any]


class FakePort:
    def __init__(self, router: Router | None = None, components: Sequence[Component] = (),
                 answer: Answer | None = None) -> None:
        self.router = router or Router(max_frame_bytes=1 << 20)
        self.components = list(components)
        for component in self.components:
            for methods, hook in component.request_hooks():
                self.router.add_request_hook(methods, hook)
            for kinds, update_hook in component.update_hooks():
                self.router.add_update_hook(kinds, update_hook)
        self.answer = answer
        self.to_client: list[dict[str, Any]] = []  # parsed
        self.client_lines: list[bytes] = []  # as written
        self.to_agent: list[dict[str, Any]] = []
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.killed = 0
        self._waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._open_hook: Callable[[str], None] | None = None

    # ------------------------------------------------------------ the test's side

    def from_client(self, *messages: dict[str, Any]) -> None:
        self.router.receive_from_client(b"".join(orjson.dumps(m) + b"\n" for m in messages), time.time())
        self.flush()

    def from_agent(self, *messages: dict[str, Any]) -> None:
        self.router.receive_from_agent(b"".join(orjson.dumps(m) + b"\n" for m in messages), time.time())
        self.flush()

    def flush(self) -> None:
        out = self.router.take()
        self.client_lines += out.to_client
        self.to_client += [orjson.loads(line) for line in out.to_client]
        sent = [orjson.loads(line) for line in out.to_agent]
        self.to_agent += sent
        for event in out.events:
            if event.method and event.method.startswith("liminal/") and event.message is not None:
                self.notes.append((event.method, event.message["params"]))
            for component in self.components:
                if component.frames is not Frames.NONE:
                    component.offer(event)
        for rpc_id, message in out.own_responses:
            waiter = self._waiters.pop(rpc_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
        for local in out.local:
            next(c for c in self.components if c.answers_local).local_requested(local)
        for request in out.replays:
            next(c for c in self.components if c.answers_replays).replay_requested(request)
        if self.answer is not None:
            for message in sent:
                rpc_id = message.get("id")
                if isinstance(rpc_id, str) and rpc_id.startswith("liminal-") and "method" in message:
                    try:
                        reply = {"jsonrpc": "2.0", "id": rpc_id,
                                 "result": self.answer(message["method"], message.get("params") or {})}
                    except OwnRequestError as exc:
                        reply = {"jsonrpc": "2.0", "id": rpc_id, "error": exc.error}
                    self.from_agent(reply)

    # ------------------------------------------------------------ the port

    @property
    def agent_alive(self) -> bool:
        return self.router.agent_alive

    def backing_of(self, thread_id: str) -> str:
        return self.router.backing_of(thread_id)

    def thread_of(self, backing_id: str) -> str:
        return self.router.thread_of(backing_id)

    def is_held(self, thread_id: str) -> bool:
        return self.router.is_held(thread_id)

    def prompt_in_flight(self, thread_id: str) -> bool:
        return self.router.prompt_in_flight(thread_id)

    def agent_request_open(self, thread_id: str) -> bool:
        return self.router.agent_request_open(thread_id)

    def agent_idle(self) -> bool:
        return self.router.agent_idle()

    def hold(self, thread_id: str) -> None:
        self.router.hold(thread_id)

    def release(self, thread_id: str) -> int:
        released = self.router.release(thread_id)
        self.flush()
        return released

    def bind(self, thread_id: str, backing_id: str) -> None:
        self.router.bind(thread_id, backing_id)

    def adopt(self, backing_id: str, thread_id: str) -> None:
        self.router.adopt(backing_id, thread_id)

    def capture(self, backing_id: str) -> None:
        self.router.capture(backing_id)

    def uncapture(self, backing_id: str) -> None:
        self.router.uncapture(backing_id)

    def on_open(self, hook: Callable[[str], None] | None) -> None:
        self.router.on_open = hook

    async def request(self, method: str, params: Any, *, timeout: float,
                      thread_id: str | None = None) -> Any:
        rpc_id = self.router.send_request(method, params, time.time(), thread_id=thread_id)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters[rpc_id] = waiter
        self.flush()
        async with asyncio.timeout(timeout):
            message = await waiter
        if "error" in message:
            raise OwnRequestError(method, message["error"])
        return message.get("result")

    def answer_local(self, key: Any, result: Any = None, *, error: tuple[int, str] | None = None) -> None:
        self.router.answer_local(key, result, error=error)
        self.flush()

    def notify_client(self, method: str, params: Any) -> None:
        self.router.notify_client(method, params, time.time())
        self.flush()

    def notify_in_next_turn(self, thread_id: str, method: str, params: Any) -> None:
        self.router.notify_in_next_turn(thread_id, method, params)

    def note(self, method: str, data: dict[str, Any], *, thread_id: str, at: float | None = None) -> None:
        self.router.note(method, data, time.time() if at is None else at, thread_id=thread_id)
        self.flush()

    def finish_replay(self, token: int, history: list[dict[str, Any]] | None) -> bool:
        finished = self.router.finish_replay(token, history, time.time())
        self.flush()
        return finished

    async def start_agent(self) -> AgentProcess:
        raise OwnRequestError("start", "a fake port starts no process")

    def switch_agent(self, process: AgentProcess) -> None:
        raise AssertionError("no process to switch to")

    def discard_agent(self, process: AgentProcess) -> None:
        pass

    def agent_restarted(self) -> None:
        self.router.agent_restarted()

    def agent_token(self) -> object:
        return self

    def agent_running(self, token: object) -> bool:
        return token is self and self.router.agent_alive

    def kill_agent(self) -> None:
        self.killed += 1

    async def agents_stopped(self) -> None:
        pass
