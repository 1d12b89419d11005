"""``liminal inspect`` and ``liminal compress`` on a Gemini CLI session file: what it holds, and
the gradient's copy of it. The commands detect a Gemini session (``detect``) before trying Codex
and Claude Code."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from liminal.config import GradientSettings
from liminal.harness.gemini import chatfile, gradient, records
from liminal.harness.gemini.chatfile import ChatFile, tool_calls
from liminal.harness.gemini.live import GeminiSessions
from liminal.harness.tables import bands_and_largest, file_rows, rewrite_figures
from liminal.sessionfiles import SessionNotFound, is_session_id, open_regular, write_atomically


def detect(ref: str) -> Path | None:
    """The session file ``ref`` names (a path to one of Gemini CLI's, or a session id under
    ``~/.gemini``), or None."""
    path = Path(ref).expanduser()
    try:
        if path.is_file():
            with open_regular(path) as handle:
                first = handle.readline(1 << 16)
            return path if _is_header(first) else None
    except (OSError, SessionNotFound):
        return None
    return chatfile.find(ref) if is_session_id(ref) else None


def inspect(path: Path, settings: GradientSettings, largest: int = 10) -> dict[str, Any]:
    chat = ChatFile.read(path)
    session = gradient.Session.of(chat)
    kinds = Counter[str](records.message_type(line.obj) if line.kind == "message" and line.obj is not None
                         else line.kind for line in chat.lines)
    plan = gradient.rewrite(session, settings.target_tokens, str(uuid.uuid4()), settings)
    resolved = chat.messages()
    sized = sorted(((n, m) for n, m in enumerate(resolved)), key=lambda item: gradient.message_tokens(item[1]),
                   reverse=True)
    meta = chat.metadata()
    return {
        "harness": "gemini",
        "session_id": session.session_id,
        "path": str(path),
        "bytes": path.stat().st_size,
        "records": len(chat.lines),
        "records_by_type": dict(kinds.most_common()),
        "name_matches_id": _name_matches(path, str(meta.get("sessionId") or "")),
        "turns": len(session.turns),
        "tool_calls": sum(len(tool_calls(m)) for turn in session.turns for m in turn),
        "context_tokens": session.context,
        "resumes_as_written": gradient.resumable(chat) is None,
        "bands": gradient.by_band(session, plan),
        "planned_tokens": plan.tokens_after,
        "target_tokens": settings.target_tokens,
        "largest": [{"message": n, "kind": records.message_type(m), "tokens": gradient.message_tokens(m)}
                    for n, m in sized[:largest]],
    }


def table(data: dict[str, Any]) -> str:
    out = [
        f"session   {data['session_id']}  (Gemini CLI)",
        *file_rows(data, "the last model message's input"),
    ]
    out += bands_and_largest(data, "message")
    if not data["resumes_as_written"]:
        out.append("note: Gemini CLI would resume this file with each function response twice, or each "
                   "call in the first turn (docs/facts.md); liminal writes it again before a load")
    if not data["name_matches_id"]:
        out.append("note: the file name's eight characters are not the session id's")
    return "\n".join(out)


def compress(path: Path, settings: GradientSettings, new_id: str | None,
             dry_run: bool) -> dict[str, Any]:
    """A compressed copy beside the CLI's own session files (or, dry, what it would be)."""
    started = time.perf_counter()
    new_id = new_id or str(uuid.uuid4())
    chat = ChatFile.read(path)
    session = gradient.Session.of(chat)
    result = gradient.rewrite(session, settings.target_tokens, new_id, settings)
    target = GeminiSessions(settings).target_path(path, new_id)
    if not dry_run:
        write_atomically(target, result.lines)
    return {
        "harness": "gemini",
        "source_session_id": session.session_id,
        "new_session_id": new_id,
        "path": str(target),
        "written": not dry_run,
        "bytes_before": path.stat().st_size,
        **rewrite_figures(result, settings, len(chat.lines), started),
        "project": _project_of(path),
    }


def _is_header(line: bytes) -> bool:
    """A Gemini CLI session file's first line: its metadata (``sessionId``, ``projectHash``)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and isinstance(obj.get("sessionId"), str) and "projectHash" in obj \
        and "type" not in obj


def _name_matches(path: Path, session_id: str) -> bool:
    """The file name's eight characters are the session id's (the CLI's clean-up goes by them)."""
    match = chatfile.NAME.fullmatch(path.name)
    return match is not None and session_id[:8].lower() == match.group("short").lower()


def _project_of(path: Path) -> str | None:
    """The project folder the session's ``chats/`` belongs to (``.project_root``), if written."""
    try:
        with open_regular(path.parent.parent / ".project_root") as handle:
            return handle.read(4096).decode("utf-8", "replace").strip() or None
    except (OSError, SessionNotFound):
        return None
