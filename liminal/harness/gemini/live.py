"""Gemini CLI's session files as the swap, the commands and recall see them
(``liminal.harness.base``): where a session is, its context, its turns, recall, the store's
lines written back, removal.

Three faults of Gemini CLI 0.61.0 decide what liminal may write (docs/facts.md): a load in the
minute the session began spoils the file, so nothing liminal writes is named for the minute it
is loaded in; a resumed session with a tool call sends the call's response twice unless the
``user`` records of responses are left out, and the resume writes them back, so a session is
written again before every load; the next start deletes a loaded session's files, so the store
is the only record. A rewrite and a cut (``gradient``) are written to meet the first two.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from liminal.config import GradientSettings
from liminal.gradient.summarize import Summarizer, TurnDigest
from liminal.gradient.zone import Candidate
from liminal.harness.base import Beside, PriceRatios, Rewritten, Turns
from liminal.harness.gemini import chatfile, gradient, records
from liminal.harness.gemini.chatfile import ChatFile, text_of
from liminal.sessionfiles import (
    HeldStill,
    RewriteError,
    SessionNotFound,
    is_session_id,
    make_private_folder,
    open_regular,
    write_atomically,
)

if TYPE_CHECKING:
    from liminal.gradient.recall import RecallKey


def _squash(text: str) -> str:
    return "".join(text.split())


def _is_prompt(message: Mapping[str, Any]) -> bool:
    """A message the person typed: a ``user`` one that is neither the CLI's context nor the
    responses to calls."""
    return records.message_type(message) == "gemini:user"


def _offsets(chat: ChatFile) -> list[int]:
    """Where each line of ``chat`` begins."""
    found, at = [], 0
    for line in chat.lines:
        found.append(at)
        at += len(line.raw) + 1
    return found


def _turns_of(messages: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The messages by turn, each from a prompt of the person's; what comes before the first
    prompt (the context, a summary of older turns) is no turn."""
    turns: list[list[Mapping[str, Any]]] = []
    for message in messages:
        if _is_prompt(message):
            turns.append([message])
        elif turns:
            turns[-1].append(message)
    return turns


def _read_range(path: Path, begin: int, end: int | None) -> bytes:
    with open_regular(path) as handle:
        handle.seek(begin)
        return handle.read() if end is None else handle.read(max(0, end - begin))


class GeminiSessions:
    name = "gemini"
    # Gemini CLI compresses its history itself at half the model's limit (``compressionThreshold``
    # 0.5 of 1,048,576 tokens for the models it names): a thread held below it never meets that.
    usual_window = 1_048_576
    ceiling_tokens = 480_000
    # A side session's own prompt: the CLI's system instruction, its sixteen tools and the
    # ``<session_context>``, 12.3k tokens in the rig's first request (fixtures/gemini).
    side_session_tokens = 12_500
    # No side sessions: Gemini CLI cannot close a session, so each would run in a process of its
    # own, and every start of the CLI deletes the files of the sessions loaded in the project
    # (the live thread's among them) in a clean-up that runs beside what liminal does meanwhile
    # (docs/facts.md). The model's summaries are off for it; the extractive preamble stands.
    side_sessions = False
    # Gemini CLI asks for no cache: the API's implicit cache is all there is. Google prices its
    # hits at a tenth of an input token and the tokens that fill it at an input token's price,
    # without storage; output at about 8 input tokens (docs/formats.md, "Cached tokens and their
    # price", names the sources and what could not be checked).
    prices = PriceRatios(read=0.10, write=1.0, output=8.0)
    # No ``usage_update`` over ACP (the prompt's answer has the turn's token counts in
    # ``_meta.quota``, not the context): the session file's usage is the thread's.
    reports_usage = False

    def __init__(self, settings: GradientSettings, env: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.env = env
        self._still = HeldStill()
        self._targets: dict[str, Path] = {}

    # -- what the kernel reads ---------------------------------------------------------------

    def ceiling_at(self, window: int | None) -> int:
        """The same share of another window."""
        return self.ceiling_tokens if not window else max(window * self.ceiling_tokens // self.usual_window, 1)

    def locate(self, backing_id: str, cwd: str | None) -> Path | None:
        return chatfile.find(backing_id, cwd, self.env)

    def _messages(self, path: Path) -> list[dict[str, Any]]:
        return ChatFile.read(path).messages()

    def context_tokens(self, path: Path) -> int | None:
        return chatfile.context_size(self._messages(path))

    def first_context_tokens(self, path: Path) -> int | None:
        """The usage of the first turn's last model message."""
        turns = _turns_of(self._messages(path))
        return chatfile.context_size(turns[0]) if turns else None

    def cache_life(self, path: Path) -> float | None:
        """None: a model message's ``tokens`` count the cached tokens of its prompt (``cached``,
        part of ``input``) and never say how long the cache lives; the CLI asks for no explicit
        cache (docs/facts.md)."""
        return None

    def turn_settled(self, path: Path, prompt: str | None) -> bool:
        """The last turn has ended (its last message the model's, with no calls, saying
        something), it is the turn of ``prompt`` when that can be told, and the file has held
        still since the last look."""
        if not self._still.held_still(path):
            return False
        messages = self._messages(path)
        if not chatfile.turn_ended(messages):
            return False
        if prompt is None or not prompt.strip() or prompt.startswith("/"):
            return True  # nothing to tell, or a slash command the CLI rewrites: the ended turn
        turns = _turns_of(messages)
        if not turns:
            return False
        said = _squash(text_of(turns[-1][0].get("content")))
        wanted = _squash(prompt)
        # A prompt of images or resources reads differently on disk: then the ended turn will do.
        return not said or wanted == said or wanted in said or said in wanted

    def names(self, path: Path) -> str | None:
        """The session id of a file named as the CLI names them: its headers', when the name's
        eight characters are that id's."""
        match = chatfile.NAME.fullmatch(path.name)
        if match is None:
            return None
        try:
            found = ChatFile.read(path).session_id
        except (OSError, SessionNotFound):
            return None
        if found is None or not is_session_id(found) or not found.lower().startswith(match.group("short").lower()):
            return None
        return found

    def position(self, path: Path) -> int:
        return path.stat().st_size

    def turns(self, path: Path) -> Turns:
        """The prompts written as lines of their own (a prompt inside a ``$set`` of the whole
        history, a resume's, is earlier conversation, not a turn a cut can start at)."""
        chat = ChatFile.read(path)
        messages = chat.messages()
        live = {str(m["id"]) for m in messages}
        starts: dict[str, int] = {}  # a message appended again (its usage added) starts one turn
        for offset, line in zip(_offsets(chat), chat.lines, strict=True):
            obj = line.obj
            if line.kind == "message" and obj is not None and obj["id"] in live and _is_prompt(obj):
                starts.setdefault(obj["id"], offset)
        earlier = False
        for message in messages:
            if message["id"] in starts:
                break
            if message.get("type") in ("user", "gemini") and records.message_type(message) != "gemini:user:context":
                earlier = True
        earlier = earlier or gradient.previous_summary(messages) is not None
        return Turns(tuple(starts.values()), earlier)

    def bands(self, path: Path, target_tokens: int,
              recent_tokens: int | None = None) -> dict[str, dict[str, int]]:
        session = gradient.Session.read(path)
        plan = gradient.rewrite(session, target_tokens, str(uuid.uuid4()), self.settings.with_recent(recent_tokens))
        return gradient.by_band(session, plan)

    def ancient(self, path: Path, target_tokens: int, recent_tokens: int | None = None) -> list[TurnDigest]:
        return gradient.ancient_digests(gradient.Session.read(path), target_tokens,
                                        self.settings.with_recent(recent_tokens))

    def digests(self, path: Path) -> list[TurnDigest]:
        return gradient.digests(gradient.Session.read(path).turns)

    # -- rewrites and cuts -------------------------------------------------------------------------

    def target_path(self, path: Path, new_id: str) -> Path:
        """Beside ``path``, named for the minute before the first ask: never a load's minute
        (a load in the minute a session's file is named for spoils it)."""
        if new_id not in self._targets:
            self._targets[new_id] = path.parent / gradient.file_name(new_id)
        return self._targets[new_id]

    def rewrite(self, path: Path, target_tokens: int, new_id: str, *,
                memos: Sequence[Candidate] = (), summarizer: Summarizer | None = None,
                recent_tokens: int | None = None, scratchpad: str | None = None) -> Rewritten:
        """A compressed copy (``gradient``), with a dynamic zone of ``memos`` and the passages it
        cuts before the recent band."""
        if not is_session_id(new_id):
            raise RewriteError(f"{new_id!r} is not a session id")
        session = gradient.Session.read(path)
        if not session.turns:
            raise RewriteError(f"{path}: no turn to rewrite")
        result = gradient.rewrite(session, target_tokens, new_id, self.settings.with_recent(recent_tokens),
                                  summarizer, scratchpad, memos)
        target = self.target_path(path, new_id)
        make_private_folder(target.parent)
        write_atomically(target, result.lines)
        return Rewritten(new_id, target, result.tokens_before, result.tokens_after,
                         sum(len(line) for line in result.lines), result.zone)

    def cut(self, parts: list[tuple[Path, int, int | None]], like: Path, new_id: str, *,
            keeps_thread: bool = False, scratchpad: str | None = None) -> Rewritten:
        """The byte ranges ``parts`` as one session, written as a rewrite is (``gradient.finish``:
        each call in its turn, no response records, no usage). A cut that starts after its
        first file's first turn (``/fork MARK``) gets what comes before that turn in the file
        (its header, the CLI's context, a summary). Nothing names a thread in the CLI's files
        but the session file: ``keeps_thread`` asks nothing more."""
        if not parts:
            raise RewriteError("nothing to cut")
        if not is_session_id(new_id):
            raise RewriteError(f"{new_id!r} is not a session id")
        first, start, _ = parts[0]
        data = b""
        if start > 0:
            starts = self.turns(first).starts
            data += _read_range(first, 0, min(starts[0], start) if starts else start)
        for path, begin, end in parts:
            data += _read_range(path, begin, end)
        session = gradient.Session.of(ChatFile.parse(data))
        if not session.turns:
            raise RewriteError("the cut holds no turn")
        head = list(session.head) if scratchpad is None else gradient.refreshed(session.head, scratchpad)
        original = gradient.Session.read(like)
        overhead = gradient.overhead_of(original)
        before = original.context or overhead
        kept = [*head, *(message for turn in session.turns for message in turn)]
        result = gradient.finish(session, kept, new_id, before, overhead)
        target = self.target_path(like, new_id)
        make_private_folder(target.parent)
        write_atomically(target, result.lines)
        return Rewritten(new_id, target, result.tokens_before, result.tokens_after,
                         sum(len(line) for line in result.lines))

    def discard(self, rewritten: Rewritten) -> None:
        rewritten.path.unlink(missing_ok=True)
        for temp in rewritten.path.parent.glob(f".{rewritten.path.name}.*.tmp"):
            temp.unlink(missing_ok=True)
        self._targets.pop(rewritten.new_id, None)

    def adopted(self, rewritten: Rewritten) -> None:
        """Nothing names a thread in the CLI's files but its session file."""

    def prepare_load(self, backing_id: str, cwd: str | None, *, started: bool = True) -> None:
        """A file the CLI resumed once holds the user records of function responses (sent twice
        on the next resume), and each load leaves a file of the id with nothing to resume, for
        which the CLI's next start deletes every file of the id's eight characters. When either
        holds: the ``$set`` that makes the file resume as it was (``gradient.resumable``) after
        its bytes (what the store has stays its start), and the id's other files removed.
        Before a start (``started`` False) that is done where the file is: another process may
        still be appending to it, and the start lists the folder only after. With the process
        running, its start's clean-up may be listing and deleting meanwhile (it is not awaited):
        the file is written again under a name no file of the folder had (deletions by names
        listed before miss it), and the old one removed too."""
        path = self.locate(backing_id, cwd)
        if path is None:
            return
        chat = ChatFile.read(path)
        fix = gradient.resumable(chat)
        others = [p for p in self.files(backing_id, cwd) if p != path and p.is_file()]
        if fix is None and not others:
            return
        data = chat.to_bytes()
        if not started:
            if fix is not None:
                with path.open("ab") as handle:
                    handle.write((b"" if not data or data.endswith(b"\n") else b"\n") + fix + b"\n")
            for old in others:
                old.unlink(missing_ok=True)
            return
        lines = (data if not data or data.endswith(b"\n") else data + b"\n", *((fix + b"\n",) if fix else ()))
        target = path.parent / gradient.unused_name(backing_id, {p.name for p in path.parent.iterdir()})
        write_atomically(target, lines)
        for old in (path, *others):
            old.unlink(missing_ok=True)

    # -- side sessions -------------------------------------------------------------------------

    def side_params(self) -> dict[str, Any]:
        return {}

    def prepare_side(self, folder: Path) -> None:
        """Nothing yet: the CLI reads ``.gemini/settings.json`` in the folder, which could turn
        its tools off; the router refuses what the model asks meanwhile."""

    def side_prompt(self, text: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": text}]

    def forget(self, session_id: str, cwd: str, *, closed: bool = False) -> None:
        self.remove(session_id, cwd)

    # -- recall --------------------------------------------------------------------------------

    def recall(self, key: RecallKey) -> bytes | None:
        path = chatfile.find(key.session_id, None, self.env)
        if path is None:
            return None
        from liminal.gradient.recall import RecallError

        for line in ChatFile.read(path).lines:
            value = records.value_in_line(line.raw, key)
            if value is not None:
                return value
        raise RecallError(f"{key}: no call {key.uuid} in {path}")

    def recall_in_line(self, line: bytes, key: RecallKey) -> bytes | None:
        return records.value_in_line(line, key)

    # Gemini CLI keeps a tool's whole output in the session file: nothing beside it to keep.

    def previews(self, value: bytes) -> Beside | None:
        return None

    def beside_path(self, ref: Beside, near: Path | None) -> Path | None:
        return None

    def beside_in(self, line: bytes) -> tuple[Beside, ...]:
        return ()

    def restore(self, backing_id: str, cwd: str | None, lines: Sequence[bytes],
                beside: Iterable[tuple[Beside, bytes]] = ()) -> Path:
        """In the project's ``chats/`` (``cwd`` registered in ``projects.json``), named for the
        minute before now (a load in the minute a file is named for spoils it: the load that
        follows a restore is in this minute or a later one), the stored lines byte for byte,
        then, when the CLI would resume them wrongly, one ``$set`` of the messages as they
        were (``gradient.resumable``): a session the CLI resumed once holds the user records of
        function responses, which it would send twice, and a later turn's calls sit in the
        first turn's calls message. The stored lines stay a prefix of the file."""
        if not is_session_id(backing_id):
            raise ValueError(f"{backing_id!r} is not a session id")
        if next(iter(beside), None) is not None:
            raise ValueError("Gemini CLI keeps no file beside a session")
        slug = chatfile.project_slug(cwd, self.env) if cwd is not None else None
        if slug is None:
            raise ValueError(f"no Gemini CLI project for {cwd!r}")
        chat = ChatFile(tuple(chatfile.parse_line(line) for line in lines))
        fix = gradient.resumable(chat)
        folder = chatfile.gemini_dir(self.env) / "tmp" / slug / "chats"
        make_private_folder(folder)
        target = folder / gradient.unused_name(backing_id, {p.name for p in folder.iterdir()})
        write_atomically(target, (*(line + b"\n" for line in lines), *((fix + b"\n",) if fix else ())))
        return target

    # -- removal -------------------------------------------------------------------------------

    def files(self, backing_id: str, cwd: str | None) -> list[Path]:
        """Every file of the id's eight characters whose headers name the id (a load's empty
        recording among them), and its subagents' folder."""
        found: list[Path] = []
        for path in chatfile.session_files(backing_id, cwd, self.env):
            try:
                if ChatFile.read(path).session_id == backing_id:
                    found.append(path)
            except (OSError, SessionNotFound):
                continue
        if is_session_id(backing_id):
            found += [folder for chats in sorted((chatfile.gemini_dir(self.env) / "tmp").glob("*/chats"))
                      if (folder := chats / backing_id).is_dir() and not folder.is_symlink()]
        return found

    def remove(self, backing_id: str, cwd: str | None) -> list[Path]:
        import shutil

        gone = self.files(backing_id, cwd)
        for path in gone:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        return gone

    def lines(self) -> dict[str, int]:
        """None: the CLI's prompt history (``~/.gemini/tmp/<project>/logs``) was empty in every
        run seen (docs/facts.md)."""
        return {}

    def remove_lines(self, session_ids: Collection[str]) -> int:
        return 0
