"""Claude Code sessions as the kernel sees them (``liminal.harness.base.SessionHarness``).

Finding the file, reading its context size, knowing when a turn is on disk, and rewriting it
with the gradient: each the thin end of a module that does the real work.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from liminal import faults
from liminal.config import GradientSettings
from liminal.gradient.recall import RecallKey
from liminal.gradient.summarize import Summarizer, TurnDigest
from liminal.gradient.zone import Candidate
from liminal.harness.base import Beside, Rewritten, Turns
from liminal.harness.claude import cuts, history, tail, toolresults
from liminal.harness.claude.gradient import Preamble, prepare, rewrite_session
from liminal.harness.claude.gradient.validate import validate
from liminal.harness.claude.paths import (
    SessionNotFound,
    config_dir,
    find,
    locate_id,
    project_folder,
)
from liminal.harness.claude.recall import resolve_in, value_in_line
from liminal.sessionfiles import RewriteError, is_session_id, make_private_folder, write_atomically


class ClaudeSessions:
    name = "claude"
    # Claude Code compacts on its own at the model's window (200k) less its output reserve (20k)
    # and a buffer (13k); a thread held below that never meets the CLI's compaction.
    compact_reserve = 33_000
    ceiling_tokens = 200_000 - compact_reserve
    # A side session's own prompt (``liminal.kernel.summaries``), measured with the rig on Claude Code 2.1.316
    # (claude-agent-acp 0.100; docs/gradient.md): the Agent SDK's system prompt without tools and
    # its context messages (2.0k tokens), and the title request it makes for a new session (1.2k).
    side_session_tokens = 3_200
    side_sessions = reports_usage = True
    prices = None  # the cost policy's default

    def __init__(self, settings: GradientSettings, env: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.env = env
        self._settle = tail.SettleWatch()

    def ceiling_at(self, window: int | None) -> int:
        """The same reserve and buffer off another window: a model of 1M tokens compacts past 967k."""
        return self.ceiling_tokens if not window else max(window - self.compact_reserve, 1)

    def locate(self, backing_id: str, cwd: str | None) -> Path | None:
        return find(backing_id, cwd, self.env)

    def context_tokens(self, path: Path) -> int | None:
        return tail.context_tokens(path)

    def first_context_tokens(self, path: Path) -> int | None:
        """The last usage of the first turn's main-chain answers."""
        from liminal.harness.claude.conversation import build
        from liminal.harness.claude.paths import locate
        from liminal.harness.claude.records import read_session

        turns = build(read_session(locate(path, env=self.env))).turns
        used = [r.context_tokens for r in turns[0].records if r.type == "assistant" and r.context_tokens] \
            if turns else []
        return used[-1] if used else None

    def cache_life(self, path: Path) -> float | None:
        return tail.cache_life(path)

    def turn_settled(self, path: Path, prompt: str | None) -> bool:
        return self._settle.settled(path, prompt)

    def target_path(self, path: Path, new_id: str) -> Path:
        return path.with_name(f"{new_id}.jsonl")  # beside the original, as the CLI looks for it

    def rewrite(self, path: Path, target_tokens: int, new_id: str, *,
                memos: Sequence[Candidate] = (), summarizer: Summarizer | None = None,
                recent_tokens: int | None = None, scratchpad: str | None = None) -> Rewritten:
        if faults.value("swap.corrupt_rewrite"):
            self._corrupt_rewrite(path, target_tokens)
        result = rewrite_session(path, target_tokens, new_id, settings=self.settings.with_recent(recent_tokens),
                                 env=self.env, preamble=Preamble(summarizer, memos, scratchpad))
        return Rewritten(result.new_session_id, result.path, result.tokens_before, result.tokens_after,
                         result.path.stat().st_size, result.zone)

    # -- cuts, for the commands (``liminal.kernel.commands``) ---------------------------------

    def position(self, path: Path) -> int:
        """Where the session stands now (its size: the CLI only appends, between turns)."""
        return path.stat().st_size

    def turns(self, path: Path) -> Turns:
        return cuts.turns(path)

    def cut(self, parts: list[tuple[Path, int, int | None]], like: Path, new_id: str, *,
            keeps_thread: bool = False, scratchpad: str | None = None) -> Rewritten:
        """A session of the byte ranges ``parts``, beside ``like``, as ``new_id``. With
        ``keeps_thread`` it takes the thread's latest title, names and modes, wherever in the files
        the CLI wrote them (``cuts.THREAD_STATE``); without, none of its names. ``scratchpad``:
        in place of the one a preamble the cut keeps holds."""
        target = self.target_path(like, new_id)
        tokens, size = cuts.write_cut(parts, target, new_id, self.settings, self.env,
                                      thread=like if keeps_thread else None, scratchpad=scratchpad)
        # Before: the context of the session the thread is on (what /undo and /clear MARK
        # leave), not the cut's own (it said "11.8k -> 11.8k" of an /undo from 15.4k).
        before = tail.context_tokens(like)
        return Rewritten(new_id, target, tokens if before is None else before, tokens, size)

    def bands(self, path: Path, target_tokens: int,
              recent_tokens: int | None = None) -> dict[str, dict[str, int]]:
        from liminal.harness.claude import report

        return report.bands(path, replace(self.settings.with_recent(recent_tokens), target_tokens=target_tokens), self.env)

    def names(self, path: Path) -> str | None:
        return path.stem if path.suffix == ".jsonl" and is_session_id(path.stem) else None

    def ancient(self, path: Path, target_tokens: int, recent_tokens: int | None = None) -> list[TurnDigest]:
        from liminal.harness.claude.conversation import build
        from liminal.harness.claude.gradient.plan import make_plan
        from liminal.harness.claude.paths import locate
        from liminal.harness.claude.records import read_session

        conversation = build(read_session(locate(path, env=self.env)))
        return list(make_plan(conversation, self.settings.with_recent(recent_tokens), target_tokens).digests)

    def digests(self, path: Path) -> list[TurnDigest]:
        from liminal.harness.claude.conversation import build
        from liminal.harness.claude.gradient.plan import digest
        from liminal.harness.claude.paths import locate
        from liminal.harness.claude.records import read_session

        return [digest(t) for t in build(read_session(locate(path, env=self.env))).turns]

    def side_params(self) -> dict[str, Any]:
        """The Agent SDK's options, which both Claude adapters take from ``_meta.claudeCode``:
        no session file (``persistSession``; Claude Code writes its last prompt and cost to it
        again after the close is answered, so a removed file comes back), and no built-in tool
        (``tools``, claude-agent-acp; the older adapter keeps its tools and the router refuses
        their permissions), and no predicted follow-up prompt (``promptSuggestions``: one more
        model call, after the answer, for nothing)."""
        options = {"persistSession": False, "tools": [], "promptSuggestions": False}
        return {"_meta": {"claudeCode": {"options": options}}}

    def prepare_side(self, folder: Path) -> None:
        """Nothing: ``side_params`` says it all."""

    def side_prompt(self, text: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": text}]

    def forget(self, session_id: str, cwd: str, *, closed: bool = False) -> None:
        """The session's file, its folder of large tool results, and the project folder of
        ``cwd`` once nothing else is in it."""
        if not is_session_id(session_id):
            raise ValueError(f"{session_id!r} is not a session id")
        try:
            folder = project_folder(cwd, self.env)
        except ValueError:
            return
        (folder / f"{session_id}.jsonl").unlink(missing_ok=True)
        for temp in folder.glob(f".{session_id}.jsonl.*.tmp"):
            temp.unlink(missing_ok=True)
        beside = folder / session_id
        if beside.is_dir():
            import shutil

            shutil.rmtree(beside, ignore_errors=True)
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty

    def discard(self, rewritten: Rewritten) -> None:
        rewritten.path.unlink(missing_ok=True)
        # And the temp file of a write that a crash cut short (``write_atomically``).
        for temp in rewritten.path.parent.glob(f".{rewritten.path.name}.*.tmp"):
            temp.unlink(missing_ok=True)

    def files(self, backing_id: str, cwd: str | None) -> list[Path]:
        """The session's ``<id>.jsonl`` in every project folder it is in, the ``<id>/`` folder
        Claude Code keeps beside it (a subagent's transcripts, tool results it put aside), and
        what a cut-short atomic write left of it; and what Claude Code keeps of the session
        elsewhere in its folder, by the session's id: ``session-env/<id>/`` (seen),
        ``file-history/<id>/`` (the files its edits changed, as they were), ``todos/<id>-agent-
        *.json`` and ``debug/<id>.txt`` (named so in 2.1.44 and 2.1.316)."""
        if not is_session_id(backing_id):
            return []
        root = config_dir(self.env)
        found: list[Path] = []
        projects = root / "projects"
        for folder in projects.iterdir() if projects.is_dir() else ():
            found += [folder / f"{backing_id}.jsonl", *folder.glob(f".{backing_id}.jsonl.*.tmp"),
                      folder / backing_id]
        found += [root / "session-env" / backing_id, root / "file-history" / backing_id,
                  root / "debug" / f"{backing_id}.txt",
                  *(root / "todos").glob(f"{backing_id}-agent-*.json")]
        return [path for path in found if path.exists() and not path.is_symlink()]

    def remove(self, backing_id: str, cwd: str | None) -> list[Path]:
        gone = self.files(backing_id, cwd)
        for path in gone:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        return gone

    def lines(self) -> dict[str, int]:
        return history.count(self.env)

    def remove_lines(self, session_ids: Collection[str]) -> int:
        """Its prompt history's lines of the sessions (``history``), and the pastes only they name."""
        return history.remove(session_ids, self.env)

    def adopted(self, rewritten: Rewritten) -> None:
        """Nothing: a title the user gave is a record of the session file, which goes with it."""

    def prepare_load(self, backing_id: str, cwd: str | None, *, started: bool = True) -> None:
        """Nothing: Claude Code resumes its files as it wrote them."""

    # -- recall -------------------------------------------------------------------------------

    def recall(self, key: RecallKey) -> bytes | None:
        try:
            location = locate_id(key.session_id, env=self.env)
        except SessionNotFound:
            return None
        return resolve_in(location, key)

    def recall_in_line(self, line: bytes, key: RecallKey) -> bytes | None:
        return value_in_line(line, key)

    # -- a session written again from the store (``liminal.kernel.restore``) -------------------

    def restore(self, backing_id: str, cwd: str | None, lines: Sequence[bytes],
                beside: Iterable[tuple[Beside, bytes]] = ()) -> Path:
        """``projects/<encoded cwd>/<id>.jsonl``: the folder Claude Code looks in for the cwd the
        session is opened with (the records' own ``cwd`` when none is given); the large tool
        outputs its lines preview in ``<session>/tool-results/`` of that folder (a rewrite's
        lines name its original's, which sit beside it), first: the session is never there
        without them."""
        if not is_session_id(backing_id):
            raise ValueError(f"{backing_id!r} is not a session id")
        cwd = cwd or _cwd_in(lines)
        if not cwd:
            raise ValueError(f"session {backing_id}: no cwd to file it under")
        folder = project_folder(cwd, self.env)
        make_private_folder(folder)
        path = folder / f"{backing_id}.jsonl"
        if path.exists():  # before any file beside it is written
            raise RewriteError(f"{path} exists")
        toolresults.write_beside(folder, beside)
        write_atomically(path, tuple(line + b"\n" for line in lines))
        return path

    # -- large tool outputs beside a session (``liminal.harness.claude.toolresults``) ----------

    def beside_in(self, line: bytes) -> tuple[Beside, ...]:
        return toolresults.in_line(line)

    def beside_path(self, ref: Beside, near: Path | None) -> Path | None:
        return toolresults.path_of(ref, near, self.env)

    def previews(self, value: bytes) -> Beside | None:
        return toolresults.in_value(value)

    def _corrupt_rewrite(self, path: Path, target_tokens: int) -> None:
        """Failpoint: a real rewrite with one tool result lost, put through the real validator."""
        prepared = prepare(path, target_tokens, settings=self.settings, env=self.env)
        lines = list(prepared.rendered.lines)
        for n, line in enumerate(lines):
            if b'"tool_result"' in line:
                del lines[n]
                break
        validate(lines, prepared.result.new_session_id)  # raises ValidationError
        raise RewriteError("the validator accepted a rewrite with a tool result missing")


def _cwd_in(lines: Sequence[bytes]) -> str | None:
    """The ``cwd`` the session's first record that has one names."""
    for line in lines[:200]:
        if b'"cwd"' not in line:
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        cwd = value.get("cwd") if isinstance(value, dict) else None
        if isinstance(cwd, str) and cwd:
            return cwd
    return None
