"""Codex rollout files: where they are, their lines kept whole, and their turns.

A rollout is ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl`` (local
time), one ``{"timestamp", "type", "payload"}`` object a line (Codex 0.166 adds ``ordinal``), the
first a ``session_meta`` whose ``payload.id`` is the uuid. A turn runs from an ``event_msg``
``task_started`` to the next; what the model sees is the ``response_item`` lines. See
docs/formats.md ("Codex rollouts") for the records and what resume does with them.

Reading is lossless: every line keeps its bytes, and a line that does not parse is kept as it is
(Codex skips such lines too).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from liminal import log
from liminal.gradient.zone import ZONE_INTRO
from liminal.sessionfiles import is_session_id, open_regular

logger = log.get("liminal.harness.codex")

_NAME = re.compile(r"rollout-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-(?P<id>[0-9a-fA-F-]{36})\.jsonl")
# Messages Codex injects as context (permissions, environment, AGENTS.md), not the user's words;
# and liminal's dynamic zone (``liminal.gradient.zone``), which is no prompt either.
_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "<permissions instructions>",
                     "<skills_instructions>", "# AGENTS.md instructions", "<user_shell_command>",
                     "<turn_aborted>", "<subagent_notification>", ZONE_INTRO)
CALLS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output",
         "local_shell_call": "local_shell_call_output"}
OUTPUTS = {v: k for k, v in CALLS.items()}


def call_id_of(payload: Mapping[str, Any]) -> str | None:
    """The id a call and its output pair by. A ``local_shell_call`` may come without a
    ``call_id``: Codex then answers it under the item's ``id`` (``call_id.or(id)``)."""
    found = payload.get("call_id")
    if not found and payload.get("type") == "local_shell_call":
        found = payload.get("id")
    return str(found) if found else None


class RolloutError(ValueError):
    """Not a Codex rollout (no ``session_meta`` first), or not one liminal can rewrite."""


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env.get("HOME") or Path.home()) / ".codex"


def session_id_of(path: Path) -> str | None:
    match = _NAME.fullmatch(path.name)
    return match.group("id") if match else None


def find(session_id: str, env: Mapping[str, str] | None = None) -> Path | None:
    """The rollout of ``session_id`` (newest day first, then the archive), or None. An id that is
    not a uuid never becomes part of a path."""
    if not is_session_id(session_id):
        return None
    home = codex_home(env)
    pattern = f"rollout-*-{session_id}.jsonl"
    sessions = home / "sessions"
    if sessions.is_dir():
        for day in sorted(sessions.glob("[0-9]*/[0-9]*/[0-9]*"), reverse=True):
            for path in day.glob(pattern):
                if path.is_file():
                    return path
    for path in (home / "archived_sessions").glob(pattern):
        if path.is_file():
            return path
    return None


def recorded_path(session_id: str, env: Mapping[str, str] | None = None) -> Path | None:
    """Where Codex's state database (``$CODEX_HOME/state_<n>.sqlite``, table ``threads``) says
    the rollout of ``session_id`` is, if it names one under CODEX_HOME's ``sessions`` or
    ``archived_sessions`` by Codex's naming; read-only, and None on any failure. Codex resumes a
    thread from that path first: with a row naming a file that is gone, the app server's
    ``thread/resume`` says "no rollout found" (seen with codex-acp 2.6.0) rather than scanning
    the folders by name."""
    if not is_session_id(session_id):
        return None
    home = codex_home(env)
    def version(database: Path) -> int:
        number = database.stem.partition("_")[2]
        return int(number) if number.isdigit() else -1

    for database in sorted(home.glob("state_*.sqlite"), key=version, reverse=True):
        try:
            with contextlib.closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True,
                                                    timeout=1)) as db:
                row = db.execute("SELECT rollout_path FROM threads WHERE id = ?", (session_id,)).fetchone()
        except sqlite3.Error:
            continue
        if row is None or not isinstance(row[0], str):
            continue
        path = Path(row[0])
        folders = (home / "sessions", home / "archived_sessions")
        if session_id_of(path) == session_id and any(f in path.parents for f in folders) \
                and ".." not in path.parts:
            return path
    return None


def forget_rows(session_id: str, env: Mapping[str, str] | None = None) -> int:
    """Remove what Codex's own databases keep of the thread ``session_id`` (a deleted one): in
    every ``$CODEX_HOME/<name>_<n>.sqlite``, the rows of each table whose ``thread_id`` names it,
    then its ``threads`` row (0.166: ``state_5`` has its title and first prompt,
    ``thread_history_1`` every item of it, ``logs_2``, ``memories_1``, ``goals_1``, ``queue_1``
    their rows of it); how many rows went. Left, a row names a rollout that is gone: Codex's
    picker lists it, and a resume says so ("state db returned stale rollout path"). Each
    database in one transaction, waiting a little for Codex's own writer; one that cannot be
    written is left as it is (said in the log)."""
    if not is_session_id(session_id):
        return 0
    removed = 0
    for database in sorted(codex_home(env).glob("*_*.sqlite")):
        if database.is_symlink() or not database.is_file():
            continue
        try:
            with contextlib.closing(sqlite3.connect(database, timeout=5, isolation_level=None)) as db:
                tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                          if not name.startswith("sqlite_")]
                db.execute("BEGIN IMMEDIATE")
                try:
                    for table in tables:  # the rows naming it first, then the thread they name
                        quoted = '"' + table.replace('"', '""') + '"'
                        columns = {row[1] for row in db.execute(f"PRAGMA table_info({quoted})")}
                        if "thread_id" in columns:
                            removed += db.execute(f"DELETE FROM {quoted} WHERE thread_id = ?",
                                                  (session_id,)).rowcount
                    if "threads" in tables:
                        removed += db.execute("DELETE FROM threads WHERE id = ?", (session_id,)).rowcount
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
        except sqlite3.Error as exc:
            logger.warning("a deleted thread's rows not removed from Codex's database",
                           database=database.name, error=str(exc))
    return removed



def session_files(home: Path, session_id: str) -> list[Path]:
    """Every rollout of the session in the CODEX_HOME ``home``: under ``sessions/`` (any day)
    and ``archived_sessions/`` (where codex-acp's own ``session/delete`` moves it), and a
    cut-short write's temp file; and the snapshot of the shell's environment Codex took for it
    (``shell_snapshots/<id>.<n>.sh``, ``.tmp-<n>`` while written; a Codex that ends without its
    clean-up, as codex-zed at its input's end, leaves it: seen with the rig)."""
    if not is_session_id(session_id):
        return []
    pattern = f"rollout-*-{session_id}.jsonl"
    found: list[Path] = []
    for folder in (home / "sessions", home / "archived_sessions"):
        if folder.is_dir():
            found += [path for path in [*folder.rglob(pattern), *folder.rglob(f".{pattern}.*.tmp")]
                      if path.is_file() and not path.is_symlink()]
    snapshots = home / "shell_snapshots"
    if snapshots.is_dir():
        found += [path for path in snapshots.glob(f"{session_id}.*")
                  if path.is_file() and not path.is_symlink()]
    return found


# How long a closed thread's files wait for Codex to let it go (seen: half a second after the
# close was answered, on a loaded machine), and how often they look.
RELEASE_SECONDS = 5.0
RELEASE_POLL_SECONDS = 0.05


def released(home: Path, session_id: str, seconds: float = RELEASE_SECONDS) -> bool | None:
    """Whether Codex let the thread ``session_id`` go within ``seconds``: the last thing its
    teardown does is delete the thread's shell snapshot (``shell_snapshots/<id>.*``), so the
    snapshot gone is the thread gone. None: it had no snapshot, nothing to tell by."""
    snapshots = home / "shell_snapshots"
    if not is_session_id(session_id) or not any(snapshots.glob(f"{session_id}.*")):
        return None
    deadline = time.monotonic() + seconds
    while any(snapshots.glob(f"{session_id}.*")):
        if time.monotonic() >= deadline:
            logger.info("Codex keeps a closed thread loaded: side sessions' files are removed "
                        "without waiting for it", session=session_id)
            return False
        time.sleep(RELEASE_POLL_SECONDS)
    return True


def new_path(beside: Path, session_id: str, now: float | None = None) -> Path:
    """Where Codex itself would put a rollout of ``session_id`` started ``now``: under the
    ``sessions`` folder of the CODEX_HOME ``beside`` belongs to, in today's local date."""
    home = next((p.parent for p in beside.parents if p.name in ("sessions", "archived_sessions")),
                beside.parent)
    local = time.localtime(now)
    day = home / "sessions" / time.strftime("%Y/%m/%d", local)
    return day / f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S', local)}-{session_id}.jsonl"


@dataclass(slots=True)
class Line:
    offset: int
    raw: bytes  # with its newline
    value: dict[str, Any] | None  # None: did not parse as an object
    # The line's ``type``, read once: the gradient asks for it tens of times a line.
    type: str = field(init=False)

    def __post_init__(self) -> None:
        self.type = str(self.value.get("type")) if self.value is not None else ""

    @property
    def is_record(self) -> bool:
        """An object with a ``type``: what Codex reads (and 0.166 numbers); any other line it
        skips as a parse error (a write cut short by a crash)."""
        return self.value is not None and isinstance(self.value.get("type"), str)

    @property
    def payload(self) -> dict[str, Any]:
        payload = self.value.get("payload") if self.value is not None else None
        return payload if isinstance(payload, dict) else {}

    @property
    def kind(self) -> str:
        """``response_item``'s and ``event_msg``'s own type (``message``, ``token_count``)."""
        return str(self.payload.get("type") or "")

    @property
    def is_item(self) -> bool:
        return self.type == "response_item"

    def is_event(self, kind: str) -> bool:
        return self.type == "event_msg" and self.kind == kind


def parse_lines(data: bytes, start: int = 0) -> list[Line]:
    out: list[Line] = []
    offset = start
    for raw in data.splitlines(keepends=True):
        value: Any = None
        if raw.strip():
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                value = None
            out.append(Line(offset, raw if raw.endswith(b"\n") else raw + b"\n",
                            value if isinstance(value, dict) else None))
        offset += len(raw)
    return out


def read_lines(path: Path, start: int = 0, end: int | None = None) -> list[Line]:
    with open_regular(path) as handle:
        handle.seek(start)
        data = handle.read() if end is None else handle.read(max(0, end - start))
    return parse_lines(data, start)


def text_of(payload: Mapping[str, Any]) -> str:
    """The text of a message item's content (input_text and output_text parts)."""
    content = payload.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))


def is_context_message(payload: Mapping[str, Any]) -> bool:
    if payload.get("type") != "message":
        return False
    if payload.get("role") in ("developer", "system"):
        return True
    return payload.get("role") == "user" and text_of(payload).lstrip().startswith(_CONTEXT_PREFIXES)


def is_prompt(line: Line) -> bool:
    p = line.payload
    return line.is_item and p.get("type") == "message" and p.get("role") == "user" \
        and not is_context_message(p)


@dataclass(slots=True)
class Turn:
    lines: list[Line] = field(default_factory=list)

    @property
    def start(self) -> int:
        return self.lines[0].offset

    @property
    def prompt(self) -> str:
        return next((text_of(line.payload) for line in self.lines if is_prompt(line)), "")

    @property
    def complete(self) -> bool:
        return any(line.is_event("task_complete") or line.is_event("turn_aborted") for line in self.lines)

    def items(self) -> Iterable[Line]:
        return (line for line in self.lines if line.is_item)


@dataclass(slots=True)
class Rollout:
    head: list[Line]  # session_meta and anything before the first turn
    turns: list[Turn]

    @property
    def meta(self) -> dict[str, Any]:
        return self.head[0].payload

    @property
    def session_id(self) -> str:
        return str(self.meta.get("id") or "")

    @property
    def lines(self) -> list[Line]:
        return self.head + [line for turn in self.turns for line in turn.lines]


def split(lines: list[Line]) -> Rollout:
    """The head and the turns (each from its ``task_started``). Refuses a file whose first line
    is not ``session_meta``: Codex refuses it too."""
    if not lines or lines[0].type != "session_meta":
        raise RolloutError("not a Codex rollout: the first line is not session_meta")
    head: list[Line] = []
    turns: list[Turn] = []
    for line in lines:
        if line.is_event("task_started"):
            turns.append(Turn([line]))
        elif turns:
            turns[-1].lines.append(line)
        else:
            head.append(line)
    return Rollout(head, turns)


def read_rollout(path: Path) -> Rollout:
    return split(read_lines(path))


def last_token_count(lines: Iterable[Line]) -> int | None:
    """The context of the last model request: ``token_count.info.last_token_usage.total_tokens``
    (``total_token_usage`` is the sum over requests, not a context size)."""
    found: int | None = None
    for line in lines:
        if line.is_event("token_count"):
            info = line.payload.get("info")
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            total = last.get("total_tokens") if isinstance(last, dict) else None
            if isinstance(total, int):
                found = total
    return found


TAIL_BYTES = 256 * 1024


def tail_lines(path: Path, limit: int = TAIL_BYTES) -> list[Line]:
    """The complete lines of the file's last ``limit`` bytes."""
    with open_regular(path) as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        handle.seek(start)
        data = handle.read()
    if start > 0:
        cut = data.find(b"\n") + 1
        data, start = data[cut:], start + cut
    if data and not data.endswith(b"\n"):  # a line being written
        data = data[: data.rfind(b"\n") + 1]
    return parse_lines(data, start)


def tail_from(path: Path, found: Callable[[Line], bool]) -> list[Line]:
    """The complete lines from the last one ``found`` accepts to the end, however far back it
    is (a turn that read a few large files is megabytes long), or [] when no line is: the tail
    grows until it holds such a line or the whole file."""
    limit = TAIL_BYTES
    while True:
        size = path.stat().st_size
        lines = tail_lines(path, limit)
        at = max((n for n, line in enumerate(lines) if found(line)), default=None)
        if at is not None:
            return lines[at:]
        if limit >= size:
            return []
        limit *= 4
