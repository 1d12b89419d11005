"""A ``Port`` (``liminal.acp.port``) over a bare ``Router``, for driving kernel components with
literal frames: no process, no proxy, no legs.

The test feeds the client's and the agent's lines (``from_client``, ``from_agent``); what the
router produces is collected (``to_client``, ``to_agent``), its events offered to the
components, their local requests and replays handed over, as the proxy does. What the port
does is the proxy's own (``liminal.proxy.RouterPort``): only the flush and the agent process
are the fake's. An own request
is answered by ``answer`` (given the request as parsed: return its ``result``, raise
``OwnRequestError`` for an error answer, return ``UNANSWERED`` for none) through the router, or
left for the test to answer with ``from_agent``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from liminal.acp.port import AgentProcess, Component, Frames, OwnRequestError
from liminal.acp.router import Router
from liminal.proxy import RouterPort, _settle, with_parts

Answer = Callable[[str, dict[str, Any]], Any]
UNANSWERED = object()  # what ``answer`` returns for a request the agent leaves unanswered


class FakePort(RouterPort):
    def __init__(self, router: Router | None = None, components: Sequence[Component] = (),
                 answer: Answer | None = None) -> None:
        self.router = router or Router(max_frame_bytes=1 << 20)
        self.components = with_parts(components)
        for component in self.components:
            for methods, hook in component.request_hooks():
                self.router.add_request_hook(methods, hook)
            for kinds, update_hook in component.update_hooks():
                self.router.add_update_hook(kinds, update_hook)
            for methods, result_hook in component.result_hooks():
                self.router.add_result_hook(methods, result_hook)
        self.answer = answer
        self.to_client: list[dict[str, Any]] = []  # parsed
        self.client_lines: list[bytes] = []  # as written
        self.to_agent: list[dict[str, Any]] = []
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.killed = 0
        super().__init__(self.router, self.flush, {})

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
        _settle(self._waiters, out.own_responses)
        for local in out.local:
            # As the proxy: the component whose request hook keeps the method, else the first.
            takers = [c for c in self.components if c.answers_local]
            keeps = [c for c in takers if any(local.method in methods for methods, _ in c.request_hooks())]
            (keeps or takers)[0].local_requested(local)
        for request in out.replays:
            next(c for c in self.components if c.answers_replays).replay_requested(request)
        if self.answer is not None:
            for message in sent:
                rpc_id = message.get("id")
                if isinstance(rpc_id, str) and rpc_id.startswith("liminal-") and "method" in message:
                    try:
                        result = self.answer(message["method"], message.get("params") or {})
                        if result is UNANSWERED:
                            continue
                        reply = {"jsonrpc": "2.0", "id": rpc_id, "result": result}
                    except OwnRequestError as exc:
                        reply = {"jsonrpc": "2.0", "id": rpc_id, "error": exc.error}
                    self.from_agent(reply)

    # ------------------------------------------------------------ the agent process: none

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
