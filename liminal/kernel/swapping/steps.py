"""What the swap machine is told (events) and what it asks for (commands).

The machine never waits and never touches a file, the agent or the router: it answers each
event with the next command, and its driver (``liminal.kernel.swap.SwapManager``) carries the
command out and reports what came of it as the next event. A transcript of the two is the
whole of a swap's decision, which is how the tests read it.

At a thread's turn end, idle spell or load, ``SwapMachine`` answers with ``Queue`` (a ``Look``
for the swap task), ``Hold`` once it is queued, and ``LookForCacheLife``. One queued look is one
``SwapRun``: ``start`` gives its first command, ``send(event)`` each next, up to ``Finish``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from liminal.kernel.policy import Decision

# ------------------------------------------------------------------ a thread's cues


@dataclass(frozen=True, slots=True)
class Look:
    """What the swap task is asked to look at: a thread whose turn ended, idle past its cache,
    or just opened."""

    thread_id: str
    decision: Decision | None  # the agent's usage says swap; None: the session file decides
    held: bool  # the thread's next frames wait (placed in the flush that saw the cue)
    prompt: str | None  # the prompt of the turn that ended, to find that turn on disk
    idle_since: float | None = None  # an idle swap: when the thread's idle spell began (monotonic)
    loaded: bool = False  # not a turn end: the client opened the thread (no turn is still to settle)


@dataclass(frozen=True, slots=True)
class Queue:
    """Give the swap task ``look``; then tell the machine it was queued (``SwapMachine.queued``)."""

    look: Look


@dataclass(frozen=True, slots=True)
class Hold:
    """Hold the thread's next frames in the router until the swap task is done with it."""

    thread_id: str


@dataclass(frozen=True, slots=True)
class LookForCacheLife:
    """Read the thread's session file for its cache's life, beside the turns (never holding one)."""

    thread_id: str


Cue = Queue | Hold | LookForCacheLife

# ------------------------------------------------------------------ one swap's commands


@dataclass(frozen=True, slots=True)
class Locate:
    """Find the thread's session file now (``Located``)."""


@dataclass(frozen=True, slots=True)
class AwaitFile:
    """Wait up to ``timeout`` seconds for the session file to appear (``Located``)."""

    timeout: float


@dataclass(frozen=True, slots=True)
class Settle:
    """Wait up to ``timeout`` seconds for the turn of ``prompt`` to be on disk (``Settled``)."""

    path: Path
    prompt: str | None
    timeout: float


@dataclass(frozen=True, slots=True)
class ReadCacheLife:
    """Read the CLI's records of its model calls for the cache's life (``CacheLifeRead``)."""

    path: Path


@dataclass(frozen=True, slots=True)
class ReadSize:
    """Read the context size from the session file (``SizeRead``)."""

    path: Path


@dataclass(frozen=True, slots=True)
class Journal:
    """Journal the attempt as ended without a move (``Done``)."""

    outcome: str
    reason: str
    tokens: int | None


@dataclass(frozen=True, slots=True)
class Gather:
    """Collect what the rewrite is given beside the file (``Gathered``): the dynamic zone's offer
    (``zone``: asked for), the model's summaries ready now, the scratchpad, and whether the
    model's summary of this cycle was asked for."""

    zone: bool


@dataclass(frozen=True, slots=True)
class Rewrite:
    """Rewrite the file to ``aim`` tokens keeping ``band`` recent tokens whole, with ``memos``
    offered to the zone, open it for the thread, journal and release (``MoveEnded``). Before it
    opens, the rewrite is checked with ``SwapRun.rewritten``."""

    path: Path
    decision: Decision
    reason: str
    tokens: int | None  # the context before, as known when decided
    aim: int
    band: int
    memos: tuple[Any, ...] = ()
    kept_out: tuple[dict[str, Any], ...] = ()
    summarizer: Any = None
    scratchpad: Any = None


@dataclass(frozen=True, slots=True)
class Announce:
    """Tell the client the thread's context went from ``before`` to ``after`` (``Done``)."""

    new_id: str
    before: int
    after: int


@dataclass(frozen=True, slots=True)
class Finish:
    """The swap is over: True committed, False tried and failed (the thread backs off, unless
    the trigger moved instead), None no swap was needed after all."""

    outcome: bool | None


Command = Locate | AwaitFile | Settle | ReadCacheLife | ReadSize | Journal | Gather | Rewrite | Announce | Finish

# ------------------------------------------------------------------ one swap's events


@dataclass(frozen=True, slots=True)
class Located:
    path: Path | None


@dataclass(frozen=True, slots=True)
class Settled:
    ok: bool
    stopping: bool = False  # liminal stops and its grace is over: nothing may begin


@dataclass(frozen=True, slots=True)
class CacheLifeRead:
    life: float | None  # None: the records said nothing (or could not be read)
    now: float  # monotonic


@dataclass(frozen=True, slots=True)
class SizeRead:
    tokens: int | None


@dataclass(frozen=True, slots=True)
class Gathered:
    summary_asked: bool
    memos: tuple[Any, ...] = ()
    kept_out: tuple[dict[str, Any], ...] = ()
    summarizer: Any = None
    scratchpad: Any = None


@dataclass(frozen=True, slots=True)
class MoveEnded:
    committed: bool
    new_id: str | None = None
    before: int | None = None
    after: int | None = None


@dataclass(frozen=True, slots=True)
class Done:
    """A command with nothing to report was carried out."""


Event = Located | Settled | CacheLifeRead | SizeRead | Gathered | MoveEnded | Done
