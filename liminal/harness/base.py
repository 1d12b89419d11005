"""The seam between liminal and a CLI: what the swap, the commands and recall need of its files.

A CLI is a subpackage of ``liminal.harness`` (``claude``, ``codex``) with one class that
implements ``SessionHarness``. Nothing outside ``liminal.harness`` knows a file format: the
kernel asks a harness where a session is, how big its context is, whether a turn is on disk,
and for a rewritten or cut copy under a new id; recall asks it for the bytes a key names.

The seam is cut by role, and a component names only the roles it uses: ``SessionFiles`` (what
the kernel reads of a session file), ``Rewriting`` (a rewrite or a cut under a new id, adopted
or removed), ``SideSessions``, ``Recall``, ``StoredSessions`` (the files beside a session, and a
session written back from the store's lines), ``Removal`` (everything a CLI keeps of a session,
for a delete). ``SessionHarness`` is all of them: what a CLI's class implements.

``HarnessChoice`` chooses the harness of the agent liminal wraps: by the ``harness.name``
setting, else from the agent's ``initialize`` answer (``agentInfo.name``), else from the agent
command's words, else Claude Code. What the kernel holds is its ``harness``, the chosen one at
each use (``ChosenHarness``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from liminal import log

if TYPE_CHECKING:
    from liminal.gradient.recall import RecallKey
    from liminal.gradient.summarize import Summarizer, TurnDigest
    from liminal.gradient.zone import Candidate, Placed

logger = log.get("liminal.harness")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Rewritten:
    new_id: str
    path: Path
    tokens_before: int
    tokens_after: int
    size: int = 0  # bytes liminal wrote; the CLI appends after them
    zone: tuple[Placed, ...] = ()  # what the rewrite placed in its dynamic zone


@dataclass(frozen=True, slots=True)
class PriceRatios:
    """What a CLI's model charges for a token of the prompt read from its cache, one written to
    it, and one of output, as multiples of an uncached input token (the cost policy's units)."""

    read: float
    write: float
    output: float


@dataclass(frozen=True, slots=True)
class Beside:
    """A file a CLI keeps beside a session and that the session's lines refer to (Claude Code's
    large tool outputs: ``liminal.harness.claude.toolresults``): whose it is and its name there,
    both the harness's own. The store keeps it with the thread whose lines refer to it, as one
    session record under ``store_key`` (``liminal.ingest.tail``), so that ``restore`` can write
    it back and recall can read it with the file gone."""

    session_id: str
    name: str

    @property
    def store_key(self) -> str:
        """The ``SessionRecord.backing_id`` the store keeps the file's bytes under (offset 0;
        one record per thread that refers to it: ``record_id``)."""
        return f"{self.session_id}/{self.name}"

    def record_id(self, thread_id: str | None) -> str:
        return f"{self.store_key}@{thread_id or ''}"


@dataclass(frozen=True, slots=True)
class Turns:
    """The turns of a session file that a person typed, as ``/undo`` takes them out."""

    starts: tuple[int, ...]  # where each begins (a byte offset at a line start), oldest first
    # The model sees conversation before the first of them: a summary of older turns (a swap's
    # preamble, the CLI's own compaction). A summary is no turn of the person's: it is never
    # one of ``starts``.
    earlier: bool


class SessionFiles(Protocol):
    """What the kernel reads of a CLI's session files: where a session is, its context, whether a
    turn is on disk, its turns as the person typed them and as a rewrite would band them."""

    @property
    def name(self) -> str: ...

    @property
    def ceiling_tokens(self) -> int:
        """The context no thread should reach: the CLI's own auto-compaction point."""

    def ceiling_at(self, window: int | None) -> int:
        """The CLI's own auto-compaction point on a model of ``window`` tokens (the size the
        agent's usage reports); None: the usual model's, ``ceiling_tokens``."""

    def locate(self, backing_id: str, cwd: str | None) -> Path | None:
        """The session file of ``backing_id``, or None (not written yet, or not this CLI's)."""

    def context_tokens(self, path: Path) -> int | None: ...

    @property
    def reports_usage(self) -> bool:
        """Whether the CLI (or its adapter) tells the context in ACP ``usage_update``s. When it
        does not, what ``context_tokens`` reads at a turn's end is the thread's usage point in
        the store (a ``liminal/usage`` note, never sent), which the dashboard charts."""

    def first_context_tokens(self, path: Path) -> int | None:
        """The context at the end of the session's first turn, as the usage its file records
        says (None: none recorded): the CLI's own prompt and a first exchange, what the cost
        policy takes for the CLI's own prompt when it sees a new thread's first turn end
        (``Pace.overhead``). A thread a new liminal opens has it read from its first session
        (``liminal.kernel.recalibrate``)."""

    @property
    def prices(self) -> PriceRatios | None:
        """The CLI's model's cache pricing, when it is not the cost policy's default (Anthropic's
        ratios, which OpenAI's are close to): docs/formats.md names the source."""

    def cache_life(self, path: Path) -> float | None:
        """How long the model's prompt cache of this session lives unused, as the CLI's own
        records of its last model calls say (seconds), or None: they do not say."""

    def turn_settled(self, path: Path, prompt: str | None) -> bool:
        """The turn whose prompt was ``prompt`` is completely written to the file."""

    def names(self, path: Path) -> str | None:
        """The session id a file at ``path`` holds by this CLI's naming (``target_path``'s),
        or None: not a session file of this CLI. The clean-up after a crash removes a file only
        when its name is the rewrite's id."""

    def position(self, path: Path) -> int:
        """Where the session stands now, between turns (the CLIs only append)."""

    def turns(self, path: Path) -> Turns:
        """Where each turn the person typed begins, and whether a summary of older ones comes
        before them (``Turns``)."""

    def bands(self, path: Path, target_tokens: int,
              recent_tokens: int | None = None) -> dict[str, dict[str, int]]:
        """The session's turns as a rewrite to ``target_tokens`` would band them: for each band
        (``liminal.gradient.bands.Band`` values) its ``turns`` and their ``tokens`` now."""

    def ancient(self, path: Path, target_tokens: int, recent_tokens: int | None = None) -> list[TurnDigest]:
        """The turns a rewrite to ``target_tokens`` would consolidate into its preamble, as the
        summarizer is given them (``liminal.kernel.summaries`` has them summarised ahead)."""

    def digests(self, path: Path) -> list[TurnDigest]:
        """Every turn the model sees now (not a preamble's summary of older ones), as the
        summarizer is given them: what ``/context rebuild`` has the state anchor written from."""



class Rewriting(Protocol):
    """What writes a compressed copy (a swap's, ``/optimise``'s) or a cut (``/undo``, ``/clear MARK``,
    ``/fork``, a rewind) of a session under a new id, and what becomes of it after: adopted by
    the thread, or removed unused."""

    @property
    def name(self) -> str: ...

    def target_path(self, path: Path, new_id: str) -> Path:
        """Where ``rewrite(path, ..., new_id)`` writes: journaled before the file exists."""

    def rewrite(self, path: Path, target_tokens: int, new_id: str, *,
                memos: Sequence[Candidate] = (), summarizer: Summarizer | None = None,
                recent_tokens: int | None = None, scratchpad: str | None = None) -> Rewritten:
        """A compressed copy as ``new_id``; ``target_tokens`` 0: as deep as the recent band allows.
        ``memos``: candidates for its dynamic zone beside the passages it cuts
        (``liminal.gradient.zone``). ``summarizer``: what writes the preamble (the extractive one
        unless given). ``recent_tokens``: the recent band for this thread (the swap policy's, by
        its cache's life), else ``gradient.recent_tokens``; likewise in ``ancient`` and ``bands``.
        ``scratchpad``: the thread's (``liminal.lookup.scratchpad``), at the head of the preamble
        the rewrite writes, or in place of the one an earlier preamble it keeps holds
        (``liminal.gradient.summarize.with_scratchpad``); empty: none; None: not known (the
        earlier preamble's stays)."""

    def cut(self, parts: list[tuple[Path, int, int | None]], like: Path, new_id: str, *,
            keeps_thread: bool = False, scratchpad: str | None = None) -> Rewritten:
        """A session of the byte ranges ``parts``, in order, beside ``like``, as ``new_id``.
        ``keeps_thread``: the thread moves to it (/undo, /clear MARK; a /fork does not), so it
        keeps what names the thread in the CLI, as a rewrite does. ``scratchpad``: as
        ``rewrite``'s, in place of the one a preamble the cut keeps holds (a cut writes none)."""

    def discard(self, rewritten: Rewritten) -> None:
        """Remove a rewritten session that will not be used (it was never loaded)."""

    def adopted(self, rewritten: Rewritten) -> None:
        """The thread moved onto ``rewritten`` (a swap's rewrite, a cut of /undo or /clear MARK):
        what names the thread in the CLI's own files follows it now, and only now, so that a
        rewrite that is skipped, fails or is removed leaves no trace in them."""

    def prepare_load(self, backing_id: str, cwd: str | None, *, started: bool = True) -> None:
        """Before liminal lets the CLI load or resume ``backing_id``: make its file one the CLI
        resumes as the conversation was, where the CLI's own start does not remove it.
        ``started``: the process that will load it runs already (a client's load), so what its
        start does may be under way; else it is about to be started (the recycle, the agent
        restarted), and another process may still be writing the file. The stored lines of the
        session stay a prefix of what it writes. Nothing for a CLI that resumes its files as it
        wrote them (Claude Code, Codex); Gemini CLI's need it (docs/facts.md)."""


class SideSessions(Protocol):
    """What a side session (``liminal.kernel.summaries``) needs of the CLI: what it adds to the
    request, how the prompt is put, and the files it must not leave behind."""

    @property
    def side_sessions(self) -> bool:
        """Whether liminal may open side sessions on this CLI at all. False turns the model's
        summaries off for it (the extractive preamble stands), for a reason its facts give."""

    @property
    def side_session_tokens(self) -> int:
        """What the CLI sends of its own in a side session (``liminal.kernel.summaries``) beside
        liminal's request: its system prompt, tools and context messages, a title request.
        The swap policy prices a summary with it."""

    def side_params(self) -> dict[str, Any]:
        """What a side session's ``session/new`` adds for this CLI's adapter, so that it keeps
        no file of it and offers the model no tool (the router refuses what is asked anyway)."""

    def prepare_side(self, folder: Path) -> None:
        """Write what the CLI reads from a side session's working folder ``folder`` (made,
        empty, before its ``session/new``; removed with it after), so that it offers the model
        no tool where ``side_params`` cannot say so."""

    def side_prompt(self, text: str) -> list[dict[str, Any]]:
        """The content blocks of a side session's prompt holding liminal's request ``text``, as
        this CLI's adapter should be given it (ACP ``ContentBlock``s)."""

    def forget(self, session_id: str, cwd: str, *, closed: bool = False) -> None:
        """Remove every file the CLI keeps of a session liminal opened for itself in the folder
        ``cwd`` (a side session: ``liminal.kernel.summaries``), so that no list shows it.
        ``closed``: the session was just closed in an agent still running, which may be tearing
        it down still: a CLI whose teardown writes files waits for it (bounded)."""



class Recall(Protocol):
    """What recall reads: the bytes a key names, and the file a recalled preview stands for. A key
    names a session, not a CLI: ``ChosenHarness`` asks every CLI's harness in turn."""

    def recall(self, key: RecallKey) -> bytes | None:
        """What a recall key names, from its session file; None: no session of this CLI has the
        key's id. Raises ``RecallError`` when the session has no such record."""

    def recall_in_line(self, line: bytes, key: RecallKey) -> bytes | None:
        """What a recall key names if ``line`` (a stored session line) is its record, else None."""

    def previews(self, value: bytes) -> Beside | None:
        """The file whose whole text a recalled value (``recall``) is only a preview of, or None:
        recall gives the file's text instead."""

    def beside_path(self, ref: Beside, near: Path | None) -> Path | None:
        """Where ``ref`` is on this machine (``near``: the session file whose line named it),
        or None."""



class StoredSessions(Protocol):
    """A session as the store keeps it: which files beside the session each line refers to (kept
    with the line), and the session written back from its stored lines."""

    def beside_in(self, line: bytes) -> tuple[Beside, ...]:
        """The files beside a session that ``line`` (a line of a session file of this CLI)
        refers to: the store keeps them with the line. Empty for a CLI that keeps no such file
        (Codex puts everything in the rollout)."""

    def restore(self, backing_id: str, cwd: str | None, lines: Sequence[bytes],
                beside: Iterable[tuple[Beside, bytes]] = ()) -> Path:
        """Write the session ``backing_id`` again from its stored ``lines`` (each without its
        newline, in file order: the file byte for byte) where the CLI looks for it (``cwd``: the
        session's folder, for a CLI that files sessions by it), 0600; returns the path. Raises
        ``RewriteError`` when a file is there already, ``ValueError`` for an id that is not
        a session id of this CLI or lines it cannot place. ``beside``: the files its lines refer
        to (``beside_in``) and their bytes, taken one at a time (each may be large), written
        where the CLI keeps them, 0600, byte for byte (none over a file that is there), before
        the session."""



class Removal(Protocol):
    """Everything a CLI keeps of a session, and its removal: a deleted thread's files, and the
    lines its own logs keep of it."""

    @property
    def name(self) -> str: ...

    def files(self, backing_id: str, cwd: str | None) -> list[Path]:
        """Every file (or folder) the CLI keeps of the session ``backing_id``: its session file
        wherever the CLI filed it, what it keeps beside it of that session. What ``remove``
        removes; ``liminal doctor`` counts what a deleted thread left. None for an id not of
        this CLI."""

    def remove(self, backing_id: str, cwd: str | None) -> list[Path]:
        """Remove every file the CLI keeps of the session ``backing_id`` (``files``): a thread
        deleted (``session/delete``, ``liminal threads delete``). Returns what went; none for an
        id not of this CLI."""

    def lines(self) -> dict[str, int]:
        """How many lines the CLI's own logs of every session keep of each session they name
        (the prompts a person typed in the CLI's own interface, the names threads were given):
        what ``remove_lines`` removes; ``liminal doctor`` counts what deleted threads left, the
        logs read once for all of them."""

    def remove_lines(self, session_ids: Collection[str]) -> int:
        """Remove those lines (``lines``), and what only they named, under the lock the CLI
        takes while it appends (``liminal.harness.logs``); how many went. ``LogBusy`` when the
        CLI held the lock too long: nothing removed."""


class SessionHarness(SessionFiles, Rewriting, SideSessions, Recall, StoredSessions, Removal, Protocol):
    """One CLI's session files, as the swap (``liminal.kernel.swap``), the commands
    (``liminal.kernel.commands``) and recall (``liminal.lookup.recaller``) use them: every role
    above. A CLI's class implements it whole; a component names only the roles it uses."""


class MoveHarness(SessionFiles, Rewriting, Protocol):
    """What moves a thread onto a rewrite or a cut of its session (``liminal.kernel.mover``,
    ``liminal.kernel.rewind``)."""


class SwapHarness(MoveHarness, SideSessions, Protocol):
    """What the swap manager needs: a move's, and what a summary's side session costs."""


Factory = Callable[[], SessionHarness]


def guess(words: Sequence[str], names: Sequence[str]) -> str | None:
    """The harness named in ``words`` (an agent's name, the words of its command), if exactly one
    is: ``@agentclientprotocol/codex-acp`` and ``npx @zed-industries/codex-acp`` are Codex."""
    text = " ".join(words).lower()
    found = [name for name in names if name in text]
    return found[0] if len(found) == 1 else None


class HarnessChoice:
    """Which CLI's harness is the agent's: ``forced`` (the ``harness.name`` setting, unless
    ``auto``) wins; otherwise the agent command's words choose at start and ``agent_said`` may
    change it when ``initialize`` is answered (before any session exists). Claude Code when
    nothing says otherwise.

    The components are built before the agent names itself, so none keeps the harness chosen
    at its start: each holds ``harness`` (a ``ChosenHarness``), which is the chosen one at each
    use."""

    def __init__(self, factories: Mapping[str, Factory], *, forced: str | None = None,
                 argv: Sequence[str] = ()) -> None:
        self._factories = dict(factories)
        self._made: dict[str, SessionHarness] = {}
        self.forced = forced if forced in self._factories else None
        # The last part of each word: a folder named after a CLI says nothing of the adapter.
        words = [Path(word).name for word in argv]
        self.chosen = self.forced or guess(words, list(self._factories)) or "claude"
        self.harness: SessionHarness = ChosenHarness.of(self)

    def _get(self, name: str) -> SessionHarness:
        if name not in self._made:
            self._made[name] = self._factories[name]()
        return self._made[name]

    @property
    def current(self) -> SessionHarness:
        return self._get(self.chosen)

    def all(self) -> list[SessionHarness]:
        """Every harness, the chosen first (recall tries each for a key)."""
        return [self.current] + [self._get(n) for n in self._factories if n != self.chosen]

    def named(self, name: str) -> SessionHarness | None:
        """The harness called ``name`` (a journal record's), if liminal has it."""
        return self._get(name) if name in self._factories else None

    def agent_said(self, agent_info: Any) -> None:
        if self.forced or not isinstance(agent_info, dict):
            return
        words = [str(agent_info.get(k) or "") for k in ("name", "title")]
        name = guess(words, list(self._factories))
        if name is not None and name != self.chosen:
            logger.info("harness chosen from the agent's initialize", harness=name, was=self.chosen)
            self.chosen = name


def _members(protocol: type) -> frozenset[str]:
    """The public members a protocol declares, its bases' included."""
    return frozenset(name for klass in protocol.__mro__ if klass.__module__ == __name__
                     for name in vars(klass) if not name.startswith("_"))


class ChosenHarness(Recall):
    """The harness a ``HarnessChoice`` has chosen, looked up at each use: what the components hold.

    Every member of ``SessionHarness`` but recall's is the chosen harness's own, reached by
    ``__getattr__`` rather than by a forward written for each: the seam has 34 members, and each
    forward would repeat a signature that could drift from the protocol's. mypy still checks
    every use, because a component only ever sees this object as a ``SessionHarness`` (``of``)
    or one of its roles, and the attribute it gets is the chosen harness's, which implements the
    protocol; what ``__getattr__`` looks up is limited to the protocol's members, so the view is
    exactly the seam. Recall's members are written out: a recall key, a preview or a file beside
    a session names a session, not a CLI, so each harness is asked in turn, the chosen first.
    """

    SEAM = _members(SessionHarness)

    def __init__(self, choice: HarnessChoice) -> None:
        self.choice = choice

    @classmethod
    def of(cls, choice: HarnessChoice) -> SessionHarness:
        return cast("SessionHarness", cls(choice))

    def __getattr__(self, name: str) -> Any:
        if name not in self.SEAM:
            raise AttributeError(name)
        return getattr(self.choice.current, name)

    def _first(self, ask: Callable[[SessionHarness], _T | None]) -> _T | None:
        """What the first harness to know answers, the chosen one asked first."""
        for harness in self.choice.all():
            found = ask(harness)
            if found is not None:
                return found
        return None

    def recall(self, key: RecallKey) -> bytes | None:
        return self._first(lambda harness: harness.recall(key))

    def recall_in_line(self, line: bytes, key: RecallKey) -> bytes | None:
        return self._first(lambda harness: harness.recall_in_line(line, key))

    def previews(self, value: bytes) -> Beside | None:
        return self._first(lambda harness: harness.previews(value))

    def beside_path(self, ref: Beside, near: Path | None) -> Path | None:
        return self._first(lambda harness: harness.beside_path(ref, near))


def choice_behind(harness: object) -> HarnessChoice | None:
    """The choice ``harness`` follows, when it is a ``ChosenHarness``; None for a harness given
    as one (tests), which stays that one whatever the agent says."""
    return harness.choice if isinstance(harness, ChosenHarness) else None
