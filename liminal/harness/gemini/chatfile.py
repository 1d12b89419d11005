"""Gemini CLI's session files, read: where they are, their lines kept whole, and the conversation
the CLI makes of them.

A session is ``~/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDThh-mm>-<id8>.jsonl`` (the UTC
minute its recording began, the id's first eight characters); ``<project>`` is a slug mapped from
the project's absolute path in ``~/.gemini/projects.json``. One JSON object a line, appended, of
four kinds: a header (``sessionId``, ``projectHash``, ...), an update (``{"$set": {...}}``, whose
``messages`` replaces the whole list), a message (``id``, ``type``, ``content``; appended again
under its id to change it) and a rewind (``{"$rewindTo": id}``: that message and every later one
go). See docs/formats.md, "Gemini CLI session files".

Reading is lossless: every line keeps its bytes, and a line that does not parse, or is of no kind
the CLI knows, is kept as it is (the CLI skips such lines). Nothing here writes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from liminal.sessionfiles import SessionNotFound, is_session_id, open_regular

Kind = Literal["header", "update", "message", "rewind", "other"]

NAME = re.compile(r"session-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-(?P<short>[0-9a-fA-F]{8})\.jsonl")
# Slugs the CLI makes (``ProjectRegistry.slugify``, a counter after a clash): checked before one
# read from projects.json becomes part of a path.
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# The first message of every session: the CLI's context (date, OS, folders), not the user's words.
SESSION_CONTEXT = "<session_context>"


def _loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:  # orjson refuses lone surrogates, which JSON.stringify writes
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return None


@dataclass(frozen=True)
class Line:
    """One line of the file: its bytes (without the newline) and what the CLI reads in it."""

    raw: bytes
    obj: dict[str, Any] | None

    @property
    def kind(self) -> Kind:
        obj = self.obj
        if obj is None:
            return "other"
        if isinstance(obj.get("$rewindTo"), str):
            return "rewind"
        if isinstance(obj.get("id"), str):
            return "message"
        if isinstance(obj.get("$set"), dict):
            return "update"
        if isinstance(obj.get("sessionId"), str) and isinstance(obj.get("projectHash"), str):
            return "header"
        return "other"


def parse_line(raw: bytes) -> Line:
    obj = _loads(raw)
    return Line(raw, obj if isinstance(obj, dict) else None)


@dataclass(frozen=True)
class ChatFile:
    """A session file's lines, in order; ``ends_with_newline`` says how the last one ended."""

    lines: tuple[Line, ...]
    ends_with_newline: bool = True

    @classmethod
    def parse(cls, data: bytes) -> ChatFile:
        pieces = data.split(b"\n")
        ends = pieces[-1] == b""
        if ends:
            pieces.pop()
        return cls(tuple(parse_line(piece) for piece in pieces), ends or not pieces)

    @classmethod
    def read(cls, path: Path) -> ChatFile:
        with open_regular(path) as handle:
            return cls.parse(handle.read())

    def to_bytes(self) -> bytes:
        """The file again, byte for byte."""
        body = b"\n".join(line.raw for line in self.lines)
        return body + b"\n" if self.lines and self.ends_with_newline else body

    def metadata(self) -> dict[str, Any]:
        """Headers and ``$set`` updates merged in order (the last says), without the messages."""
        merged: dict[str, Any] = {}
        for line in self.lines:
            if line.kind == "header" and line.obj is not None:
                merged.update({k: v for k, v in line.obj.items() if k != "messages"})
            elif line.kind == "update" and line.obj is not None:
                merged.update({k: v for k, v in line.obj["$set"].items() if k != "messages"})
        return merged

    @property
    def session_id(self) -> str | None:
        found = self.metadata().get("sessionId")
        return found if isinstance(found, str) else None

    def messages(self) -> list[dict[str, Any]]:
        """The messages as the CLI resumes them (``loadConversationRecord``): by id, the last
        version of each in its first place; a ``$set`` of ``messages`` replaces them all; a rewind
        drops its message and every later one (all, when its id is unknown)."""
        by_id: dict[str, dict[str, Any]] = {}
        for line in self.lines:
            obj = line.obj
            if obj is None:
                continue
            kind = line.kind
            if kind == "rewind":
                ids = list(by_id)
                cut = ids.index(obj["$rewindTo"]) if obj["$rewindTo"] in by_id else 0
                for gone in ids[cut:]:
                    del by_id[gone]
            elif kind == "message":
                by_id[obj["id"]] = obj
            elif kind == "update" and isinstance(obj["$set"].get("messages"), list):
                by_id = {m["id"]: m for m in obj["$set"]["messages"]
                         if isinstance(m, dict) and isinstance(m.get("id"), str)}
            elif kind == "header" and isinstance(obj.get("messages"), list):
                by_id.update({m["id"]: m for m in obj["messages"]
                              if isinstance(m, dict) and isinstance(m.get("id"), str)})
        return list(by_id.values())


def tool_calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("toolCalls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def is_function_responses(message: Mapping[str, Any]) -> bool:
    """A ``user`` message that holds the function responses of the model's calls (the same
    parts as the calls' ``result``), not the user's words."""
    content = message.get("content")
    return message.get("type") == "user" and isinstance(content, list) and any(
        isinstance(part, dict) and "functionResponse" in part for part in content)


def last_usage(messages: Sequence[Mapping[str, Any]]) -> dict[str, int] | None:
    """The last model message's ``tokens`` (``input`` holds ``cached``), or None."""
    for message in reversed(messages):
        tokens = message.get("tokens")
        if message.get("type") == "gemini" and isinstance(tokens, dict):
            return {k: v for k, v in tokens.items() if isinstance(k, str) and isinstance(v, int)}
    return None


def context_size(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """What the model's context held at its last answer: the prompt it read and what it wrote."""
    usage = last_usage(messages)
    return None if usage is None else usage.get("input", 0) + usage.get("output", 0)


def turn_ended(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the last turn has ended: the last message is the model's, with no calls, and says
    something (a model round trip that calls tools is first written as a record of its usage
    alone, empty, then one of its calls)."""
    if not messages:
        return False
    last = messages[-1]
    if last.get("type") != "gemini" or tool_calls(last):
        return False
    content = last.get("content")
    return bool(content) or bool(last.get("thoughts"))


def is_chat_file(path: Path) -> bool:
    """``path`` is named as the CLI names a session file."""
    return NAME.fullmatch(path.name) is not None


def gemini_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("HOME") or Path.home()) / ".gemini"


def project_slug(cwd: str, env: Mapping[str, str] | None = None) -> str | None:
    """The folder name the CLI gave the project at ``cwd`` (``projects.json``), if it is one the
    CLI could have made."""
    try:
        with open_regular(gemini_dir(env) / "projects.json") as handle:
            registry = _loads(handle.read())
    except (OSError, SessionNotFound):
        return None
    projects = registry.get("projects") if isinstance(registry, dict) else None
    slug = projects.get(os.path.normpath(cwd)) if isinstance(projects, dict) else None
    return slug if isinstance(slug, str) and _SLUG.fullmatch(slug) else None


def session_files(session_id: str, cwd: str | None = None,
                  env: Mapping[str, str] | None = None) -> list[Path]:
    """Every file named for ``session_id`` (its first eight characters), in the project's
    ``chats/`` when ``cwd`` is registered, else in every project's; an id that is not a uuid
    never becomes part of a path."""
    if not is_session_id(session_id):
        return []
    tmp = gemini_dir(env) / "tmp"
    slug = project_slug(cwd, env) if cwd is not None else None
    folders = [tmp / slug / "chats"] if slug is not None else sorted(tmp.glob("*/chats"))
    short = session_id[:8].lower()
    return sorted(path for folder in folders for path in folder.glob("session-*.jsonl")
                  if (match := NAME.fullmatch(path.name)) and match.group("short").lower() == short
                  and path.is_file())


def text_of(content: Any) -> str:
    """A message's text: its string, or its parts' ``text`` joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


# User messages the CLI does not count as something to resume (``isIgnoredUserContent``): its
# context, a hook's, and commands.
_IGNORED_PROMPTS = ("/", "?", SESSION_CONTEXT, "<hook_context>")


def has_resumable_content(messages: Sequence[Mapping[str, Any]]) -> bool:
    """What the CLI asks of a file before it offers it for resuming (``isResumableMessageRecord``):
    a prompt of the user's, or a model message with text, calls or thoughts."""
    for message in messages:
        text = text_of(message.get("content")).strip()
        if message.get("type") == "user" and text and not text.startswith(_IGNORED_PROMPTS):
            return True
        if message.get("type") == "gemini" and (text or tool_calls(message) or message.get("thoughts")):
            return True
    return False


def find(session_id: str, cwd: str | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """The file the CLI resumes ``session_id`` from: of those that name the id and have something
    to resume, the one updated last (``getSessionFiles``), or None."""
    best: tuple[str, Path] | None = None
    for path in session_files(session_id, cwd, env):
        try:
            chat = ChatFile.read(path)
        except (OSError, SessionNotFound):
            continue
        meta = chat.metadata()
        if meta.get("sessionId") != session_id or meta.get("kind") == "subagent" \
                or not has_resumable_content(chat.messages()):
            continue
        updated = str(meta.get("lastUpdated") or meta.get("startTime") or "")
        if best is None or updated > best[0]:
            best = (updated, path)
    return best[1] if best is not None else None
