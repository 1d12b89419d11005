"""What Codex's own logs keep of a deleted thread, beside its rollouts and its databases' rows.

- ``$CODEX_HOME/session_index.jsonl``: the names threads were given, a line a rename:
  ``{"id", "thread_name", "updated_at"}`` (newest line per id wins). codex-acp 2.x writes one
  for the client's ``session/set_title`` (seen with the rig: codex-agent advertises
  ``sessionCapabilities.title``) and for the title it has the model make from a new session's
  first prompt; the terminal's ``/rename`` too; codex-zed writes none. Codex 0.166 appends
  holding an exclusive ``flock`` on ``session_index.jsonl.lock`` and opens the log by its name
  once it holds it (seen: a rename waited for liminal's lock, and appended to the file renamed
  in meanwhile): rewritten into a new file renamed over it (``liminal.harness.logs``).
- ``$CODEX_HOME/history.jsonl``: the prompts typed in Codex's terminal interface, a line each,
  ``{"session_id", "ts", "text"}`` (no ACP adapter writes one). Codex opens the file, then takes
  an exclusive ``flock`` on it (tried ten times, 100 ms apart) and appends: a rename would leave
  a waiting append on the file it replaced, so this log is rewritten in place.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from liminal.harness import logs
from liminal.harness.codex.rollout import codex_home
from liminal.sessionfiles import is_session_id

NAMES = "session_index.jsonl"
PROMPTS = "history.jsonl"


def _of(sessions: Collection[str], key: str) -> Callable[[dict[str, Any]], bool]:
    wanted = {s for s in sessions if is_session_id(s)}
    return lambda line: line.get(key) in wanted


def count(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """How many lines of both logs name each session."""
    home = codex_home(env)
    return dict(logs.count_by(home / NAMES, "id") + logs.count_by(home / PROMPTS, "session_id"))


def remove(sessions: Collection[str], env: Mapping[str, str] | None = None) -> int:
    """The lines of ``sessions`` in both logs; how many went."""
    home = codex_home(env)
    names, prompts = home / NAMES, home / PROMPTS
    gone = logs.remove(names, _of(sessions, "id"), logs.flock(_beside(names, ".lock")), in_place=False)
    typed = logs.remove(prompts, _of(sessions, "session_id"), logs.flock(prompts), in_place=True)
    return len(gone.dropped) + len(typed.dropped)


def _beside(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)
