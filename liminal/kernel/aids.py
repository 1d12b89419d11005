"""What the wiring lends one component from the others, as one record each, so that a
constructor takes what it needs in one argument rather than one parameter per collaborator
(and nothing is assigned to a component after it is built).

- ``Preamble``: what a move's rewrite or cut is written with besides the session file: the
  thread's scratchpad, the dynamic zone's candidates, and (a swap's) the model's summaries;
- ``CommandAids``: what the command center reads from the rest: its moves' ``Preamble``, the
  summaries' state anchor and its rebuild, where side sessions work, ``$LIMINAL_HOME``, the
  recalibration to wait for, the lock of a thread a client opens.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from liminal.kernel.memory import Memory, unknown

if TYPE_CHECKING:
    from liminal.gradient.summarize import Summarizer
    from liminal.kernel.zone import ZoneSource


def _no_summarizer(_thread: str) -> Summarizer | None:
    return None


def _never_asked(_thread: str, _backing: str) -> bool:
    return False


def _no_anchor(_thread: str) -> str | None:
    return None


def _nothing_behind() -> bool:
    return False


@dataclass(frozen=True)
class Preamble:
    # The thread's scratchpad (``liminal.kernel.memory``): none known keeps the earlier one's.
    memory: Memory = field(default_factory=unknown)
    # Memos, lessons, summaries and titles offered to the rewrite's dynamic zone.
    zone: ZoneSource | None = None
    # What writes a thread's preamble at its swap (None: the extractive summarizer).
    summarizer_for: Callable[[str], Summarizer | None] = _no_summarizer
    # Whether the model's summary of the thread's cycle on a session was asked for (its side
    # session opened, so paid): the journal prices no summary that was never made.
    summary_asked: Callable[[str, str], bool] = _never_asked


@dataclass(frozen=True)
class CommandAids:
    # What a command's move writes its preamble with (the scratchpad, the dynamic zone).
    preamble: Preamble = field(default_factory=Preamble)
    # The thread's state anchor, from its newest summary (``liminal.kernel.summaries``).
    anchor_of: Callable[[str], str | None] = _no_anchor
    # ``/context rebuild`` (``SideSummaries.rebuild``): None while the summaries are off.
    rebuild_anchor: Callable[[str], Awaitable[str]] | None = None
    # Where liminal's side sessions work: a session the agent lists there is no thread.
    side_root: Path | None = None
    # ``$LIMINAL_HOME``: what a deleted thread left there goes too (``liminal.kernel.owned``).
    home: Path | None = None
    # Where the thread locks are (``liminal.store.base.lock_root``); None: the home.
    lock_root: Path | None = None
    # Until what a new liminal learns again of an opened thread's pace is in (``Recalibrator``).
    recalibrated: Callable[[str], Awaitable[None]] | None = None
    # Take a thread's lock for as long as this liminal runs (``liminal acp``'s, from
    # ``liminal.commands.acp.thread_locks``); False: another live liminal has it open. None:
    # no locks here (no store, or ``liminal serve``, which locks a connection's threads itself).
    take_thread: Callable[[str], Awaitable[bool]] | None = None
    # Whether a liminal that stopped left a spool still being stored (``liminal.ingest.spool.behind``):
    # its last turns are not in the store yet (``whereabouts.caught_up``).
    spool_behind: Callable[[], bool] = _nothing_behind
