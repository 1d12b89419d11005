"""Recall keys: how the model (or a person) gets back what the gradient cut.

A key names the original bytes: ``<session id>:<record>:<block index>[:<path>]``, where the path
(dotted, list indices as numbers) leads to a string leaf inside a tool's input. What ``record``
and ``block`` mean is the CLI's (Claude Code: a record uuid and a content block; Codex: a
``call_id``, 0 for the output, 1 for the call): each harness reads its own keys
(``SessionHarness.recall``); this module knows their syntax only. The
session a key names may be one liminal wrote (a rewrite, a cut): the store keeps every line of
every session of a thread, liminal's own among them, so a key resolves from the store for as
long as it holds the thread, and from the file while that exists (``liminal.lookup.recaller``).
Keys survive a second rewrite: a record already cut carries the key to its first original.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from liminal.sessionfiles import is_session_id

MARKER_PREFIX = "[liminal: "
# The marker names the tool that returns the text (``liminal mcp``'s ``recall``) and the key:
# the model reads it and can ask. ``KEY_IN_MARKER`` finds the key again.
KEY_IN_MARKER = re.compile(r"call liminal's recall tool with key (\S+?)\]")


class RecallError(LookupError):
    """The key is malformed, or what it names is gone."""


# A block or list index: ASCII digits, few of them (``str.isdigit`` takes "²", which ``int``
# refuses, and 4,301 digits, which it refuses too).
_INDEX = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True, slots=True)
class RecallKey:
    session_id: str
    uuid: str
    block: int
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        tail = f":{'.'.join(self.path)}" if self.path else ""
        return f"{self.session_id}:{self.uuid}:{self.block}{tail}"

    @classmethod
    def parse(cls, text: str) -> RecallKey:
        parts = text.strip().split(":")
        if len(parts) not in (3, 4) or not is_session_id(parts[0]) or not _INDEX.fullmatch(parts[2]):
            raise RecallError(f"not a recall key: {text!r}")
        path = tuple(parts[3].split(".")) if len(parts) == 4 and parts[3] else ()
        return cls(parts[0], parts[1], int(parts[2]), path)


def marker(cut_chars: int, key: RecallKey) -> str:
    return f"\n{MARKER_PREFIX}{cut_chars} more characters cut; call liminal's recall tool with key {key}]"


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return orjson.dumps(value)


def walk(value: Any, key: RecallKey) -> Any:
    """Follow the key's path (dotted; list indices as numbers) into ``value``; any CLI's."""
    for step in key.path:
        if isinstance(value, list) and _INDEX.fullmatch(step) and int(step) < len(value):
            value = value[int(step)]
        elif isinstance(value, dict) and step in value:
            value = value[step]
        else:
            raise RecallError(f"{key}: no {step!r} in the block")
    return value


def as_bytes(value: Any) -> bytes:
    """What recall answers: a string's UTF-8, anything else as JSON."""
    return _as_bytes(value)
