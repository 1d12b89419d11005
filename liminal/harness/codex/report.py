"""``liminal inspect`` and ``liminal compress`` on a Codex rollout: what it holds, and the
gradient's copy of it. The commands detect a rollout (``detect``) before trying Claude Code."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from liminal.config import GradientSettings
from liminal.harness.codex import gradient
from liminal.harness.codex.live import CodexSessions
from liminal.harness.codex.rollout import (
    CALLS,
    find,
    last_token_count,
    read_rollout,
    session_id_of,
)
from liminal.harness.tables import bands_and_largest, file_rows, rewrite_figures
from liminal.sessionfiles import open_regular


def detect(ref: str) -> Path | None:
    """The rollout ``ref`` names (a path to one, or a thread id under ``$CODEX_HOME``), or None."""
    path = Path(ref).expanduser()
    try:
        if path.is_file():
            with open_regular(path) as handle:
                head = handle.read(200)
            return path if b'"type":"session_meta"' in head else None
    except OSError:
        return None
    return find(ref)


def bands(path: Path, settings: GradientSettings) -> dict[str, dict[str, int]]:
    """The rollout's turns as a rewrite to ``settings.target_tokens`` would band them (``/context``)."""
    return gradient.band_table(path, settings)


def inspect(path: Path, settings: GradientSettings, largest: int = 10) -> dict[str, Any]:
    rollout = read_rollout(path)
    lines = rollout.lines
    kinds = Counter(f"{line.type}:{line.kind}" if line.kind else line.type for line in lines)
    plan = gradient.rewrite(rollout, settings.target_tokens, str(uuid.uuid4()), settings)
    items = sorted(((n, line) for n, line in enumerate(lines) if line.is_item),
                   key=lambda item: len(item[1].raw), reverse=True)
    return {
        "harness": "codex",
        "session_id": rollout.session_id,
        "path": str(path),
        "bytes": path.stat().st_size,
        "records": len(lines),
        "records_by_type": dict(kinds.most_common()),
        "cli_version": rollout.meta.get("cli_version"),
        "name_matches_id": session_id_of(path) == rollout.session_id,
        "turns": len(rollout.turns),
        "tool_calls": sum(1 for line in lines if line.is_item and line.kind in CALLS),
        "context_tokens": last_token_count(lines),
        "bands": gradient.by_band(rollout, plan),
        "planned_tokens": plan.tokens_after,
        "target_tokens": settings.target_tokens,
        "largest": [{"line": n, "kind": line.kind, "tokens": gradient.item_tokens(line.payload)}
                    for n, line in items[:largest]],
    }


def table(data: dict[str, Any]) -> str:
    out = [
        f"session   {data['session_id']}  (Codex {data['cli_version']})",
        *file_rows(data, "the last token_count"),
    ]
    out += bands_and_largest(data, "line")
    if not data["name_matches_id"]:
        out.append("note: the file name and session_meta disagree on the id (Codex resumes by the latter)")
    return "\n".join(out)


def compress(path: Path, settings: GradientSettings, new_id: str | None,
             dry_run: bool) -> dict[str, Any]:
    """A compressed copy beside Codex's own rollouts (or, dry, what it would be)."""
    started = time.perf_counter()
    new_id = new_id or str(uuid.uuid4())
    rollout = read_rollout(path)
    result = gradient.rewrite(rollout, settings.target_tokens, new_id, settings)
    sessions = CodexSessions(settings)
    target = sessions.target_path(path, new_id)
    if not dry_run:
        sessions.write(target, result.lines)
        sessions.name_like(path, new_id)
    return {
        "harness": "codex",
        "source_session_id": rollout.session_id,
        "new_session_id": new_id,
        "path": str(target),
        "written": not dry_run,
        "bytes_before": path.stat().st_size,
        **rewrite_figures(result, settings, len(rollout.lines), started),
        "cwd": rollout.meta.get("cwd"),
    }
