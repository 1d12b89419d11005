"""Claude Code's prompt history (``<config>/history.jsonl``): what a deleted thread leaves in it.

Claude Code's own interface (the terminal's prompt, not ACP: neither claude-agent-acp nor
claude-code-acp writes a line) appends a line a prompt typed: ``{"display", "pastedContents",
"timestamp", "project", "sessionId"}``, the prompt's words under its session's id; a paste longer
than 1,024 characters is kept apart, in ``paste-cache/<hash>.txt``, and the line names its
``contentHash``. So a thread liminal holds has lines there once a person opened one of its
sessions in the terminal (``claude --resume ID``) and typed. A line with no ``sessionId`` (Claude
Code before 2.1) names only its project folder and time: no session's, left.

Claude Code appends under ``proper-lockfile``'s lock (``history.jsonl.lock``, a folder, stale
after 10 s), opening the file by its name once it holds it: the rewrite takes that lock and
renames a new file over the log (``liminal.harness.logs``). A paste file goes with the lines
when no line kept names it (the same text pasted in another session stays).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from liminal.harness import logs
from liminal.harness.claude.paths import config_dir
from liminal.sessionfiles import is_session_id

STALE_SECONDS = 10.0  # Claude Code's ``stale`` for this lock
_HASH = re.compile(r"[0-9a-f]{8,64}")


def _log(env: Mapping[str, str] | None) -> Path:
    return config_dir(env) / "history.jsonl"


def _of(sessions: Collection[str]) -> Callable[[dict[str, Any]], bool]:
    wanted = {s for s in sessions if is_session_id(s)}
    return lambda line: line.get("sessionId") in wanted


def count(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """How many lines name each session."""
    return dict(logs.count_by(_log(env), "sessionId"))


def remove(sessions: Collection[str], env: Mapping[str, str] | None = None) -> int:
    """The lines of ``sessions``, and the pastes only they name; how many lines went."""
    log = _log(env)
    if not log.is_file():
        return 0
    lock = logs.lock_dir(Path(os.path.realpath(log) + ".lock"), STALE_SECONDS)
    done = logs.remove(log, _of(sessions), lock, in_place=False)
    kept = {h for line in done.kept for h in _pastes(line)}
    for digest in {h for line in done.dropped for h in _pastes(line)} - kept:
        with contextlib.suppress(FileNotFoundError):
            (config_dir(env) / "paste-cache" / f"{digest}.txt").unlink()
    return len(done.dropped)


def _pastes(line: dict[str, Any]) -> list[str]:
    """The paste files a line names (their hashes, checked before they become paths)."""
    contents = line.get("pastedContents")
    found = contents.values() if isinstance(contents, dict) else ()
    return [h for c in found if isinstance(c, dict) and isinstance(h := c.get("contentHash"), str)
            and _HASH.fullmatch(h)]
