"""Where Claude Code keeps a session: ``$CLAUDE_CONFIG_DIR/projects/<encoded cwd>/<id>.jsonl``.

The folder name replaces every character of the cwd outside ``[A-Za-z0-9]`` with ``-`` (no
collapsing). Names past 200 characters are cut and get a hash suffix that differs between
builds, so when the simple rule misses we scan ``projects/*/`` for ``<id>.jsonl``: the file name
is the one thing every build agrees on. Beside a session live ``<id>/subagents/agent-*.jsonl``
(older builds: ``agent-*.jsonl`` next to the session) and ``<id>/tool-results/<toolu_id>.txt``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from liminal.sessionfiles import SessionNotFound as SessionNotFound
from liminal.sessionfiles import is_session_id as is_session_id
from liminal.sessionfiles import open_regular as open_regular

_UNSAFE = re.compile(r"[^A-Za-z0-9]")
# Exactly the form Claude Code names its files with. An id from a frame or the command line
# becomes part of a path only once it matches: nothing else (``../x``, ``a/b``) ever does.
MAX_FOLDER_CHARS = 200


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    raw = env.get("CLAUDE_CONFIG_DIR")
    return Path(raw).expanduser() if raw else Path("~/.claude").expanduser()


def encode_cwd(cwd: str | Path) -> str:
    """The project folder name for a cwd, by the simple rule (long names need the scan)."""
    return _UNSAFE.sub("-", str(cwd))


@dataclass(frozen=True, slots=True)
class SessionLocation:
    path: Path
    session_id: str

    @property
    def project_dir(self) -> Path:
        return self.path.parent

    @property
    def sidecar_dir(self) -> Path:
        """``<id>/`` beside the file: subagent transcripts and large tool results."""
        return self.path.parent / self.session_id

    @property
    def tool_results_dir(self) -> Path:
        return self.sidecar_dir / "tool-results"

    def subagent_files(self) -> list[Path]:
        found = sorted((self.sidecar_dir / "subagents").glob("agent-*.jsonl"))
        # Older builds put agent transcripts beside the session; they name their parent inside,
        # so only the new layout can be attributed without reading them.
        return found

    def sibling(self, session_id: str) -> SessionLocation:
        return SessionLocation(self.path.with_name(f"{session_id}.jsonl"), session_id)


def _session_id_inside(path: Path) -> str | None:
    """The sessionId the records carry, for a file not named after it (a copy, a fixture)."""
    needle = b'"sessionId":"'
    try:
        with open_regular(path) as handle:
            for _, line in zip(range(200), handle, strict=False):
                at = line.find(needle)
                if at >= 0:
                    value = line[at + len(needle) : at + len(needle) + 36].decode("ascii", "replace")
                    if is_session_id(value):
                        return value
    except (OSError, SessionNotFound):
        return None
    return None


def locate(
    ref: str | Path,
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> SessionLocation:
    """Find a session by file path or by id (in ``cwd``'s project folder first, then anywhere).

    For references a person typed (``inspect``, ``compress``); ids that arrive in frames go
    through ``locate_id``, which never reads one as a path."""
    text = str(ref)
    candidate = Path(text).expanduser()
    if text.endswith(".jsonl") or os.sep in text or candidate.exists():
        try:
            mode = candidate.stat().st_mode
        except OSError as exc:
            raise SessionNotFound(f"{text}: no such file") from exc
        if not stat.S_ISREG(mode):
            raise SessionNotFound(f"{text}: not a regular file")
        stem = candidate.name.removesuffix(".jsonl")
        if not is_session_id(stem):
            stem = _session_id_inside(candidate) or stem
        return SessionLocation(candidate, stem)
    return locate_id(text, cwd=cwd, env=env)


def locate_id(
    session_id: str,
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> SessionLocation:
    """Find a session by its id only: anything that is not a session id is refused."""
    if not is_session_id(session_id):
        raise SessionNotFound(f"{session_id!r}: neither a session file nor a session id")
    projects = config_dir(env) / "projects"
    if cwd is not None:
        folder = encode_cwd(cwd)
        if len(folder) <= MAX_FOLDER_CHARS:
            direct = projects / folder / f"{session_id}.jsonl"
            if direct.is_file():
                return SessionLocation(direct, session_id)
    if projects.is_dir():
        for found in sorted(projects.glob(f"*/{session_id}.jsonl")):
            if found.is_file():
                return SessionLocation(found, session_id)
    raise SessionNotFound(f"session {session_id} not found under {projects}")


def project_folder(cwd: str | Path, env: Mapping[str, str] | None = None) -> Path:
    """The folder Claude Code keeps the sessions of ``cwd`` in: by the simple rule, or for a name
    past ``MAX_FOLDER_CHARS`` the existing folder that starts with its cut (the hash suffix
    differs between builds, so liminal cannot make one up)."""
    projects = config_dir(env) / "projects"
    folder = encode_cwd(cwd)
    if len(folder) <= MAX_FOLDER_CHARS:
        return projects / folder
    found = sorted(p for p in projects.glob(f"{folder[:MAX_FOLDER_CHARS]}*") if p.is_dir())
    if not found:
        raise ValueError(f"no project folder of Claude Code for the long cwd {str(cwd)[:80]}...")
    return found[0]


def find(session_id: str, cwd: str | Path | None = None,
         env: Mapping[str, str] | None = None) -> Path | None:
    """``locate_id``'s file for a session id, or None (for callers that wait for it to appear)."""
    try:
        return locate_id(session_id, cwd=cwd or None, env=env).path
    except SessionNotFound:
        return None
