"""Codex rollouts as the swap, the commands and recall see them (``liminal.harness.base``).

A rewrite or a cut is a new rollout under a new uuid, in today's folder of the same
``$CODEX_HOME/sessions``, named as Codex names its own: Codex finds it by the uuid in the name,
and neither its state database nor 0.166's history projection (both keyed by thread id) has a
row for it to contradict. The original is never touched. A thread the user named in Codex
(``session_index.jsonl``) keeps its name on the new id.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from liminal import faults
from liminal.config import GradientSettings
from liminal.gradient.summarize import PREAMBLE_INTRO, Summarizer, TurnDigest
from liminal.gradient.zone import Candidate
from liminal.harness.base import Beside, Rewritten, Turns
from liminal.harness.codex import gradient, history
from liminal.harness.codex.rollout import (
    OUTPUTS,
    Line,
    RolloutError,
    codex_home,
    find,
    forget_rows,
    is_context_message,
    last_token_count,
    new_path,
    parse_lines,
    read_lines,
    read_rollout,
    recorded_path,
    released,
    session_files,
    session_id_of,
    split,
    tail_from,
    text_of,
)
from liminal.sessionfiles import HeldStill, is_session_id, make_private_folder, write_atomically

if TYPE_CHECKING:
    from liminal.gradient.recall import RecallKey


def _squash(text: str) -> str:
    return "".join(text.split())


# A side session's project config (``CodexHarness.prepare_side``): every tool setting Codex 0.166
# reads, off. The features are those Codex turns off itself for a thread of its own that must not
# act (its "temporary structured thread"), plus tool search and goals; a key another Codex does
# not know is ignored. ``apply_patch`` comes from the model's catalog entry, not a setting: in the
# read-only sandbox an edit needs an approval, and the router refuses every one.
SIDE_CONFIG = """\
# liminal's side session (a summary): no tool runs here. Removed with the session.
sandbox_mode = "read-only"
web_search = "disabled"

[features]
shell_tool = false
unified_exec = false
view_image = false
apply_patch_freeform = false
tool_search = false
tool_suggest = false
goals = false
request_permissions_tool = false
image_generation = false
standalone_web_search = false
multi_agent = false
multi_agent_v2 = false
code_mode = false
memories = false

[tools.experimental_request_user_input]
enabled = false

[tools.update_plan]
enabled = false
"""


# What a side session's request is called in its prompt (``CodexSessions.side_prompt``).
SIDE_REQUEST_URI = "liminal:summary-request"


class CodexSessions:
    name = "codex"
    # Codex compacts on its own near 90% of the model's window (258,400 tokens for the GPT-5
    # family it reports in ``task_started``); a thread held below it never meets that.
    ceiling_tokens = 230_000
    usual_window = 258_400  # the GPT-5 family's, which the ceiling is 90% of (rounded down)
    # A side session's own prompt, measured with the rig (docs/gradient.md): Codex's
    # instructions and tools, 9.4k tokens with codex-acp 0.16 and 8.6k with codex-acp 2.6 in the
    # side folder's config (which asks for no title of it: ``side_prompt``).
    side_session_tokens = 9_500
    side_sessions = reports_usage = True
    prices = None  # the cost policy's default

    def __init__(self, settings: GradientSettings, env: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.env = env
        self._still = HeldStill()
        self._targets: dict[str, Path] = {}
        self._found: dict[str, Path] = {}
        self._name_from: dict[str, Path] = {}  # a rewrite or cut -> the rollout whose name it takes
        # Whether this Codex lets a closed thread go (``released``): None until a closed side
        # session has shown it. The adapter on Codex's own core tears one down within a second;
        # the one on Codex's app server keeps it loaded, and waiting on it would wait in vain.
        self._lets_go: bool | None = None

    def ceiling_at(self, window: int | None) -> int:
        """The same share of another window."""
        return self.ceiling_tokens if not window else max(window * self.ceiling_tokens // self.usual_window, 1)

    def locate(self, backing_id: str, cwd: str | None) -> Path | None:
        # Found once, then remembered while it exists: a search walks every day's folder.
        known = self._found.get(backing_id)
        if known is not None and known.is_file():
            return known
        path = find(backing_id, self.env)
        if path is not None:
            self._found[backing_id] = path
        return path

    def context_tokens(self, path: Path) -> int | None:
        return last_token_count(tail_from(path, lambda line: line.is_event("token_count")))

    def first_context_tokens(self, path: Path) -> int | None:
        """The first turn's last ``token_count`` (the context its last model request had)."""
        turns = read_rollout(path).turns
        return last_token_count(turns[0].lines) if turns else None

    def cache_life(self, path: Path) -> float | None:
        """None: a rollout's usage (``token_count``, 0.166's ``token_usage_record``) counts
        cached and cache-written tokens but never says how long the cache lives, and Codex asks
        for no retention (only a ``prompt_cache_key``; docs/facts.md)."""
        return None

    def turn_settled(self, path: Path, prompt: str | None) -> bool:
        """The last turn has ended (``task_complete`` or ``turn_aborted``), it is the turn of
        ``prompt`` when that can be told, and the file has held still since the last look."""
        if not self._still.held_still(path):
            return False
        turn = tail_from(path, lambda line: line.is_event("task_started"))
        if not turn:
            return False
        if not any(line.is_event("task_complete") or line.is_event("turn_aborted") for line in turn):
            return False
        if prompt is None or not prompt.strip() or prompt.startswith("/"):
            return True  # nothing to tell, or a slash command the CLI rewrites: the ended turn
        wanted = _squash(prompt)
        said = [_squash(text_of(line.payload)) for line in turn
                if line.is_item and line.payload.get("role") == "user"]
        # A prompt of images or resources reads differently on disk: then the ended turn will do.
        return any(wanted == s or (s and (wanted in s or s in wanted)) for s in said) or not said

    def target_path(self, path: Path, new_id: str) -> Path:
        if new_id not in self._targets:
            self._targets[new_id] = new_path(path, new_id)
        return self._targets[new_id]

    def write(self, target: Path, lines: tuple[bytes, ...]) -> int:
        make_private_folder(target.parent)
        write_atomically(target, lines)
        return sum(len(line) for line in lines)

    def rewrite(self, path: Path, target_tokens: int, new_id: str, *,
                memos: Sequence[Candidate] = (), summarizer: Summarizer | None = None,
                recent_tokens: int | None = None, scratchpad: str | None = None) -> Rewritten:
        result = gradient.rewrite(read_rollout(path), target_tokens, new_id, self.settings.with_recent(recent_tokens),
                                  memos, summarizer, scratchpad)
        lines = result.lines
        if faults.value("swap.corrupt_rewrite"):
            # Failpoint: a tool output lost (or, with none left, the session_meta), put through
            # the real check, which refuses it.
            outputs = [n for n, line in enumerate(lines) if b'_output"' in line]
            lost = outputs[0] if outputs else 0
            gradient.check(lines[:lost] + lines[lost + 1:], new_id)
            raise RolloutError("the check accepted a rewrite with a line lost")
        target = self.target_path(path, new_id)
        size = self.write(target, lines)
        self._name_from[new_id] = path  # named once the thread is on it (``adopted``)
        return Rewritten(new_id, target, result.tokens_before, result.tokens_after, size, result.zone)

    def names(self, path: Path) -> str | None:
        found = session_id_of(path)
        return found if found is not None and is_session_id(found) else None

    def ancient(self, path: Path, target_tokens: int, recent_tokens: int | None = None) -> list[TurnDigest]:
        return gradient.ancient_digests(read_rollout(path), target_tokens, self.settings.with_recent(recent_tokens))

    def digests(self, path: Path) -> list[TurnDigest]:
        return gradient.all_digests(read_rollout(path))

    def side_params(self) -> dict[str, Any]:
        """Nothing the Codex adapters take: neither reads a tool setting from ``session/new``
        (``prepare_side``); the rollout is removed after (``forget``)."""
        return {}

    def prepare_side(self, folder: Path) -> None:
        """A project config in the side session's folder turning Codex's tools off
        (``SIDE_CONFIG``). The TypeScript adapter (``@agentclientprotocol/codex-acp``) starts
        each session as an app-server thread whose config is read for its cwd, project layers
        included (it marks the cwd trusted itself): Codex 0.166 then offers ``apply_patch``
        alone, instead of ten tools (``tests/acceptance/test_summaries.py``). The Rust adapter (``@zed-industries/codex-acp``) copies
        the config it read at its start for every session (``build_session_config``: cwd and
        MCP servers set, ``include_apply_patch_tool`` forced on) and reads neither this file nor
        anything of ``session/new``'s ``_meta``: its side sessions keep their tools, and the
        router refuses what the model asks (``docs/gradient.md``)."""
        make_private_folder(folder / ".codex")
        write_atomically(folder / ".codex" / "config.toml", (SIDE_CONFIG.encode(),))

    def side_prompt(self, text: str) -> list[dict[str, Any]]:
        """The request as an embedded resource (both Codex adapters advertise
        ``embeddedContext`` and give the model its text inside ``<context ref=...>``), not a
        text block: ``@agentclientprotocol/codex-acp`` titles a new session from its first
        prompt's text blocks, in a request of its own (11k tokens of Codex's prompt again) and a
        ``thread/name/set`` on the side thread after its turn, which then finds its rollout
        removed (Codex's "state db returned stale rollout path" error). With no text block
        there is no title to write."""
        return [{"type": "resource", "resource": {"uri": SIDE_REQUEST_URI, "mimeType": "text/plain",
                                                  "text": text}}]

    def forget(self, session_id: str, cwd: str, *, closed: bool = False) -> None:
        """A side session's rollout and what Codex's databases keep of it (``remove``): a row
        naming a removed rollout is what Codex reports as stale, and it holds the request's text.

        A ``closed`` one not before Codex has let the thread go (``released``): Codex tears a
        closed session down after the close is answered, and the teardown writes the thread's
        row once more, so a row removed before it comes back naming a rollout that is gone (the
        next listing: "state db list_threads returned stale rollout path"). A Codex that has
        ended may have left the snapshot behind: nothing to wait for then."""
        if closed and self._lets_go is not False:
            went = released(codex_home(self.env), session_id)
            if self._lets_go is None and went is not None:
                self._lets_go = went
        self.remove(session_id, cwd)

    def discard(self, rewritten: Rewritten) -> None:
        rewritten.path.unlink(missing_ok=True)
        for temp in rewritten.path.parent.glob(f".{rewritten.path.name}.*.tmp"):
            temp.unlink(missing_ok=True)
        self._targets.pop(rewritten.new_id, None)
        self._name_from.pop(rewritten.new_id, None)

    def files(self, backing_id: str, cwd: str | None) -> list[Path]:
        return session_files(codex_home(self.env), backing_id)

    def remove(self, backing_id: str, cwd: str | None) -> list[Path]:
        """The rollouts (``files``), and the rows Codex's databases keep of the thread
        (``rollout.forget_rows``: its title, its first prompt, 0.166's copy of every item)."""
        self._found.pop(backing_id, None)
        # The rows before the files, and again after: a row whose rollout is gone is what Codex
        # reports as stale when it lists its threads (``state db list_threads returned stale
        # rollout path``), so no moment may have the one without the other; the second sweep
        # takes a row the running Codex wrote in between.
        forget_rows(backing_id, self.env)
        gone = self.files(backing_id, cwd)
        for path in gone:
            path.unlink(missing_ok=True)
        forget_rows(backing_id, self.env)
        return gone

    def lines(self) -> dict[str, int]:
        return history.count(self.env)

    def remove_lines(self, session_ids: Collection[str]) -> int:
        """Their lines in Codex's thread names and prompt history (``history``)."""
        return history.remove(session_ids, self.env)

    def adopted(self, rewritten: Rewritten) -> None:
        """The thread goes on in ``rewritten``: the name the user gave it in Codex goes with it
        (``name_like``), so ``codex resume NAME`` opens the rollout it is on. Not before: a
        rewrite that is skipped or fails would leave Codex's index a line naming no rollout."""
        source = self._name_from.pop(rewritten.new_id, None)
        if source is not None:
            self.name_like(source, rewritten.new_id)

    def prepare_load(self, backing_id: str, cwd: str | None, *, started: bool = True) -> None:
        """Nothing: Codex resumes its rollouts as it wrote them."""

    # -- cuts, for the commands --------------------------------------------------------------

    def position(self, path: Path) -> int:
        return path.stat().st_size

    def turns(self, path: Path) -> Turns:
        """The turns with a prompt of the person's. A rewrite's first turn holds its summary
        of the older turns as its only user message (``gradient._summary_turn``): that turn,
        and one of Codex's own with no prompt (its compaction's ``compacted`` line), are the
        history before them when the model sees something of them."""
        starts: list[int] = []
        earlier = False
        for turn in read_rollout(path).turns:
            if turn.prompt and not turn.prompt.startswith(PREAMBLE_INTRO):
                starts.append(turn.start)
            elif not starts:
                earlier = earlier or any(line.type == "compacted" or (
                    line.is_item and not is_context_message(line.payload)) for line in turn.lines)
        return Turns(tuple(starts), earlier)

    def cut(self, parts: list[tuple[Path, int, int | None]], like: Path, new_id: str, *,
            keeps_thread: bool = False, scratchpad: str | None = None) -> Rewritten:
        """The byte ranges ``parts`` as one rollout. A cut that starts after its first file's
        beginning (``/fork MARK``) gets that file's ``session_meta`` and Codex's context
        messages, which only the first turn carries. ``keeps_thread``: the thread goes on in
        the cut, which gets its name (``name_like``). ``scratchpad``: in place of the one a
        previous rewrite's summary the cut keeps holds (a cut adds no summary)."""
        if not parts:
            raise RolloutError("nothing to cut")
        first, start, _ = parts[0]
        whole = split(read_lines(first))
        lines: list[Line] = []
        if start > 0:
            lines.extend(whole.head)
            if whole.turns:
                lines.extend(line for line in whole.turns[0].lines if line.type == "world_state"
                             or (line.is_item and is_context_message(line.payload)))
        for path, begin, end in parts:
            lines.extend(read_lines(path, begin, end))
        kept = [line for line in lines if line.type not in gradient.USAGE_LINES
                and not any(line.is_event(k) for k in gradient.USAGE_EVENTS)]
        if scratchpad is not None:
            kept = [gradient.refreshed(line, scratchpad) for line in kept]
        if not kept or kept[0].type != "session_meta":
            raise RolloutError("the cut does not start with session_meta")
        others = {found for path, _, _ in parts[1:] if (found := session_id_of(path)) is not None}
        raw = gradient.finish(kept, whole.session_id, new_id, also=others)
        target = self.target_path(like, new_id)
        size = self.write(target, raw)
        if keeps_thread:
            self._name_from[new_id] = like
        # The context the cut leaves: its items and what every call sends besides (without
        # the latter an /undo right after a swap said 2.6k of a 14k context).
        overhead = self._overhead(like)
        tokens = overhead + gradient.tokens_of(raw)
        # Before: the context of the rollout the thread is on, as its last call counted it, or
        # as a rewrite not resumed since holds it.
        before = self.context_tokens(like)
        if before is None:
            before = overhead + gradient.tokens_of(tuple(line.raw for line in read_lines(like)))
        return Rewritten(new_id, target, before, tokens, size)

    def _overhead(self, path: Path) -> int:
        """The instructions and tools the model is sent with ``path``'s items, from its last
        ``token_count``, or from the rollout it was copied from when it has none yet (a
        rewrite or cut liminal wrote, not resumed since: ``forked_from_id``); 0 if none says."""
        seen: set[Path] = set()
        found: Path | None = path
        while found is not None and found not in seen and len(seen) < 8:
            seen.add(found)
            rollout = read_rollout(found)
            known = gradient.overhead(rollout)
            if known is not None:
                return known
            parent = rollout.meta.get("forked_from_id")
            found = self.locate(parent, None) if isinstance(parent, str) else None
        return 0

    def bands(self, path: Path, target_tokens: int,
              recent_tokens: int | None = None) -> dict[str, dict[str, int]]:
        from liminal.harness.codex import gradient

        return gradient.band_table(path, replace(self.settings.with_recent(recent_tokens), target_tokens=target_tokens))

    # -- recall -------------------------------------------------------------------------------

    def recall(self, key: RecallKey) -> bytes | None:
        path = find(key.session_id, self.env)
        if path is None:
            return None
        from liminal.gradient.recall import RecallError

        with path.open("rb") as handle:
            for raw in handle:
                value = self.recall_in_line(raw, key)
                if value is not None:
                    return value
        raise RecallError(f"{key}: no call {key.uuid} in {path}")

    # -- files beside a rollout: Codex keeps none ----------------------------------------------
    # A tool output of any size is in the rollout's ``function_call_output`` item (Codex
    # truncates what the model is sent, not what it records): there is nothing beside it to keep.

    def beside_in(self, line: bytes) -> tuple[Beside, ...]:
        return ()

    def beside_path(self, ref: Beside, near: Path | None) -> Path | None:
        return None

    def previews(self, value: bytes) -> Beside | None:
        return None

    def restore(self, backing_id: str, cwd: str | None, lines: Sequence[bytes],
                beside: Iterable[tuple[Beside, bytes]] = ()) -> Path:
        """Where Codex's state database names the rollout (``rollout.recorded_path``), else
        ``sessions/YYYY/MM/DD/rollout-<start>-<id>.jsonl`` under CODEX_HOME, dated by the
        rollout's own ``session_meta`` (when it started), as Codex names it. ``beside`` must be
        empty: Codex keeps no file beside a rollout."""
        if not is_session_id(backing_id):
            raise ValueError(f"{backing_id!r} is not a session id")
        if next(iter(beside), None) is not None:
            raise ValueError("Codex keeps no file beside a rollout")
        parsed = parse_lines(lines[0] + b"\n") if lines else []
        started = None
        if parsed and parsed[0].value is not None:
            stamp = parsed[0].value.get("timestamp")
            try:
                started = datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) else None
            except ValueError:
                started = None
        # Where Codex's state database says the rollout is (it resumes from there first), else
        # where Codex would have named it when it started.
        target = recorded_path(backing_id, self.env) \
            or new_path(codex_home(self.env) / "sessions" / "any", backing_id, started)
        make_private_folder(target.parent)
        write_atomically(target, tuple(line + b"\n" for line in lines))
        self._found[backing_id] = target
        return target

    def recall_in_line(self, line: bytes, key: RecallKey) -> bytes | None:
        if f'"call_id":"{key.uuid}"'.encode() not in line:
            return None
        parsed = parse_lines(line)
        if not parsed or not parsed[0].is_item:
            return None
        payload = parsed[0].payload
        if key.block == gradient.OUTPUT_BLOCK and payload.get("type") in OUTPUTS:
            value: object = payload.get("output")
        elif key.block == gradient.CALL_BLOCK and payload.get("type") not in OUTPUTS:
            value = payload.get("input") if payload.get("type") == "custom_tool_call" else payload.get("arguments")
            if isinstance(value, str) and key.path:
                try:
                    value = orjson.loads(value)
                except orjson.JSONDecodeError:
                    return None
        else:
            return None
        from liminal.gradient.recall import RecallError, as_bytes, walk

        try:
            return as_bytes(walk(value, key))
        except RecallError:
            return None

    # -- the picker's names -------------------------------------------------------------------

    def name_like(self, path: Path, new_id: str) -> None:
        """If the user named the thread in Codex, the new rollout gets the same name, newer, so
        ``codex resume NAME`` finds the copy (names live in ``session_index.jsonl``)."""
        index = codex_home(self.env) / "session_index.jsonl"
        old_id = session_id_of(path)
        try:
            data = index.read_bytes()
        except OSError:
            return
        name = None
        for raw in data.splitlines():
            try:
                entry = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            # (Codex reads a line whose name is not a string as no entry at all.)
            if isinstance(entry, dict) and entry.get("id") == old_id \
                    and isinstance(entry.get("thread_name"), str) and entry["thread_name"].strip():
                name = entry["thread_name"]
        if name is None:
            return
        stamp = datetime.fromtimestamp(time.time(), UTC).isoformat().replace("+00:00", "Z")
        entry_line = orjson.dumps({"id": new_id, "thread_name": name, "updated_at": stamp}) + b"\n"
        fd = os.open(index, os.O_RDWR | os.O_APPEND)
        try:
            # Codex appends whole lines, but a crash can leave the last one cut short: ours then
            # starts a line of its own rather than joining it (neither would parse). Looked at
            # just before the write, which O_APPEND puts at the end whatever came meanwhile.
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                entry_line = b"\n" + entry_line
            os.write(fd, entry_line)
        finally:
            os.close(fd)
