"""The MCP side of ``liminal mcp``: JSON-RPC messages in, answers out, no I/O.

Only what a tools-only server needs: ``initialize`` (the client's protocol version is accepted
as given: a tools-only server speaks every version alike), ``ping``, ``tools/list`` and
``tools/call``; notifications are taken and ignored. A tool's failure is the tool's answer
(``isError``), as MCP asks, so that the model reads it; a call of a tool that does not exist, or
with arguments its schema refuses, is a JSON-RPC error.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from liminal import __version__
from liminal.acp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)
from liminal.errors import in_words

LATEST = "2025-06-18"


class ToolError(Exception):
    """Said to the model as the tool's answer (``isError``)."""


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    run: Callable[[dict[str, Any]], Awaitable[list[str]]]  # text blocks, in order

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "inputSchema": {"type": "object", "properties": self.properties,
                                "required": list(self.required), "additionalProperties": False}}

    def check(self, arguments: Any) -> str | None:
        """Why the arguments do not fit the schema, or None (types of the top level only)."""
        if not isinstance(arguments, dict):
            return "arguments must be an object"
        for name in self.required:
            if name not in arguments:
                return f"missing argument {name!r}"
        kinds = {"string": str, "integer": int, "boolean": bool, "array": list}
        for name, value in arguments.items():
            spec = self.properties.get(name)
            if spec is None:
                return f"unknown argument {name!r}"
            kind = kinds.get(spec.get("type", ""))
            if kind is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
                return f"argument {name!r} must be of type {spec['type']}"
        return None


@dataclass
class McpServer:
    tools: list[Tool]
    instructions: str = ""
    _by_name: dict[str, Tool] = field(init=False)

    def __post_init__(self) -> None:
        self._by_name = {t.name: t for t in self.tools}

    def answer(self, message: Any) -> dict[str, Any] | Call | None:
        """The answer to one message: at once, or a ``Call`` to run (a tool), or None when the
        message wants no answer (a notification, a response)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(message.get("id") if isinstance(message, dict) else None,
                          INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        method = message.get("method")
        if "id" not in message:
            return None  # notifications/initialized, notifications/cancelled: nothing to do
        rpc_id = message["id"]
        if not isinstance(method, str):
            return None if "result" in message or "error" in message else \
                _error(rpc_id, INVALID_REQUEST, "no method")
        raw_params = message.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        if method == "initialize":
            version = params.get("protocolVersion")
            return _result(rpc_id, {
                "protocolVersion": version if isinstance(version, str) and version else LATEST,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "liminal", "version": __version__},
                **({"instructions": self.instructions} if self.instructions else {}),
            })
        if method == "ping":
            return _result(rpc_id, {})
        if method == "tools/list":
            return _result(rpc_id, {"tools": [t.spec() for t in self.tools]})
        if method != "tools/call":
            return _error(rpc_id, METHOD_NOT_FOUND, f"liminal mcp has no method {method!r}")
        name = params.get("name")
        tool = self._by_name.get(name) if isinstance(name, str) else None
        if tool is None:
            return _error(rpc_id, INVALID_PARAMS, f"no tool {params.get('name')!r}; "
                          f"liminal's tools: {', '.join(self._by_name)}")
        arguments = params.get("arguments", {})
        problem = tool.check(arguments)
        if problem is not None:
            return _error(rpc_id, INVALID_PARAMS, f"{tool.name}: {problem}")
        return Call(rpc_id, tool, arguments)

    async def handle(self, message: Any) -> dict[str, Any] | None:
        """``answer``, with a tool's call run."""
        answer = self.answer(message)
        return await answer.run() if isinstance(answer, Call) else answer


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call to run: its answer is the tool's, or the tool's failure (``isError``)."""

    rpc_id: Any
    tool: Tool
    arguments: dict[str, Any]

    async def run(self) -> dict[str, Any]:
        try:
            texts = await self.tool.run(self.arguments)
            failed = False
        except ToolError as exc:
            texts, failed = [str(exc)], True
        except Exception as exc:  # a bug or a store down: the model hears it, the server stays
            # The model reads what happened; whoever debugs liminal, the class too (the CLI
            # keeps an MCP server's stderr; this server has no log of its own).
            sys.stderr.write(f"liminal mcp: {self.tool.name} failed: {type(exc).__name__}: {exc}\n")
            texts, failed = [f"{self.tool.name} failed: {in_words(exc)}"], True
        return _result(self.rpc_id, {"content": [{"type": "text", "text": _unpaired_replaced(t)} for t in texts],
                                     "isError": failed})


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unpaired_replaced(text: str) -> str:
    """A text JSON can carry: a lone surrogate (Claude Code writes one when it cuts a string in the
    middle of an emoji, and recall gives it back as it was) becomes U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _result(rpc_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def _error(rpc_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}


def parse_error() -> dict[str, Any]:
    return _error(None, PARSE_ERROR, "not JSON")


def too_large(limit: int) -> dict[str, Any]:
    return _error(None, INVALID_REQUEST, f"message longer than {limit} bytes")


def internal_error(rpc_id: Any, message: str) -> dict[str, Any]:
    return _error(rpc_id if isinstance(rpc_id, str | int) and not isinstance(rpc_id, bool) else None,
                  INTERNAL_ERROR, message)
