"""A client that speaks ACP v2, answered in v2 by a liminal that speaks v1 (frames in, frames out).

liminal reads and writes v1 on both legs (``liminal.kernel.version``). ``V2Face`` sits at the
client's edge for a client whose ``initialize`` asked for 2 or later: it turns each of the
client's v2 messages into the v1 message liminal expects, and each v1 message liminal sends the
client into v2, so that everything behind it (the router, the store, swaps, replay, commands)
works as for a v1 client. Shapes follow ``@agentclientprotocol/sdk``'s ``schema/v2/schema.json``
(the pinned SDK; docs/facts.md, "ACP v2"):

- ``initialize``: v2's ``info``/``capabilities`` both ways, agreed at 2.
- ``session/resume`` with ``replayFrom`` is v1's ``session/load`` (liminal replays the thread from
  its store); without, v1's ``session/resume``. Either is answered after a ``state_update`` idle.
- ``session/prompt``: v2 answers a prompt once its user message is in the conversation, with that
  message's id; the turn's progress and end are ``state_update`` notifications. v1 answers at the
  turn's end with the user message's id (``_meta.userMessageId``, rule 10): so the client gets
  ``running`` as the prompt goes on, then, at the end, the user message, the answer and ``idle``
  with the stop reason.
- updates: ``tool_call`` becomes a ``tool_call_update`` (an upsert by id), ``plan`` a
  ``plan_update``; ``current_mode_update`` has no v2 counterpart and is not sent; chunks keep the
  ``messageId`` liminal stamps on every one.
- ``session/request_permission``: v2 names the tool call as its ``subject``, with a ``title``.
- v2 has no ``fs/*`` or ``terminal/*`` client methods: the agent is told the client offers none,
  and a request for one is refused here.

Every other message passes as it is.
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass, field
from typing import Any

from liminal import __version__
from liminal.acp import jsonrpc
from liminal.acp.message_ids import user_message_id_of

SPOKEN = 1  # the one ACP major version liminal speaks behind the face, and to its agent
Message = dict[str, Any]

# What the face sends the client of each v1 update kind (None: not sent).
UPDATE_NAMES: dict[str, str | None] = {"tool_call": "tool_call_update", "plan": "plan_update",
                                       "current_mode_update": None}
CLIENT_ONLY_PREFIXES = ("fs/", "terminal/")
# A diff larger than this (old and new text) is sent as its changes alone: working out a patch of
# megabytes would hold the event loop.
PATCH_CHARS = 256 * 1024


def asked_version(message: Any) -> int | float | None:
    """The version an ``initialize`` asks for, a number in any spelling (``2.0`` is the integer
    2 to a JavaScript peer); None for any other message or a version that is no number."""
    params = message.get("params") if isinstance(message, dict) else None
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    if not isinstance(asked, (int, float)) or isinstance(asked, bool):
        return None
    return asked


def asks_v2(message: Any) -> bool:
    """Whether ``message`` is an ``initialize`` asking for ACP 2 or later."""
    asked = asked_version(message) if isinstance(message, dict) and message.get("method") == "initialize" else None
    return asked is not None and asked >= 2


@dataclass(slots=True)
class Out:
    """What one message turned into: messages for liminal, messages for the client."""

    to_liminal: list[Message] = field(default_factory=list)
    to_client: list[Message] = field(default_factory=list)


@dataclass(slots=True)
class _Prompt:
    session: str
    prompt: list[Any]


class V2Face:
    def __init__(self) -> None:
        self._asked: dict[Any, tuple[str, Any]] = {}  # a client request's id -> (its v2 method, what it needs)
        self._ids = itertools.count(1)

    # -- the client's messages, for liminal -------------------------------------------------

    def from_client(self, message: Message) -> Out:
        method = message.get("method")
        params = _obj(message.get("params"))
        if not isinstance(method, str) or "id" not in message:
            return Out(to_liminal=[message])  # a notification (cancel) or a response (permission)
        key = jsonrpc.id_key(message["id"])
        if method == "initialize":
            self._asked[key] = (method, None)
            return Out(to_liminal=[{**message, "params": v1_initialize(params)}])
        if method == "session/resume":
            replay = params.get("replayFrom")
            if replay is not None and _obj(replay).get("type") != "start":
                return Out(to_client=[{"jsonrpc": "2.0", "id": message["id"], "error": {
                    "code": jsonrpc.INVALID_PARAMS, "message": "replayFrom: only {\"type\": \"start\"} is supported"}}])
            self._asked[key] = (method, params.get("sessionId"))
            v1 = {**{k: v for k, v in params.items() if k != "replayFrom"},
                  "mcpServers": v1_mcp_servers(params.get("mcpServers"))}
            return Out(to_liminal=[{**message, "method": "session/load" if replay is not None else "session/resume",
                                    "params": v1}])
        if method == "auth/login":  # v1's ``authenticate``, the same params and answer
            return Out(to_liminal=[{**message, "method": "authenticate"}])
        if method == "session/new":
            self._asked[key] = (method, None)
            return Out(to_liminal=[{**message, "params": {**params,
                                                          "mcpServers": v1_mcp_servers(params.get("mcpServers"))}}])
        if method == "session/set_config_option":
            self._asked[key] = (method, None)
            v1 = {k: v for k, v in params.items() if not (k == "type" and v == "id")}
            return Out(to_liminal=[{**message, "params": v1}])
        if method == "session/prompt":
            session = params.get("sessionId")
            prompt = params.get("prompt")
            self._asked[key] = (method, _Prompt(str(session), prompt if isinstance(prompt, list) else []))
            running = update(session, {"sessionUpdate": "state_update", "state": "running"})
            return Out(to_liminal=[message], to_client=[running])
        return Out(to_liminal=[message])

    # -- liminal's messages, for the client -------------------------------------------------

    def to_client(self, message: Message) -> Out:
        method = message.get("method")
        if isinstance(method, str):
            if method == "session/update":
                return Out(to_client=self._update(message))
            if method == "session/request_permission" and "id" in message:
                return Out(to_client=[{**message, "params": v2_permission(message.get("params"))}])
            if method.startswith(CLIENT_ONLY_PREFIXES) and "id" in message:
                refusal = {"jsonrpc": "2.0", "id": message["id"],
                           "error": {"code": jsonrpc.METHOD_NOT_FOUND,
                                     "message": f"{method}: an ACP v2 client offers no such method"}}
                return Out(to_liminal=[refusal])
            return Out(to_client=[message])
        asked = self._asked.pop(jsonrpc.id_key(message.get("id")), None)
        if asked is None:
            return Out(to_client=[message])
        v2_method, context = asked
        result = message.get("result")
        if v2_method == "session/prompt":
            return Out(to_client=self._prompt_ended(message, context))
        if not isinstance(result, dict):
            return Out(to_client=[message])  # an error, as it is
        if v2_method == "initialize":
            return Out(to_client=[{**message, "result": v2_initialize(result)}])
        if v2_method == "session/new":
            return Out(to_client=[{**message, "result": _session_result(result, keep=("sessionId",))}])
        if v2_method == "session/set_config_option":
            return Out(to_client=[{**message, "result": _session_result(result)}])
        if v2_method == "session/resume":
            idle = update(context, {"sessionUpdate": "state_update", "state": "idle"})
            return Out(to_client=[idle, {**message, "result": _session_result(result)}])
        return Out(to_client=[message])

    def _update(self, message: Message) -> list[Message]:
        params = _obj(message.get("params"))
        body = params.get("update")
        if not isinstance(body, dict) or not isinstance(body.get("sessionUpdate"), str):
            return [message]
        kind = body["sessionUpdate"]
        if kind in UPDATE_NAMES:
            name = UPDATE_NAMES[kind]
            if name is None:
                return []
            body = {**body, "sessionUpdate": name}
            if name == "tool_call_update":
                body = v2_tool_call(body)
            if name == "plan_update":
                entries = body.pop("entries", [])
                body["plan"] = {"type": "items", "planId": "plan", "entries": entries}
        elif kind == "tool_call_update":
            body = v2_tool_call(body)
        elif kind == "available_commands_update":
            body = {**body, "availableCommands": v2_commands(body.get("availableCommands"))}
        elif kind == "config_option_update":
            body = {**body, "configOptions": v2_config_options(body.get("configOptions"))}
        elif kind.endswith("_chunk") and not isinstance(body.get("messageId"), str):
            body = {**body, "messageId": f"liminal-v2-{next(self._ids)}"}
        else:
            return [message]
        return [{**message, "params": {**params, "update": body}}]

    def _prompt_ended(self, message: Message, prompt: _Prompt) -> list[Message]:
        """The v1 answer at the turn's end: the user message, the answer (its id), ``idle``."""
        result = message.get("result")
        if not isinstance(result, dict):
            said = _obj(message.get("error"))
            error = {"code": said.get("code", jsonrpc.INTERNAL_ERROR), "message": str(said.get("message", ""))}
            idle = update(prompt.session, {"sessionUpdate": "state_update", "state": "idle",
                                           "stopReason": "error", "error": error})
            return [message, idle]
        meta = _obj(result.get("_meta"))
        message_id = user_message_id_of(result) or f"liminal-v2-{next(self._ids)}"
        echo = update(prompt.session, {"sessionUpdate": "user_message", "messageId": message_id,
                                       "content": prompt.prompt})
        stop = result.get("stopReason")
        idle = update(prompt.session, {"sessionUpdate": "state_update", "state": "idle",
                                       "stopReason": stop if isinstance(stop, str) else "end_turn"})
        answer: Message = {"jsonrpc": "2.0", "id": message.get("id"), "result": {"messageId": message_id}}
        if meta:
            answer["result"]["_meta"] = meta
        return [echo, answer, idle]


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def update(session: Any, body: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": body}}


def v1_initialize(params: dict[str, Any]) -> dict[str, Any]:
    """v2's ``initialize`` params as v1's: the client's name, no file system or terminal (v2 has
    neither), and ``session.notices`` and ``session.compaction``, which v2 gives every client."""
    v1: dict[str, Any] = {"protocolVersion": SPOKEN,
                          "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                                 "terminal": False,
                                                 "session": {"notices": {}, "compaction": {}}}}
    if isinstance(params.get("info"), dict):
        v1["clientInfo"] = params["info"]
    if params.get("_meta") is not None:
        v1["_meta"] = params["_meta"]
    return v1


def v2_initialize(result: dict[str, Any]) -> dict[str, Any]:
    """v1's ``initialize`` answer as v2's, agreed at 2: ``info`` (the agent's, else liminal's) and
    the capabilities v2 has a place for; the rest of v1's (and liminal's own, ``_meta``) under
    ``capabilities._meta``."""
    caps = _obj(result.get("agentCapabilities"))
    prompt = _obj(caps.get("promptCapabilities"))
    mcp = _obj(caps.get("mcpCapabilities"))
    sessions = _obj(caps.get("sessionCapabilities"))
    session: dict[str, Any] = {
        "prompt": {name: {} for name in ("image", "audio", "embeddedContext") if prompt.get(name) is True},
        "mcp": {"stdio": {}, **({"http": {}} if mcp.get("http") is True else {})},
    }
    if sessions.get("delete") is not None:
        session["delete"] = {}
    if sessions.get("additionalDirectories") is not None:
        session["additionalDirectories"] = {}
    capabilities: dict[str, Any] = {"session": session}
    if caps.get("_meta"):
        capabilities["_meta"] = caps["_meta"]
    info = result.get("agentInfo")
    v2: dict[str, Any] = {"protocolVersion": 2, "capabilities": capabilities,
                          "info": info if isinstance(info, dict) and "name" in info and "version" in info
                          else {"name": "liminal", "version": __version__}}
    methods = [v2_auth_method(m) for m in _list(result.get("authMethods")) if isinstance(m, dict)]
    if methods:
        v2["authMethods"] = methods
    if result.get("_meta") is not None:
        v2["_meta"] = result["_meta"]
    return v2


def v2_auth_method(method: dict[str, Any]) -> dict[str, Any]:
    """A v1 auth method (``id``; no ``type``: the agent's own) as v2's (``methodId``, ``type``),
    logged into by ``auth/login``, which the face sends on as v1's ``authenticate``."""
    rest = {k: v for k, v in method.items() if k not in ("id", "type")}
    kind = method.get("type") if isinstance(method.get("type"), str) else "agent"
    return {"type": kind, "methodId": method.get("id", method.get("methodId")), **rest}


def _session_result(result: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """A v1 new, load, resume or set-option answer as v2's: its config options (v2 has no modes
    or models)."""
    kept = {k: result[k] for k in (*keep, "_meta") if result.get(k) is not None}
    if isinstance(result.get("configOptions"), list):
        kept["configOptions"] = v2_config_options(result["configOptions"])
    return kept


def v2_config_options(options: Any) -> list[Any]:
    """v1's options (``id``; a select's groups by ``group``) as v2's (``configId``, ``groupId``)."""
    made = []
    for option in _list(options):
        if not isinstance(option, dict):
            continue
        option = {("configId" if k == "id" else k): v for k, v in option.items()}
        if isinstance(option.get("options"), list):
            option["options"] = [{("groupId" if k == "group" else k): v for k, v in choice.items()}
                                 if isinstance(choice, dict) else choice for choice in option["options"]]
        made.append(option)
    return made


def v1_mcp_servers(servers: Any) -> list[Any]:
    """v2's MCP servers as v1's: a stdio server has no ``type`` and lists its ``args`` and
    ``env``, an HTTP one its ``headers`` (v2 lets each list be left out); none is ``[]``."""
    made = []
    for server in _list(servers):
        if not isinstance(server, dict):
            continue
        if server.get("type") in (None, "stdio"):
            made.append({"args": [], "env": [], **{k: v for k, v in server.items() if k != "type"}})
        elif server.get("type") in ("http", "sse"):
            made.append({"headers": [], **server})
        else:
            made.append(server)
    return made


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def v2_commands(commands: Any) -> list[Any]:
    """v1's commands as v2's: each of ``type`` ``command``, its input of ``type`` ``text``."""
    made = []
    for command in _list(commands):
        if not isinstance(command, dict):
            continue
        typed = {"type": "command", **command}
        given = command.get("input")
        if isinstance(given, dict) and "type" not in given:
            typed["input"] = {"type": "text", **given}
        made.append(typed)
    return made


def v2_permission(params: Any) -> Any:
    """v1's permission request (its ``toolCall``) as v2's: the tool call as the subject, its title."""
    if not isinstance(params, dict) or not isinstance(params.get("toolCall"), dict):
        return params
    call = v2_tool_call(params["toolCall"])
    title = call.get("title") if isinstance(call.get("title"), str) and call.get("title") else "Permission"
    rest = {k: v for k, v in params.items() if k != "toolCall"}
    return {**rest, "title": title, "subject": {"type": "tool_call", "toolCall": call}}


def v2_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """A v1 tool call's fields as v2's: a diff as v2's list of changes and a Git patch of them,
    a location's line (v2's are 1-based) only where it can be one."""
    made = dict(call)
    if isinstance(call.get("content"), list):
        made["content"] = [v2_diff(item) if isinstance(item, dict) and item.get("type") == "diff" else item
                           for item in call["content"]]
    if isinstance(call.get("locations"), list):
        made["locations"] = [{k: v for k, v in place.items() if k != "line" or (isinstance(v, int) and v >= 1)}
                             if isinstance(place, dict) else place for place in call["locations"]]
    return made


def v2_diff(item: dict[str, Any]) -> dict[str, Any]:
    """v1's ``{path, oldText, newText}`` as v2's ``{changes, patch}``: one text change (``add``
    when there was no old text) and the same change as a ``git_patch``."""
    path = item.get("path")
    if not isinstance(path, str) or not isinstance(item.get("newText"), str):
        return item
    old = item.get("oldText")
    old_text = old if isinstance(old, str) else ""
    change = {"operation": "modify" if isinstance(old, str) else "add", "path": path, "fileType": "text"}
    if len(old_text) + len(item["newText"]) > PATCH_CHARS:  # the changes alone: no patch worked out here
        return {"type": "diff", "changes": [change], **({"_meta": item["_meta"]} if item.get("_meta") is not None else {})}
    lines = difflib.unified_diff(old_text.splitlines(keepends=True), item["newText"].splitlines(keepends=True),
                                 fromfile=path if isinstance(old, str) else "/dev/null", tofile=path)
    body = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    made: dict[str, Any] = {
        "type": "diff",
        "changes": [change],
        "patch": {"format": "git_patch", "text": f"diff --git {path} {path}\n" + body},
    }
    if item.get("_meta") is not None:
        made["_meta"] = item["_meta"]
    return made
