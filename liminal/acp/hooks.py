"""What components plug into the router (``liminal.acp.router``): request hooks, which see a
client's request before it is routed (forward it amended, or keep it for liminal to answer),
and update hooks, which amend a ``session/update`` of the agent's before the client sees it. A
component's fault never stops a frame: a hook that raises is reported and passed over."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from liminal.acp.events import kind_markers


@dataclass(frozen=True, slots=True)
class LocalRequest:
    """A client request a component answers itself (``Router.answer_local``); the agent never
    sees it."""

    key: Any  # ``jsonrpc.id_key`` of its id: what ``answer_local`` takes
    method: str
    thread_id: str | None
    message: dict[str, Any]  # as the request hooks left it (``RequestHook``)
    # The store's id of the request's own frame (``<connection>:<seq>``): once the store holds
    # it, it holds every frame the connection had before (the index keeps their order).
    frame_id: str | None = None


class Local:
    """A request hook's verdict: liminal answers this request (see ``LocalRequest``)."""


LOCAL = Local()

# A request hook sees each client request whose method it registered for, before the router
# acts on it: it returns None (forward as sent), ``LOCAL``, or a new message to forward instead
# (``mcpServers`` amended, say). Hooks are called inside the flush that read the request, in the
# order added, each with the message as the ones before it left it; a ``LOCAL`` from any keeps
# the request for liminal, amended (a load liminal answers still carries liminal's MCP server).
RequestHook = Callable[[str, dict[str, Any], "str | None"], "Local | dict[str, Any] | None"]
# An update hook sees each ``session/update`` of its kind the agent sends the client, with the
# thread it is for; it returns None (forward as sent) or the update to forward instead (liminal's
# commands added to ``available_commands_update``). The taps get what the agent sent.
UpdateHook = Callable[[str, dict[str, Any]], "dict[str, Any] | None"]
# A result hook sees the agent's result for each client request of its method; it returns None
# (forward as sent) or the result to forward instead (``initialize``'s capabilities with what
# liminal answers for the agent added). The taps get what the agent sent.
ResultHook = Callable[[str, dict[str, Any]], "dict[str, Any] | None"]


class Hooks:
    def __init__(self) -> None:
        self._requests: dict[str, list[RequestHook]] = {}  # method -> hooks, in the order added
        self._updates: dict[str, list[UpdateHook]] = {}  # update kind -> hooks
        self._results: dict[str, list[ResultHook]] = {}  # method -> hooks
        # The hooked kinds as a canonical line spells them (``kind_markers``): the router routes
        # a canonical line of any other kind from its bytes.
        self.update_markers: tuple[bytes, ...] = ()

    def add_request_hook(self, methods: tuple[str, ...], hook: RequestHook) -> None:
        for method in methods:
            self._requests.setdefault(method, []).append(hook)

    def add_update_hook(self, kinds: tuple[str, ...], hook: UpdateHook) -> None:
        for kind in kinds:
            self._updates.setdefault(kind, []).append(hook)
        self.update_markers = kind_markers(*self._updates)

    def add_result_hook(self, methods: tuple[str, ...], hook: ResultHook) -> None:
        for method in methods:
            self._results.setdefault(method, []).append(hook)

    def result(self, method: str, result: dict[str, Any], problems: list[str]) -> dict[str, Any]:
        """The result hooks' version of the agent's result (``result`` itself when none changed it)."""
        current = result
        for hook in self._results.get(method, ()):
            try:
                new = hook(method, current)
            except Exception as exc:  # a component's fault never stops an answer
                problems.append(f"result hook failed ({type(exc).__name__}: {exc}); "
                                f"{method}'s answer goes on without it")
                continue
            if isinstance(new, dict):
                current = new
        return current

    def request(self, method: str, message: dict[str, Any], thread: str | None, line: bytes,
                problems: list[str]) -> tuple[bool, bytes, dict[str, Any]]:
        """The hooks' verdict on a client request: (kept for liminal, the line and the message to
        go on with). An amended message that cannot be encoded exactly is forwarded as sent."""
        local = False
        current = message
        for hook in self._requests.get(method, ()):
            try:
                verdict = hook(method, current, thread)
            except Exception as exc:  # a component's fault never stops a request
                problems.append(f"request hook failed ({type(exc).__name__}: {exc}); "
                                f"{method} goes on without it")
                continue
            if verdict is LOCAL:
                local = True
            elif isinstance(verdict, dict):
                current = verdict
        if local or current is message:
            return local, line, current
        amended = _encoded(current, message, line)
        if amended is None:
            problems.append(f"a request hook's {method} cannot be encoded; forwarded as sent")
            return False, line, message
        return False, amended, current

    def update(self, line: bytes, message: dict[str, Any], thread: str, problems: list[str]) -> bytes:
        """The update hooks' version of a notification, or the line as sent."""
        params = message.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        for hook in self._updates.get(kind, ()) if isinstance(kind, str) else ():
            try:
                new = hook(thread, update)  # type: ignore[arg-type]
            except Exception as exc:  # a component's fault never stops a frame
                problems.append(f"update hook failed ({type(exc).__name__}: {exc}); "
                                "the agent's update passed as sent")
                return line
            if new is not None:
                assert isinstance(params, dict)
                return orjson.dumps({**message, "params": {**params, "update": new}})
        return line


def _encoded(amended: dict[str, Any], parsed: dict[str, Any], line: bytes) -> bytes | None:
    """A hook's message as a line, or None when the parsed copy of the client's line lost
    something (a big integer read as a float, a number past a double's range), so that
    re-encoding would change what the client sent. Only for the few requests hooks amend."""
    try:
        if json.loads(line) != parsed:
            return None
        return orjson.dumps(amended)
    except (ValueError, TypeError):
        return None
